"""Kernel profiler with roofline-based bottleneck detection.

Keeps the original LLM-Speed profiler API (`Bottleneck`, `KernelMetrics`,
`CUDAProfiler.measure_time / profile_attention / profile_gemm /
compare_with_reference`, `benchmark_attention`, `benchmark_gemm`,
`print_benchmark_results`) and replaces its fixed "100 FLOP/byte" threshold by the
device's roofline (`cuda_llm_ops.roofline`). Every time comes from
`cuda_llm_ops.timing.benchmark` (CUDA events, median of many runs).

`sm_occupancy` and `l2_hit_rate` are hardware counters that CUDA events cannot see;
they stay 0.0 unless you fill them from Nsight Compute (`ncu`).
"""
from __future__ import annotations

import contextlib

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch

from .roofline import (Bottleneck, Ceilings, analyze, attention_compute_kind, attention_prefill_work, ceilings_for,
                       compute_kind, gemm_work)
from .testing import first_tensor
from .timing import Timing, benchmark

__all__ = ["Bottleneck", "KernelMetrics", "CUDAProfiler", "benchmark_attention", "benchmark_gemm",
           "print_benchmark_results"]


@dataclass
class KernelMetrics:
    """What one profiled call achieved, and where it sits on the device's roofline."""

    elapsed_ms: float  # median time
    tflops: float  # achieved TFLOP/s (TOPS for int8)
    memory_bandwidth_gb: float  # achieved GB/s over the op's minimum bytes
    sm_occupancy: float = 0.0  # not measured by CUDA events (fill from ncu)
    l2_hit_rate: float = 0.0  # not measured by CUDA events (fill from ncu)
    bottleneck: Bottleneck = Bottleneck.MEMORY_BOUND
    arithmetic_intensity: float = 0.0  # FLOP/byte
    pct_of_roofline: float = 0.0  # roofline time / measured time, in percent
    flops: float = 0.0
    bytes: float = 0.0
    p20_ms: float = 0.0
    p80_ms: float = 0.0
    floor_ms: float = 0.0  # the roofline time: max(flops / peak, bytes / bandwidth)
    ridge_point: float = 0.0  # FLOP/byte where this device's roofs meet for this compute unit
    compute: str = ""  # compute kind whose peak applies ("fp16_tc", "fp32", ...)
    gpu: str = ""


def _metrics(t: Timing, flops: float, nbytes: float, compute: str, ceilings: Ceilings) -> KernelMetrics:
    sec = t.median_ms * 1e-3
    r = analyze(flops, nbytes, ceilings, compute, time_s=sec)
    return KernelMetrics(
        elapsed_ms=t.median_ms, tflops=flops / sec / 1e12, memory_bandwidth_gb=nbytes / sec / 1e9,
        bottleneck=r.bottleneck, arithmetic_intensity=r.intensity, pct_of_roofline=r.pct_of_roofline,
        flops=flops, bytes=nbytes, p20_ms=t.p20_ms, p80_ms=t.p80_ms, floor_ms=r.floor_s * 1e3,
        ridge_point=r.ridge, compute=compute, gpu=ceilings.gpu)


