"""CPU tests of the roofline model, the profiler's API and the timer's argument checks."""
from __future__ import annotations

import json

import pytest
import torch

from cuda_llm_ops import roofline as rl
from cuda_llm_ops.profiler import Bottleneck, KernelMetrics, _metrics, print_benchmark_results
from cuda_llm_ops.reference import causal_mask
from cuda_llm_ops.timing import Timing, benchmark, rotation_count

H100 = rl.ceilings_for("h100", calibrations={})


# --------------------------------------------------------------------------- FLOP/byte models


@pytest.mark.parametrize("nq,nk,expected", [(4, 4, 10), (1, 1, 1), (2, 4, 7), (4, 2, 3), (1, 5, 5), (5, 1, 1)])
def test_visible_pairs_hand_worked(nq, nk, expected):
    # (2, 4): query 0 sees keys 0..2, query 1 sees 0..3 -> 3 + 4; (4, 2): queries 2, 3 see 1 and 2 keys.
    assert rl.visible_pairs(nq, nk, True) == expected
    assert rl.visible_pairs(nq, nk, False) == nq * nk


@pytest.mark.parametrize("nq", [1, 3, 16, 17, 64])
@pytest.mark.parametrize("nk", [1, 5, 16, 33, 64])
def test_visible_pairs_matches_reference_mask(nq, nk):
    assert rl.visible_pairs(nq, nk, True) == int(causal_mask(nq, nk).sum())


