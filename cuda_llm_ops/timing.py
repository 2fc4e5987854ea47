"""The one timer of the package: CUDA events, warm-up, median and percentiles,
optional cold L2 and optional CUDA-graph replay for launch-bound ops.

Two ways to start each timed run with a cold L2:
- rotation (`cold_l2=True, fn_sets=[...]`, what `llm-speed bench` uses): calls cycle
  over copies of the inputs that together span 3x the L2 (`rotation_count`; one
  copy when a call alone moves that much), so each call finds its data evicted by
  the others. This is the steady state of a model running op after op: the data
  comes from HBM, and the write-back of earlier calls' outputs runs during later
  calls, as the call's own outputs' would. No flush kernel between runs, so it
  combines with `cuda_graph` (cold data and no launch gaps).
- flush (`cold_l2=True` alone; for a single callable, e.g. the profiler): before
  each run, outside the events, a buffer of twice the L2 size (at least 256 MB) is
  READ by a reduction. Reading, not writing: a written flush would leave a whole L2
  of dirty lines whose write-back (~50 MB, ~17 us on an H100) would be charged to
  the timed kernel, as long as a whole decode kernel. The flip side: a call whose
  outputs fit in the clean L2 is not charged their write-back, so write-heavy ops
  (a state update) read optimistic with a flush; use rotation for them.

Every number the profiler and `llm-speed bench` report comes from `benchmark`.
"""
from __future__ import annotations

import statistics
import math
from dataclasses import dataclass, field, replace
from typing import Callable, Sequence

import torch


@dataclass
class Timing:
    median_ms: float
    p20_ms: float
    p80_ms: float
    runs: int
    cold_l2: bool
    cuda_graph: bool
    # How L2 was made cold: "" (warm), "flush" or "rotate:<sets>".
    l2_method: str = ""
    # Every run's time, ms (what pool_timings merges).
    times: list[float] = field(default_factory=list, repr=False)


_FLUSH: dict[int, torch.Tensor] = {}
_SINK: dict[int, torch.Tensor] = {}


def l2_cache_bytes(device: int | torch.device | None = None) -> int:
    """L2 size of a CUDA device in bytes (50 MB when the driver does not say)."""
    idx = _device_index(device)
    props = torch.cuda.get_device_properties(idx)
    return int(getattr(props, "L2_cache_size", 0) or 50 * 2**20)


def _device_index(device) -> int:
    if device is None:
        return torch.cuda.current_device()
    if isinstance(device, int):
        return device
    device = torch.device(device)
    return device.index if device.index is not None else torch.cuda.current_device()


