"""Decode attention: paged KV cache (block tables), split-KV (flash-decoding),
GQA, and the paged cache append.

CUDA graphs and host synchronisation: every op is CUDA-graph capturable. With `out=`,
a preallocated `workspace` and the host checks off (`check_indices=False`;
`decode_attention(..., check_workspace=False)`; `paged_kv_append(..., check_slots=False)`),
a call allocates nothing and never
synchronises with the host (tests/test_decode.py checks both). With the defaults
(`None`), an eager call runs the host index check below: one synchronisation per call,
skipped by itself under capture and torch.compile tracing. `CUDAGraphRunner`
(`cuda_llm_ops.graphs`) captures a decode step per batch-size bucket and replays it.

Split-KV workspace: a split call runs one kernel; each split writes its partial
output to the workspace and counts itself in on a counter at the workspace's end,
and the split that finishes last merges (log-sum-exp) and resets the counter to its
rest value (on Hopper's TMA kernel with 16-bit caches, where a block's query rows x
head_dim / 4 outnumber its threads (the balanced schedule's: twice them), e.g. 16 query
rows per KV head at head_dim 256, a second kernel merges instead and no counter is
read; and at 2-4 splits on Hopper at head_dim 128 and more, where one wave of
thread-block clusters holds the grid, each sequence's split blocks run as one cluster and
merge through each other's shared memory: no partials, no counter). So the counters must be
at rest before the first call: use a workspace from
`decode_workspace` / `paged_attention_workspace` (which set them), passed as returned
(not a slice: the counters sit at the end of the tensor). It is self-resetting: after
every completed call the counters are at rest again, so one workspace serves any number
of later calls and CUDA-graph replays, and calls of other shapes (batch, splits, heads) that
it is large enough for. Calls sharing a workspace must be ordered (one stream).
Without `workspace=` a split call allocates one and sets its counters (one small
kernel). A workspace whose counters are not at rest (a `torch.zeros` / `torch.empty`
buffer, or an overwritten one) gives NaN outputs where the splits merge themselves
(split clusters read no counter: right outputs either way), never stale or early-merged values (the rest value is not 0, a small integer, -1 or
a common float bit pattern), and the host checks raise ValueError for it
(`paged_attention`'s `check_indices`, `decode_attention`'s `check_workspace`).

Layouts (vLLM's):
- q / out: `[B, Hq, D]`, one new token per sequence (`[B, Hq, Nq, D]`: Nq new tokens,
  speculative decoding).
- k_cache / v_cache: `[num_blocks, block_size, Hkv, D]`, contiguous; block_size a
  power of two (8 ... 256 tested).
- block_tables: int32 `[B, max_blocks_per_seq]`; sequence b's token t lives in
  physical block `block_tables[b, t // block_size]` at offset `t % block_size`.
- seq_lens: int32 `[B]`, keys in the cache for each sequence (the new token
  included); a sequence sees keys `0 .. seq_len - 1` and a length of 0 gives zeros.

Kernels exist for float16 and bfloat16 with D any multiple of 8 up to 256: D in
`DECODE_KERNEL_HEAD_DIMS` (64, 96, 128, 256) has its own kernel, any other D (32,
80, 112, 192, ...) runs on the next wider one, reading its own rows once (the
padding columns are zeros in shared memory, never loaded). Hq any multiple of Hkv;
batch <= 65535. GPUs with 99 KB of shared memory per block (sm_86/89/120) run D up to
128, not 136-256 (`decode_head_dim_fits`). Both attention ops take a sliding window
(`window_left`: each query sees the window_left keys before its own position and
itself; the keys before the window are not read) and logit soft-capping
(`logits_soft_cap`: scores become cap * tanh(score / cap), Gemma 2).

GQA: a thread block serves 16 query rows (query heads x new tokens) of one KV head and
reads that head's keys once for all of them: with one new token, every group of up to
16 query heads per KV head (GQA 32/8, 64/8) reads each K/V element once. More rows per
KV head (MQA with more than 16 query heads, or Nq x Hq / Hkv > 16) take several row
tiles: on sm_90 parts (the H100 and H200) at 16-bit head dims 64, 96 and 128, 17-32 rows
run as one block of two tiles over one read of the keys where `decode_num_splits`' two-tile
rule applies (tables long enough, grids up to about two units per SM); otherwise each
16-row block reads the keys again (mostly from L2, as the blocks of a KV head run together).

FP8 KV cache (vLLM's `kv_cache_dtype="fp8"`, e4m3): `paged_attention` takes caches of
dtype `torch.float8_e4m3fn` with float16/bfloat16 q, each K element standing for its
value times `k_scale` and each V element for its value times `v_scale` (per-tensor
scales, floats: a captured graph keeps them); `paged_kv_append` writes such caches,
storing `e4m3(x * (1 / scale))` (float32) rounded to nearest and saturated to +-448.
Half the bytes of a 16-bit cache are read, so a memory-bound decode step takes about
half the time. The kernels convert the loaded K/V to float16 in registers (exactly:
e4m3 fits it) and run the same tensor-core math (bfloat16 q rows scaled by a power of
two into float16's range, so any bfloat16 magnitude keeps its bits); the output is q's
dtype; head_dim a multiple of 16 (16-byte cache rows).

Index checks: a block index outside `[0, num_blocks)` or a seq_len outside
`[0, table capacity]` is data on the GPU; checking it on the host needs a
synchronisation. `check_indices=None` (default) checks on the host (one sync,
ValueError naming the sequence) except while a CUDA graph is being captured or
torch.compile is tracing, where the sync is impossible (capture) or would break the
graph: there the check is skipped. The kernel itself never dereferences such an index
in any mode: it clamps the read and writes NaN to that sequence's output, so a bad
table is never a silent wrong answer or an out-of-bounds access. `check_indices=False`
skips the host check everywhere (serving loops, benchmarks); `True` forces it (and
raises under capture). `paged_kv_append`'s `check_slots` works the same way for slots
past the cache.

Kernel choice: on Hopper a TMA (tensor-memory-accelerator) kernel streams K/V through
swizzled shared-memory tiles on a warp-specialised pipeline, launched with programmatic
dependent launch where that measured faster; a cp.async kernel runs elsewhere and below
sm_90. Which kernel, how many pipeline stages, whether adjacent KV heads run as one
wider row (head pairs at D = 64 and 72-96), how many splits, and the Hopper schedules
that even out the last wave (the balanced schedule, the spread tail) are chosen per
GPU (HBM3e parts such as the H200 have their own rules), head dim, layout and grid
from measurements: `decode_num_splits` states the split rules, and
csrc/decode/NOTES.md holds each rule's measurements ("Kernel choice", v6 onwards;
the H200 rules from "Stop 62" on). Every choice gives the same result to rounding.

Dev knobs (benchmarks only): `CLO_DECODE_*` environment variables force the kernel, its
pipeline depth, head pairs, the schedules, the split merge's kernel and PDL (each with its
values in csrc/decode/NOTES.md, "Where it stands"). They are read on every call when set
before the process's first decode call; unset, the choice is automatic and the
environment is never read.
"""
from __future__ import annotations

import math
import numbers

import torch

from . import _ops
from .validation import (
    check_contiguous,
    check_dtype,
    check_elements_apart,
    check_last_dim_contiguous,
    check_rank,
    check_same_device,
    check_same_dtype,
    check_one_cuda_device,
    check_tensor,
    check_out_apart,
    check_writes_apart,
    call_or_explain,
    given,
    resolve_scale,
    score_factor_ok,
    validate_attention_inputs,
)

DECODE_DTYPES = (torch.float16, torch.bfloat16)
# The quantized KV-cache dtype paged_attention / paged_kv_append take (module docstring).
FP8_KV_DTYPE = torch.float8_e4m3fn
# Head dims with a compiled decode kernel; every other multiple of 8 up to
# DECODE_MAX_HEAD_DIM runs on the next wider one (`decode_kernel_head_dim`).
DECODE_KERNEL_HEAD_DIMS = (64, 96, 128, 256)
DECODE_MAX_HEAD_DIM = 256
# flash_attention hands calls with at most this many query rows to decode_attention.
DECODE_MAX_QUERY_ROWS = 16
MAX_SPLITS = 128
MAX_BATCH = 65535


def _dt(d: torch.dtype) -> str:
    return str(d).replace("torch.", "")


def decode_kernel_head_dim(d: int) -> int:
    """The compiled decode kernel's head dim that head dim `d` runs on (the smallest of
    `DECODE_KERNEL_HEAD_DIMS` >= d), or 0 when no decode kernel takes `d` (not a
    multiple of 8 in [8, DECODE_MAX_HEAD_DIM]: rows move in 16-byte pieces)."""
    if not 8 <= d <= DECODE_MAX_HEAD_DIM or d % 8:
        return 0
    return next(k for k in DECODE_KERNEL_HEAD_DIMS if d <= k)