class CUDAProfiler:
    """Times callables with the package timer and reports roofline metrics.

    Args:
        gpu: ceilings to use (a `--gpu` key such as "h100", or a device name);
            None: the visible GPU (calibrated figures when `llm-speed calibrate` ran).
        cold_l2: flush the L2 before each timed run (memory-bound ops).
        cuda_graph: time CUDA-graph replays (launch-bound ops).
    """

    def __init__(self, gpu: str | None = None, cold_l2: bool = False, cuda_graph: bool = False):
        if cold_l2 and cuda_graph:  # an L2 flush cannot run inside a captured graph (timing.benchmark)
            raise ValueError("CUDAProfiler: cold_l2 and cuda_graph cannot be combined (an L2 flush cannot run "
                             "inside the captured graph); use one, or cuda_llm_ops.timing.benchmark with fn_sets "
                             "(rotated inputs) for both")
        self.gpu = gpu
        self.cold_l2 = cold_l2
        self.cuda_graph = cuda_graph
        self._ceilings: Ceilings | None = None
        self.last_timing: Timing | None = None

    @property
    def ceilings(self) -> Ceilings:
        if self._ceilings is None:
            self._ceilings = ceilings_for(self.gpu)
        return self._ceilings

    def measure_time(self, func: Callable, *args, warmup: int = 10, iterations: int = 100, **kwargs) -> float:
        """Median time of `func(*args, **kwargs)` in milliseconds (the full `Timing` is kept
        in `self.last_timing`)."""
        self.last_timing = benchmark(lambda: func(*args, **kwargs), warmup=warmup, iterations=iterations,
                                     cold_l2=self.cold_l2, cuda_graph=self.cuda_graph)
        return self.last_timing.median_ms

    def profile(self, func: Callable, *args, flops: float, bytes: float, compute: str, warmup: int = 10,
                iterations: int = 100, **kwargs) -> KernelMetrics:
        """Time `func(*args, **kwargs)` and place it on the roofline given its FLOPs and bytes."""
        self.measure_time(func, *args, warmup=warmup, iterations=iterations, **kwargs)
        return _metrics(self.last_timing, flops, bytes, compute, self.ceilings)

    def profile_attention(self, func: Callable, batch_size: int, num_heads: int, seq_len: int, head_dim: int,
                          dtype: torch.dtype = torch.float16, warmup: int = 10, iterations: int = 100,
                          is_causal: bool = False, num_kv_heads: int | None = None) -> KernelMetrics:
        """Profile `func(q, k, v)` (plus `is_causal=True` when causal) on fresh random
        q `[B, H, N, D]` and k, v `[B, num_kv_heads or H, N, D]`. FLOPs count the visible
        (query, key) pairs, so a causal call does about half the work. fp32 is bounded by
        a third of the TF32 peak (3xTF32 products on the tensor cores)."""
        hkv = num_kv_heads or num_heads
        q = torch.randn(batch_size, num_heads, seq_len, head_dim, device="cuda", dtype=dtype)
        k = torch.randn(batch_size, hkv, seq_len, head_dim, device="cuda", dtype=dtype)
        v = torch.randn_like(k)
        kw = {"is_causal": True} if is_causal else {}
        w = attention_prefill_work(batch_size, num_heads, hkv, seq_len, seq_len, head_dim, is_causal,
                                   torch.empty((), dtype=dtype).element_size())
        return self.profile(func, q, k, v, flops=w.flops, bytes=w.bytes, compute=attention_compute_kind(dtype),
                            warmup=warmup, iterations=iterations, **kw)

    def profile_gemm(self, func: Callable, M: int, N: int, K: int, dtype: torch.dtype = torch.float16,
                     warmup: int = 10, iterations: int = 100) -> KernelMetrics:
        """Profile `func(a, b)` on fresh random a `[M, K]`, b `[K, N]` (int8: values in
        [-64, 64)). The output's element size, found by one call, enters the byte count
        (e.g. fp16 in, fp32 out for `tensor_core_gemm`). For float32 inputs the FP32
        (non-TF32) peak applies."""
        if dtype == torch.int8:
            a = torch.randint(-64, 64, (M, K), device="cuda", dtype=dtype)
            b = torch.randint(-64, 64, (K, N), device="cuda", dtype=dtype)
        else:
            a = torch.randn(M, K, device="cuda", dtype=dtype)
            b = torch.randn(K, N, device="cuda", dtype=dtype)
        out = first_tensor(func(a, b))
        in_b = a.element_size()
        out_b = out.element_size() if out is not None else in_b
        w = gemm_work(M, N, K, in_b, out_b)
        return self.profile(func, a, b, flops=w.flops, bytes=w.bytes, compute=compute_kind(dtype),
                            warmup=warmup, iterations=iterations)

    def compare_with_reference(self, custom_func: Callable, reference_func: Callable, *args, warmup: int = 10,
                               iterations: int = 100, **kwargs) -> dict[str, float]:
        """Time both on the same arguments, one after the other in this process.

        Returns `custom_ms`, `reference_ms`, `speedup` (reference / custom: > 1 means
        custom is faster) and `relative_perf` (custom / reference time, as the original API).
        """
        custom = self.measure_time(custom_func, *args, warmup=warmup, iterations=iterations, **kwargs)
        reference = self.measure_time(reference_func, *args, warmup=warmup, iterations=iterations, **kwargs)
        return {"custom_ms": custom, "reference_ms": reference, "speedup": reference / custom,
                "relative_perf": custom / reference}


# Errors that are RuntimeErrors but no backend's refusal of a call (torch >= 2.9 has AcceleratorError).
_FAULTS = tuple(e for e in (torch.OutOfMemoryError, getattr(torch, "AcceleratorError", None)) if e is not None)


