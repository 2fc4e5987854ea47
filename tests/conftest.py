import os

import pytest
import torch

import cuda_llm_ops
from cuda_llm_ops import _ops

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
