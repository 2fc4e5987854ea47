import inspect
import os
import shutil
import tempfile

import pytest
import torch

import cuda_llm_ops
from cuda_llm_ops import _ops, testing

HAS_GPU = torch.cuda.is_available()


@pytest.fixture(autouse=True)
def _private_calibration_cache(tmp_path_factory, monkeypatch):
    """No test reads or writes the user's calibration cache (~/.cache/llm-speed): a
    `llm-speed calibrate` run on the same machine would change the ceilings that the
    roofline tests expect (the datasheet's, or the ones they save themselves)."""
    monkeypatch.setenv("LLM_SPEED_CACHE_DIR", str(tmp_path_factory.mktemp("llm_speed_cache")))


def pytest_collection_modifyitems(config, items):
    if HAS_GPU and _ops.kernels_available():
        return
    why = "no CUDA GPU" if not HAS_GPU else f"kernels not built ({cuda_llm_ops.build_info()})"
    if os.environ.get("CLO_REQUIRE_KERNELS") == "1":  # the GPU script: a failed build or load is no skip
        raise pytest.UsageError(f"CLO_REQUIRE_KERNELS=1 but the cuda tests cannot run: {why}")
    skip = pytest.mark.skip(reason=f"cuda test: {why}")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


def require_op(name: str):
    """Skip (a partial dev build) when the op's area was not built."""
    if not _ops.has_op(name):
        pytest.skip(f"op {name} not in this build ({cuda_llm_ops.build_info()})")


def _with_params(fn, item):
    """fn called with the test's parameters that it names."""
    callspec = getattr(item, "callspec", None)
    params = callspec.params if callspec is not None else {}
    return fn(**{name: params[name] for name in inspect.signature(fn).parameters})


def _isolated_runs(items):
    """run_isolated's arguments of each selected test marked `isolated` whose ops are built
    (`ops`: op names, or a function of the test's parameters giving them), not marked to skip.
    A builder that raises starts nothing: the test meets the same error itself."""
    for item in items:
        mark = item.get_closest_marker("isolated")
        if mark is None or any(m.name == "skip" or (m.name == "skipif" and m.args and m.args[0] is True)
                               for m in item.iter_markers()):
            continue
        try:
            ops = mark.kwargs.get("ops", ())
            if all(_ops.has_op(op) for op in (_with_params(ops, item) if callable(ops) else ops)):
                yield _with_params(mark.args[0], item)
        except Exception:  # noqa: BLE001 - reported by the test itself
            continue


def pytest_collection_finish(session):
    """Start the selected tests' child scripts ahead, CLO_ISOLATED_PARALLEL (default 4) at a time
    beside the other tests: each child pays an interpreter, the torch import and a CUDA context,
    and one by one they were most of the GPU suite's slowest tests. A child's checks and output
    are its test's, as before (run_isolated takes the child of the same script; its timeout
    counts from then). Ahead-started children see this session's environment, with one
    LLM_SPEED_CACHE_DIR of their own for all of them (the per-test one of
    _private_calibration_cache does not exist yet; no child script reads the cache). Tests
    marked `gpu_alone` (timings) wait for the running children and start none. 0: each child in
    its test."""
    limit = int(os.environ.get("CLO_ISOLATED_PARALLEL", "4"))
    if (limit <= 0 or session.config.option.collectonly or session.testsfailed
            or not (HAS_GPU and _ops.kernels_available())):
        return
    runs = list(_isolated_runs(session.items))
    if not runs:
        return
    cache_dir = tempfile.mkdtemp(prefix="llm_speed_cache_")
    pool = testing.IsolatedPool(max_running=limit, base_env={"LLM_SPEED_CACHE_DIR": cache_dir})
    for run in runs:
        pool.add(**run)
    testing.isolated_pool = pool


def pytest_runtest_setup(item):
    pool = testing.isolated_pool
    if pool is None:
        return
    if item.get_closest_marker("gpu_alone") is not None:
        pool.wait_running()
    else:
        pool.top_up()


def pytest_sessionfinish(session):
    pool, testing.isolated_pool = testing.isolated_pool, None
    if pool is not None:
        pool.close()
        shutil.rmtree(pool.base_env["LLM_SPEED_CACHE_DIR"], ignore_errors=True)