def _flush_buffer(device: torch.device) -> torch.Tensor:
    """A float32 buffer 2x the L2 size (at least 256 MB): reading it evicts every cached line."""
    idx = _device_index(device)
    if idx not in _FLUSH:
        nbytes = max(2 * l2_cache_bytes(idx), 256 * 2**20)
        _FLUSH[idx] = torch.zeros(nbytes // 4, dtype=torch.float32, device=f"cuda:{idx}")
        _SINK[idx] = torch.zeros((), dtype=torch.float32, device=f"cuda:{idx}")
    return _FLUSH[idx]


def flush_l2(device: torch.device | None = None) -> None:
    """Evict the L2 by reading a buffer twice its size (clean lines: no write-back later)."""
    buf = _flush_buffer(torch.device("cuda") if device is None else device)
    torch.sum(buf, dim=0, out=_SINK[_device_index(buf.device)])


def rotation_count(bytes_per_set: float, l2_bytes: int | None = None, max_sets: int | None = 64) -> int:
    """How many copies of a call's inputs to rotate over so each call reads from HBM.

    The sets together span at least 3x the L2 (LRU-like eviction then leaves none
    of the next set's data cached): 1 when one call moves that much, capped at
    `max_sets` (None: no cap; compare with the cap to see whether rotation can be cold).
    """
    if l2_bytes is None:
        l2_bytes = l2_cache_bytes()
    need = max(1, math.ceil(3 * l2_bytes / max(float(bytes_per_set), 1.0)))
    return int(need if max_sets is None else min(max_sets, need))


def _quantiles(times: list[float]) -> tuple[float, float, float]:
    s = sorted(times)
    n = len(s)

    def q(p: float) -> float:
        return s[min(n - 1, max(0, int(round(p * (n - 1)))))]

    return statistics.median(s), q(0.2), q(0.8)


DEFAULT_GRAPH_CALLS = 10


def graph_replay_calls(graph_calls: int, n_sets: int) -> int:
    """The calls one replay of `benchmark`'s graph makes: `graph_calls`, or every one of
    `n_sets` input sets where there are more (else the rotation stays warm)."""
    return max(graph_calls, n_sets)


def benchmark(fn: Callable[[], object], *, warmup: int = 10, iterations: int = 100, cold_l2: bool = False,
              cuda_graph: bool = False, graph_calls: int = DEFAULT_GRAPH_CALLS,
              fn_sets: Sequence[Callable[[], object]] | None = None, warmup_ms: float = 0.0) -> Timing:
    """Time `fn()` on the current CUDA stream.

    - warm-up calls first (module load, autotuning, allocator growth stay out);
    - each timed run is bracketed by its own pair of CUDA events; the median and
      the 20th/80th percentiles of `iterations` runs are reported, in ms;
    - `cold_l2`: before each run, outside the events, the L2 is flushed by reading
      a buffer twice its size, so memory-bound ops read from HBM, not L2;
    - `fn_sets`: the same call on several input copies (`fn` is ignored); run i
      calls `fn_sets[i % len]`. With `cold_l2=True` no flush runs: the caller vouches
      that the sets together span 3x the L2 (`rotation_count`), and the result
      reports `l2_method="rotate:<n>"`;
    - `cuda_graph`: `graph_calls` calls (cycling over `fn_sets` when given) are
      captured in one CUDA graph; each replay is timed and divided by `graph_calls`,
      removing launch gaps. A flush cannot go inside a graph, so `cold_l2=True`
      with `cuda_graph=True` needs `fn_sets`.
    - `warmup_ms`: after the warm-up calls, more back-to-back calls until this much GPU
      time has passed (no flush between them). A GPU at its power cap runs its first tens
      of milliseconds after an idle gap at the full clock, then throttles (an H100 on
      long prefill calls: 1980 MHz, then 1400-1700 within ~50 ms); warmed this long, every
      timed run sees the clock the call sustains.
    """
    if iterations < 1:
        raise ValueError(f"benchmark: iterations must be >= 1, got {iterations}")
    if warmup < 0:
        raise ValueError(f"benchmark: warmup must be >= 0, got {warmup}")
    if not warmup_ms >= 0:
        raise ValueError(f"benchmark: warmup_ms must be >= 0, got {warmup_ms}")
    if graph_calls < 1:
        raise ValueError(f"benchmark: graph_calls must be >= 1, got {graph_calls}")
    fns = list(fn_sets) if fn_sets is not None else [fn]
    if not fns:
        raise ValueError("benchmark: fn_sets must hold at least one callable")
    rotate = fn_sets is not None and cold_l2
    if cold_l2 and cuda_graph and not rotate:
        raise ValueError("benchmark: cold_l2 with cuda_graph needs fn_sets (rotated inputs): "
                         "an L2 flush cannot run inside the captured graph")
    use_flush = cold_l2 and not rotate
    stream = torch.cuda.current_stream()
    if use_flush:
        flush_l2()
    per_call = 1
    if cuda_graph:
        graph_calls = graph_replay_calls(graph_calls, len(fns))
        from .graphs import capture_graph

        def run_all():
            for j in range(graph_calls):
                fns[j % len(fns)]()

        graph, _ = capture_graph(run_all, warmup=3)
        calls = [graph.replay]
        per_call = graph_calls
    else:
        calls = fns
    for i in range(warmup):
        calls[i % len(calls)]()
    if warmup_ms > 0:
        _warm_for(calls, warmup_ms, stream)
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iterations)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iterations)]
    for i in range(iterations):
        if use_flush:
            flush_l2()
        starts[i].record(stream)
        calls[i % len(calls)]()
        ends[i].record(stream)
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) / per_call for s, e in zip(starts, ends)]
    med, p20, p80 = _quantiles(times)
    method = f"rotate:{len(fns)}" if rotate else ("flush" if use_flush else "")
    return Timing(med, p20, p80, iterations, bool(cold_l2), cuda_graph, method, times)


def _warm_for(calls: Sequence[Callable[[], object]], ms: float, stream) -> None:
    """Back-to-back calls until `ms` of GPU time has passed, in batches of about 5 ms each
    (sized by the first call), one sync a batch."""
    done, n, batch = 0.0, 0, 1
    while done < ms:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(stream)
        for _ in range(batch):
            calls[n % len(calls)]()
            n += 1
        e.record(stream)
        e.synchronize()
        took = s.elapsed_time(e)
        done += took
        batch = max(1, min(10000, int(5.0 * batch / max(took, 1e-3))))


def pool_timings(parts: Sequence[Timing]) -> Timing:
    """One Timing of the runs of several (the rounds of one implementation, timed between
    other implementations'): quantiles over all their runs; the method fields of the first."""
    if not parts or any(not p.times for p in parts):
        raise ValueError("pool_timings: every part must carry its run times")
    how = {(p.cold_l2, p.cuda_graph, p.l2_method) for p in parts}
    if len(how) > 1:
        raise ValueError(f"pool_timings: the parts were timed differently (cold L2, graph, L2 method): {sorted(how)}")
    times = [t for p in parts for t in p.times]
    med, p20, p80 = _quantiles(times)
    return replace(parts[0], median_ms=med, p20_ms=p20, p80_ms=p80, runs=len(times), times=times)
