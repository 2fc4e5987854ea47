"""CUDA-graph capture with batch-size buckets, as serving engines do for decode.

A decode step launches many short kernels; replaying a captured CUDA graph
removes the per-launch CPU cost. A graph fixes every shape and address, so the
runner captures one graph per batch-size bucket (1, 2, 4, ..., 128) with static
input buffers, pads a call's batch up to the next bucket, copies the inputs in,
replays, and returns the first B rows of the static output.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import torch

DEFAULT_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)


def capture_graph(fn: Callable[[], Any], warmup: int = 1, pool=None) -> tuple[torch.cuda.CUDAGraph, Any]:
    """Capture `fn()` in a CUDA graph; returns (graph, what the captured call returned).

    `warmup` calls first run on a side stream, outside the graph (lazy initialisation,
    allocator growth, one-time kernel attributes), as capture requires; `pool`: a
    memory pool handle shared with other graphs (torch.cuda.graph_pool_handle())."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool):
        out = fn()
    return graph, out


class CUDAGraphRunner:
    """Capture `fn` once per batch bucket and replay it for any batch size up to the largest bucket.

    Args:
        fn: `fn(*args)` returning a tensor or a tuple/list/namedtuple/dict whose tensors have
            the batch as dim 0 (other items, 0-d tensors too, are returned as captured), or None
            (a step that only writes in place, e.g. `paged_kv_append`). It must be
            capturable: no host synchronisation, no data-dependent shapes (e.g.
            `paged_attention` with `out=` and a workspace, or with `check_indices` left at
            None, which skips the host check under capture).
        example_args: one call's arguments. Those at `batch_args` have the batch as dim 0;
            each bucket gets static buffers shaped `[bucket, *shape[1:]]` like them. The
            others (KV caches, weights, floats) are passed as they are to every capture:
            the graphs keep their addresses, so update them in place between calls.
        batch_args: positions in `example_args` of the batched arguments (at least one);
            `__call__` takes exactly these, in this order, with a batch of at least 1.
        buckets: batch sizes to capture (sorted ascending; a call with more rows than
            the largest raises ValueError).
        pad_values: value written to the padding rows of each batched argument
            (by position in `batch_args` order; default 0). For `paged_attention`, a
            seq_len of 0 makes a padding row read nothing. A padding row still runs
            through `fn`: a `paged_kv_append` slot_mapping must be padded with -1 (the
            op skips negative slots), since 0 would write the padding rows' K/V into
            slot 0 of the cache, someone's block (vLLM pads with -1 for the same reason).

    Graphs are captured lazily on a bucket's first use, or all at once with `capture_all()`
    (largest first, sharing one memory pool). Capture runs `fn` `warmup` times eagerly first:
    `capture_all()` on `example_args` (their rows, padded), a bucket's first use on that
    call's own rows (padded), so a step that writes a cache writes what that call writes, not
    the example's tokens into slots other sequences may hold by then. A step that is not
    idempotent (one that updates a state in place, such as lightning attention's `kv`) runs
    `warmup + 1` times on the call that captures its bucket: `capture_all()` before serving.
    The returned tensors are views of static buffers, overwritten by the next call of the
    same bucket (and, as the buckets share one memory pool, possibly by any later call): clone
    them to keep them.
    """

    def __init__(self, fn: Callable[..., Any], example_args: Sequence[Any], batch_args: Sequence[int],
                 buckets: Sequence[int] = DEFAULT_BATCH_BUCKETS, pad_values: Sequence[float] | None = None,
                 warmup: int = 2):
        if not buckets or any(int(b) < 1 for b in buckets):
            raise ValueError(f"buckets must be positive batch sizes, got {tuple(buckets)}")
        self.fn = fn
        self.example_args = list(example_args)
        self.batch_args = [int(i) for i in batch_args]
        if not self.batch_args:
            raise ValueError("batch_args must name at least one batched argument (its dim 0 is the batch)")
        for i in self.batch_args:
            if not (0 <= i < len(self.example_args)) or not isinstance(self.example_args[i], torch.Tensor):
                raise ValueError(f"batch_args entry {i} must index a tensor in example_args "
                                 f"({len(self.example_args)} arguments)")
        self.buckets = tuple(sorted({int(b) for b in buckets}))
        if pad_values is not None and len(pad_values) != len(self.batch_args):
            raise ValueError(f"pad_values must have one value per batched argument ({len(self.batch_args)}), "
                             f"got {len(pad_values)}")
        self.pad_values = list(pad_values) if pad_values is not None else [0] * len(self.batch_args)
        self.warmup = warmup
        self.pool = None
        self._graphs: dict[int, tuple[torch.cuda.CUDAGraph, list[torch.Tensor], Any]] = {}

    def bucket_for(self, batch: int) -> int:
        """Smallest bucket >= batch."""
        for b in self.buckets:
            if b >= batch:
                return b
        raise ValueError(f"batch size {batch} is larger than the largest captured bucket ({self.buckets[-1]})")

    @property
    def captured(self) -> tuple[int, ...]:
        return tuple(sorted(self._graphs))

    def capture_all(self) -> None:
        for b in reversed(self.buckets):
            self._capture(b, [self.example_args[pos] for pos in self.batch_args])

    def _static_inputs(self, bucket: int, rows_from: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """A bucket's static buffers, each holding the first rows of `rows_from`'s tensor (one
        per batched argument) and its pad value below them."""
        bufs = []
        for src, pad in zip(rows_from, self.pad_values):
            buf = torch.empty((bucket, *src.shape[1:]), dtype=src.dtype, device=src.device)
            rows = min(bucket, src.shape[0])
            buf[:rows].copy_(src[:rows])
            buf[rows:].fill_(pad)
            bufs.append(buf)
        return bufs

    def _args(self, bufs: list[torch.Tensor]) -> list[Any]:
        args = list(self.example_args)
        for pos, buf in zip(self.batch_args, bufs):
            args[pos] = buf
        return args

    def _capture(self, bucket: int, rows_from: Sequence[torch.Tensor]):
        if bucket in self._graphs:
            return self._graphs[bucket]
        bufs = self._static_inputs(bucket, rows_from)
        args = self._args(bufs)
        if self.pool is None:
            self.pool = torch.cuda.graph_pool_handle()
        graph, out = capture_graph(lambda: self.fn(*args), warmup=self.warmup, pool=self.pool)
        self._graphs[bucket] = (graph, bufs, out)
        return self._graphs[bucket]

    def __call__(self, *batched: torch.Tensor):
        if len(batched) != len(self.batch_args):
            raise ValueError(f"expected {len(self.batch_args)} batched arguments, got {len(batched)}")
        for i, t in enumerate(batched):
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"batched argument {i} must be a torch.Tensor, got {type(t).__name__}")
            if t.dim() == 0:
                raise ValueError(f"batched argument {i} must have the batch as dim 0, got a 0-d tensor")
        batch = batched[0].shape[0]
        if batch == 0:  # no bucket holds 0 rows; replaying bucket 1 would return 1 row
            raise ValueError("batch size must be >= 1, got 0")
        for i, t in enumerate(batched):
            ex = self.example_args[self.batch_args[i]]
            if t.shape[0] != batch or tuple(t.shape[1:]) != tuple(ex.shape[1:]) or t.dtype != ex.dtype:
                raise ValueError(f"batched argument {i} must be [{batch}, *{tuple(ex.shape[1:])}] {ex.dtype}, "
                                 f"got {tuple(t.shape)} {t.dtype}")
            # A host tensor would be copied in synchronously, every call.
            if t.device != ex.device:
                raise ValueError(f"batched argument {i} must be on {ex.device} (the captured buffers' device), "
                                 f"got {t.device}")
        graph, bufs, out = self._capture(self.bucket_for(batch), batched)
        for buf, t, pad in zip(bufs, batched, self.pad_values):
            buf[:batch].copy_(t)
            if buf.shape[0] > batch:
                buf[batch:].fill_(pad)
        graph.replay()
        if out is None:
            return None
        if isinstance(out, torch.Tensor):
            return out[:batch] if out.dim() > 0 else out
        if isinstance(out, dict):
            return {k: o[:batch] if isinstance(o, torch.Tensor) and o.dim() > 0 else o for k, o in out.items()}
        items = [o[:batch] if isinstance(o, torch.Tensor) and o.dim() > 0 else o for o in out]
        return type(out)(*items) if hasattr(out, "_fields") else type(out)(items)  # a namedtuple takes fields
