"""CPU tests of `llm-speed`: case loading and selection, the check-before-timing logic,
the JSON schema, the table, plots from a fixture result file, the CLI and the README script."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections import OrderedDict

import pytest
import torch

from cuda_llm_ops import cli
from cuda_llm_ops.bench import registry, report, runner
from cuda_llm_ops.bench.registry import BenchCase, BenchImpl
from cuda_llm_ops.timing import Timing

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ISSUE_FIELDS = ["op", "impl", "is_peer", "dtype", "shape", "median_ms", "p20_ms", "p80_ms", "tflops", "tbps",
                "pct_of_roofline", "bottleneck", "cold_l2", "cuda_graph", "gpu", "torch", "cuda", "git_sha",
                "timestamp"]
ENV = {"gpu": "NVIDIA H100 80GB HBM3", "torch": "2.11.0+cu130", "cuda": "13.0", "git_sha": "abc1234"}


@pytest.fixture(scope="module", autouse=True)
def _cases_loaded():
    runner.load_case_modules()


# --------------------------------------------------------------------------- case modules and selection


def test_every_case_module_is_loaded():
    names = runner.load_case_modules()
    files = sorted(f[:-3] for f in os.listdir(os.path.join(ROOT, "cuda_llm_ops", "bench"))
                   if f.startswith("cases_") and f.endswith(".py"))
    assert [n.rsplit(".", 1)[1] for n in names] == files
    assert "attention" in registry.groups()


def test_a_broken_case_module_fails_loudly(monkeypatch):
    import importlib
    import pkgutil

    real_iter, real_import = pkgutil.iter_modules, importlib.import_module
    monkeypatch.setattr(pkgutil, "iter_modules",
                        lambda path=None: list(real_iter(path)) + [pkgutil.ModuleInfo(None, "cases_broken", False)])

    def fake_import(name, package=None):
        if name.endswith("cases_broken"):
            raise SyntaxError("invalid syntax (cases_broken.py, line 3)")
        return real_import(name, package)

    monkeypatch.setattr(importlib, "import_module", fake_import)
    with pytest.raises(runner.CaseModuleError, match="cases_broken failed to import: SyntaxError"):
        runner.load_case_modules()


def test_cases_describe_shapes_without_a_gpu():
    for dt in runner.ALL_DTYPES:
        for preset in registry.PRESET_NAMES:
            for quick in (False, True):
                for gname, gen in registry.groups().items():
                    for c in gen(dt, preset, quick):
                        assert isinstance(c, BenchCase)
                        assert c.flops >= 0 and c.bytes > 0, (gname, c.shape)
                        assert c.compute in ("fp32", "tf32", "tf32x3", "fp16_tc", "bf16_tc", "int8_tc", "fp8_tc")
                        assert c.impls and any(not i.is_peer for i in c.impls), (gname, c.op)
                        assert len({i.name for i in c.impls}) == len(c.impls), (gname, c.op)


def test_attention_cases():
    gen = registry.groups()["attention"]
    full = gen(torch.float16, "all", False)
    prefill = [c for c in full if c.op == "attention_prefill"]
    assert all(c.shape["B"] * c.shape["N"] == 16384 for c in prefill)
    main = [c for c in prefill if c.shape["D"] == 128]
    assert len(main) == 3 * 2 * 5  # presets x causal x N
    assert {c.shape["N"] for c in main} == {512, 1024, 2048, 4096, 8192}
    assert {(c.shape["Hq"], c.shape["Hkv"]) for c in main} == {(32, 32), (32, 8), (64, 8)}
    dims = [c for c in prefill if c.shape["D"] != 128]  # the other head dims, GQA 32/8
    assert len(dims) == 4 * 2 * 2  # D x causal x N
    assert {c.shape["D"] for c in dims} == {64, 96, 192, 256}
    assert {(c.shape["Hq"], c.shape["Hkv"]) for c in dims} == {(32, 8)}
    assert not any(c.shape["D"] != 128 for c in gen(torch.float32, "all", False) + gen(torch.float16, "all", True))
    names = {i.name for i in main[0].impls}
    assert {"flash_attention", "sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "sdpa-math"} <= names
    assert "naive_attention" not in names
    small = [c for c in full if c.op == "attention_prefill_b1"]
    assert small and all(c.shape["B"] == 1 and c.shape["N"] <= 1024 for c in small)
    assert {"naive_attention", "tiled_attention", "flash_attention"} <= {i.name for i in small[0].impls}
    quick = gen(torch.float16, "all", True)
    assert 0 < len(quick) <= 8
    assert gen(torch.int8, "all", False) == []
    assert gen(torch.float16, "square", False) == []
    assert {c.shape["Hq"] for c in gen(torch.float16, "llama-70b", False)} == {64}
    assert max(c.shape["N"] for c in gen(torch.float32, "all", False)) <= 2048
    c = main[0]
    assert c.flops == 4 * c.shape["B"] * c.shape["Hq"] * c.shape["N"] ** 2 * c.shape["D"]


def test_fused_decode_block_cases(capsys):
    gen = registry.groups()["fused_decode_block"]
    full = gen(torch.float16, "all", False)
    grid = [(b, n) for b in (1, 4, 16) for n in (1024, 4096, 16384)]
    assert [(c.shape["Hkv"], c.shape["B"], c.shape["N"]) for c in full] == [(h, b, n) for h in (32, 8) for b, n in grid]
    assert all((c.shape["hidden"], c.shape["Hq"], c.shape["D"], c.shape["block_size"]) == (4096, 32, 128, 16)
               for c in full)
    assert [(c.shape["B"], c.shape["N"]) for c in gen(torch.bfloat16, "llama-7b", True)] == [(1, 1024), (1, 4096)]
    assert [c.shape["Hkv"] for c in gen(torch.float16, "llama-8b", False)] == [8] * len(grid)
    assert gen(torch.float32, "all", False) == [] and gen(torch.float16, "llama-70b", False) == []
    for c in full:
        assert c.flops > 0 and c.bytes > 0 and c.cold_l2 and c.cuda_graph and c.reference is not None
        assert c.label == f"B={c.shape['B']} Hkv={c.shape['Hkv']} N={c.shape['N']}" and c.x_key == "N"
        assert c.rel_tol == 1e-2
    peers = {i.name: i.is_peer for i in full[0].impls}
    assert peers == {"torch-cublas+sdpa-flash": True, "torch-cublas+sdpa-cudnn": True,
                     "torch-cublas+sdpa-efficient": True, "cuda_llm_ops-unfused": True, "cuda_llm_ops": False,
                     "cuda_llm_ops-one-kernel": False}
    assert cli.main(["roofline", "fused_decode_block", "--quick", "--gpu", "h100", "--dtype", "fp16", "bf16"]) == 0
    rows = [ln.split() for ln in capsys.readouterr().out.splitlines() if ln.startswith("fused_decode_block ")]
    assert len(rows) == 4 and all(r[-1] == "memory_bound" for r in rows)
    # B=1, N=1024: 151.01 MB, almost all of it the two weights (134.22 MB), 50.34 us at 3 TB/s
    assert "151.01" in rows[0] and "50.34" in rows[0]


def test_select_by_group_op_and_our_function():
    by_group = runner.select_cases(["attention"], [torch.float16], "all", True)
    assert by_group and all(s.group == "attention" for s in by_group)
    by_op = runner.select_cases(["attention_prefill_b1"], [torch.float16], "all", True)
    assert by_op and all(s.case.op == "attention_prefill_b1" for s in by_op)
    by_impl = runner.select_cases(["naive_attention"], [torch.float16], "all", True)
    assert by_impl and all(s.case.op == "attention_prefill_b1" for s in by_impl)
    for s in by_impl:  # the named function and every peer, not our other functions
        assert [i.name for i in s.impls if not i.is_peer] == ["naive_attention"]
        assert any(i.is_peer for i in s.impls)
    with pytest.raises(ValueError, match=r"unknown op\(s\) \['nope'\].*groups"):
        runner.select_cases(["nope"], [torch.float16], "all", True)
    with pytest.raises(ValueError, match="preset"):
        runner.select_cases([], [torch.float16], "llama-3b", True)
    # a known name with nothing for this dtype is an empty selection, not an error
    assert runner.select_cases(["attention"], [torch.int8], "all", True) == []


def test_shape_filters():
    f = runner.parse_shape_filters(["N=1024,4096", "causal=1"])
    assert f == {"N": {"1024", "4096"}, "causal": {"1"}}
    sel = runner.select_cases(["attention_prefill"], [torch.float16], "all", False, f)
    assert sel and all(s.case.shape["N"] in (1024, 4096) and s.case.shape["causal"] for s in sel)
    # "1" is a boolean only for a boolean key: B=1 selects batch 1, causal=0 / no the non-causal cases
    sel = runner.select_cases(["decode_attention"], [torch.float16], "all", True, runner.parse_shape_filters(["B=1"]))
    assert sel and all(s.case.shape["B"] == 1 for s in sel)
    for off in ("0", "no", "false"):
        sel = runner.select_cases(["attention_prefill"], [torch.float16], "all", False,
                                  runner.parse_shape_filters([f"causal={off}"]))
        assert sel and not any(s.case.shape["causal"] for s in sel)
    with pytest.raises(ValueError, match=r"no case of this selection has key\(s\) \['Q'\] .*keys: B, "):
        runner.select_cases(["attention"], [torch.float16], "all", False, {"Q": {"1"}})
    with pytest.raises(ValueError, match=r"key\(s\) \['M'\]"):  # a GEMM key, not paged_attention's
        runner.select_cases(["paged_attention"], [torch.float16], "all", True, {"M": {"16"}})
    # a value as the table prints it, commas inside brackets included
    assert runner.parse_shape_filters(["b=[N,K] M=1,16"]) == {"b": {"[n,k]"}, "M": {"1", "16"}}
    sel = runner.select_cases(["gemm"], [torch.float16], "all", True, runner.parse_shape_filters(["b=[N,K]"]))
    assert sel and all(s.case.shape["b"] == "[N,K]" for s in sel)
    with pytest.raises(ValueError, match="KEY=VALUE"):
        runner.parse_shape_filters(["N"])
    with pytest.raises(ValueError, match="KEY=VALUE"):
        runner.parse_shape_filters(["N="])


def test_parse_dtypes():
    assert runner.parse_dtypes(None) == [torch.float16]
    assert runner.parse_dtypes(["bf16", "float32", "fp16", "bf16"]) == [torch.bfloat16, torch.float32, torch.float16]
    assert set(runner.parse_dtypes(["all"])) == {torch.float16, torch.bfloat16, torch.float32, torch.int8}
    with pytest.raises(ValueError, match="unknown dtype 'fp64'"):
        runner.parse_dtypes(["fp64"])


# --------------------------------------------------------------------------- check before timing (mocked GPU)


def _fake_case(timed_names):
    x = torch.randn(64)

    def impl(name, fn, is_peer=False, unavailable=None):
        return BenchImpl(name, is_peer, lambda inp: (lambda: fn(inp["x"])), unavailable)

    def missing(_x):
        raise RuntimeError("cuda_llm_ops.foo: the package was installed without its CUDA kernels (no _C)")

    def crash(_x):
        raise ValueError("q must be 4-D")

    impls = [
        impl("peer", lambda t: t * 2, is_peer=True),
        impl("good", lambda t: t * 2 + 1e-6),
        impl("wrong", lambda t: t * 2 + 1),
        impl("nan", lambda t: t * float("nan")),
        impl("shape", lambda t: (t * 2)[:10]),
        impl("gone", lambda t: t, unavailable=lambda inp: "needs sm_90"),
        impl("missing", missing),
        impl("crash", crash),
        impl("tuple", lambda t: (t * 2, t)),
    ]
    return BenchCase(op="fake", dtype=torch.float32, shape={"N": 64}, flops=128.0, bytes=512.0, compute="fp32",
                     make_inputs=lambda: {"x": x.clone()}, impls=impls, rel_tol=1e-3)


def test_every_impl_is_checked_before_it_is_timed(monkeypatch):
    timed_names = []

    def fake_time(case, impl, fn, seed, iterations, budget_ms, notes, eager=False, rounds=1, warmup_ms=0.0):
        timed_names.append(impl.name)
        return Timing(1.0, 0.9, 1.1, 5, False, False)

    monkeypatch.setattr(runner, "_time_impl", fake_time)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    case = _fake_case(timed_names)
    from cuda_llm_ops import roofline as rl

    results = runner.run_cases([runner.Selected("fake", case, case.impls)], rl.ceilings_for("h100", {}),
                               progress=False)
    status = {r.impl.name: (r.status, r.error or "") for r in results}
    assert status["peer"][0] == "ok" and status["good"][0] == "ok" and status["tuple"][0] == "ok"
    assert status["wrong"][0] == "failed" and "relative error" in status["wrong"][1] and "vs peer" in status["wrong"][1]
    assert status["nan"] == ("failed", "output holds NaN/inf (vs peer)")
    assert status["shape"][0] == "failed" and "shape (10,) != reference (64,)" in status["shape"][1]
    assert status["gone"] == ("unavailable", "needs sm_90")
    assert status["missing"][0] == "unavailable" and "without its CUDA kernels" in status["missing"][1]
    assert status["crash"] == ("failed", "ValueError: q must be 4-D")
    assert timed_names == ["peer", "good", "tuple"]  # nothing that failed or could not run was timed
    records = [runner.to_record(r, ENV, "2026-11-22T09:00:00Z") for r in results]
    for rec in records:
        runner.validate_record(rec)
    by = {r["impl"]: r for r in records}
    assert by["wrong"]["median_ms"] is None and by["wrong"]["status"] == "failed"
    assert by["good"]["tflops"] == pytest.approx(128.0 / 1e-3 / 1e12)
    assert by["good"]["bottleneck"] == "latency_bound"  # 1 ms for a few bytes


def test_reference_first_then_peers_then_unchecked(monkeypatch):
    monkeypatch.setattr(runner, "_time_impl", lambda *a, **k: Timing(1.0, 0.9, 1.1, 5, False, False))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    x = torch.randn(32)

    def case(reference, impls):
        return BenchCase(op="f", dtype=torch.float32, shape={"N": 32}, flops=1.0, bytes=4.0, compute="fp32",
                         make_inputs=lambda: {"x": x.clone()}, impls=impls, reference=reference, rel_tol=1e-4)

    ours = BenchImpl("ours", False, lambda inp: (lambda: inp["x"] + 1))
    wrong_peer = BenchImpl("peer", True, lambda inp: (lambda: inp["x"] * 0 + 5))

    def broken(inp):
        raise MemoryError("reference too large")

    def run(c):
        return {r.impl.name: r for r in runner.run_cases([runner.Selected("g", c, c.impls)], None, progress=False)}

    # the case's reference wins over a (wrong) peer
    res = run(case(lambda inp: inp["x"] + 1, [wrong_peer, ours]))
    assert res["ours"].status == "ok" and res["peer"].status == "failed" and "vs reference" in res["peer"].error
    # a failing reference falls back to the first peer
    res = run(case(broken, [wrong_peer, ours]))
    assert res["peer"].status == "ok" and res["ours"].status == "failed"
    # nothing to check against: timed, but marked unchecked, with the reason
    res = run(case(broken, [ours]))
    assert res["ours"].status == "unchecked" and "reference failed (MemoryError" in res["ours"].error
    assert res["ours"].timing is not None
    # a reference or peer output holding NaN/inf checks nothing: the next peer, else unchecked
    nan_peer = BenchImpl("nan_peer", True, lambda inp: (lambda: inp["x"] * float("nan")))
    good_peer = BenchImpl("good_peer", True, lambda inp: (lambda: inp["x"] + 1))
    res = run(case(lambda inp: inp["x"] * float("inf"), [nan_peer, good_peer, ours]))
    assert res["ours"].status == "ok" and res["good_peer"].status == "ok"
    assert res["nan_peer"].status == "failed" and "vs good_peer" in res["nan_peer"].error
    res = run(case(lambda inp: inp["x"] * float("nan"), [ours]))
    assert res["ours"].status == "unchecked" and "reference output holds NaN/inf" in res["ours"].error


@pytest.mark.parametrize("nbytes,graph,sets,flush,eager", [
    (400e6, False, 1, False, False),  # one call sweeps the L2 3x: no copies needed
    (20e6, False, 8, False, False),  # 3 x 50 MiB / 20 MB -> 8 rotated copies
    (20e6, True, 8, False, False),  # graphs rotate too
    (1e5, False, 0, True, False),  # too small for 64 copies to span the L2: flush
    (1e5, True, 64, False, False),  # ... unless graphed: 64 copies, noted as partly warm
    (20e6, True, 8, False, True),  # --eager: a launch-bound case rotates without a graph
    (1e5, True, 0, True, True),  # ... and flushes when too small to rotate
])
def test_cold_l2_policy(monkeypatch, nbytes, graph, sets, flush, eager):
    seen = {}

    def fake_benchmark(fn, **kw):
        seen.update(kw)
        return Timing(1.0, 1.0, 1.0, 5, kw.get("cold_l2", False), kw.get("cuda_graph", False))

    monkeypatch.setattr(runner, "benchmark", fake_benchmark)
    monkeypatch.setattr(runner, "_estimate_ms", lambda fn: 1.0)
    monkeypatch.setattr(runner, "rotation_count",
                        lambda b, max_sets=64: __import__("cuda_llm_ops.timing", fromlist=["x"]).rotation_count(
                            b, 50 * 2**20, max_sets))
    built = []
    impl = BenchImpl("ours", False, lambda inp: built.append(inp) or (lambda: None))
    case = BenchCase(op="f", dtype=torch.float16, shape={}, flops=1.0, bytes=nbytes, compute="fp16_tc",
                     make_inputs=lambda: {}, impls=[impl], cold_l2=True, cuda_graph=graph)
    notes = []
    t = runner._time_impl(case, impl, lambda: None, 0, 100, 300.0, notes, eager)
    assert seen["cold_l2"] is True and seen.get("cuda_graph", False) is (graph and not eager)
    if flush:
        assert "fn_sets" not in seen
    else:
        assert len(seen["fn_sets"]) == sets and len(built) == sets - 1
    assert bool(notes) is (sets == 64)
    assert t.cold_l2 is (sets != 64)  # a partly warm rotation is not recorded as cold


@pytest.mark.parametrize("est, graph, sets, iters, warm", [
    (1.0, False, 1, 100, 10),  # eager, 1-ms calls: the cap of 100 runs within 300 ms
    (1.0, True, 1, 30, 5),  # a graph replay is 10 calls: 30 replays spend the 300 ms
    (1.0, True, 64, 5, 1),  # 64 input copies, all in each replay: at least 5 replays
    (5.5, True, 1, 5, 1),  # a slow call: at least 5, one warm-up replay
    (0.02, True, 8, 100, 10),  # launch-bound: the cap
])
def test_budget_counts_calls(monkeypatch, est, graph, sets, iters, warm):
    """--budget-ms is the timed calls' time, also under a CUDA graph, whose runs replay 10 calls
    or one per input copy (it was spent per replay: ten times or more the budget); so is the
    50-ms warm-up count."""
    seen = {}

    def fake_benchmark(fn, **kw):
        seen.update(kw)
        return Timing(1.0, 1.0, 1.0, 5, kw.get("cold_l2", False), kw.get("cuda_graph", False))

    monkeypatch.setattr(runner, "benchmark", fake_benchmark)
    monkeypatch.setattr(runner, "_estimate_ms", lambda fn: est)
    monkeypatch.setattr(runner, "rotation_count", lambda b, max_sets=64: sets)
    impl = BenchImpl("ours", False, lambda inp: (lambda: None))
    case = BenchCase(op="f", dtype=torch.float16, shape={}, flops=1.0, bytes=1e9, compute="fp16_tc",
                     make_inputs=lambda: {}, impls=[impl], cold_l2=True, cuda_graph=graph)
    runner._time_impl(case, impl, lambda: None, 0, 100, 300.0, [], False)
    assert (seen["iterations"], seen["warmup"]) == (iters, warm)
    assert seen.get("cuda_graph", False) is graph and len(seen.get("fn_sets", [None])) == sets


def test_tensor_core_gemm_peers_say_when_they_cannot_run():
    """fp16 x fp16 -> fp32: cuBLAS writing float32 itself (`torch.mm(out_dtype=)`, "cublas") and
    the 16-bit GEMM plus a cast ("cublas+cast"); the first says why where torch cannot run it
    (here: CPU tensors), rather than raising."""
    case = next(c for c in registry.groups()["gemm"](torch.float16, "all", True) if c.op == "tensor_core_gemm")
    assert [i.name for i in case.impls if i.is_peer] == ["cublas", "cublas+cast"]
    inp = {"a": torch.randn(4, 8).half(), "b": torch.randn(8, 3).half()}
    why = case.impls[0].unavailable(inp)
    assert isinstance(why, str) and "float32-output cuBLAS GEMM" in why


# --------------------------------------------------------------------------- records, table, plots


def fixture_records() -> list[dict]:
    """A small result file: two attention shapes and a decode case, with a FAILED and an unavailable row."""
    recs = []

    def add(op, impl, is_peer, shape, ms, flops, nbytes, bound, status="ok", error=None, cold=False, dtype="float16"):
        sec = ms * 1e-3 if ms else None
        recs.append({
            "op": op, "impl": impl, "is_peer": is_peer, "dtype": dtype, "shape": shape,
            "median_ms": ms, "p20_ms": ms * 0.98 if ms else None, "p80_ms": ms * 1.03 if ms else None,
            "tflops": flops / sec / 1e12 if ms else None, "tbps": nbytes / sec / 1e12 if ms else None,
            "pct_of_roofline": (max(flops / 989.4e12, nbytes / 3e12) / sec * 100) if ms else None,
            "bottleneck": bound if ms else None, "cold_l2": cold, "cuda_graph": False, **ENV,
            "timestamp": "2026-11-22T09:00:00Z", "status": status, "error": error})

    for n, b in ((1024, 16), (4096, 4)):
        shape = {"B": b, "Hq": 32, "Hkv": 8, "N": n, "D": 128, "causal": False}
        fl = 4.0 * b * 32 * n * n * 128
        by = 2.0 * (2 * b * 32 * n * 128 + 2 * b * 8 * n * 128)
        add("attention_prefill", "sdpa-flash", True, shape, fl / 340e12 * 1e3, fl, by, "compute_bound")
        add("attention_prefill", "sdpa-cudnn", True, shape, fl / 600e12 * 1e3, fl, by, "compute_bound")
        add("attention_prefill", "sdpa-math", True, shape, None, fl, by, None, "unavailable",
            "math backend materialises the N x N scores: run only up to N=2048")
        add("attention_prefill", "flash_attention", False, shape, fl / 300e12 * 1e3, fl, by, "compute_bound")
    shape = {"B": 64, "Hq": 32, "Hkv": 8, "N": 4096, "D": 128, "block_size": 16}
    add("paged_attention", "cuda_llm_ops", False, shape, None, 1e9, 1e9, None, "failed",
        "relative error 3.1e-01 > tolerance 1.0e-02 (vs sdpa-cudnn)", cold=True)
    add("paged_attention", "sdpa-cudnn", True, shape, 0.5, 4.3e9, 1.08e9, "memory_bound", cold=True)
    return recs


def test_json_schema_of_fixture_and_errors(tmp_path):
    recs = fixture_records()
    assert list(runner.RECORD_FIELDS[:len(ISSUE_FIELDS)]) == ISSUE_FIELDS
    assert list(runner.RECORD_FIELDS[len(ISSUE_FIELDS):]) == ["status", "error"]
    path = tmp_path / "r.json"
    report.write_json(recs, str(path))
    assert report.read_json(str(path)) == recs
    bad = dict(recs[0])
    del bad["git_sha"]
    with pytest.raises(ValueError, match="missing \\['git_sha'\\]"):
        runner.validate_record(bad)
    with pytest.raises(ValueError, match="median_ms must be a positive number"):
        runner.validate_record({**recs[0], "median_ms": None})
    runner.validate_record({**recs[0], "tflops": 0.0})  # a pure copy does no FLOPs
    with pytest.raises(ValueError, match="tflops must be a number >= 0"):
        runner.validate_record({**recs[0], "tflops": -1.0})
    with pytest.raises(ValueError, match="must be null for a failed row"):
        runner.validate_record({**recs[-2], "median_ms": 1.0})
    with pytest.raises(ValueError, match="status must be one of"):
        runner.validate_record({**recs[0], "status": "great"})
    with pytest.raises(ValueError, match="bottleneck must be one of"):
        runner.validate_record({**recs[0], "bottleneck": "fast"})
    with pytest.raises(ValueError, match="p20 <= median <= p80"):
        runner.validate_record({**recs[0], "p20_ms": recs[0]["median_ms"] * 2})
    with pytest.raises(ValueError, match="must say why"):
        runner.validate_record({**recs[2], "error": None})
    (tmp_path / "bad.json").write_text(json.dumps([bad]))
    with pytest.raises(ValueError, match="record 0"):
        report.read_json(str(tmp_path / "bad.json"))


def test_merge_records_replaces_remeasured_rows():
    old = fixture_records()
    again = dict(old[1], median_ms=old[1]["median_ms"] / 2, timestamp="later")
    extra = dict(old[0], op="gemm", shape={"M": 8, "N": 8, "K": 8})
    merged = report.merge_records(old, [again, extra])
    assert len(merged) == len(old) + 1
    assert merged[1] is again and merged[-1] is extra and merged[0] is old[0]


def test_table_lists_failed_rows_and_ratios():
    text = report.format_table(fixture_records())
    lines = text.splitlines()
    assert lines[0].split() == ["op", "dtype", "shape", "impl", "median", "ms", "TFLOP/s", "TB/s", "%", "roof",
                                "bottleneck", "vs", "best", "peer", "note"]
    ours = [ln for ln in lines if "flash_attention *" in ln]
    assert len(ours) == 2 and all("0.50x" in ln for ln in ours)  # 300 vs the best peer's 600 TFLOP/s
    assert any("sdpa-cudnn" in ln and "1.00x" in ln for ln in lines)
    failed = [ln for ln in lines if "cuda_llm_ops *" in ln]
    assert failed and "FAILED" in failed[0] and "relative error" in failed[0]
    assert any("sdpa-math" in ln and "unavailable" in ln for ln in lines)
    assert report.format_table([]) == "(no benchmark cases selected)"


def test_plots_from_a_fixture_result_file(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "results.json"
    report.write_json(fixture_records(), str(path))
    paths = report.plot_records(report.read_json(str(path)), str(tmp_path / "plots"))
    names = sorted(os.path.basename(p) for p in paths)
    assert names == ["attention_prefill_float16.png", "paged_attention_float16.png", "roofline.png"]
    for p in paths:
        with open(p, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
        assert os.path.getsize(p) > 5000


def test_single_point_cases_become_bars_and_the_roof_rate():
    """A sweep (two or more x values in a panel) is a line panel; cases of one point each are
    drawn together as bars, not as panels of one x value; the roofline's rate comes back from
    rate / % of roofline of the records bound by that roof."""
    recs = [r for r in fixture_records() if report.timed(r)]
    prefill = [r for r in recs if r["op"] == "attention_prefill"]
    lines, points = report.split_panels(prefill, "N")
    assert list(lines) == ["Hq=32 Hkv=8 D=128 causal=no"] and len(lines["Hq=32 Hkv=8 D=128 causal=no"]) == 6
    assert points == []
    paged = [r for r in recs if r["op"] == "paged_attention"]
    lines, points = report.split_panels(paged, report._x_key(paged))
    assert lines == OrderedDict() and [r["impl"] for r in points] == ["sdpa-cudnn"]
    more = [dict(points[0], shape=dict(points[0]["shape"], N=n)) for n in (1024, 2048)]
    lines, points = report.split_panels(more + [dict(more[0], shape=dict(more[0]["shape"], D=64))], "N")
    assert [len(v) for v in lines.values()] == [2] and len(points) == 1  # D=64 has one N: a bar
    assert report.split_panels(recs, None)[0] == OrderedDict()  # no x key: every case a bar
    assert report.roof_rate(recs, "tflops") == pytest.approx(989.4)
    assert report.roof_rate(recs, "tbps") == pytest.approx(3.0)
    assert report.roof_rate([r for r in recs if r["bottleneck"] == "compute_bound"], "tbps") is None


def test_dependent_shape_keys_share_a_panel():
    recs = [r for r in fixture_records() if r["op"] == "attention_prefill"]
    assert report._x_key(recs) == "N"
    assert report._dependent_keys(recs, "N") == {"B"}  # B = 16384 // N: one line over N, not one panel per B


def test_x_key_prefers_a_sweep_key_over_more_varied_other_keys():
    """Context lengths (3 values) stay the x axis when a few cases add more head dims (5 values)."""
    shapes = [{"N": n, "D": 128} for n in (1024, 4096, 16384)] + [{"N": 2048, "D": d} for d in (64, 80, 96, 192)]
    assert report._x_key([{"shape": s} for s in shapes]) == "N"
    assert report._x_key([{"shape": {"N": 2048, "D": d}} for d in (64, 80, 96)]) == "D"  # no sweep key varies


# --------------------------------------------------------------------------- CLI


def test_cli_parsing():
    p = cli.build_parser()
    a = p.parse_args(["bench", "flash_attention", "gemm", "--dtype", "fp16", "bf16", "--preset", "llama-70b",
                      "--shapes", "N=4096", "--json", "x.json", "--plot", "d", "--quick"])
    assert (a.command, a.ops, a.dtype, a.preset, a.shapes, a.json, a.plot, a.quick) == (
        "bench", ["flash_attention", "gemm"], ["fp16", "bf16"], "llama-70b", ["N=4096"], "x.json", "d", True)
    a = p.parse_args(["roofline", "--gpu", "a100"])
    assert (a.command, a.gpu, a.ops, a.preset) == ("roofline", "a100", [], "all")
    with pytest.raises(SystemExit):
        p.parse_args(["bench", "--preset", "gpt-5"])
    help_text = p.format_help()
    for word in ("bench", "roofline", "calibrate", "plot"):
        assert word in help_text


def test_bench_without_gpu_says_so_in_one_line(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    rc = cli.main(["bench", "--quick"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert len(err) == 1 and "no CUDA GPU" in err[0] and "llm-speed roofline" in err[0]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert cli.main(["calibrate"]) == 2
    assert "no CUDA GPU" in capsys.readouterr().err


def test_bench_unknown_gpu_name_is_an_error(monkeypatch, capsys):
    """`bench --gpu NAME` with a name the ceilings table lacks says so (as `roofline --gpu`),
    rather than measuring the visible card under the asked-for name's flag; no calibration runs."""
    import cuda_llm_ops.roofline as rl
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(rl, "calibrate", lambda *a, **k: pytest.fail("calibrated for a mistyped --gpu"))
    assert cli.main(["bench", "--gpu", "h1OO", "gemm"]) == 2
    err = capsys.readouterr().err
    assert "bench: error:" in err and "h1OO" in err


