"""CPU tests of the child-process helpers the GPU tests use (cuda_llm_ops.testing:
IsolatedChild, IsolatedPool, run_isolated; tests/conftest.py: which tests' children start
ahead), with plain Python scripts as children."""
import time

import pytest

import conftest
from cuda_llm_ops import testing


def _script(path, tag, extra=""):
    # each run appends "tag pid" to `path`: which scripts ran, how often, in which process
    return (f"import os\nwith open({str(path)!r}, 'a') as f:\n    f.write(f'{tag} {{os.getpid()}}\\n')\n{extra}")


def _runs(path):
    return [tuple(line.split()) for line in path.read_text().splitlines()] if path.exists() else []


def test_child_passes_fails_and_times_out():
    testing.IsolatedChild("x = 1\n").check()
    with pytest.raises(AssertionError, match=r"child exited with 3[\s\S]*stderr:[\s\S]*boom"):
        testing.IsolatedChild("import sys\nprint('boom', file=sys.stderr)\nsys.exit(3)\n").check()
    with pytest.raises(AssertionError, match=r"ValueError: bad"):  # an exception: its traceback
        testing.IsolatedChild("raise ValueError('bad')\n").check()
    with pytest.raises(AssertionError, match=r"still running after 0.5 s, killed[\s\S]*stdout:\nstarted"):
        testing.IsolatedChild("import time\nprint('started', flush=True)\ntime.sleep(30)\n", timeout=0.5).check()
    # env: added to the child's environment, over base_env
    testing.IsolatedChild("import os\nassert os.environ['A'] == '2' and os.environ['B'] == '3'\n", env={"A": "2"},
                          base_env={"A": "1", "B": "3"}).check()


def test_pool_starts_ahead_within_its_limit(tmp_path):
    log = tmp_path / "runs.txt"
    slow = "import time\ntime.sleep(1.5)\n"
    pool = testing.IsolatedPool(max_running=2)
    for tag in "abc":
        pool.add(_script(log, tag, slow), timeout=60, env={"TAG": tag})
    pool.add(_script(log, "a", slow), timeout=60, env={"TAG": "a"})  # the same script again: queued once
    pool.top_up()
    assert pool.running() == 2, "two of the three started"
    # a script with other env or timeout is another script: not in the pool
    assert pool.take(_script(log, "a", slow), timeout=60, env={"TAG": "x"}) is None
    assert pool.take(_script(log, "a", slow), timeout=61, env={"TAG": "a"}) is None
    a = pool.take(_script(log, "a", slow), timeout=60, env={"TAG": "a"})
    c = pool.take(_script(log, "c", slow), timeout=60, env={"TAG": "c"})  # still queued: take starts it
    b = pool.take(_script(log, "b", slow), timeout=60, env={"TAG": "b"})
    for child in (a, b, c):
        child.check()
    assert sorted(_runs(log)) == sorted([("a", str(a.proc.pid)), ("b", str(b.proc.pid)), ("c", str(c.proc.pid))])
    for tag in "abc":  # each child is handed over once
        assert pool.take(_script(log, tag, slow), timeout=60, env={"TAG": tag}) is None
    pool.close()


def test_pool_timeout_counts_from_the_hand_over():
    pool = testing.IsolatedPool(max_running=1)
    code = "import time\ntime.sleep(2.0)\n"
    pool.add(code, timeout=1.5)
    pool.top_up()
    time.sleep(1.5)  # queued beside other work: not the test's time
    pool.take(code, timeout=1.5).check()  # ends about 0.6 s after the hand-over, 2.1 s after its start
    pool.add("import time\ntime.sleep(30)\n", timeout=0.3)
    pool.top_up()
    t0 = time.monotonic()
    pool.wait_running()  # waits to the child's timeout from its start, then leaves it to its test
    assert 0.2 < time.monotonic() - t0 < 5
    pool.close()