def test_attention_prefill_work_hand_worked():
    w = rl.attention_prefill_work(1, 1, 1, 2, 2, 1, False, 2)
    assert (w.flops, w.bytes) == (16, 16)  # 4 * 2 * 2 * 1 FLOPs; q, k, v, o: 2 elements of 2 bytes each
    w = rl.attention_prefill_work(4, 16, 16, 4096, 4096, 128, False, 2)
    assert w.flops == 549_755_813_888  # 4 * B * H * N^2 * D
    assert w.bytes == 268_435_456  # 4 tensors of 4*16*4096*128 fp16 = 64 MiB each
    causal = rl.attention_prefill_work(4, 16, 16, 4096, 4096, 128, True, 2)
    assert causal.flops == 4 * 4 * 16 * (4096 * 4097 // 2) * 128  # the causal half plus the diagonal
    assert causal.bytes == w.bytes
    gqa = rl.attention_prefill_work(1, 32, 8, 1024, 1024, 128, False, 2)
    assert gqa.bytes == 2 * (2 * 32 * 1024 * 128 + 2 * 8 * 1024 * 128)  # K/V once per KV head
    assert rl.attention_prefill_work(1, 1, 1, 8, 8, 8, False, 4).bytes == 2 * rl.attention_prefill_work(
        1, 1, 1, 8, 8, 8, False, 2).bytes


def test_decode_work_intensity_is_about_one():
    w = rl.decode_attention_work(64, 32, 32, 4096, 128, 2)
    assert w.flops == 4 * 32 * 128 * 4096 * 64
    assert w.bytes == 2 * (2 * 32 * 128 * 4096 * 64 + 2 * 64 * 32 * 128)
    assert 0.99 < w.intensity < 1.0  # the seed's "decode is ~1 FLOP/byte" in fp16
    ragged = rl.decode_attention_work(2, 8, 2, [3, 5], 64, 2)
    assert ragged.flops == 4 * 8 * 64 * 8
    assert ragged.bytes == 2 * (2 * 2 * 64 * 8 + 2 * 2 * 8 * 64)
    with pytest.raises(ValueError, match="batch"):
        rl.decode_attention_work(None, 8, 2, 5, 64)


def test_paged_decode_adds_block_tables():
    base = rl.decode_attention_work(3, 32, 8, [1, 17, 32], 128, 2)
    paged = rl.paged_decode_work(None, 32, 8, [1, 17, 32], 128, block_size=16)
    assert paged.flops == base.flops
    assert paged.bytes - base.bytes == 4 * ((1 + 2 + 2) + 3)  # 5 block-table entries + 3 seq_lens, int32
    assert rl.paged_decode_work(3, 32, 8, 16, 128, 16, include_tables=False).bytes == \
        rl.decode_attention_work(3, 32, 8, 16, 128).bytes


def test_gemm_work_hand_worked():
    w = rl.gemm_work(4096, 4096, 4096, 2)
    assert w.flops == 2 * 4096**3
    assert w.bytes == 3 * 4096 * 4096 * 2
    assert round(w.intensity, 1) == 1365.3
    assert rl.gemm_work(2, 3, 4, 2, 4).bytes == (2 * 4 + 4 * 3) * 2 + 2 * 3 * 4  # fp16 in, fp32 out
    assert rl.gemm_work(2, 3, 4, 4, reads_c=True).bytes == (8 + 12) * 4 + 2 * 6 * 4
    i8 = rl.gemm_int8_work(4096, 4096, 4096)
    assert i8.bytes == 2 * 4096 * 4096 + 4 * 4096 * 4096
    decode = rl.gemm_work(1, 12288, 4096, 2)  # a decode projection: memory-bound, ~1 FLOP/byte
    assert decode.intensity < 1.01


def test_fused_decode_block_work_hand_worked():
    """Llama-2-7B's block at B=2, 1024 keys: the two projections' FLOPs and weights plus
    decode attention's, with the new token's k/v written instead of read and nothing in between."""
    w = rl.fused_decode_block_work(2, 4096, 32, 32, 128, 1024, 2)
    assert w.flops == 2 * 2 * 4096 * 96 * 128 + 4 * 2 * 32 * 1024 * 128 + 2 * 2 * 32 * 128 * 4096
    weights = (96 * 128 * 4096 + 4096 * 32 * 128) * 2
    assert w.bytes == weights + 2 * 2 * 32 * 128 * 2 * (1023 + 1) + 2 * 2 * 4096 * 2
    ragged = rl.fused_decode_block_work(2, 64, 4, 2, 16, [1, 5], 4)
    assert ragged.flops == 2 * 2 * 64 * 8 * 16 + 4 * 4 * 16 * 6 + 2 * 2 * 4 * 16 * 64
    assert ragged.bytes == 4 * (8 * 16 * 64 + 64 * 4 * 16 + 2 * 2 * 16 * (0 + 4) + 2 * 2 * 16 * 2 + 2 * 2 * 64)
    assert w.intensity < 1.1 * rl.gemm_work(2, 4 * 4096, 4096, 2).intensity  # weight-bound, like a decode GEMM


def test_lightning_work_hand_worked():
    w = rl.lightning_decode_work(16, 64, 1, 96, 96, 2)
    assert w.bytes == 2 * 16 * 64 * 96 * 96 * 4 + 2 * 16 * 64 * (2 * 96 + 2 * 96) + 4 * 64
    assert w.flops == 5 * 16 * 64 * 96 * 96


# --------------------------------------------------------------------------- ceilings and bottleneck


def test_device_table_lookup_by_torch_name():
    cases = {"NVIDIA H100 80GB HBM3": "h100-sxm", "NVIDIA H100 PCIe": "h100-pcie", "NVIDIA H100 NVL": "h100-nvl",
             "NVIDIA H200": "h200", "NVIDIA A100-SXM4-40GB": "a100-40gb", "NVIDIA A100-SXM4-80GB": "a100-80gb",
             "NVIDIA A100 80GB PCIe": "a100-pcie-80gb", "NVIDIA A100-PCIE-40GB": "a100-pcie-40gb",
             "NVIDIA L40S": "l40s", "NVIDIA GeForce RTX 4090": "rtx4090", "NVIDIA L4": "l4", "h100": "h100-sxm",
             "A100": "a100-80gb", "rtx4090": "rtx4090"}
    for name, key in cases.items():
        assert rl.find_device(name).key == key, name
    assert rl.find_device("Tesla T4") is None
    assert rl.find_device("NVIDIA A10G") is None


def test_every_device_has_all_ceilings():
    for d in rl.DEVICES:
        for kind in ("fp32", "tf32", "fp16_tc", "bf16_tc", "int8_tc"):
            assert d.peak_tflops[kind] > 0, (d.key, kind)
        assert 0.1 < d.hbm_tbps < 10
        assert d.peak_tflops["fp16_tc"] >= d.peak_tflops["tf32"] >= d.peak_tflops["fp32"] * 0.99


def test_ceilings_sources():
    assert H100.bandwidth_tbps == 3.0 and "measured copy" in H100.bandwidth_source
    assert H100.peak("fp16_tc") == pytest.approx(989.4)
    assert H100.ridge("fp16_tc") == pytest.approx(989.4 / 3.0)
    h200 = rl.ceilings_for("NVIDIA H200", calibrations={})
    assert h200.bandwidth_tbps == 4.22 and "measured copy" in h200.bandwidth_source
    assert rl.ceilings_for("h200-nvl", calibrations={}).bandwidth_tbps == 4.8  # not measured: the datasheet
    a100 = rl.ceilings_for("a100-40gb", calibrations={})
    assert a100.bandwidth_tbps == pytest.approx(1.555) and "datasheet" in a100.bandwidth_source
    cal = {"NVIDIA A100-SXM4-40GB": {"gpu": "NVIDIA A100-SXM4-40GB", "copy_tbps": 1.31, "timestamp": "t"}}
    assert rl.ceilings_for("a100-40gb", calibrations=cal).bandwidth_tbps == 1.31
    with pytest.raises(ValueError, match="unknown GPU 'Tesla T4'.*calibrate"):
        rl.ceilings_for("Tesla T4", calibrations={})
    t4 = rl.ceilings_for("Tesla T4", calibrations={"Tesla T4": {"copy_tbps": 0.25, "matmul_tflops": {
        "fp16_tc": 40.0, "fp32": 4.0, "int8_tc": None}}})
    assert t4.peak("bf16_tc") == 40.0  # bf16 falls back to the fp16 figure
    assert t4.peak("tf32") == 4.0
    assert t4.peak("tf32x3") == pytest.approx(4.0 / 3)  # three TF32 products per fp32 one
    assert rl.attention_compute_kind(torch.float32) == "tf32x3"
    assert rl.attention_compute_kind(torch.bfloat16) == "bf16_tc"
    with pytest.raises(ValueError, match="int8_tc"):
        t4.peak("int8_tc")
    with pytest.raises(ValueError, match="compute must be one of"):
        H100.peak("fp64")


def test_calibration_cache_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_SPEED_CACHE_DIR", str(tmp_path))
    assert rl.load_calibrations() == {}
    rec = {"gpu": "NVIDIA H100 80GB HBM3", "copy_tbps": 2.9, "matmul_tflops": {"fp16_tc": 700.0}, "timestamp": "x"}
    path = rl.save_calibration(rec)
    assert path == str(tmp_path / "calibration.json")
    assert rl.load_calibrations()["NVIDIA H100 80GB HBM3"]["copy_tbps"] == 2.9
    # the --gpu key finds the calibration stored under the torch device name
    c = rl.ceilings_for("h100")
    assert c.bandwidth_tbps == 2.9 and "calibrated" in c.bandwidth_source
    assert c.peak("fp16_tc") == pytest.approx(989.4)  # compute stays the datasheet peak
    (tmp_path / "calibration.json").write_text("not json")
    assert rl.load_calibrations() == {}
    # `calibrate --path cal.json`: a bare file name is the working directory's
    monkeypatch.chdir(tmp_path)
    assert rl.save_calibration(rec, "cal.json") == "cal.json"
    assert rl.load_calibrations("cal.json")["NVIDIA H100 80GB HBM3"]["copy_tbps"] == 2.9


def test_classification_by_ridge_point():
    ridge = H100.ridge("fp16_tc")  # ~330 FLOP/byte
    assert rl.classify(ridge, ridge) is Bottleneck.COMPUTE_BOUND
    assert rl.classify(ridge * 0.99, ridge) is Bottleneck.MEMORY_BOUND
    # the same op changes class with the device: AI 200 is compute-bound on an A100 (ridge ~153 at
    # 2.04 TB/s) but memory-bound on an H100
    a100 = rl.ceilings_for("a100-80gb", calibrations={})
    assert rl.analyze(200e9, 1e9, a100, "fp16_tc").bottleneck is Bottleneck.COMPUTE_BOUND
    assert rl.analyze(200e9, 1e9, H100, "fp16_tc").bottleneck is Bottleneck.MEMORY_BOUND


def test_analyze_floors_and_latency():
    w = rl.gemm_work(4096, 4096, 4096, 2)
    r = rl.analyze(w.flops, w.bytes, H100, "fp16_tc", time_s=200e-6)
    assert r.compute_floor_s == pytest.approx(2 * 4096**3 / 989.4e12)
    assert r.memory_floor_s == pytest.approx(w.bytes / 3.0e12)
    assert r.floor_s == r.compute_floor_s
    assert r.pct_of_roofline == pytest.approx(100 * r.floor_s / 200e-6)
    assert r.bottleneck is Bottleneck.COMPUTE_BOUND and r.bound == "compute_bound"
    slow = rl.analyze(w.flops, w.bytes, H100, "fp16_tc", time_s=r.floor_s * (rl.LATENCY_FACTOR + 1))
    assert slow.bottleneck is Bottleneck.LATENCY_BOUND
    edge = rl.analyze(w.flops, w.bytes, H100, "fp16_tc", time_s=r.floor_s * rl.LATENCY_FACTOR)
    assert edge.bottleneck is Bottleneck.COMPUTE_BOUND
    d = rl.decode_attention_work(1, 32, 8, 16384, 128)
    dr = rl.analyze(d.flops, d.bytes, H100, "fp16_tc", time_s=d.bytes / 2.5e12)
    assert dr.bottleneck is Bottleneck.MEMORY_BOUND and dr.pct_of_roofline == pytest.approx(250 / 3)
    assert json.dumps(dr.as_dict())
    with pytest.raises(ValueError, match="time_s"):
        rl.analyze(1.0, 1.0, H100, "fp32", time_s=0.0)
    with pytest.raises(ValueError, match="bytes"):
        rl.analyze(1.0, 0.0, H100, "fp32")


def test_compute_kind():
    assert rl.compute_kind(torch.float16) == "fp16_tc"
    assert rl.compute_kind(torch.bfloat16) == "bf16_tc"
    assert rl.compute_kind(torch.float32) == "fp32"
    assert rl.compute_kind(torch.int8) == "int8_tc"
    with pytest.raises(ValueError, match="dtype"):
        rl.compute_kind(torch.float64)


# --------------------------------------------------------------------------- profiler API


def test_bottleneck_enum_values():
    assert Bottleneck.COMPUTE_BOUND.value == "compute_bound"
    assert Bottleneck.MEMORY_BOUND.value == "memory_bound"
    assert Bottleneck.LATENCY_BOUND.value == "latency_bound"
    assert Bottleneck is rl.Bottleneck


def test_kernel_metrics_defaults_keep_the_original_api():
    m = KernelMetrics(elapsed_ms=1.0, tflops=10.0, memory_bandwidth_gb=100.0)
    assert (m.sm_occupancy, m.l2_hit_rate, m.bottleneck) == (0.0, 0.0, Bottleneck.MEMORY_BOUND)
    m = KernelMetrics(2.0, 20.0, 200.0, 0.8, 0.9, Bottleneck.COMPUTE_BOUND, arithmetic_intensity=3.0,
                      pct_of_roofline=50.0)
    assert (m.sm_occupancy, m.l2_hit_rate, m.arithmetic_intensity, m.pct_of_roofline) == (0.8, 0.9, 3.0, 50.0)


def test_metrics_from_a_timing():
    w = rl.gemm_work(4096, 4096, 4096, 2)
    m = _metrics(Timing(0.2, 0.19, 0.21, 100, False, False), w.flops, w.bytes, "fp16_tc", H100)
    assert m.tflops == pytest.approx(2 * 4096**3 / 0.2e-3 / 1e12)
    assert m.memory_bandwidth_gb == pytest.approx(w.bytes / 0.2e-3 / 1e9)
    assert m.arithmetic_intensity == pytest.approx(w.intensity)
    assert m.pct_of_roofline == pytest.approx(100 * m.tflops / 989.4)
    assert m.bottleneck is Bottleneck.COMPUTE_BOUND
    assert (m.p20_ms, m.p80_ms, m.compute) == (0.19, 0.21, "fp16_tc")


def test_print_benchmark_results(capsys):
    print_benchmark_results([{"seq_len": 512, "custom_ms": 1.0, "custom_tflops": 10.0, "reference_ms": 1.5,
                              "reference_tflops": 6.7, "speedup": 1.5, "bottleneck": "memory_bound"}],
                            title="Attention Benchmark")
    out = capsys.readouterr().out
    assert "Attention Benchmark" in out and "Speedup" in out and "1.50x" in out and "seq_len" in out
    assert out.index("seq_len") < out.index("Custom (ms)")
    print_benchmark_results([{"M": 1024, "N": 1024, "K": 1024, "custom_ms": 2.0, "relative_perf": 0.9,
                              "bottleneck": Bottleneck.COMPUTE_BOUND}], title="GEMM Benchmark")
    out = capsys.readouterr().out
    assert "GEMM Benchmark" in out and "Relative Performance" in out and "90.0%" in out and "compute_bound" in out
    print_benchmark_results([], title="Empty Results")
    out = capsys.readouterr().out
    assert "Empty Results" in out and "(no results)" in out


# --------------------------------------------------------------------------- timer arguments


def test_rotation_count():
    l2 = 50 * 2**20
    assert rotation_count(1 * 2**20, l2) == 64  # capped
    assert rotation_count(10 * 2**20, l2) == 15  # 3 x 50 MB / 10 MB
    assert rotation_count(1 * 2**30, l2) == 1  # one call alone sweeps the L2 three times over
    assert rotation_count(1 * 2**20, l2, max_sets=None) == 150


def test_benchmark_rejects_bad_arguments_before_touching_the_gpu():
    with pytest.raises(ValueError, match="iterations must be >= 1"):
        benchmark(lambda: None, iterations=0)
    with pytest.raises(ValueError, match="cold_l2 with cuda_graph needs fn_sets"):
        benchmark(lambda: None, cold_l2=True, cuda_graph=True)
    with pytest.raises(ValueError, match="fn_sets must hold"):
        benchmark(lambda: None, fn_sets=[])
    with pytest.raises(ValueError, match="graph_calls"):
        benchmark(lambda: None, graph_calls=0)
    for bad in (-1.0, float("nan")):
        with pytest.raises(ValueError, match="warmup_ms must be >= 0"):
            benchmark(lambda: None, warmup_ms=bad)


def test_profiler_refuses_cold_l2_with_cuda_graph():
    """Every measure_time would raise (an L2 flush cannot run inside a captured graph): refused
    when the profiler is made, not at its first measurement."""
    from cuda_llm_ops.profiler import CUDAProfiler
    with pytest.raises(ValueError, match=r"cold_l2 and cuda_graph cannot be combined"):
        CUDAProfiler(cold_l2=True, cuda_graph=True)
    assert CUDAProfiler(cold_l2=True).cold_l2 and CUDAProfiler(cuda_graph=True).cuda_graph
