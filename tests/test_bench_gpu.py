"""GPU tests of the timer, the profiler and `llm-speed bench` end to end (marker `cuda`).

No test asserts a speed: the bounds below are physical sanity limits (a cold copy cannot
beat the memory's datasheet bandwidth by 25%), which a broken timer or flush would break.
"""
from __future__ import annotations

import math
import os

import pytest
import torch

from conftest import require_op

pytestmark = [pytest.mark.cuda, pytest.mark.gpu_alone]  # timings: no child scripts beside them


def _spec_tbps() -> float | None:
    from cuda_llm_ops.roofline import find_device

    spec = find_device(torch.cuda.get_device_name())
    return spec.hbm_tbps if spec else None


def _check_timing(t, cold, graph):
    assert t.runs > 0 and t.cold_l2 is cold and t.cuda_graph is graph
    assert 0 < t.p20_ms <= t.median_ms <= t.p80_ms and math.isfinite(t.p80_ms)


def test_large_copy_bandwidth_is_plausible():
    from cuda_llm_ops.timing import benchmark

    n = 1 << 30
    src = torch.randint(0, 255, (n,), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    t = benchmark(lambda: dst.copy_(src), warmup=3, iterations=20)
    _check_timing(t, False, False)
    tbps = 2 * n / (t.median_ms * 1e-3) / 1e12
    print(f"1 GiB copy: {t.median_ms:.3f} ms, {tbps:.2f} TB/s read+write")
    assert torch.equal(dst[:4096], src[:4096])
    spec = _spec_tbps()
    if spec:
        assert 0.2 * spec < tbps < 1.25 * spec, f"copy at {tbps:.2f} TB/s vs datasheet {spec} TB/s"


def test_cold_l2_flush_and_rotation_read_from_memory():
    """Summing 32 MiB (it fits in an H100's 50 MB L2): warm, it may read at L2 speed; after the
    flush or with rotated inputs it reads from HBM and cannot beat its datasheet bandwidth.
    (A read-only kernel: a copy's writes could be absorbed by the clean L2 a flush leaves.)"""
    from cuda_llm_ops.timing import benchmark, l2_cache_bytes, rotation_count

    n = 32 << 20
    if n > l2_cache_bytes() * 0.8:
        pytest.skip("L2 smaller than the test buffer")
    sink = torch.empty((), device="cuda")

    def reader(x):
        return lambda: torch.sum(x, dim=0, out=sink)

    x = torch.randn(n // 4, device="cuda")
    warm = benchmark(reader(x), warmup=5, iterations=50)
    cold = benchmark(reader(x), warmup=5, iterations=50, cold_l2=True)
    _check_timing(warm, False, False)
    _check_timing(cold, True, False)
    assert cold.l2_method == "flush"
    sets = rotation_count(n)
    assert sets >= 2
    fns = [reader(torch.randn(n // 4, device="cuda")) for _ in range(sets)]
    rot = benchmark(fns[0], warmup=5, iterations=50, fn_sets=fns, cold_l2=True)
    rot_graph = benchmark(fns[0], warmup=2, iterations=20, fn_sets=fns, cold_l2=True, cuda_graph=True)
    _check_timing(rot, True, False)
    _check_timing(rot_graph, True, True)
    assert rot.l2_method == f"rotate:{sets}"
    bw = {name: n / (t.median_ms * 1e-3) / 1e12 for name, t in
          (("warm", warm), ("flush", cold), ("rotate", rot), ("rotate+graph", rot_graph))}
    print("32 MiB sum, read TB/s: " + ", ".join(f"{k} {v:.2f}" for k, v in bw.items()))
    spec = _spec_tbps()
    if spec:
        for k in ("flush", "rotate", "rotate+graph"):
            assert bw[k] < 1.25 * spec, f"{k}: {bw[k]:.2f} TB/s beats the memory ({spec} TB/s): L2 still warm"


def test_cuda_graph_mode_times_replays():
    from cuda_llm_ops.timing import benchmark

    x = torch.randn(1024, device="cuda")
    y = torch.empty_like(x)
    eager = benchmark(lambda: torch.mul(x, 2.0, out=y), warmup=5, iterations=50)
    graph = benchmark(lambda: torch.mul(x, 2.0, out=y), warmup=5, iterations=50, cuda_graph=True, graph_calls=20)
    _check_timing(eager, False, False)
    _check_timing(graph, False, True)
    torch.cuda.synchronize()
    assert torch.equal(y, x * 2)
    print(f"tiny kernel: eager {eager.median_ms * 1e3:.2f} us, graph replay {graph.median_ms * 1e3:.2f} us/call")


def test_warmup_ms_runs_the_call_that_long_first():
    """benchmark(warmup_ms=30): back-to-back calls for ~30 ms of GPU time before the timed runs."""
    from cuda_llm_ops.timing import benchmark

    x = torch.randn(1 << 24, device="cuda")  # 64 MB read and written: tens of us a call, GPU-bound
    y = torch.empty_like(x)
    calls = []

    def fn():
        calls.append(1)
        torch.mul(x, 2.0, out=y)

    plain = benchmark(fn, warmup=2, iterations=5)
    assert len(calls) == 7
    calls.clear()
    t = benchmark(fn, warmup=2, iterations=5, warmup_ms=30.0)
    _check_timing(t, False, False)
    warm_calls = len(calls) - 7
    fill = 30.0 / plain.median_ms  # calls that fill 30 ms
    print(f"{plain.median_ms * 1e3:.1f} us a call; {warm_calls} warm-up calls for 30 ms (~{fill:.0f} fill it)")
    assert 0.5 * fill <= warm_calls <= 3 * fill + 2


def test_profiler_measure_and_compare():
    from cuda_llm_ops.profiler import CUDAProfiler

    prof = CUDAProfiler()
    a = torch.randn(256, 256, device="cuda")
    ms = prof.measure_time(torch.matmul, a, a, warmup=2, iterations=10)
    assert isinstance(ms, float) and ms > 0 and prof.last_timing.median_ms == ms
    res = prof.compare_with_reference(lambda x: x * 2.0, lambda x: x.mul(2.0), a, warmup=2, iterations=10)
    assert set(res) == {"custom_ms", "reference_ms", "speedup", "relative_perf"}
    assert res["speedup"] == pytest.approx(res["reference_ms"] / res["custom_ms"])
    assert res["relative_perf"] == pytest.approx(res["custom_ms"] / res["reference_ms"])


def test_profile_attention_on_flash_attention():
    require_op("flash_attention")
    import cuda_llm_ops
    from cuda_llm_ops.profiler import Bottleneck, CUDAProfiler, KernelMetrics

    prof = CUDAProfiler()
    for causal in (False, True):
        m = prof.profile_attention(cuda_llm_ops.flash_attention, 2, 8, 1024, 128, torch.float16, warmup=3,
                                   iterations=20, is_causal=causal, num_kv_heads=2)
        assert isinstance(m, KernelMetrics) and isinstance(m.bottleneck, Bottleneck)
        assert m.elapsed_ms > 0 and m.tflops > 0 and m.memory_bandwidth_gb > 0 and m.pct_of_roofline > 0
        assert m.flops == pytest.approx(4 * 2 * 8 * (1024 * 1025 // 2 if causal else 1024 * 1024) * 128)
        assert m.arithmetic_intensity == pytest.approx(m.flops / m.bytes)
        print(f"flash_attention causal={causal}: {m.elapsed_ms:.3f} ms, {m.tflops:.1f} TFLOP/s, "
              f"{m.pct_of_roofline:.1f}% of roofline, {m.bottleneck.value}")
    sdpa = prof.profile_attention(torch.nn.functional.scaled_dot_product_attention, 2, 8, 1024, 128,
                                  warmup=3, iterations=20)
    assert sdpa.tflops > 0


def test_profile_gemm_on_our_gemm_and_cublas():
    from cuda_llm_ops.profiler import CUDAProfiler

    prof = CUDAProfiler()
    ref = prof.profile_gemm(torch.matmul, 1024, 1024, 1024, torch.float16, warmup=3, iterations=20)
    assert ref.tflops > 0 and ref.flops == 2 * 1024**3 and ref.bytes == 3 * 1024 * 1024 * 2
    print(f"cuBLAS fp16 1024^3: {ref.tflops:.1f} TFLOP/s, {ref.bottleneck.value}")
    require_op("gemm")
    import cuda_llm_ops

    for dtype in (torch.float16, torch.float32):
        m = prof.profile_gemm(cuda_llm_ops.gemm, 1024, 512, 768, dtype, warmup=3, iterations=20)
        assert m.tflops > 0 and m.flops == 2 * 1024 * 512 * 768
        print(f"our gemm {dtype}: {m.tflops:.1f} TFLOP/s, {m.pct_of_roofline:.1f}% of roofline, {m.bottleneck.value}")
    if cuda_llm_ops._ops.has_op("tensor_core_gemm"):
        m = prof.profile_gemm(cuda_llm_ops.tensor_core_gemm, 1024, 1024, 1024, torch.float16, warmup=3, iterations=20)
        assert m.bytes == 2 * 1024 * 1024 * 2 + 1024 * 1024 * 4  # fp32 output counted as 4 bytes


def test_bench_quick_end_to_end(tmp_path, capsys):
    """`llm-speed bench flash_attention --quick` with --json and --plot, restricted to N=1024,
    in two interleaved rounds."""
    from cuda_llm_ops import cli
    from cuda_llm_ops.bench.report import read_json

    out_json = tmp_path / "bench.json"
    plots = tmp_path / "plots"
    rc = cli.main(["bench", "flash_attention", "--quick", "--shapes", "N=1024", "--json", str(out_json),
                   "--plot", str(plots), "--no-progress", "--budget-ms", "60", "--iterations", "30",
                   "--rounds", "2"])
    out = capsys.readouterr().out
    print(out)
    records = read_json(str(out_json))  # validates every record against the schema
    assert records and {r["op"] for r in records} == {"attention_prefill", "attention_prefill_b1"}
    assert {r["impl"] for r in records if not r["is_peer"]} == {"flash_attention"}
    assert rc == (1 if any(r["status"] == "failed" for r in records) else 0)
    sdpa = [r for r in records if r["impl"] == "sdpa-flash"]
    assert sdpa and all(r["status"] == "ok" and r["pct_of_roofline"] > 0 for r in sdpa)
    assert all("2 interleaved rounds" in r["error"] for r in records if r["status"] == "ok")
    assert all(r["gpu"] == torch.cuda.get_device_name() for r in records)
    assert "vs best peer" in out and "attention_prefill" in out
    pngs = sorted(os.listdir(plots))
    assert "roofline.png" in pngs and "attention_prefill_float16.png" in pngs
    assert all(os.path.getsize(plots / p) > 5000 for p in pngs)


def test_bench_eager_times_without_graphs(tmp_path, capsys):
    """`--eager` times the launch-bound decode case call by call: no record says cuda_graph."""
    require_op("decode_attention")  # a partial dev build times only the peers
    from cuda_llm_ops import cli
    from cuda_llm_ops.bench.report import read_json

    out_json = tmp_path / "eager.json"
    rc = cli.main(["bench", "decode_attention", "--quick", "--shapes", "B=1", "--eager", "--json", str(out_json),
                   "--no-progress", "--budget-ms", "40", "--iterations", "20"])
    print(capsys.readouterr().out)
    records = read_json(str(out_json))
    assert rc == 0 and records and all(r["status"] == "ok" for r in records if r["impl"] != "sdpa-efficient")
    assert all(r["cold_l2"] and not r["cuda_graph"] for r in records)
    assert {r["impl"] for r in records if not r["is_peer"]} == {"cuda_llm_ops"}


def test_calibrate_command_caches_measurements(tmp_path, capsys):
    from cuda_llm_ops import cli
    from cuda_llm_ops import roofline as rl

    path = tmp_path / "calibration.json"
    assert cli.main(["calibrate", "--path", str(path)]) == 0
    print(capsys.readouterr().out)
    cal = rl.load_calibrations(str(path))
    rec = cal[torch.cuda.get_device_name()]
    assert rec["copy_tbps"] > 0 and rec["matmul_tflops"]["fp16_tc"] > 0
    c = rl.ceilings_for(torch.cuda.get_device_name(), cal)
    assert c.bandwidth_tbps == rec["copy_tbps"] and "calibrated" in c.bandwidth_source