def test_bench_usage_errors(monkeypatch, capsys):
    assert cli.main(["bench", "no_such_op"]) == 2
    assert "unknown op(s) ['no_such_op']" in capsys.readouterr().err
    assert cli.main(["bench", "--dtype", "fp8"]) == 2
    assert "unknown dtype 'fp8'" in capsys.readouterr().err
    assert cli.main(["bench", "--shapes", "N"]) == 2


def test_bench_eager_append_keeps_graph_timings(tmp_path, monkeypatch, capsys):
    """--eager --append must not replace CUDA-graph records of the same keys in a result file."""
    recs = fixture_records()
    recs[-1]["cuda_graph"] = True
    path = tmp_path / "graphs.json"
    report.write_json(recs, str(path))
    assert cli.main(["bench", "paged_attention", "--eager", "--append", "--json", str(path)]) == 2
    assert "holds CUDA-graph timings" in capsys.readouterr().err
    recs[-1]["cuda_graph"] = False  # an eager file takes more eager records (then: no GPU here),
    recs[-2]["cuda_graph"] = True  # also when an untimed (failed) row carries the case's flag
    report.write_json(recs, str(path))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert cli.main(["bench", "paged_attention", "--eager", "--append", "--json", str(path)]) == 2
    assert "holds CUDA-graph" not in capsys.readouterr().err
    # another GPU's graph timings are never replaced (a case is one GPU's): the run goes ahead
    recs[-1]["cuda_graph"] = True
    report.write_json(recs, str(path))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    from cuda_llm_ops.bench import runner as bench_runner

    class Ran(Exception):
        pass

    def run_cases(*a, **k):
        raise Ran

    monkeypatch.setattr(bench_runner, "run_cases", run_cases)
    with pytest.raises(Ran):
        cli.main(["bench", "paged_attention", "--eager", "--append", "--json", str(path)])
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: recs[-1]["gpu"])
    assert cli.main(["bench", "paged_attention", "--eager", "--append", "--json", str(path)]) == 2
    assert "holds CUDA-graph timings" in capsys.readouterr().err