def benchmark_attention(seq_lengths: list[int] = (512, 1024, 2048, 4096), batch_size: int = 1, num_heads: int = 32,
                        head_dim: int = 128, dtype: torch.dtype = torch.float16, is_causal: bool = False) -> list[dict]:
    """Our `flash_attention` against `F.scaled_dot_product_attention` on its fastest backend
    for each sequence length (flash, cuDNN and memory-efficient each pinned, as `llm-speed
    bench` times them; `reference` names the winner); rows for `print_benchmark_results`."""
    from .attention import flash_attention
    from .bench import sdpa

    prof = CUDAProfiler()
    rows = []
    for n in seq_lengths:
        ours = prof.profile_attention(flash_attention, batch_size, num_heads, n, head_dim, dtype, is_causal=is_causal)

        def sdpa_on(name: str):  # "default": SDPA's own choice
            with sdpa.pinned(name) if name != "default" else contextlib.nullcontext():
                return prof.profile_attention(torch.nn.functional.scaled_dot_product_attention, batch_size,
                                              num_heads, n, head_dim, dtype, is_causal=is_causal)

        best = None
        for name in ("flash", "cudnn", "efficient"):
            if sdpa.backend(name) is None:
                continue
            try:
                m = sdpa_on(name)
            except _FAULTS:  # a fault, not a declined call
                raise
            except RuntimeError:  # the backend declines this dtype / shape
                continue
            if best is None or m.elapsed_ms < best[1].elapsed_ms:
                best = (name, m)
        if best is None:  # none of the fast three: SDPA's own choice (the math backend)
            best = ("default", sdpa_on("default"))
        name, ref = best
        rows.append({"seq_len": n, "custom_ms": ours.elapsed_ms, "custom_tflops": ours.tflops,
                     "reference": f"sdpa-{name}", "reference_ms": ref.elapsed_ms, "reference_tflops": ref.tflops,
                     "speedup": ref.elapsed_ms / ours.elapsed_ms, "pct_of_roofline": ours.pct_of_roofline,
                     "bottleneck": ours.bottleneck.value})
    return rows


def benchmark_gemm(sizes: list[tuple[int, int, int]] = ((1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096)),
                   dtype: torch.dtype = torch.float16) -> list[dict]:
    """Our `gemm` against cuBLAS (`torch.matmul`, TF32 off) per (M, N, K)."""
    import cuda_llm_ops

    ours_fn = getattr(cuda_llm_ops, "gemm", None)  # the function, or the area's module before export
    ours_fn = getattr(ours_fn, "gemm", ours_fn)
    if ours_fn is None:
        raise RuntimeError("benchmark_gemm: this version of cuda_llm_ops has no gemm op")
    prof = CUDAProfiler()
    rows = []
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        for M, N, K in sizes:
            ours = prof.profile_gemm(ours_fn, M, N, K, dtype)
            ref = prof.profile_gemm(torch.matmul, M, N, K, dtype)
            rows.append({"M": M, "N": N, "K": K, "custom_ms": ours.elapsed_ms, "custom_tflops": ours.tflops,
                         "reference_ms": ref.elapsed_ms, "reference_tflops": ref.tflops,
                         "relative_perf": ours.tflops / ref.tflops, "pct_of_roofline": ours.pct_of_roofline,
                         "bottleneck": ours.bottleneck.value})
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    return rows


_KEY_ORDER = ("op", "impl", "seq_len", "batch_size", "num_heads", "head_dim", "M", "N", "K")
_HEADERS = {
    "seq_len": "seq_len", "custom_ms": "Custom (ms)", "reference_ms": "Reference (ms)",
    "custom_tflops": "Custom TFLOP/s", "reference_tflops": "Reference TFLOP/s", "speedup": "Speedup",
    "reference": "Reference",
    "relative_perf": "Relative Performance", "pct_of_roofline": "% of roofline", "bottleneck": "Bottleneck",
}


def _fmt(key: str, v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, Bottleneck):
        return v.value
    if isinstance(v, bool) or isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        if key == "speedup":
            return f"{v:.2f}x"
        if key == "relative_perf":  # custom rate / reference rate
            return f"{100 * v:.1f}%"
        if key == "pct_of_roofline":
            return f"{v:.1f}%"
        if abs(v) >= 100:
            return f"{v:.1f}"
        if abs(v) >= 1:
            return f"{v:.3f}"
        return f"{v:.4g}"
    return str(v)


def print_benchmark_results(results: list[dict], title: str = "Benchmark Results") -> None:
    """Print result dicts as an aligned table (attention rows keyed by `seq_len`, GEMM rows by
    `M`/`N`/`K`; any other keys become columns). An empty list prints the title and "(no results)"."""
    width = 60
    print(f"\n{'=' * width}\n{title:^{width}}\n{'=' * width}")
    if not results:
        print("(no results)")
        return
    keys: list[str] = []
    for r in results:
        for k in r:
            if k not in keys:
                keys.append(k)
    keys.sort(key=lambda k: (_KEY_ORDER.index(k) if k in _KEY_ORDER else len(_KEY_ORDER)))
    headers = [_HEADERS.get(k, k) for k in keys]
    rows = [[_fmt(k, r.get(k)) for k in keys] for r in results]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    print("  ".join(h.rjust(w) for h, w in zip(headers, widths)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(c.rjust(w) for c, w in zip(row, widths)))
    if any("relative_perf" in r for r in results):
        print("Relative Performance: custom relative to the reference (100% = parity).")
    if any("speedup" in r for r in results):
        print("Speedup: reference time / custom time (> 1: custom is faster).")
