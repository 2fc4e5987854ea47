"""CPU tests of the child-process helpers the GPU tests use (cuda_llm_ops.testing:
IsolatedChild, IsolatedPool, run_isolated), with plain Python scripts as children."""
import pytest

from cuda_llm_ops import testing


def _script(path, tag, extra=""):
    # each run appends its tag to `path`: how many times a script ran, and in which order
    return f"with open({str(path)!r}, 'a') as f:\n    f.write({tag!r} + '\\n')\n{extra}"


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
    pool.take(_script(log, "a", slow), timeout=60, env={"TAG": "a"}).check()
    # "c" was still queued: take starts it
    pool.take(_script(log, "c", slow), timeout=60, env={"TAG": "c"}).check()
    pool.take(_script(log, "b", slow), timeout=60, env={"TAG": "b"}).check()
    assert sorted(log.read_text().split()) == ["a", "b", "c"], "each script ran once"
    assert pool.take(_script(log, "a", slow), timeout=60, env={"TAG": "a"}) is None, "a child is taken once"
    pool.close()


def test_run_isolated_takes_the_pools_child(tmp_path, monkeypatch):
    log = tmp_path / "runs.txt"
    pool = testing.IsolatedPool(max_running=1)
    code = _script(log, "pooled")
    pool.add(code, timeout=60, env={"K": "1"})
    pool.add("import time\ntime.sleep(60)\n")  # never taken: close() kills it
    pool.top_up()
    monkeypatch.setattr(testing, "isolated_pool", pool)
    testing.run_isolated(code, timeout=60, env={"K": "1"})
    assert log.read_text().split() == ["pooled"], "run_isolated checked the pool's child, no second run"
    testing.run_isolated(code, timeout=60, env={"K": "1"})  # taken already: runs afresh
    assert log.read_text().split() == ["pooled", "pooled"]
    pool.top_up()
    sleeper = next(iter(pool._started.values()))
    pool.close()
    assert sleeper.done() and sleeper.proc.returncode != 0, "close() killed the child no test took"
    with pytest.raises(AssertionError, match="child exited with 1"):  # a failing pooled child fails its test
        pool = testing.IsolatedPool()
        pool.add("raise SystemExit(1)\n")
        monkeypatch.setattr(testing, "isolated_pool", pool)
        pool.top_up()
        testing.run_isolated("raise SystemExit(1)\n")