def test_bench_outputs_checked_before_the_run(tmp_path, monkeypatch, capsys):
    """--json / --plot / --append targets that would fail at the end of a run are refused before
    anything runs (nothing measured is lost): an unreadable append target, a directory given as
    --json, a file as --plot, a non-finite warm-up."""
    from cuda_llm_ops.bench import runner as bench_runner
    monkeypatch.setattr(bench_runner, "run_cases", lambda *a, **k: pytest.fail("ran before the check"))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H100 80GB HBM3")
    bad = tmp_path / "bad.json"
    bad.write_text('[{"op": "x"}]')
    assert cli.main(["bench", "gemm", "--append", "--json", str(bad)]) == 2
    assert "--append: cannot read" in capsys.readouterr().err and bad.read_text() == '[{"op": "x"}]'
    bad.write_text("not json")
    assert cli.main(["bench", "gemm", "--eager", "--append", "--json", str(bad)]) == 2
    assert "--append: cannot read" in capsys.readouterr().err
    assert cli.main(["bench", "gemm", "--json", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert cli.main(["bench", "gemm", "--plot", str(bad)]) == 2
    assert "is a file: give a directory" in capsys.readouterr().err
    assert cli.main(["bench", "gemm", "--warmup-ms", "inf"]) == 2
    assert "--warmup-ms must be finite" in capsys.readouterr().err


def test_records_of_several_gpus_stay_apart(tmp_path):
    """A file may hold several GPUs' records (`bench --append` from another GPU): a re-run
    replaces only its own GPU's records, each GPU's case compares ours with that GPU's peers,
    the table comes per GPU and each GPU's plots carry its name."""
    h100 = fixture_records()
    h200 = [dict(r, gpu="NVIDIA H200", median_ms=r["median_ms"] and r["median_ms"] / 4) for r in h100]
    merged = report.merge_records(h100, h200)
    assert merged == h100 + h200
    again = [dict(r, git_sha="def5678") for r in h200[:2]]
    assert report.merge_records(merged, again) == h100 + again + h200[2:]
    assert all(len({r["gpu"] for r in recs}) == 1 for recs in report.group_cases(merged).values())
    text = report.format_table(merged)
    assert text.startswith("GPU: NVIDIA H100 80GB HBM3\n") and "\n\nGPU: NVIDIA H200\n" in text
    h100_part, h200_part = text.split("\n\nGPU: NVIDIA H200\n")
    assert h100_part.splitlines()[1:] == report.format_table(h100).splitlines()
    assert h200_part.splitlines() == report.format_table(h200).splitlines()
    if importlib.util.find_spec("matplotlib") is None:
        return
    names = sorted(os.path.basename(p) for p in report.plot_records(merged, str(tmp_path / "plots")))
    assert names == sorted(f"{stem}_{gpu}.png" for gpu in ("NVIDIA_H100_80GB_HBM3", "NVIDIA_H200")
                           for stem in ("attention_prefill_float16", "paged_attention_float16", "roofline"))


def test_write_json_replaces_the_file_whole(tmp_path, monkeypatch):
    """An interrupted write leaves the old file as it was (a temporary file, then a rename)."""
    path = tmp_path / "r.json"
    recs = fixture_records()
    report.write_json(recs, str(path))

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(report.json, "dump", boom)
    with pytest.raises(KeyboardInterrupt):
        report.write_json(recs[:1], str(path))
    monkeypatch.undo()
    assert report.read_json(str(path)) == recs
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_untimed_record_says_cuda_graph_only_outside_eager():
    case = BenchCase(op="f", dtype=torch.float16, shape={}, flops=1.0, bytes=1.0, compute="fp16_tc",
                     make_inputs=lambda: {}, cold_l2=True, cuda_graph=True)
    impl = BenchImpl("ours", False, lambda inp: (lambda: None))
    for eager in (False, True):
        res = runner.Result("g", case, impl, "unavailable", error="not here", eager=eager)
        rec = runner.to_record(res, ENV)
        runner.validate_record(rec)
        assert rec["cuda_graph"] is (not eager)


def test_records_say_which_ceilings_and_l2_method():
    """A record stores the ceilings its % of roofline is against and how its L2 was made cold
    (stop 95); records written before lack both and still validate; other extra fields do not."""
    import cuda_llm_ops.roofline as rl
    case = BenchCase(op="f", dtype=torch.float16, shape={}, flops=1.0, bytes=1e6, compute="fp16_tc",
                     make_inputs=lambda: {}, cold_l2=True)
    impl = BenchImpl("ours", False, lambda inp: (lambda: None))
    ceilings = rl.ceilings_for("h100")
    t = Timing(0.01, 0.009, 0.011, 5, True, False, "rotate:8")
    res = runner.Result("g", case, impl, "ok", timing=t, roof=rl.analyze(1.0, 1e6, ceilings, "fp16_tc", 0.01e-3))
    rec = runner.to_record(res, ENV | {"roofline": ceilings.as_record()})
    runner.validate_record(rec)
    assert rec["l2_method"] == "rotate:8" and rec["roofline"]["bandwidth_tbps"] == ceilings.bandwidth_tbps
    assert rec["pct_of_roofline"] == pytest.approx(1e6 / (ceilings.bandwidth_tbps * 1e12) / 0.01e-3 * 100)
    old = {k: v for k, v in rec.items() if k not in runner.OPTIONAL_FIELDS}
    runner.validate_record(old)
    with pytest.raises(ValueError, match=r"extra \['speedup'\]"):
        runner.validate_record({**rec, "speedup": 2.0})
    with pytest.raises(ValueError, match="roofline must be null or a dict"):
        runner.validate_record({**rec, "roofline": 3.0})


def test_best_peer_is_another_librarys_where_a_case_has_one():
    """"vs best peer" compares with other libraries' peers; our own other paths that records mark
    as peers (the fused block's unfused ops) count only where a case has nothing else."""
    def rec(impl, is_peer, ms):
        return {"impl": impl, "is_peer": is_peer, "status": "ok", "median_ms": ms}
    fused = [rec("cuda_llm_ops", False, 1.0), rec("cuda_llm_ops-unfused", True, 0.99),
             rec("torch-cublas+sdpa-cudnn", True, 1.4)]
    assert report.best_peer_ms(fused) == 1.4
    variants = [rec("cuda_llm_ops.pipelined", False, 1.0), rec("cuda_llm_ops.unpipelined", True, 1.1)]
    assert report.best_peer_ms(variants) == 1.1


def test_bench_list_needs_no_gpu(monkeypatch, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert cli.main(["bench", "attention", "--quick", "--list"]) == 0
    out = capsys.readouterr().out
    assert "attention_prefill" in out and "flash_attention*" in out and "sdpa-cudnn" in out


def test_roofline_command(capsys):
    assert cli.main(["roofline", "attention_prefill", "--quick", "--gpu", "h100", "--shapes", "N=4096",
                     "causal=0"]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA H100 SXM5" in out and "3.00 TB/s" in out
    row = [ln for ln in out.splitlines() if ln.startswith("attention_prefill ")]
    assert len(row) == 1
    cells = row[0].split()
    # B=4 Hq=32 Hkv=8 N=4096 D=128: 1099.51 GFLOP at 989.4 TFLOP/s = 1111.29 us; 335.54 MB at 3 TB/s
    assert "1099.51" in cells and "335.54" in cells and "1111.29" in cells and "111.85" in cells
    assert cells[-1] == "compute_bound"
    assert cli.main(["roofline", "--gpu", "no-such-gpu"]) == 2


def test_roofline_command_on_a_calibration_without_a_kind(tmp_path, monkeypatch, capsys):
    """A calibrated GPU outside the table whose int8 rate was not measured: its int8 rows have no
    floor ("-") and the table says why, instead of a traceback."""
    from cuda_llm_ops import roofline as rl
    monkeypatch.setenv("LLM_SPEED_CACHE_DIR", str(tmp_path))
    rl.save_calibration({"gpu": "NVIDIA B200", "copy_tbps": 7.0, "matmul_tflops": {"fp16_tc": 2000.0, "fp32": 70.0,
                                                                                     "int8_tc": None}, "timestamp": "t"})
    assert cli.main(["roofline", "--gpu", "NVIDIA B200", "gemm", "--dtype", "int8", "fp16", "--quick"]) == 0
    out = capsys.readouterr().out
    int8_rows = [ln for ln in out.splitlines() if ln.startswith("gemm") and " int8 " in ln]
    fp16_rows = [ln for ln in out.splitlines() if ln.startswith("gemm") and " float16 " in ln]
    assert int8_rows and all(ln.split()[-1] == "-" for ln in int8_rows)
    assert fp16_rows and all(ln.split()[-1] in ("compute_bound", "memory_bound") for ln in fp16_rows)
    assert "-: no int8_tc peak known for NVIDIA B200" in out


def test_python_dash_m_runs_the_cli():
    r = subprocess.run([sys.executable, "-m", "cuda_llm_ops", "roofline", "--help"], capture_output=True, text=True,
                       cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "usage: python -m cuda_llm_ops roofline" in r.stdout


def test_plot_command(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    path = tmp_path / "r.json"
    report.write_json(fixture_records(), str(path))
    assert cli.main(["plot", str(path), "--out", str(tmp_path / "p")]) == 0
    out = capsys.readouterr().out
    assert "flash_attention *" in out and "wrote 3 plots" in out
    assert cli.main(["plot", str(tmp_path / "missing.json")]) == 2
    assert cli.main(["plot", str(path), "--out", str(path)]) == 2  # a file as the plot directory
    assert "is a file: give a directory" in capsys.readouterr().err
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    assert cli.main(["plot", str(empty), "--out", str(tmp_path / "q")]) == 2
    assert "holds no records" in capsys.readouterr().err and not (tmp_path / "q").exists()


# --------------------------------------------------------------------------- README table


def _script(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "scripts", f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_readme_table_from_fixture(tmp_path, capsys):
    mod = _script("readme_table")
    results = tmp_path / "h100.json"
    report.write_json(fixture_records(), str(results))
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\n## Results\n\n{mod.BEGIN}\nold\n{mod.END}\n\ntail\n")
    assert mod.main([str(results), "--readme", str(readme), "--check"]) == 1
    assert mod.main([str(results), "--readme", str(readme)]) == 0
    text = readme.read_text()
    assert "old" not in text and text.endswith("\n\ntail\n")
    rows = [ln for ln in text.splitlines() if ln.startswith("| ") and not ln.startswith("| dtype")]
    assert len(rows) == 3  # one per (case, our implementation); peers are in the JSON only
    # one collapsible table per op, its summary naming the op and its row count
    assert "<summary><code>attention_prefill</code>: 2 rows</summary>" in text
    assert "<summary><code>paged_attention</code>: 1 rows</summary>" in text
    assert "`flash_attention`" in rows[0] and "sdpa-cudnn" in rows[0] and "0.50x" in rows[0]
    assert "FAILED" in rows[2]
    assert mod.main([str(results), "--readme", str(readme), "--check"]) == 0
    readme.write_text("no markers")
    with pytest.raises(ValueError, match="bench:begin"):
        mod.main([str(results), "--readme", str(readme)])
    # a file of several GPUs: the table is one GPU's, picked by --gpu
    report.write_json(fixture_records() + [dict(r, gpu="NVIDIA H200") for r in fixture_records()], str(results))
    assert mod.main([str(results), "--print"]) == 2
    assert "records of 2 GPUs (NVIDIA H100 80GB HBM3, NVIDIA H200): pick one with --gpu" in capsys.readouterr().err
    assert mod.main([str(results), "--print", "--gpu", "H200"]) == 0
    assert "Measured on NVIDIA H200 (" in capsys.readouterr().out
    assert mod.main([str(results), "--print", "--gpu", "A100"]) == 2
    assert "--gpu 'A100' names 0 of its GPUs" in capsys.readouterr().err


def test_decode_targets_picks_the_issue_cases(tmp_path, capsys):
    """scripts/decode_targets.py: the issue's cases only, % of copy from the records, x SDPA's best."""
    mod = _script("decode_targets")
    recs = []

    def add(op, impl, shape, ms, pct, dtype="float16", status="ok"):
        recs.append({"op": op, "impl": impl, "is_peer": impl != "cuda_llm_ops", "dtype": dtype, "shape": shape,
                     "median_ms": ms, "p20_ms": ms, "p80_ms": ms, "tflops": 1.0 if ms else None,
                     "tbps": 2.5 if ms else None, "pct_of_roofline": pct if ms else None,
                     "bottleneck": "memory_bound" if ms else None, "cold_l2": True, "cuda_graph": True,
                     **ENV, "timestamp": "2026-12-05T00:00:00Z", "status": status,
                     "error": None if status == "ok" else "did not run"})

    def case(op, b, n, hkv, ours_ms, pct, cudnn_ms, flash_ms=None, status="ok", hq=32, d=128, **extra):
        shape = {"B": b, "Hq": hq, "Hkv": hkv, "N": n, "D": d, "block_size": 16, **extra}
        add(op, "cuda_llm_ops", shape, ours_ms, pct, status=status)
        add(op, "sdpa-cudnn", shape, cudnn_ms, 90.0)
        if flash_ms:
            add(op, "sdpa-flash", shape, flash_ms, 80.0)
        add(op, "sdpa-efficient", shape, None, None, status="unavailable")
        add(op, "torch-paged", shape, ours_ms / 10 if ours_ms else 0.001, 99.0)  # not SDPA: never the ratio's peer

    case("paged_attention", 16, 1024, 8, 0.0262, 85.7, 0.026)
    case("paged_attention", 16, 1024, 32, 0.0925, 85.0, 0.0917)  # exactly at the bar: met
    case("paged_attention", 17, 1024, 8, 0.0284, 84.1, 0.028)
    case("paged_attention", 64, 4096, 8, None, None, 0.35, status="failed")  # ours did not run: n/a
    case("paged_attention", 16, 512, 8, 0.01, 50.0, 0.01)  # under 1024 keys: no target
    case("paged_attention", 16, 1024, 16, 0.04, 50.0, 0.04)  # Hkv 16: not the issue's
    case("paged_attention", 16, 1024, 8, 0.05, 40.0, 0.05, window=256)  # a window: another case
    case("paged_attention", 16, 1024, 8, 0.05, 40.0, 0.05, d=64)
    case("paged_attention", 16, 1024, 8, 0.05, 40.0, 0.05, hq=64)
    case("paged_attention_fp8", 16, 1024, 8, 0.02, 60.0, 0.026)  # same keys, another op
    case("decode_attention", 16, 1024, 8, 0.02, 60.0, 0.026)  # % targets are the paged cases'
    case("decode_attention", 64, 4096, 32, 1.3804, 103.7, 1.3919, 1.8752)
    case("decode_attention", 64, 4096, 8, 0.3, 99.0, 0.9)  # GQA: the 1.0x is MHA's
    case("decode_attention", 1, 16384, 8, 0.0284, 78.8, 0.0297, 0.0369)
    case("decode_attention", 1, 16384, 32, 0.08, 80.0, 0.09)  # MHA: the 1.5x is GQA's
    case("paged_attention", 1, 16384, 8, 0.0284, 74.9, 0.0298)
    case("paged_attention", 1, 16384, 32, 0.08, 20.0, 0.09)
    add("paged_attention", "cuda_llm_ops", {"B": 16, "Hq": 32, "Hkv": 32, "N": 1024, "D": 128, "block_size": 16},
        0.09, 96.0, dtype="bfloat16")  # bf16: the issue's cases are fp16
    rows = mod.target_rows(recs)
    got = [(r["target"], r["op"], r["shape"]["B"], r["shape"]["N"], r["shape"]["Hkv"],
            None if r["value"] is None else round(r["value"], 3), r["met"]) for r in rows]
    assert got == [  # the issue's order; then Hkv, B, N
        ("B>=16, N>=1K: % of copy", "paged_attention", 16, 1024, 8, 85.7, True),
        ("B>=16, N>=1K: % of copy", "paged_attention", 17, 1024, 8, 84.1, False),
        ("B>=16, N>=1K: % of copy", "paged_attention", 64, 4096, 8, None, None),
        ("B>=16, N>=1K: % of copy", "paged_attention", 16, 1024, 32, 85.0, True),
        ("B=1, N=16K, GQA: % of copy", "paged_attention", 1, 16384, 8, 74.9, False),
        ("B=64, N=4K, MHA: x SDPA", "decode_attention", 64, 4096, 32, 1.008, True),
        ("B=1, N=16K, GQA: x SDPA", "decode_attention", 1, 16384, 8, 1.046, False),
    ]
    path = tmp_path / "r.json"
    report.write_json(recs, str(path))
    assert mod.main([str(tmp_path / "missing.json"), str(path)]) == 0
    out = capsys.readouterr().out
    assert "missing.json: missing, skipped" in out and "3 of 6 met" in out and "1 not measured or n/a" in out
    assert "| B>=16, N>=1K: % of copy | paged_attention | 17 1024 8 | 28.4 | 28.0 | 84.1% | >= 85% | NO |" in out
    assert "| 64 4096 8 | - | 350.0 | - | >= 85% | n/a (failed) |" in out
    # the named cases a file lacks are listed, not counted
    only = [r for r in recs if r["shape"]["B"] == 17]
    rows = mod.target_rows(only)
    assert [(r["shape"]["B"], r["shape"]["N"], r["shape"]["Hkv"], r["status"]) for r in rows] == [
        (16, 1024, 8, "not measured"), (17, 1024, 8, "ok"), (16, 1024, 32, "not measured"),
        (1, 16384, 8, "not measured"), (64, 4096, 32, "not measured"), (1, 16384, 8, "not measured")]
    assert mod.summary_line(rows).startswith("0 of 1 met; not met: paged_attention B=17")
    # files of several GPUs: one GPU's records, picked by --gpu; its missing cases are its own
    report.write_json(recs + [dict(r, gpu="NVIDIA H200") for r in only], str(path))
    assert mod.main([str(path)]) == 2
    assert "records of 2 GPUs (NVIDIA H100 80GB HBM3, NVIDIA H200): pick one with --gpu" in capsys.readouterr().err
    assert mod.main([str(path), "--gpu", "h200"]) == 0
    out = capsys.readouterr().out
    assert "issue #5 targets on NVIDIA H200:" in out and "0 of 1 met" in out and "5 not measured or n/a" in out
    assert mod.main([str(path), "--gpu", "NVIDIA"]) == 2
    assert "--gpu 'NVIDIA' names 2 of its GPUs" in capsys.readouterr().err


def test_repo_readme_has_the_markers():
    text = open(os.path.join(ROOT, "README.md")).read()
    assert text.count("<!-- bench:begin -->") == 1 and text.count("<!-- bench:end -->") == 1


def test_sdpa_pin_once_per_scope(monkeypatch):
    """An SDPA peer's call pins its backend itself, except inside the runner's scope for it."""
    from cuda_llm_ops.bench import sdpa

    entered = []
    real_pinned = sdpa.pinned

    def counting_pinned(name):
        entered.append(name)
        return real_pinned(name)

    monkeypatch.setattr(sdpa, "pinned", counting_pinned)

    def backends():
        return (torch.backends.cuda.flash_sdp_enabled(), torch.backends.cuda.math_sdp_enabled())

    outside = backends()
    assert sdpa.run("math", backends) == (False, True) and entered == ["math"]
    with sdpa.pinned("math"):
        entered.clear()
        assert [sdpa.run("math", backends) for _ in range(3)] == [(False, True)] * 3 and entered == []
        assert sdpa.run("flash", backends) == (True, False) and entered == ["flash"]  # another backend: its own pin
    assert backends() == outside
    with pytest.raises(ValueError, match="backend must be one of"):
        sdpa.backend("fastest")


def test_runner_holds_an_impls_scope_around_check_and_timing(monkeypatch):
    inside = []

    class Scope:
        def __enter__(self):
            inside.append(True)

        def __exit__(self, *exc):
            inside.pop()

    seen = []

    def fake_time(case, impl, fn, seed, iterations, budget_ms, notes, eager=False, rounds=1, warmup_ms=0.0):
        seen.append((impl.name, bool(inside)))
        return Timing(1.0, 0.9, 1.1, 5, False, False)

    monkeypatch.setattr(runner, "_time_impl", fake_time)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    x = torch.randn(8)

    def build(inp):
        seen.append(("build", bool(inside)))
        return lambda: inp["x"] * 2

    impls = [BenchImpl("peer", True, lambda inp: (lambda: inp["x"] * 2)),
             BenchImpl("scoped", False, build, scope=Scope)]
    case = BenchCase(op="fake", dtype=torch.float32, shape={"N": 8}, flops=1.0, bytes=1.0, compute="fp32",
                     make_inputs=lambda: {"x": x.clone()}, impls=impls)
    from cuda_llm_ops import roofline as rl

    results = runner.run_cases([runner.Selected("fake", case, impls)], rl.ceilings_for("h100", {}), progress=False)
    assert [r.status for r in results] == ["ok", "ok"]
    assert seen == [("peer", False), ("build", True), ("scoped", True)] and not inside


def test_sdpa_call_passes_gqa_only_when_asked():
    """`sdpa.call` on the math backend equals SDPA on expanded K/V, natively (enable_gqa) and not."""
    import torch.nn.functional as F

    from cuda_llm_ops.bench import sdpa

    q, k, v = torch.randn(1, 8, 5, 16), torch.randn(1, 2, 7, 16), torch.randn(1, 2, 7, 16)
    ke, ve = k.repeat_interleave(4, 1), v.repeat_interleave(4, 1)
    ref = F.scaled_dot_product_attention(q, ke, ve, is_causal=True)
    torch.testing.assert_close(sdpa.call("math", q, k, v, True, is_causal=True), ref)
    torch.testing.assert_close(sdpa.call("math", q, ke, ve, False, is_causal=True), ref)


def test_rounds_interleave_implementations_and_pool_their_runs(monkeypatch):
    """--rounds 3: round 1 checks and times each implementation in order; rounds 2 and 3 time
    them again in alternating order, on fresh inputs under their scopes; each result pools
    its runs, and one whose later round fails keeps the rounds before it, saying so."""
    from cuda_llm_ops import roofline as rl

    inside, seen, flaky_calls, clock = [], [], [], iter(range(1, 1000))

    class Scope:
        def __enter__(self):
            inside.append(True)

        def __exit__(self, *exc):
            inside.pop()

    def fake_time(case, impl, fn, seed, iterations, budget_ms, notes, eager=False, rounds=1, warmup_ms=0.0):
        assert rounds == 3
        if impl.name == "flaky":
            flaky_calls.append(1)
            if len(flaky_calls) == 2:
                raise RuntimeError("boom")
        seen.append((impl.name, bool(inside)))
        t = float(next(clock))  # every run of a call takes t ms: which call a run came from shows
        return Timing(t, t, t, 2, False, False, "", [t, t])

    monkeypatch.setattr(runner, "_time_impl", fake_time)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    x = torch.randn(8)
    made = []

    def make_inputs():
        made.append(1)
        return {"x": x.clone()}

    impls = [BenchImpl("peer", True, lambda inp: (lambda: inp["x"] * 2)),
             BenchImpl("scoped", False, lambda inp: (lambda: inp["x"] * 2), scope=Scope),
             BenchImpl("flaky", False, lambda inp: (lambda: inp["x"] * 2))]
    case = BenchCase(op="fake", dtype=torch.float32, shape={"N": 8}, flops=1.0, bytes=1.0, compute="fp32",
                     make_inputs=make_inputs, impls=impls)
    with pytest.raises(ValueError, match="rounds must be >= 1"):
        runner.run_cases([runner.Selected("fake", case, impls)], rl.ceilings_for("h100", {}), progress=False,
                         rounds=0)
    results = runner.run_cases([runner.Selected("fake", case, impls)], rl.ceilings_for("h100", {}),
                               progress=False, rounds=3)
    assert [r.status for r in results] == ["ok", "ok", "ok"] and not inside
    # round 1 in order, round 2 reversed (flaky fails there), round 3 in order again
    assert seen == [("peer", False), ("scoped", True), ("flaky", False),
                    ("scoped", True), ("peer", False),
                    ("peer", False), ("scoped", True), ("flaky", False)]
    peer, scoped, flaky = (r.timing for r in results)
    assert peer.times == [1.0, 1.0, 5.0, 5.0, 6.0, 6.0] and peer.runs == 6 and peer.median_ms == 5.0
    assert scoped.times == [2.0, 2.0, 4.0, 4.0, 7.0, 7.0] and scoped.median_ms == 4.0
    assert flaky.times == [3.0, 3.0, 8.0, 8.0] and flaky.p20_ms == 3.0 and flaky.p80_ms == 8.0
    assert "round 2 of 3 left out (RuntimeError: boom)" in results[2].notes
    assert [r.notes[0] for r in results] == ["3 interleaved rounds", "3 interleaved rounds",
                                             "2 of 3 interleaved rounds"]
    assert all(r.roof is not None for r in results)
    assert len(made) >= 3 + 6  # every later round on fresh inputs


def test_rounds_interrupted_keep_what_was_pooled(monkeypatch):
    """Ctrl-C in a later round: the case's results so far reach on_result, pooled over the
    rounds done, and the interrupt goes on to the caller."""
    from cuda_llm_ops import roofline as rl

    calls = []

    def fake_time(case, impl, fn, seed, iterations, budget_ms, notes, eager=False, rounds=1, warmup_ms=0.0):
        calls.append(impl.name)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return Timing(1.0, 1.0, 1.0, 1, False, False, "", [float(len(calls))])

    monkeypatch.setattr(runner, "_time_impl", fake_time)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    impls = [BenchImpl(n, n == "peer", lambda inp: (lambda: inp["x"] * 2)) for n in ("peer", "ours")]
    case = BenchCase(op="fake", dtype=torch.float32, shape={"N": 8}, flops=1.0, bytes=1.0, compute="fp32",
                     make_inputs=lambda: {"x": torch.randn(8)}, impls=impls)
    got = []
    with pytest.raises(KeyboardInterrupt):
        runner.run_cases([runner.Selected("fake", case, impls)], rl.ceilings_for("h100", {}), progress=False,
                         rounds=3, on_result=got.append)
    # round 1: peer 1, ours 2; round 2 reversed: ours 3, peer interrupted
    assert calls == ["peer", "ours", "ours", "peer"]
    assert [r.timing.times for r in got] == [[1.0], [2.0, 3.0]]
    assert [r.notes[0] for r in got] == ["1 of 3 interleaved rounds", "2 of 3 interleaved rounds"]
    assert all(r.roof is not None for r in got)


def test_rounds_share_the_run_count(monkeypatch):
    """--iterations is the total over the rounds; one round keeps the count asked for."""
    seen = []
    monkeypatch.setattr(runner, "benchmark", lambda fn, **kw: seen.append(kw["iterations"]) or
                        Timing(1.0, 1.0, 1.0, kw["iterations"], False, False))
    monkeypatch.setattr(runner, "_estimate_ms", lambda fn: 1.0)
    monkeypatch.setattr(runner, "rotation_count", lambda b, max_sets=None: 1)
    impl = BenchImpl("ours", False, lambda inp: (lambda: None))
    case = BenchCase(op="f", dtype=torch.float16, shape={}, flops=1.0, bytes=1.0, compute="fp16_tc",
                     make_inputs=lambda: {}, impls=[impl])
    for iterations, rounds in ((100, 1), (3, 1), (100, 4), (100, 3), (5, 10)):
        runner._time_impl(case, impl, lambda: None, 0, iterations, 300.0, [], False, rounds)
    assert seen == [100, 3, 25, 34, 1]


def test_pool_timings_takes_quantiles_over_every_run():
    from cuda_llm_ops.timing import pool_timings

    a = Timing(2.0, 1.0, 3.0, 3, True, True, "rotate:4", [1.0, 2.0, 3.0])
    b = Timing(20.0, 10.0, 30.0, 3, True, True, "rotate:4", [10.0, 20.0, 30.0])
    p = pool_timings([a, b])
    assert p.runs == 6 and p.times == [1.0, 2.0, 3.0, 10.0, 20.0, 30.0]
    assert p.median_ms == 6.5 and p.p20_ms == 2.0 and p.p80_ms == 20.0
    assert p.cold_l2 and p.cuda_graph and p.l2_method == "rotate:4"
    with pytest.raises(ValueError, match="run times"):
        pool_timings([a, Timing(1.0, 1.0, 1.0, 1, False, False)])
    with pytest.raises(ValueError, match="timed differently"):
        pool_timings([a, Timing(1.0, 1.0, 1.0, 1, True, False, "rotate:4", [1.0])])


def test_warmup_ms_reaches_every_timing(monkeypatch):
    """--warmup-ms: each round's timing gets it (timing.benchmark runs the warm-up)."""
    from cuda_llm_ops import roofline as rl

    seen = []

    def fake_time(case, impl, fn, seed, iterations, budget_ms, notes, eager=False, rounds=1, warmup_ms=0.0):
        seen.append((impl.name, warmup_ms))
        return Timing(1.0, 1.0, 1.0, 1, False, False, "", [1.0])

    monkeypatch.setattr(runner, "_time_impl", fake_time)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    impls = [BenchImpl(n, n == "peer", lambda inp: (lambda: inp["x"] * 2)) for n in ("peer", "ours")]
    case = BenchCase(op="fake", dtype=torch.float32, shape={"N": 8}, flops=1.0, bytes=1.0, compute="fp32",
                     make_inputs=lambda: {"x": torch.randn(8)}, impls=impls)
    runner.run_cases([runner.Selected("fake", case, impls)], rl.ceilings_for("h100", {}), progress=False,
                     rounds=2, warmup_ms=75.0)
    assert seen == [("peer", 75.0), ("ours", 75.0), ("ours", 75.0), ("peer", 75.0)]


def test_racecheck_pairs_groups_reports_under_their_case(tmp_path, capsys):
    """scripts/racecheck_pairs.py: every "and" line of a report is one pair (file:line of both
    accesses, paths and kernel signatures dropped), printed under the program line that follows."""
    mod = _script("racecheck_pairs")
    sig = "void ns::decode_epilogue<__half, (int)64, (int)288>(const ns::P &, float (&)[8][4], unsigned char *)"
    log = tmp_path / "race.log"
    log.write_text(
        "========= COMPUTE-SANITIZER\n"
        "auto clean case: 1 splits, 0.1 s\n"
        f"========= Error: Race reported between Write access at {sig}+0x7490 in /src/csrc/decode/decode_attention.cuh:1282\n"
        "=========     and Read access at ns::ldmatrix_x4(unsigned int (&)[4], const void *)+0x57e0 in mma.cuh:18 [128 hazards]\n"
        "=========     and Read access at ns::ldmatrix_x4(unsigned int (&)[4], const void *)+0x5850 in mma.cuh:18 [64 hazards]\n"
        f"=========     and Read access at {sig}+0x7600 in /src/csrc/decode/decode_attention.cuh:1309\n"
        "========= \n"
        "auto racy case: 2 splits, 0.2 s\n"
        "sanitize cases: 2, mismatches: 0\n"
        "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n")
    assert mod.main(str(log)) == 3
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "auto clean case: 1 splits, 0.1 s"
    assert out[1] == "auto racy case: 2 splits, 0.2 s"
    assert out[2:4] == ["        1  Write decode_attention.cuh:1282  /  Read decode_attention.cuh:1309",
                        "        2  Write decode_attention.cuh:1282  /  Read mma.cuh:18"]
    assert out[4] == "sanitize cases: 2, mismatches: 0"
    assert out[-1] == "report pairs: 3"


def test_gemm_presets_hold_for_int8_and_the_8b_prefill():
    """--preset picks the int8 GEMM shapes as it picks the 16-bit ones (square: squares only;
    llama-7b: no squares, no Llama-8B shapes), and the 4352x4096x14336 prefill (Llama-8B's MLP
    down projection) and the batched decode rows only under all / llama-8b."""
    from cuda_llm_ops.bench import cases_gemm

    def shapes(dtype, preset, quick=False):
        return {(c.shape["M"], c.shape["N"], c.shape["K"]) for c in cases_gemm.gemm_cases(dtype, preset, quick)}

    assert all(m == n == k for m, n, k in shapes(torch.int8, "square"))
    for dtype in (torch.int8, torch.float16):
        assert (4352, 4096, 14336) not in shapes(dtype, "llama-7b")
        assert (4352, 4096, 14336) in shapes(dtype, "llama-8b") and (4352, 4096, 14336) in shapes(dtype, "all")
    assert not any(m == n == k for m, n, k in shapes(torch.int8, "llama-7b"))
    assert (16, 28672, 4096) in shapes(torch.int8, "llama-8b") and (16, 28672, 4096) not in shapes(torch.int8, "llama-7b")
    # batched decode (64-256 rows, b [N, K]) for both, against _int_mm on A unpadded past 16 rows
    for dtype in (torch.int8, torch.float16):
        assert {(64, 4096, 14336), (256, 28672, 4096)} <= shapes(dtype, "llama-8b")
    names = {i.name for c in cases_gemm.gemm_cases(torch.int8, "llama-8b", False) for i in c.impls
             if c.shape["M"] in (16, 64)}
    assert "torch._int_mm[col-major B]" in names and "torch._int_mm[col-major B, M padded to 17]" in names
    assert shapes(torch.int8, "all", quick=True) == {(4096, 4096, 4096)}


def test_gemm_batched_sweeps_each_projection_once():
    """gemm_batched: every batch size of BATCH_SIZES (1-256 token rows) through each preset's four
    projections with nn.Linear weights (b [N, K]), an (N, K) that two presets share only once
    (Llama-7B's and -8B's O 4096x4096); 16-bit against cuBLAS, int8 against _int_mm (padded up to
    16 rows); memory-bound: cold L2, CUDA graphs; nothing for fp32 or the square preset."""
    from cuda_llm_ops.bench import cases_gemm

    assert cases_gemm.projections("llama-8b") == [("qkv", 6144, 4096), ("o", 4096, 4096), ("gate_up", 28672, 4096),
                                                  ("down", 4096, 14336)]
    assert cases_gemm.projections("llama-70b")[0] == ("qkv", 10240, 8192)
    gen = registry.groups()["gemm_batched"]
    cases = gen(torch.float16, "all", False)
    weights = {(c.shape["N"], c.shape["K"]) for c in cases}
    assert len(weights) == 11 and (4096, 4096) in weights and (57344, 8192) in weights
    assert len(cases) == 11 * len(cases_gemm.BATCH_SIZES)
    assert {c.shape["M"] for c in cases} == set(cases_gemm.BATCH_SIZES) and max(cases_gemm.BATCH_SIZES) == 256
    assert all(c.op == "gemm_batched" and c.shape["b"] == "[N,K]" and c.cold_l2 and c.cuda_graph for c in cases)
    assert {i.name for i in cases[0].impls} == {"cublas", "cuda_llm_ops.gemm"}
    assert len(gen(torch.bfloat16, "llama-8b", False)) == 4 * len(cases_gemm.BATCH_SIZES)
    int8 = gen(torch.int8, "llama-7b", False)
    assert {c.op for c in int8} == {"gemm_batched"} and (12288, 4096) in {(c.shape["N"], c.shape["K"]) for c in int8}
    assert "torch._int_mm[col-major B, M padded to 17]" in {i.name for i in int8[0].impls}
    assert [c.label for c in gen(torch.float16, "all", True)] == ["1x4096x4096 b[N,K] o", "64x4096x4096 b[N,K] o",
                                                                 "144x4096x4096 b[N,K] o"]
    assert gen(torch.float32, "all", False) == [] and gen(torch.float16, "square", False) == []