def test_run_isolated_takes_the_pools_child(tmp_path, monkeypatch):
    log = tmp_path / "runs.txt"
    pool = testing.IsolatedPool(max_running=1)
    code = _script(log, "pooled")
    pool.add(code, timeout=60, env={"K": "1"})
    pool.add("import time\ntime.sleep(60)\n")  # never taken: close() kills it
    pool.top_up()
    pooled_pid = str(pool._started[testing._isolated_key(code, 60, {"K": "1"})].proc.pid)
    monkeypatch.setattr(testing, "isolated_pool", pool)
    testing.run_isolated(code, timeout=60, env={"K": "1"})
    assert _runs(log) == [("pooled", pooled_pid)], "run_isolated checked the pool's child, no second run"
    testing.run_isolated(code, timeout=60, env={"K": "1"})  # taken already: runs afresh
    assert len(_runs(log)) == 2 and _runs(log)[1][1] != pooled_pid
    pool.top_up()
    sleeper = next(iter(pool._started.values()))
    pool.close()
    assert sleeper.done() and sleeper.proc.returncode != 0, "close() killed the child no test took"
    # the pooled child's verdict is the test's: it fails here (base_env), a fresh child would pass
    pool = testing.IsolatedPool(base_env={"FAIL": "1"})
    failing = "import os\nraise SystemExit(int(os.environ.get('FAIL', '0')))\n"
    pool.add(failing)
    monkeypatch.setattr(testing, "isolated_pool", pool)
    with pytest.raises(AssertionError, match="child exited with 1"):
        testing.run_isolated(failing)
    pool.close()


class _Mark:
    def __init__(self, name, *args, **kwargs):
        self.name, self.args, self.kwargs = name, args, kwargs


class _Callspec:
    def __init__(self, params):
        self.params = params


class _Item:
    """What conftest._isolated_runs reads of a pytest item."""

    def __init__(self, marks, params=None):
        self.marks = marks
        if params is not None:
            self.callspec = _Callspec(params)

    def get_closest_marker(self, name):
        return next((m for m in self.marks if m.name == name), None)

    def iter_markers(self):
        return iter(self.marks)


def test_conftest_picks_the_children_to_start(monkeypatch):
    monkeypatch.setattr(conftest._ops, "has_op", lambda name: name != "missing")

    def build(case):
        if case == "raises":
            raise KeyError(case)
        return {"code": f"# {case}", "timeout": 5}

    items = [_Item([_Mark("isolated", build, ops=("gemm",))], {"case": "x", "other": 1}),
             _Item([_Mark("isolated", build, ops=lambda case: (case,))], {"case": "missing"}),  # op not built
             _Item([_Mark("isolated", build), _Mark("skipif", True, reason="not Hopper")], {"case": "y"}),
             _Item([_Mark("isolated", build), _Mark("skipif", False, reason="")], {"case": "z"}),
             _Item([_Mark("isolated", build), _Mark("skip", reason="no GPU")], {"case": "w"}),
             _Item([_Mark("isolated", build)], {"case": "raises"}),  # the test meets the error itself
             _Item([_Mark("cuda")], {"case": "v"}),  # not isolated
             _Item([_Mark("isolated", lambda: {"code": "# plain"})])]  # no parameters
    assert list(conftest._isolated_runs(items)) == [{"code": "# x", "timeout": 5}, {"code": "# z", "timeout": 5},
                                                     {"code": "# plain"}]


def test_no_test_function_lost_to_its_marker():
    """`@pytest.mark.isolated(build)` with no keyword decorates the test with `build` (pytest's
    rule for a lone function argument): the test becomes build's result and is never collected.
    Every module-level test_ name of the GPU test files must still be a function."""
    import importlib
    import pathlib

    for path in sorted(pathlib.Path(__file__).parent.glob("test_*.py")):
        module = importlib.import_module(path.stem)
        lost = [name for name in dir(module) if name.startswith("test_") and not callable(getattr(module, name))]
        assert not lost, f"{path.name}: {lost}"
