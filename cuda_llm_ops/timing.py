"""The one timer of the package: CUDA events, warm-up, median and percentiles,
optional cold L2 (a flush buffer larger than L2 written between runs) and
optional CUDA-graph replay for launch-bound ops.

Every number the profiler and `llm-speed bench` report comes from `benchmark`.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Callable

import torch


@dataclass
class Timing:
    median_ms: float
    p20_ms: float
    p80_ms: float
    runs: int
    cold_l2: bool
    cuda_graph: bool


_FLUSH: dict[int, torch.Tensor] = {}


def _flush_buffer(device: torch.device) -> torch.Tensor:
    """A buffer 2x the L2 size (at least 256 MB): writing it evicts every cached line."""
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _FLUSH:
        props = torch.cuda.get_device_properties(idx)
        l2 = getattr(props, "L2_cache_size", 50 * 2**20) or 50 * 2**20
        nbytes = max(2 * l2, 256 * 2**20)
        _FLUSH[idx] = torch.empty(nbytes // 4, dtype=torch.int32, device=f"cuda:{idx}")
    return _FLUSH[idx]


def _quantiles(times: list[float]) -> tuple[float, float, float]:
    s = sorted(times)
    n = len(s)

    def q(p: float) -> float:
        return s[min(n - 1, max(0, int(round(p * (n - 1)))))]

    return statistics.median(s), q(0.2), q(0.8)


def benchmark(fn: Callable[[], object], *, warmup: int = 10, iterations: int = 100, cold_l2: bool = False,
              cuda_graph: bool = False, graph_calls: int = 10) -> Timing:
    """Time `fn()` on the current CUDA stream.

    - warm-up calls first (module load, autotuning, allocator growth stay out);
    - each timed run is bracketed by its own pair of CUDA events; the median and
      the 20th/80th percentiles of `iterations` runs are reported, in ms;
    - `cold_l2`: before each run, a buffer twice the L2 size is overwritten
      (outside the events), so memory-bound ops read from HBM, not L2;
    - `cuda_graph`: `graph_calls` calls are captured in one CUDA graph and each
      replay is timed and divided by `graph_calls`, removing launch gaps
      (cannot be combined with `cold_l2`: the flush would be inside the timing).
    """
    if cold_l2 and cuda_graph:
        raise ValueError("benchmark: cold_l2 and cuda_graph cannot be combined")
    if iterations < 1:
        raise ValueError(f"benchmark: iterations must be >= 1, got {iterations}")
    stream = torch.cuda.current_stream()
    flush = _flush_buffer(torch.device("cuda")) if cold_l2 else None
    call = fn
    per_call = 1
    if cuda_graph:
        side = torch.cuda.Stream()
        side.wait_stream(stream)
        with torch.cuda.stream(side):
            for _ in range(3):
                fn()
        stream.wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(graph_calls):
                fn()
        call = graph.replay
        per_call = graph_calls
    for _ in range(warmup):
        call()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iterations)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iterations)]
    for i in range(iterations):
        if flush is not None:
            flush.fill_(i)
        starts[i].record(stream)
        call()
        ends[i].record(stream)
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) / per_call for s, e in zip(starts, ends)]
    med, p20, p80 = _quantiles(times)
    return Timing(med, p20, p80, iterations, cold_l2, cuda_graph)