def _check_head_dim(d: int, device: torch.device | None = None, fp8_cache: bool = False) -> None:
    if not decode_kernel_head_dim(d):
        raise ValueError(f"head_dim must be a multiple of 8 in [8, {DECODE_MAX_HEAD_DIM}] for the decode kernels, "
                         f"got {d}")
    if (device is not None and device.type == "cuda" and _ops.has_op("decode_head_dim_fits")
            and not decode_head_dim_fits(d, device, fp8_cache)):
        fits = [h for h in DECODE_KERNEL_HEAD_DIMS if decode_head_dim_fits(h, device, fp8_cache)]
        runs = f"multiples of 8 up to {max(fits)}" if fits else "none"
        raise ValueError(f"head_dim {d}: the decode kernels need more shared memory per block than this GPU "
                         f"allows; head dims that run here: {runs}")


def _check_window_and_soft_cap(window_left: int, logits_soft_cap: float) -> None:
    if not isinstance(window_left, int) or isinstance(window_left, bool) or window_left < -1:
        raise ValueError(f"window_left must be an int >= -1 (-1: no sliding window), got {window_left!r}")
    if not (isinstance(logits_soft_cap, (int, float)) and math.isfinite(logits_soft_cap) and logits_soft_cap >= 0):
        raise ValueError(f"logits_soft_cap must be finite and >= 0 (0: off), got {logits_soft_cap!r}")
    if logits_soft_cap != 0 and not score_factor_ok(logits_soft_cap):
        raise ValueError(f"logits_soft_cap must be 0 or a normal float32 of at most 1.7e38, got {logits_soft_cap!r}")


def _check_lse(lse, q: torch.Tensor) -> None:
    if lse is None:
        return
    check_tensor(lse, "lse")
    check_dtype(lse, "lse", torch.float32)
    check_same_device(lse, "lse", q, "q")
    if tuple(lse.shape) != tuple(q.shape[:-1]):
        raise ValueError(f"lse must have q's shape without head_dim {tuple(q.shape[:-1])}, got {tuple(lse.shape)}")
    check_contiguous(lse, "lse")


def _check_written_apart(out, lse, workspace, inputs) -> None:
    """out, lse and the workspace are written by the kernels: apart from each other and from
    every (tensor, name) of `inputs` (None entries skipped). Skipped while torch.compile traces
    (by check_out_apart)."""
    check_out_apart(out, inputs)
    for scratch, sname in ((lse, "lse"), (workspace, "workspace")):
        check_out_apart(scratch, list(inputs) + [(out, "out")], out_name=sname)
    check_out_apart(lse, [(workspace, "workspace")], out_name="lse")


def _lse_for(lse, return_lse: bool, q: torch.Tensor):
    """The lse buffer a call writes: the given one, a new one when it is to be returned, else None."""
    if lse is None and return_lse:
        return torch.empty(q.shape[:-1], dtype=torch.float32, device=q.device)
    return lse


def merge_attention_states(out_a: torch.Tensor, lse_a: torch.Tensor, out_b: torch.Tensor,
                           lse_b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention over the union of two disjoint key sets from the attention over each
    (`out_*` `[..., D]`, `lse_*` their rows' log-sum-exp `[...]`, as `paged_attention` /
    `decode_attention` return with `return_lse=True`): out = (out_a e^lse_a + out_b e^lse_b)
    / (e^lse_a + e^lse_b), lse = log(e^lse_a + e^lse_b), in float32; returns (out in
    out_a's dtype, lse). A side with lse = -inf (no key) contributes nothing. Plain PyTorch."""
    m = torch.maximum(lse_a, lse_b)
    m = torch.where(torch.isneginf(m), torch.zeros_like(m), m)  # both sides empty: no -inf - -inf
    wa, wb = torch.exp(lse_a - m), torch.exp(lse_b - m)
    total = wa + wb
    safe = torch.where(total > 0, total, torch.ones_like(total))
    out = (out_a.float() * (wa / safe).unsqueeze(-1) + out_b.float() * (wb / safe).unsqueeze(-1)).to(out_a.dtype)
    return out, m + torch.log(total)


def _read_kv_len(max_kv_len: int, seq_len_q: int, window_left: int) -> int:
    """Keys a call reads at most (the split heuristic's length): max_kv_len, or with a
    sliding window the lowest query row's window from its 64-key tile start."""
    return max_kv_len if window_left < 0 else min(max_kv_len, window_left + seq_len_q + 63)


# FP8 scales: normal float32 values with normal reciprocals (the append multiplies by 1 / scale).
_MIN_KV_SCALE = 1.1754943508222875e-38  # float32's smallest normal
_MAX_KV_SCALE = 1.0 / _MIN_KV_SCALE


def _kv_scale_type_ok(*scales) -> None:
    """Scales are host numbers (a Python or numpy float): a tensor would make every call
    synchronise (float(t)) and break CUDA-graph capture. Cheap: runs on every call."""
    for x, name in zip(scales, ("k_scale", "v_scale")):
        if not isinstance(x, numbers.Real) or isinstance(x, bool):
            raise ValueError(f"{name} must be a Python float (for a tensor scale, pass float(scale) once, outside "
                             f"the decode loop), got {type(x).__name__}")


def _check_kv_scales(fp8: bool, k_scale: float, v_scale: float) -> None:
    """FP8 caches' scales: float32 values in [FLT_MIN, 1 / FLT_MIN]; 16-bit caches take
    none (1.0)."""
    _kv_scale_type_ok(k_scale, v_scale)
    for x, name in ((k_scale, "k_scale"), (v_scale, "v_scale")):
        if fp8:
            if not _MIN_KV_SCALE <= x <= _MAX_KV_SCALE:
                raise ValueError(f"{name} must be a float32 in [{_MIN_KV_SCALE:g}, {_MAX_KV_SCALE:g}] (finite, > 0, "
                                 f"normal, with a finite reciprocal), got {x!r}")
        elif x != 1.0:
            raise ValueError(f"{name} applies to float8_e4m3fn caches only and must be 1.0 for 16-bit caches, "
                             f"got {x!r}")


def _check_num_splits(num_splits: int) -> None:
    if not isinstance(num_splits, int) or isinstance(num_splits, bool) or num_splits < 0 or num_splits > MAX_SPLITS:
        raise ValueError(f"num_splits must be an int in [0, {MAX_SPLITS}] (0: heuristic), got {num_splits!r}")


def _check_batch(b: int) -> None:
    if b > MAX_BATCH:
        raise ValueError(f"batch must be <= {MAX_BATCH} (the decode grid's y dimension), got {b}")


def _check_rows(t: torch.Tensor, name: str) -> None:
    """`check_last_dim_contiguous`, except while torch.compile traces: fake tensors
    have no data pointer (the op's C++ checks alignment on the real tensors)."""
    if not torch.compiler.is_compiling():
        check_last_dim_contiguous(t, name)


def _host_checks_allowed(check: bool | None, what: str) -> bool:
    """Whether to run a host-synchronising index check now (see the module docstring)."""
    if check is False:
        return False
    compiling = torch.compiler.is_compiling()
    capturing = (not compiling) and torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()
    if check is True and (capturing or compiling):
        raise ValueError(f"{what}=True needs a host synchronisation, impossible during CUDA-graph capture "
                         "or torch.compile tracing; pass False or None there")
    return not (capturing or compiling)


def _check_block_table(block_tables: torch.Tensor, seq_lens: torch.Tensor, rows: int, whose: str) -> None:
    """int32 block_tables `[rows, max_blocks_per_seq >= 1]` with a contiguous last dimension and
    contiguous int32 seq_lens `[rows]` (`whose`: what the row count comes from, for the message)."""
    check_rank(block_tables, "block_tables", 2, "[batch, max_blocks_per_seq]")
    check_rank(seq_lens, "seq_lens", 1, "[batch]")
    check_dtype(block_tables, "block_tables", torch.int32)
    check_dtype(seq_lens, "seq_lens", torch.int32)
    if block_tables.shape[0] != rows:
        raise ValueError(f"block_tables must have {rows} rows ({whose}), got {block_tables.shape[0]}")
    if seq_lens.shape[0] != rows:
        raise ValueError(f"seq_lens must have {rows} entries ({whose}), got {seq_lens.shape[0]}")
    if block_tables.shape[1] < 1:
        raise ValueError(f"block_tables must not be empty, got shape {tuple(block_tables.shape)}")
    if block_tables.stride(1) != 1:
        raise ValueError(f"block_tables must have a contiguous last dimension, got strides {block_tables.stride()}")
    check_contiguous(seq_lens, "seq_lens")


def _check_paged_geometry(num_blocks: int, block_size: int, batch: int, block_tables: torch.Tensor,
                          seq_lens: torch.Tensor, cache: str) -> None:
    """A paged cache's block size (a power of two), the batch, the block table and lengths
    (`_check_block_table`), and the keys a table row can address (< 2^31)."""
    if block_size < 1 or block_size & (block_size - 1):
        raise ValueError(f"block_size ({cache} dim 1) must be a power of two, got {block_size}")
    _check_batch(batch)
    _check_block_table(block_tables, seq_lens, batch, "q's batch")
    if num_blocks >= 2**31 or block_tables.shape[1] * block_size >= 2**31:
        raise ValueError(f"num_blocks and max_blocks_per_seq x block_size (the keys a table row can address) must "
                         f"be < 2^31, got {num_blocks} and {block_tables.shape[1]} x {block_size}")


def validate_paged_attention_inputs(q, k_cache, v_cache, block_tables, seq_lens, out=None) -> None:
    """Shape/dtype/layout checks of `paged_attention` (no host synchronisation).

    Raises TypeError/ValueError naming the argument, the expected and the actual value.
    """
    for t, name in ((q, "q"), (k_cache, "k_cache"), (v_cache, "v_cache"), (block_tables, "block_tables"),
                    (seq_lens, "seq_lens")):
        check_tensor(t, name)
    if q.dim() not in (3, 4):
        raise ValueError(f"q must be 3-D [batch, num_q_heads, head_dim] or 4-D [batch, num_q_heads, "
                         f"num_new_tokens, head_dim], got {q.dim()}-D shape {tuple(q.shape)}")
    check_rank(k_cache, "k_cache", 4, "[num_blocks, block_size, num_kv_heads, head_dim]")
    check_rank(v_cache, "v_cache", 4, "[num_blocks, block_size, num_kv_heads, head_dim]")
    check_dtype(q, "q", DECODE_DTYPES)
    if k_cache.dtype != FP8_KV_DTYPE:
        check_same_dtype(k_cache, "k_cache", q, "q")
    check_same_dtype(v_cache, "v_cache", k_cache, "k_cache")
    b, hq, d = q.shape[0], q.shape[1], q.shape[-1]
    if q.dim() == 4 and not 1 <= q.shape[2] <= 65535:
        raise ValueError(f"num_new_tokens (q dim 2) must be in [1, 65535], got {q.shape[2]}")
    nb, bs, hkv, dk = k_cache.shape
    if tuple(v_cache.shape) != tuple(k_cache.shape):
        raise ValueError(f"v_cache must have k_cache's shape {tuple(k_cache.shape)}, got {tuple(v_cache.shape)}")
    if dk != d:
        raise ValueError(f"k_cache head_dim (dim 3) must match q's ({d}), got {dk}")
    _check_head_dim(d, None if torch.compiler.is_compiling() else q.device, k_cache.dtype == FP8_KV_DTYPE)
    if hkv < 1 or hq % hkv != 0:
        raise ValueError(f"q's number of heads ({hq}) must be a multiple of k_cache's num_kv_heads, got {hkv}")
    if b < 1:
        raise ValueError(f"q's batch (dim 0) must be >= 1, got q shape {tuple(q.shape)}")
    if nb < 1:
        raise ValueError(f"k_cache must hold at least one block (num_blocks, dim 0, >= 1), got shape "
                         f"{tuple(k_cache.shape)}")
    _check_paged_geometry(nb, bs, b, block_tables, seq_lens, "k_cache")
    if out is not None:
        check_tensor(out, "out")
        if tuple(out.shape) != tuple(q.shape):
            raise ValueError(f"out must have q's shape {tuple(q.shape)}, got {tuple(out.shape)}")
        check_same_dtype(out, "out", q, "q")
    check_one_cuda_device([(q, "q"), (k_cache, "k_cache"), (v_cache, "v_cache"), (block_tables, "block_tables"),
                           (seq_lens, "seq_lens")] + given((out, "out")))
    if out is not None:
        _check_rows(out, "out")
        check_elements_apart(out, "out")
    for t, name in ((k_cache, "k_cache"), (v_cache, "v_cache")):
        check_contiguous(t, name)
    _check_rows(q, "q")
    _check_rows(k_cache, "k_cache")
    _check_rows(v_cache, "v_cache")


# (a 1-element workspace is the helpers' for a call that does not split: never counted on)
_STALE_WORKSPACE = ("workspace's split counters (its last ceil(numel / 128) elements) are not at rest: allocate it "
                    "with paged_attention_workspace / decode_workspace (a zeroed, empty or overwritten buffer is not "
                    "one); the kernel would write NaN")


def _workspace_counters_stale(workspace: torch.Tensor | None) -> torch.Tensor | None:
    """A 0-d bool on the GPU, whether a given workspace's split counters are off their rest
    value (no synchronisation); None for no workspace or a 1-element one."""
    counted = workspace is not None and workspace.numel() > 1
    return _ops.op("decode_workspace_counters_stale")(workspace) if counted else None


def check_paged_indices(k_cache: torch.Tensor, block_tables: torch.Tensor, seq_lens: torch.Tensor,
                        workspace: torch.Tensor | None = None, window_left: int = -1, seq_len_q: int = 1,
                        min_seq_len: int = 0, also=()) -> None:
    """Host check (one synchronisation) of the device-side indices of `paged_attention`.

    Raises ValueError when a seq_len is outside `[min_seq_len, max_blocks_per_seq * block_size]`
    (`min_seq_len` 1 where the call appends the new token, `fused_decode_block`),
    a block index that the sequence uses is outside `[0, num_blocks)`, or a given
    workspace's split counters are not at rest (the kernel would write NaN). With a
    sliding window (`window_left >= 0`, `seq_len_q` new tokens) the blocks wholly before
    the lowest query's window are not used (a serving engine may have freed them). `also`:
    more (0-d bool on the GPU, message) pairs, raised first where true, in the same synchronisation.
    """
    nb, bs = k_cache.shape[0], k_cache.shape[1]
    cap = block_tables.shape[1] * bs
    lens = seq_lens.long()
    bad_len = (lens < min_seq_len) | (lens > cap)
    blk = torch.arange(block_tables.shape[1], device=block_tables.device)[None, :]
    used = blk < ((lens.clamp(0, cap) + bs - 1) // bs)[:, None]
    if window_left >= 0:
        lowest = (lens - seq_len_q - window_left).clamp(min=0)
        used &= (blk + 1) * bs > lowest[:, None]
    bad_blk = used & ((block_tables < 0) | (block_tables >= nb))
    bad_ws = _workspace_counters_stale(workspace)
    flags = list(also) + ([(bad_ws, _STALE_WORKSPACE)] if bad_ws is not None else [])
    any_bad = bad_len.any() | bad_blk.any()
    for flag, _ in flags:
        any_bad = any_bad | flag
    if not bool(any_bad):  # the one synchronisation
        return
    for flag, message in flags:
        if bool(flag):
            raise ValueError(message)
    if bool(bad_len.any()):
        i = int(bad_len.nonzero()[0, 0])
        raise ValueError(f"seq_lens[{i}] = {int(lens[i])} is outside [{min_seq_len}, {cap}] (max_blocks_per_seq "
                         f"{block_tables.shape[1]} x block_size {bs})")
    i, j = (int(x) for x in bad_blk.nonzero()[0])
    raise ValueError(f"block_tables[{i}, {j}] = {int(block_tables[i, j])} is outside [0, num_blocks={nb}) "
                     f"(used by seq_lens[{i}] = {int(lens[i])})")


def decode_num_splits(batch: int, num_kv_heads: int, rows_per_kv_head: int, max_kv_len: int, head_dim: int,
                      dtype: torch.dtype, paged: bool = True, seq_len_q: int = 1) -> int:
    """The split count `num_splits=0` resolves to (flash-decoding heuristic).

    With `base = batch * num_kv_heads * ceil(rows_per_kv_head / 16)` thread blocks
    per split (`rows_per_kv_head` = (Hq / Hkv) * Nq) and the device's SM count:
    - first, 16-bit head_dim 64, 96 and 128 on Hopper HBM3e parts (the H200) and on other
      sm_90 parts (the H100: head_dim 128 since stop 99, the same counts; GQA 32:8 Nq 8 paged
      B=4/16K 146.3 -> 98.2 us, csrc/decode/NOTES.md "Stop 99"; the balanced 2 splits of 1-1.35
      units per SM since stop 100: B=17/4K 148.1 -> 112.1 us against an even grid; head_dim
      64 and 96 since stop 101, head_dim 64 at its own counts there, below), with 17-32
      query rows per KV head (Nq 5-8 at GQA 32/8, one new token at groups of 17-32): one
      block of 32 rows per (batch, KV head) reads the keys once for both 16-row tiles, at
      `units = batch * num_kv_heads` per split. At head_dim 64 and 96 with
      `max_kv_len >= 2048`: below 0.45 times the SMs, `SMs // units` splits (twice that at
      head_dim 64 on HBM3e parts, on paged caches only where `max_kv_len > 1024 * (SMs // units)`) of at
      least 256 keys, at most 128 (GQA 32:8 Nq 5 contiguous D=64 B=5/8K 72.2 -> 30.3 us,
      "Stop 89"; paged D=64 B=1/8K 14.2 -> 11.8, "Stop 90"); from 0.45 times up to 1 (head_dim 96: 1.5), the count of
      1 to 4 splits of at least 1024 keys whose waves of blocks are fullest (twice that, at
      most 4, at head_dim 64 on HBM3e parts; off them head_dim 64's waves are two blocks per
      SM, not doubled: H100 paged D=64 B=12/16K 216.9 -> 151.4 us, "Stop 101"; GQA 32:8 Nq 5
      paged D=96 B=16/4K 102.5 -> 69.2 us (59.9 with the
      tail spans, "Stop 93"), contiguous
      D=64 B=8/16K 141.2 -> 73.6, csrc/decode/NOTES.md "Stop 88"; paged D=64 B=8/16K 141.1 ->
      79.2, "Stop 89"); head_dim 64 past 1 up to 1.35 times with `max_kv_len >= 4096`: 3
      (contiguous B=22/16K 249.0 -> 188.4, paged B=22/8K 147.7 -> 109.7, "Stop 89"), else
      off HBM3e up to 1.5 times 1 (H100 contiguous B=20/2K 46.5 -> 36.2 us). With
      `1024 <= max_kv_len < 2048` there: up to one unit per SM `SMs // units` splits where
      that is 4 or fewer (4 where that is 2 on contiguous caches at head_dim 64: contiguous D=64
      B=8/2047 22.5 -> 16.8 us, "Stop 98"; off HBM3e from 2048 keys too, stop 104: H100 Nq 8
      B=7/4K 37.0 -> 29.3 us), one split at head_dim 96 to 1.5 units per SM (paged D=96 B=16/1K
      30.0 -> 19.2 us, "Stop 94"). At
      head_dim 128 and at least 1024 keys: up to one unit per SM,
      `SMs // units` splits (no split under 1024 keys) where that fills 90% of the SMs
      (Nq 8 B=8/16K paged 153.4 -> 146.8 us at 2, csrc/decode/NOTES.md "Stop 69"; 70% on
      other sm_90 parts, stop 100: Nq 8 B=6/16K 242.8 -> 147.7 us on an H100; there since
      stop 104 above 0.5 units per SM with `max_kv_len >= 2048` 1, or 2 run as the balanced
      schedule below up to 0.62 units per SM on `paged` caches with `max_kv_len >= 4096`,
      0.67 from 8192, 0.69 on either layout from 16384: one-token MQA B=90/4K 80.5 -> 74.3
      us at 1, Nq 8 B=9/8K 146.7 -> 116.6 balanced); 1-1.35
      units per SM (1.55 on `paged` caches off HBM3e, stop 101: one-token MQA B=200/8K
      321.3 -> 300.3 us on an H100) with `max_kv_len >= 2048`, 2 run as the balanced schedule (one block
      per SM, an equal share of every unit's keys each: one-token MQA B=136/2K 73.1 ->
      57.1 us, 0.98x cuDNN; Nq 8 B=17/4K 109.6 -> 90.3, "Stop 73"); up to two, 1 where its
      two waves are 75% full, else (1.35-1.5 units per SM) 2; elsewhere the rules below;
    - base < SMs / 2 (small grids, e.g. B=1): `SMs // base` splits, about one block
      per SM, but no split shorter than 128 keys of `max_kv_len` and at most 128
      (H100, B=1, Hkv=8, 16K keys: 16 splits);
    - base >= 12 blocks per SM and `max_kv_len >= 4096` on the cp.async kernel (below
      sm_90, or head_dims 72-88 on the head_dim-96 kernel, unpaired): 2 (e.g. B=64, N=4096,
      MHA);
      the TMA kernel that takes those grids on sm_90 at head_dim 64, 96, 128 and 256 runs 1;
    - 16-bit caches on sm_90 with `max_kv_len >= 2048`, where the unsplit grid leaves
      a tail: 2 when `base` is 1.1-1.35 (head_dim 128, and paged 104-120, of one token
      or spec rows: 1 or 3, below) or 2.1-2.5 times the SMs at head_dim 97-128,
      1-1.35 times at head_dim 129-256, 2-2.7 times at head_dim 65-96 (2-3.05 when
      `paged` and `max_kv_len >= 4096`, 2-3 from 8192; paged head_dim 96 exactly off Hopper
      HBM3e parts takes 3 instead from 4096 keys to 2.5 times, from 8192 to 2.7, stop 107:
      H100 B=34/16K 743.5 -> 674.0 us), and also 1.06-1.35 times
      there when `paged=False` (e.g. B=20 or B=36 at GQA 32/8), the whole of 1.06-2.95
      times with `paged=False` and `max_kv_len >= 4096` (not when `base` is a multiple
      of the SMs: whole waves leave no tail). Between
      one and two blocks per SM a 2-split call at head_dim 97-256 (65-96 with
      `paged=False`) runs as a balanced schedule (one block per SM, each taking an equal
      share of all the sequences' keys: on paged caches of blocks of 16 query rows
      planned on the GPU from `seq_lens`, so ragged batches stay balanced, a sequence
      cut in up to three pieces merged like splits, where the lengths allow it; else,
      on contiguous caches, and for the two-row-tile kernel's blocks (16-bit head_dim
      128 on Hopper HBM3e parts, 17-32 query rows per KV head: one-token MQA, 8 new
      tokens at GQA 32/8), where that plan measured slower, each sequence's
      share of the table's capacity laid over the keys it reads, cut in at most
      two); so does one at head_dim <= 64 with `paged=False` between two and
      four blocks per SM, at two blocks per SM. Where the blocks' units read common
      128-byte cache lines (paged heads whose rows are not whole lines beside other KV
      heads, head_dim 104-120 and 136-248 but 192; a token-major strided cache whose head
      stride is not a multiple of 128 bytes; units of several row tiles of one KV head),
      a block starts each unit further from its neighbour's than L2 keeps the lines past
      1.1 units per block, and each unit read them from DRAM (1.8x the bytes at D=112
      B=22/8K, csrc/decode/NOTES.md "Stop 87"): those 2 splits run as an even grid;
    - 16-bit head_dim 64 on sm_90 with `max_kv_len >= 2048`: `paged` calls that run
      head pairs (an even `num_kv_heads`, `seq_len_q` 1, at most 8 query heads per KV
      head, `base` beyond 1.25 times the SMs) on Hopper HBM3e parts take, when the pairs
      (`base / 2`) are 1.06-1.35 times the SMs, 3 from `max_kv_len` 8192 (up to 19% faster:
      B=40/16K 328.0 -> 314.3 us, "Stop 86") and below it the spread tail's pieces over the
      pairs, `SMs // (base / 2 - SMs)` up to 8 (GQA 32:8 B=40/2K 56.1 -> 45.4 -> 43.6, "Stop
      88"); off them 1 (since stop 107; the balanced 2 before: H100 B=40/2K 68.9 -> 61.6 us);
      contiguous ones (`paged=False`) take 2 (balanced) when `base` is 2-2.7 times
      the SMs (on Hopper HBM3e parts not for units of two row tiles, 17-32 query rows per
      KV head: 1, where the two-row-tile rule above gives no count; off them units of one row
      tile take 3 below 8192 keys, stop 107: H100 B=42/2K 69.6 -> 64.9 us), paged ones without
      head pairs 3 at 2.1-2.45 times;
    - 16-bit head_dim 72-80 `paged` calls that run head pairs (Hopper HBM3e parts, the
      pairs `base / 2` at least 0.35 times the SMs): 1 split from 0.8 times, 2 below;
      below 0.35 times, `SMs // (base / 2)` splits of at least 512 keys of `max_kv_len`
      (under the small grids' caps below), cut back to the splits that hold keys (33 of
      16384 keys leave one empty: 32), run as head pairs where that grid is 80-100% of
      the SMs (B=1, Hkv=8, 16K keys: 32 splits on 132 SMs), else the rules below;
    - 16-bit head_dim 64 and 96 `paged` calls on Hopper HBM3e parts (the H200) with
      `seq_len_q` 1 and `rows_per_kv_head <= 8`, or `seq_len_q` 2-4 and
      `rows_per_kv_head <= 16` (not head_dim 64 with more than 8 rows where `2 * SMs //
      base` is under 3), and `base` at most the SMs: `2 * SMs // base` (about two blocks
      per SM) where those are at most 16 splits (8 at head_dim 96 with `seq_len_q` > 1)
      of 512 keys or more of `max_kv_len`, else at most that many splits of 1024 keys or
      more; cut back to the splits that hold keys (33 of 40960 keys leave one empty: 32),
      where that is more than the generic `SMs // base` (GQA 32:8 B=16/4K D=64 41.6 ->
      36.3 us, 1.04x cuDNN in `llm-speed bench`; D=96 58.7 -> 52.3, 1.06x; B=5/4K D=64
      17.7 -> 15.6, D=96 24.3 -> 21.0; Nq 2 B=10/4K D=96 58.6 -> 37.2; csrc/decode/NOTES.md
      "Stop 77" to "Stop 79"); on other sm_90 parts (the H100) one token's units of at
      most 8 rows take `2 * SMs // base` (3, cut back to the splits that hold keys) only
      with `base` past half the SMs up to 2/3 of them, where the generic count is 1: paged
      head_dim 64 / 96 and contiguous 96 with `max_kv_len >= 2048`, contiguous 64 and
      paged 128 from 8192 (B=9/8K D=64 paged 75.3 -> 56.6 us, D=96 108.5 -> 82.4, "Stop
      107"; contiguous D=96 B=9/16K 186.1 -> 161.9, "Stop 108");
    - head_dim 128 (16-bit) on Hopper HBM3e parts (the H200) with `seq_len_q` 1 or
      `rows_per_kv_head <= 64` (up to four row tiles: "spec rows" below; rows beyond
      one tile take their own tops, with one new token too) and `max_kv_len >= 1024`,
      `base` past the SMs up to 1.34 times them when `paged` or the rows span more than
      one tile (`rows_per_kv_head > 16`), 1.1 otherwise: SMs / (base - SMs) up to 8 and the
      length (`max_kv_len // 128`), where that is at least 3 (beyond one tile always 4), run
      as the spread tail (the first SM-count units whole, each other unit in that many pieces beside
      them; csrc/decode/NOTES.md "Stop 63"; head_dim-64 head pairs take it too, above); on
      other sm_90 parts (the H100, since stop 119) only with `seq_len_q` 1 and
      `rows_per_kv_head <= 16`, `base` up to 1.1 times the SMs (1.05 when contiguous with
      `max_kv_len < 2048`, "Stop 120"): 8 pieces (GQA 32:8 B=17/16K contiguous 396.5 ->
      372.3 us, paged B=17/1K 28.0 -> 27.7, "Stop 119");
    - head_dim 128 (16-bit) on any sm_90 part, `max_kv_len >= 2048`, at 1.1-1.35 times
      the SMs with `seq_len_q` 1 or spec rows (on Hopper HBM3e parts beyond the spread
      tail's band): on Hopper HBM3e parts 1, 3 when `paged` and `max_kv_len >= 4096`; on
      other parts (since stop 99, where the H100's 1 split had caught up with the balanced
      2: GQA 32:8 paged B=20/2K 66.4 -> 60.4 us, csrc/decode/NOTES.md "Stop 99") 1, but 3
      for paged units of several row tiles (Nq 5 at GQA 32:8) with `max_kv_len >= 4096`
      (B=10/16K 334.4 -> 256.6) and the balanced 2 for contiguous units of one tile with
      `max_kv_len >= 8192`; off Hopper HBM3e parts units of 2-16 query rows (GQA, spec
      rows within one tile; not MHA's one row) with `max_kv_len >= 4096` take 3 past 2
      times the SMs to 2.5 instead of the 2 above (1 to 2.1), and from 8192 keys 3 past
      2.5 times to 2.8, 2 from there to just under 3, instead of 1 (GQA 32:8 paged
      B=37/16K 871.4 -> 836.6 us, B=34/16K 893.4 -> 755.3, B=42/16K 993.9 -> 920.2;
      csrc/decode/NOTES.md "Stop 108");
    - head_dim 128 (16-bit) on Hopper HBM3e parts (the H200), `max_kv_len >= 2048`,
      instead of the two bands above: from just past 2 times to 2.5, 3
      (measured 3-16% faster there, csrc/decode/NOTES.md "H200 rules"); past 2.5 times and
      under 3 with `seq_len_q` 1 or spec rows and `max_kv_len >= 4096`, 2 (B=42/16K/GQA
      32:8 paged 729.0 -> 650.1 us, "Stop 66"), 3 up to 2.67 times from 8192 keys (-> 622.4,
      "Stop 67"); units of 9-16 query rows end it at 2.75 times below 8192 keys; rows
      beyond one tile take 2 to 2.8 times at any length ("Stop 68");
    - on sm_90, 16-bit head_dims 104-120 (on the head_dim-128 kernel) with `paged` and
      `seq_len_q` 1 or spec rows keep 1 at 1.1-1.35 times the SMs (the 2 splits took
      25-77% longer on the H200: D=112 GQA 32:8 B=20/4K 132.7 -> 77.9 us,
      csrc/decode/NOTES.md "Stop 86"; 13% on the H100: 123.5 -> 108.9, "Stop 99");
    - on sm_90, 16-bit head_dims 136-248 but 192 (rows that are not whole 128-byte lines
      on the head_dim-256 kernel) with `paged`, `num_kv_heads` > 1, one row tile and
      `max_kv_len >= 2048` take 3 in the one-tail band (past the SMs to 1.35 times them)
      with `max_kv_len >= 4096`, else 2 (GQA 32:8 D=224 B=17/16K on the H100 1003.3 ->
      782.7 us, "Stop 99"), and with `max_kv_len >= 8192` `max_kv_len // 2048` up to 16
      (D=224 B=20/16K 877.8 -> 812.9 us, 32K 1874.9 -> 1626.5 with the head clusters the
      kernel then runs, "Stop 110"); on Hopper HBM3e parts past 1.1 times or with
      `max_kv_len >= 8192`, else 2 (D=224 B=20/16K 737.4-767.0 us balanced -> 591.1, "Stop 87");
      off HBM3e the same rows past 1.35 times the SMs take `max_kv_len // 2048` up to 16 with
      `max_kv_len >= 4096`, and below the SMs with `max_kv_len >= 16384` where the last rule's
      `SMs // base` leaves splits of more than 4096 keys (D=224 B=40/16K 2003.2 -> 1627.2 us,
      B=64/8K 1444.7 -> 1309.1, B=16/16K 788.4 -> 653.0, "Stop 111");
    - on Hopper HBM3e parts, 16-bit head_dim 256, 192 and 96 exactly (NOTES.md "D = 256 and
      96 split counts on the H200"): head_dim 256 takes 2 (balanced) up to 1.7 times the
      SMs when `paged`, 1.55 when not (head_dim 192 when not: 1.83, and 2 even splits
      from just past 2 times the SMs to 2.5 with `max_kv_len >= 4096`); paged head_dim 96
      with `max_kv_len >= 4096` takes 3 from just past 2 times the SMs to 2.65 (from 8192
      keys 4 up to 2.5), 2 up to 2.95 below 4096 keys; contiguous head_dim 96 below 4096
      keys takes 2 only up to 1.15;
    - head_dim 128 (16-bit) on Hopper HBM3e parts with `seq_len_q` 1 or spec rows,
      `base` more than half the SMs and up to 0.9 times them with `paged` and `max_kv_len >= 2048` (1.0
      from 8192 keys; 0.7 times them and 4096 keys when not; rows beyond one tile: 1.0 on
      both layouts): `2 * SMs // base` (2 or 3: 1.33-2 blocks per SM
      in one wave; B=10/16K/GQA 32:8 paged 246.9 -> 161.7 us, csrc/decode/NOTES.md "Stop
      65"; contiguous B=9/16K 174.7 -> 142.6, "Stop 66"), where the first rule's
      `SMs // base` is 1; rows beyond one tile take `2 * SMs // base` (two blocks per SM,
      with the first rule's caps) below half the SMs too (B=1/16K/GQA 32:8 Nq 8 paged 40.4
      -> 32.6 us, "Stop 68");
    - otherwise 1 (one pass per sequence).
    `dtype` is the cache's: with `torch.float8_e4m3fn` (FP8 caches) the same but for the
    16-bit-only HBM3e rules above, never 2,
    except at head_dim <= 64: `base <= SMs` takes `2 * SMs / base` splits rounded to
    nearest (about two blocks per SM), `SMs < base < 1.6 * SMs` takes 2 (head pairs then
    halve the grid; same caps).
    `paged`: the call's layout (`paged_attention`; False: `decode_attention`);
    `seq_len_q`: its query rows per (batch, head), Nq (it must divide `rows_per_kv_head`).
    Each rule measured best on the GPUs it names (most ungated ones on the H100, the HBM3e
    ones on the H200; csrc/decode/NOTES.md). It depends on host-known
    shapes only (`max_kv_len` is the table capacity, not the seq_lens), so a captured
    CUDA graph and its preallocated workspace stay valid for any seq_lens.
    """
    return int(_ops.op("decode_num_splits")(batch, num_kv_heads, rows_per_kv_head, max_kv_len, head_dim, dtype,
                                            paged, seq_len_q))


def decode_workspace(batch: int, num_q_heads: int, num_kv_heads: int, head_dim: int, max_kv_len: int,
                     dtype: torch.dtype, seq_len_q: int = 1, num_splits: int = 0,
                     device: torch.device | str | None = None, paged: bool | None = None) -> torch.Tensor:
    """A float32 workspace for `paged_attention`/`decode_attention` calls of this shape.

    Sized for the split count the call will use: `num_splits`, or with 0 the
    heuristic's at every batch size up to `batch` on `device` (smaller batches split
    more, so one workspace serves all the buckets of a `CUDAGraphRunner`), for the
    layout `paged` (True: `paged_attention`, False: `decode_attention`, None: the larger
    of the two); `max_kv_len`
    is the table capacity (max_blocks_per_seq * block_size) for paged calls, Nk for
    contiguous ones: the size covers every shorter length too, so calls with any sliding
    window fit (they split for the keys they read, min(max_kv_len, window_left + seq_len_q
    + 63), and a shorter read can split more). Holds [slots, B*Hq*Nq, D] partial
    outputs and [slots, B*Hq*Nq, 2] softmax states (slots = splits, and 3 for 2 splits:
    the balanced schedule may cut a sequence in three), then int32 split counters in its
    last ceil(numel / 128) elements (set to their rest value here; every call leaves
    them so: see the module docstring); a 1-element tensor when the call does not split.
    Any call it is large enough for may use it (pass it unsliced).
    """
    _check_num_splits(num_splits)
    # Every batch size up to `batch`, in C++ (decode_workspace_numel_upto): the heuristic's
    # bands (2 or 3 splits at 1-2.7 blocks per SM) fall beyond b = SMs when the grid has one
    # or two blocks per sequence (MQA, Hkv 2). Asked on `device` (the heuristic reads its SM
    # count), as the op will be called there.
    dev = torch.device(device if device is not None else "cuda")
    with torch.cuda.device(dev):
        n = int(_ops.op("decode_workspace_numel_upto")(batch, num_q_heads, num_kv_heads, seq_len_q, head_dim,
                                                       max_kv_len, dtype, paged, num_splits))
        ws = torch.empty(max(n, 1), dtype=torch.float32, device=dev)
        _ops.op("decode_workspace_init")(ws)  # counters at rest, once: every call leaves them so
    return ws


def _check_workspace_buffer(workspace, q: torch.Tensor, helpers: str, need_for) -> None:
    """A given workspace must be float32, contiguous, 16-byte aligned, on q's device and hold
    `need_for()` = (splits, floats) elements (host-side numbers only: no synchronisation);
    `helpers` names the functions that make one, for the messages."""
    if workspace is None or torch.compiler.is_compiling():  # the op re-checks the real tensors
        return
    check_tensor(workspace, "workspace")
    check_dtype(workspace, "workspace", torch.float32)
    check_same_device(workspace, "workspace", q, "q")
    check_contiguous(workspace, "workspace")
    if workspace.data_ptr() % 16:
        raise ValueError(f"workspace must be 16-byte aligned; pass the tensor from {helpers} as returned (not a "
                         "slice of it)")
    splits, need = need_for()
    if workspace.numel() < need:
        raise ValueError(f"workspace must hold at least {need} float32 elements for num_splits={splits}, got "
                         f"{workspace.numel()}; use {helpers}")


def _check_workspace(workspace, q: torch.Tensor, num_kv_heads: int, seq_len_q: int, max_kv_len: int,
                     num_splits: int, paged: bool, cache_dtype: torch.dtype | None = None) -> None:
    """`_check_workspace_buffer` for a decode call; `cache_dtype` (default q's) is the split
    heuristic's dtype."""
    def need_for():
        b, hq, d = q.shape[0], q.shape[1], q.shape[-1]
        splits = num_splits or decode_num_splits(b, num_kv_heads, (hq // num_kv_heads) * seq_len_q, max_kv_len, d,
                                                 cache_dtype or q.dtype, paged, seq_len_q)
        return splits, int(_ops.op("decode_workspace_numel")(b, hq, seq_len_q, d, splits))

    _check_workspace_buffer(workspace, q, "decode_workspace / paged_attention_workspace", need_for)


def decode_workspace_counters_idle(workspace: torch.Tensor) -> bool:
    """Whether every split counter of a workspace (its last ceil(numel / 128) elements,
    int32) is at rest, as the helpers set them and every completed call leaves them
    (one host synchronisation)."""
    return not bool(_ops.op("decode_workspace_counters_stale")(workspace))


def paged_attention_workspace(q: torch.Tensor, k_cache: torch.Tensor, block_tables: torch.Tensor,
                              num_splits: int = 0) -> torch.Tensor:
    """`decode_workspace` for `paged_attention(q, k_cache, ..., block_tables, ...)` calls
    of q's batch or fewer sequences (with `num_splits=0`, the heuristic's splits)."""
    b, hq, d = q.shape[0], q.shape[1], q.shape[-1]
    nq = q.shape[2] if q.dim() == 4 else 1
    cap = block_tables.shape[1] * k_cache.shape[1]
    return decode_workspace(b, hq, k_cache.shape[2], d, cap, k_cache.dtype, nq, num_splits, q.device, paged=True)


def paged_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_tables: torch.Tensor,
                    seq_lens: torch.Tensor, scale: float = 0.0, out: torch.Tensor | None = None, num_splits: int = 0,
                    workspace: torch.Tensor | None = None, check_indices: bool | None = None,
                    window_left: int = -1, logits_soft_cap: float = 0.0, lse: torch.Tensor | None = None,
                    return_lse: bool = False, k_scale: float = 1.0,
                    v_scale: float = 1.0, is_causal: bool = True) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Decode attention over a paged KV cache (one query token per sequence).

    Args:
        q: `[B, Hq, D]` float16/bfloat16, CUDA, last dim contiguous; or `[B, Hq, Nq, D]`
            for Nq new tokens per sequence (speculative decoding: they are the last Nq
            of its seq_len keys, and query i sees keys up to seq_len - Nq + i; a row that
            sees none, i < Nq - seq_len, outputs zeros; `is_causal=False`: every row sees
            all seq_len keys). Meant for
            Nq * Hq / Hkv <= 16 (one thread block's rows; up to 32 where the split rule
            runs 32-row blocks, `decode_num_splits`), as `decode_attention`.
        k_cache, v_cache: `[num_blocks, block_size, Hkv, D]`, q's dtype or both
            `torch.float8_e4m3fn` (FP8 cache, D a multiple of 16), contiguous; Hq a
            multiple of Hkv; block_size a power of two; D a multiple of 8 up to 256.
        block_tables: int32 `[B, max_blocks_per_seq]` (last dim contiguous), physical
            block of each logical block; entries past a sequence's length are ignored.
        seq_lens: int32 `[B]`, keys per sequence, `0 <= seq_len <= max_blocks_per_seq * block_size`.
        scale: softmax scale; 0 means `1/sqrt(D)`.
        out: optional output of q's shape (q's dtype); written in place and returned. Each
            element its own memory (no expand()ed view), and it must
            not overlap q or any other input (element by element: views of one buffer that
            interleave without sharing an element, such as q and out column blocks of one
            fused buffer, are apart).
        num_splits: 0 = heuristic (`decode_num_splits`, the count for this GPU, grid
            and length); 1 = one pass per sequence (PagedAttention v1); > 1 = split-KV
            with a log-sum-exp merge (v2), up to 128. On Hopper some counts select the
            schedules `decode_num_splits` describes (the balanced schedule, the spread
            tail) where they apply; every count gives the same result to rounding.
        workspace: optional float32 buffer from `paged_attention_workspace` /
            `decode_workspace` (used when the call splits), passed as returned: its
            split counters are left at rest by every call (module docstring), so it
            can be reused across calls, graph replays and smaller shapes. Without it
            a split call allocates one (and sets its counters).
        check_indices: host check of block indices and seq_lens, see the module
            docstring (None: on, except during CUDA-graph capture / torch.compile).
        window_left: sliding window: the query (at position seq_len - 1) sees keys
            `seq_len - 1 - window_left .. seq_len - 1` only, and the kernel reads no
            key before them (from their 64-key tile on); -1: no window. A model's
            `sliding_window = W` (HF, vLLM) is `window_left = W - 1`.
        logits_soft_cap: > 0 soft-caps the scores, `cap * tanh(scale * q.k / cap)`
            before the softmax (Gemma 2's attention soft-capping); 0: off.
        lse: optional float32 output of q's shape without D (`[B, Hq]` / `[B, Hq, Nq]`),
            contiguous: each row's log-sum-exp of its scores (natural log; -inf for a
            row that sees no key). Attention over separate key ranges (a shared prefix
            and each request's own keys: cascade attention) then merges exactly with
            `merge_attention_states`. Written in place (graph-capturable). With Nq > 1
            new tokens (each sequence's own keys, at least Nq of them), call the prefix
            part with `is_causal=False`: every new token sees the whole prefix. A sliding
            window is anchored at each row's position within the call's own keys, so a
            windowed cascade is not exact: use one call over the joined table.
        return_lse: return `(out, lse)`, allocating `lse` when not given.
        k_scale, v_scale: FP8 caches' dequantization scales (K = k_cache * k_scale, V =
            v_cache * v_scale), finite and > 0; must stay 1.0 for 16-bit caches.
        is_causal: with Nq > 1, query i sees keys up to seq_len - Nq + i (True, the
            default: speculative decoding) or all seq_len keys (False: the shared-prefix
            part of a cascade); no effect at Nq = 1. A window still starts each row at
            seq_len - Nq + i - window_left either way (as `decode_attention`).

    Returns:
        q's shape (`[B, Hq, D]` or `[B, Hq, Nq, D]`) in q's dtype (`out` when given);
        `(out, lse)` with `return_lse`.
    """
    kernel = _ops.op("paged_attention")  # first, so a build without kernels says so

    def explain() -> None:
        validate_paged_attention_inputs(q, k_cache, v_cache, block_tables, seq_lens, out)
        _check_num_splits(num_splits)
        resolve_scale(scale, q.shape[-1])
        _check_window_and_soft_cap(window_left, logits_soft_cap)
        _check_lse(lse, q)
        _check_kv_scales(k_cache.dtype == FP8_KV_DTYPE, k_scale, v_scale)
        nq = q.shape[2] if q.dim() == 4 else 1
        _check_workspace(workspace, q, k_cache.shape[2], nq,
                         _read_kv_len(block_tables.shape[1] * k_cache.shape[1], nq, window_left), num_splits,
                         True, k_cache.dtype)
        _check_written_apart(out, lse, workspace, [(q, "q"), (k_cache, "k_cache"), (v_cache, "v_cache"),
                                                   (block_tables, "block_tables"), (seq_lens, "seq_lens")])

    if _host_checks_allowed(check_indices, "check_indices"):
        explain()  # this path synchronises anyway
        nq = q.shape[2] if q.dim() == 4 else 1
        check_paged_indices(k_cache, block_tables, seq_lens, workspace, window_left, nq)

    def call():
        _kv_scale_type_ok(k_scale, v_scale)
        result = torch.empty_like(q, memory_format=torch.contiguous_format) if out is None else out
        row_lse = _lse_for(lse, return_lse, q)
        kernel(result, q, k_cache, v_cache, block_tables, seq_lens, resolve_scale(scale, q.shape[-1]), num_splits,
               workspace, window_left, float(logits_soft_cap), row_lse, float(k_scale), float(v_scale),
               bool(is_causal))
        return (result, row_lse) if return_lse else result

    return call_or_explain(call, explain)


def decode_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float = 0.0, is_causal: bool = False,
                     out: torch.Tensor | None = None, num_splits: int = 0,
                     workspace: torch.Tensor | None = None, window_left: int = -1,
                     logits_soft_cap: float = 0.0, lse: torch.Tensor | None = None,
                     return_lse: bool = False,
                     check_workspace: bool | None = None) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Split-KV decode attention over a contiguous (strided) cache, few query rows.

    The same kernel as `paged_attention` with strided K/V addressing: q `[B, Hq, Nq, D]`,
    k and v `[B, Hkv, Nk, D]` (any strides with a contiguous, 16-byte aligned last
    dim), float16/bfloat16, D a multiple of 8 up to 256. Meant for Nq <= 16 (decode,
    speculative decoding): a thread block serves 16 rows of (query head, position)
    of one KV head (32 where the split rule runs two-row-tile blocks: 16-bit head_dim
    64-128 on Hopper HBM3e parts, `decode_num_splits`), so larger Nq * Hq/Hkv re-reads
    K/V (from L2) per block's rows.
    `is_causal`: query i sees key j when `j <= i + Nk - Nq` (bottom-right aligned,
    as `flash_attention`); rows that see no key output zeros. `window_left`: query i
    sees keys `j >= i + Nk - Nq - window_left` only (-1: no window); keys before the
    first row's window are not read. `logits_soft_cap`, `out`, `num_splits`,
    `workspace`, `lse` (`[B, Hq, Nq]`) and `return_lse` as `paged_attention`
    (`decode_workspace(..., seq_len_q=Nq)`). `check_workspace`: with a `workspace` given, a
    host check (one synchronisation, as `paged_attention`'s `check_indices`; None: on except
    under CUDA-graph capture / torch.compile) that its split counters are at rest, which a
    zeroed or overwritten buffer's are not (the kernel would write NaN).

    Returns `[B, Hq, Nq, D]` in q's dtype (`out` when given).
    """
    kernel = _ops.op("decode_attention")  # first, so a build without kernels says so

    def explain() -> None:
        if torch.compiler.is_compiling():  # fake tensors: no data pointers; the op re-checks at run time
            check_rank(q, "q", 4, "[batch, num_q_heads, seq_len_q, head_dim]")
        else:
            validate_attention_inputs(q, k, v)
        check_dtype(q, "q", DECODE_DTYPES)
        _check_head_dim(q.shape[-1], None if torch.compiler.is_compiling() else q.device)
        _check_batch(q.shape[0])
        _check_num_splits(num_splits)
        resolve_scale(scale, q.shape[-1])
        _check_window_and_soft_cap(window_left, logits_soft_cap)
        _check_lse(lse, q)
        if out is not None:
            check_tensor(out, "out")
            if tuple(out.shape) != tuple(q.shape):
                raise ValueError(f"out must have q's shape {tuple(q.shape)}, got {tuple(out.shape)}")
            check_same_dtype(out, "out", q, "q")
            check_same_device(out, "out", q, "q")
            _check_rows(out, "out")
            check_elements_apart(out, "out")
        _check_workspace(workspace, q, k.shape[1], q.shape[2], _read_kv_len(k.shape[2], q.shape[2], window_left),
                         num_splits, False)
        _check_written_apart(out, lse, workspace, [(q, "q"), (k, "k"), (v, "v")])

    if workspace is not None and _host_checks_allowed(check_workspace, "check_workspace"):
        explain()  # this path synchronises anyway
        stale = _workspace_counters_stale(workspace)
        if stale is not None and bool(stale):
            raise ValueError(_STALE_WORKSPACE)

    def call():
        result = torch.empty(q.shape, dtype=q.dtype, device=q.device) if out is None else out
        row_lse = _lse_for(lse, return_lse, q)
        kernel(result, q, k, v, resolve_scale(scale, q.shape[-1]), bool(is_causal), num_splits, workspace, window_left,
               float(logits_soft_cap), row_lse)
        return (result, row_lse) if return_lse else result

    return call_or_explain(call, explain)


_HEAD_DIM_FITS: dict[tuple[int, int], bool] = {}


def _constant_to_torch_compile(fn):
    """`torch._dynamo.assume_constant_result` without importing torch._dynamo when the package
    is imported (it doubled `import cuda_llm_ops`'s time, ~0.5 s): that decorator only sets this
    attribute, which dynamo reads when it traces a call (tests/test_decode_cpu.py checks the
    name against the installed torch's decorator)."""
    fn._dynamo_marked_constant = True
    return fn


@_constant_to_torch_compile
def _head_dim_fits_on(index: int, head_dim: int, fp8_cache: bool = False) -> bool:
    """The op's answer for device `index`, remembered; a constant to torch.compile (asked
    at trace time, as flash_attention's choice of kernel must be)."""
    key = (index, head_dim, fp8_cache)
    known = _HEAD_DIM_FITS.get(key)
    if known is None:
        with torch.cuda.device(index):
            known = _HEAD_DIM_FITS[key] = bool(_ops.op("decode_head_dim_fits")(head_dim, fp8_cache))
    return known


def decode_head_dim_fits(head_dim: int, device: torch.device | str | int | None = None,
                         fp8_cache: bool = False) -> bool:
    """Whether the decode kernels run at `head_dim` on `device` (default: the current
    one): every decode head dim on sm_80 and sm_90; GPUs with 99 KB of shared memory
    per block (sm_86/89/120: A10, L4, L40S, RTX 4090/5090) run head dims up to 128, not
    136-256, which need the 256-wide kernel (`paged_attention` / `decode_attention` refuse
    them there; `flash_attention` keeps such calls on its prefill kernel). With
    `fp8_cache` (a float8_e4m3fn paged cache, half the shared memory) every head dim runs
    everywhere. Remembered per device (flash_attention asks on every call)."""
    if device is None:
        index = torch.cuda.current_device()
    else:
        device = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
        index = device.index if device.index is not None else torch.cuda.current_device()
    return _head_dim_fits_on(index, int(head_dim), bool(fp8_cache))


def use_decode_path(q) -> bool:
    """Whether `flash_attention(q, ...)` goes to `decode_attention`: few query rows
    (<= DECODE_MAX_QUERY_ROWS), float16/bfloat16, a decode head dim that fits the
    device (`decode_head_dim_fits`), a CUDA tensor, at most MAX_BATCH sequences, and a
    build with the decode kernels."""
    return (isinstance(q, torch.Tensor) and q.dim() == 4 and q.shape[2] <= DECODE_MAX_QUERY_ROWS
            and q.dtype in DECODE_DTYPES and decode_kernel_head_dim(q.shape[-1]) > 0 and q.device.type == "cuda"
            and q.shape[0] <= MAX_BATCH and _ops.has_op("decode_attention")
            and _head_dim_fits_on(q.device.index, q.shape[-1]))


def _append_target_tensors(slot_mapping, block_tables, seq_lens) -> list:
    """The tensors that say where an append writes (`paged_kv_append`, `paged_mla_append`),
    named: slot_mapping, or block_tables and seq_lens (one of the two)."""
    if slot_mapping is not None:
        if block_tables is not None or seq_lens is not None:
            raise ValueError("give slot_mapping or block_tables and seq_lens (decode: one new token per "
                             "sequence), not both")
        return [(slot_mapping, "slot_mapping")]
    if block_tables is None or seq_lens is None:
        raise ValueError("give slot_mapping, or block_tables and seq_lens (token t is sequence t's new token, "
                         "at position seq_lens[t] - 1)")
    return [(block_tables, "block_tables"), (seq_lens, "seq_lens")]


def _check_append_target(slot_mapping, block_tables, seq_lens, num_tokens: int, whose: str) -> None:
    """An append's slot_mapping (int64/int32 `[num_tokens]`, contiguous) or block table (one
    row per token); `whose`: the argument num_tokens comes from."""
    if slot_mapping is not None:
        check_rank(slot_mapping, "slot_mapping", 1, "[num_tokens]")
        check_dtype(slot_mapping, "slot_mapping", (torch.int64, torch.int32))
        if slot_mapping.shape[0] != num_tokens:
            raise ValueError(f"slot_mapping must have {num_tokens} entries ({whose}'s num_tokens), "
                             f"got {slot_mapping.shape[0]}")
        check_contiguous(slot_mapping, "slot_mapping")
    else:
        _check_block_table(block_tables, seq_lens, num_tokens, f"{whose}'s num_tokens: one new token per sequence")


def _host_check_append_slots(cache: torch.Tensor, num_tokens: int, slot_mapping, block_tables, seq_lens) -> None:
    """Host check (one synchronisation) that an append's slots lie in `cache` (dims 0, 1:
    num_blocks, block_size), or its block table's, as `check_paged_indices`."""
    if num_tokens == 0:
        return
    if slot_mapping is None:  # the block each new token goes to only (a window's freed blocks may be -1)
        # seq_lens <= 0 (padding rows, as vLLM's -1) are skipped by the kernel, so they pass here too
        check_paged_indices(cache, block_tables, seq_lens, window_left=0, min_seq_len=-(2**31))
        return
    n_slots = cache.shape[0] * cache.shape[1]
    too_big = slot_mapping >= n_slots
    if bool(too_big.any()):
        i = int(too_big.nonzero()[0, 0])
        raise ValueError(f"slot_mapping[{i}] = {int(slot_mapping[i])} is past the cache "
                         f"(num_blocks x block_size = {n_slots} slots)")


def paged_kv_append(k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                    slot_mapping: torch.Tensor | None = None, check_slots: bool | None = None, k_scale: float = 1.0,
                    v_scale: float = 1.0, *, block_tables: torch.Tensor | None = None,
                    seq_lens: torch.Tensor | None = None, cos: torch.Tensor | None = None,
                    sin: torch.Tensor | None = None, q: torch.Tensor | None = None) -> None:
    """Write new tokens' K/V into the paged cache (vLLM's reshape_and_cache), in place;
    optionally with the rest of a decode step's glue in the same launch: the slots taken
    from the block table, and the rotary embedding of k (before it is stored) and of q.

    Args:
        k, v: `[T, Hkv, D]` (token/head strides free, last dim contiguous and 16-byte
            aligned rows), float16, bfloat16 or float32: the caches' dtype, or any of
            them into FP8 caches. Views of a fused QKV projection's output work as they are.
        k_cache, v_cache: `[num_blocks, block_size, Hkv, D]`, contiguous, one dtype;
            `torch.float8_e4m3fn` caches store `e4m3(k / k_scale)` and `e4m3(v / v_scale)`
            (x times the float32 reciprocal of the scale, rounded to nearest, saturated
            to +-448; D a multiple of 16), as `paged_attention(..., k_scale, v_scale)`
            reads them.
        slot_mapping: int64 or int32 `[T]`, flat slot `block * block_size + offset`
            of each token; a negative slot skips the token (padding). Give each token
            its own slot: tokens sharing one write it at the same time, and what lands
            is unspecified (as in vLLM's reshape_and_cache). None: give `block_tables`
            and `seq_lens` instead.
        check_slots: host check (one sync; None: on except under CUDA-graph capture /
            torch.compile) that every slot lies in the cache, or with block_tables, as
            `paged_attention`'s check, that every seq_len is at most the table's capacity
            and the table entry of each new token's block lies in the cache (the others are
            not read: a sliding window's freed blocks may hold anything). The kernel skips tokens whose
            slot is outside the cache in every mode, so it never writes out of bounds.
        k_scale, v_scale: FP8 caches' quantization scales (finite, > 0); 1.0 for others.
        block_tables, seq_lens: int32 `[T, max_blocks_per_seq]` and `[T]` (paged_attention's),
            instead of slot_mapping, for decode: token t is sequence t's new token and goes
            to position `seq_lens[t] - 1` (seq_lens count it); a sequence with
            `seq_lens <= 0` is skipped. Computed in the kernel: no slot tensor, no extra launch.
        cos, sin: optional `[T, D]` in k's dtype (last dim contiguous): the rotate-half
            (NeoX / Hugging Face Llama) rotary embedding at each token's position; k is
            rotated before it is stored (the `k` tensor itself is not changed). Each value
            is computed in float32 as PyTorch's `x * cos + rotate_half(x) * sin` in float32
            computes it and rounded once to k's dtype (then quantized, for FP8 caches).
            D a multiple of 16 (16-bit) or 8 (float32).
        q: optional `[T, Hq, D]` in k's dtype (strides free, 16-byte aligned rows, e.g. a
            view of the QKV projection's output), rotated in place with cos and sin.
    """
    kernel = _ops.op("paged_kv_append")  # first, so a build without kernels says so

    def explain() -> None:
        named = [(k, "k"), (v, "v"), (k_cache, "k_cache"), (v_cache, "v_cache")]
        named += _append_target_tensors(slot_mapping, block_tables, seq_lens)
        if (cos is None) != (sin is None):
            raise ValueError("cos and sin must be given together (the rotary embedding)")
        if q is not None and cos is None:
            raise ValueError("q is rotated in place with cos and sin: give them too")
        if cos is not None:
            named += [(cos, "cos"), (sin, "sin")] + ([(q, "q")] if q is not None else [])
        for t, name in named:
            check_tensor(t, name)
        check_rank(k, "k", 3, "[num_tokens, num_kv_heads, head_dim]")
        check_rank(v, "v", 3, "[num_tokens, num_kv_heads, head_dim]")
        check_rank(k_cache, "k_cache", 4, "[num_blocks, block_size, num_kv_heads, head_dim]")
        check_rank(v_cache, "v_cache", 4, "[num_blocks, block_size, num_kv_heads, head_dim]")
        check_dtype(k, "k", (torch.float16, torch.bfloat16, torch.float32))
        check_same_dtype(v, "v", k, "k")
        if k_cache.dtype != FP8_KV_DTYPE:
            check_same_dtype(k_cache, "k_cache", k, "k")
        check_same_dtype(v_cache, "v_cache", k_cache, "k_cache")
        _check_kv_scales(k_cache.dtype == FP8_KV_DTYPE, k_scale, v_scale)
        if k_cache.shape[1] < 1:
            raise ValueError(f"k_cache's block_size (dim 1) must be >= 1, got {k_cache.shape[1]}")
        num_tokens, d = k.shape[0], k.shape[2]
        if tuple(v.shape) != tuple(k.shape):
            raise ValueError(f"v must have k's shape {tuple(k.shape)}, got {tuple(v.shape)}")
        if tuple(v_cache.shape) != tuple(k_cache.shape):
            raise ValueError(f"v_cache must have k_cache's shape {tuple(k_cache.shape)}, got {tuple(v_cache.shape)}")
        if tuple(k.shape[1:]) != tuple(k_cache.shape[2:]):
            raise ValueError(f"k must be [num_tokens, {k_cache.shape[2]}, {k_cache.shape[3]}] to match the cache, "
                             f"got {tuple(k.shape)}")
        _check_append_target(slot_mapping, block_tables, seq_lens, num_tokens, "k")
        if cos is not None:
            pair = 2 * (16 // k.element_size())
            if d % pair:
                raise ValueError(f"the rotary embedding needs head_dim a multiple of {pair} (two 16-byte halves of a "
                                 f"row), got {d}")
            for t, name in ((cos, "cos"), (sin, "sin")):
                check_rank(t, name, 2, "[num_tokens, head_dim]")
                check_same_dtype(t, name, k, "k")
                if tuple(t.shape) != (num_tokens, d):
                    raise ValueError(f"{name} must be [{num_tokens}, {d}], got {tuple(t.shape)}")
                _check_rows(t, name)
            if q is not None:
                check_rank(q, "q", 3, "[num_tokens, num_q_heads, head_dim]")
                check_same_dtype(q, "q", k, "k")
                if q.shape[0] != num_tokens or q.shape[2] != d:
                    raise ValueError(f"q must be [{num_tokens}, num_q_heads, {d}], got {tuple(q.shape)}")
                check_elements_apart(q, "q")  # rotated in place
                _check_rows(q, "q")
        check_one_cuda_device(named)
        for t, name in ((k_cache, "k_cache"), (v_cache, "v_cache")):
            check_contiguous(t, name)
        _check_rows(k, "k")
        _check_rows(v, "v")
        _check_rows(k_cache, "k_cache")
        _check_rows(v_cache, "v_cache")
        # what an append writes lands apart from what it reads: each cache from the other and every
        # input, a q rotated in place from every input (ranges_overlap is exact for q, k and v
        # views of one fused projection's rows: they pass); csrc/bindings/decode.cpp check_append_apart
        check_writes_apart(named, ("k_cache", "v_cache") + (("q",) if q is not None else ()))

    if _host_checks_allowed(check_slots, "check_slots"):
        explain()  # this path synchronises anyway
        _host_check_append_slots(k_cache, k.shape[0], slot_mapping, block_tables, seq_lens)
    # The op checks every input the kernel relies on; explain() names the argument when it refuses.
    call_or_explain(lambda: kernel(k, v, k_cache, v_cache, slot_mapping, float(k_scale), float(v_scale),
                                   block_tables, seq_lens, cos, sin, q), explain)


@_ops.register_fake("paged_attention")
def _paged_attention_fake(out, q, k_cache, v_cache, block_tables, seq_lens, scale, num_splits, workspace,
                          window_left=-1, logits_soft_cap=0.0, lse=None, k_scale=1.0, v_scale=1.0, is_causal=True):
    return None


@_ops.register_fake("decode_attention")
def _decode_attention_fake(out, q, k, v, scale, is_causal, num_splits, workspace, window_left=-1,
                           logits_soft_cap=0.0, lse=None):
    return None


@_ops.register_fake("decode_workspace_init")
def _decode_workspace_init_fake(workspace):
    return None


@_ops.register_fake("paged_kv_append")
def _paged_kv_append_fake(k, v, k_cache, v_cache, slot_mapping, k_scale=1.0, v_scale=1.0, block_tables=None,
                          seq_lens=None, cos=None, sin=None, q=None):
    return None
