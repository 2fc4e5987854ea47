"""MLA decode: multi-head latent attention (DeepSeek-V2/V3) over a paged latent cache.

The absorbed form that FlashMLA and vLLM run at decode: `W_UK` is folded into the query
and `W_UV` into the output projection, so every query head attends to one shared cache
row per token, `[kv_c (512) | k_pe (64)]`. The row is the key (all 576 columns, against
`q = [q_nope @ W_UK (512) | q_pe (64)]`) and its first 512 columns are the value:

    out[b, h] = softmax(scale * q[b, h] @ K_b^T) @ K_b[:, :512],   K_b = the sequence's rows

Layouts:
- q: `[B, Hq, 576]` float16/bfloat16, last dim contiguous (one new token per sequence).
- kv_cache: `[num_blocks, block_size, 576]` or `[num_blocks, block_size, 1, 576]`
  (FlashMLA's and vLLM's), q's dtype, contiguous; block_size a power of two.
- block_tables int32 `[B, max_blocks_per_seq]`, seq_lens int32 `[B]`: as `paged_attention`.
- out: `[B, Hq, 512]`, q's dtype.

Kernels: on sm_90a (H100) calls of 32 heads or more run a wgmma kernel whose thread block
serves 64 query heads of one sequence (heads past a multiple of 64 are padding rows) and needs
226 KB of shared memory; other calls, and other devices, run an mma.sync kernel whose block
serves 16 heads (101 KB of shared memory, 139 KB on its 3-stage pipeline: sm_80 and sm_90,
not 99-KB parts such as sm_86/89). Either way a cache row is read once per block, and blocks
of the same sequence and split run side by side and share the rows through L2. Split-KV: each
split writes its rows' partial output to a float32 workspace and a combine kernel merges
them (log-sum-exp); `mla_workspace` sizes one for every call up to a shape (any contents:
no counters), so a CUDA graph captured with it allocates nothing. Graph capture, the index
checks (`check_indices`) and `lse` work as in `paged_attention` (`cuda_llm_ops.decode`).
`paged_mla_append` writes new tokens' rows into the cache (vLLM's `concat_and_cache_mla`).
"""
from __future__ import annotations

import torch

from . import _ops
from .decode import DECODE_DTYPES, _check_num_splits, _check_paged_geometry, _check_rows, _check_workspace_buffer
from .decode import _append_target_tensors, _check_append_target, _host_check_append_slots
from .decode import _check_lse, _check_written_apart, _host_checks_allowed, _lse_for, check_paged_indices
from .validation import (
    call_or_explain,
    check_contiguous,
    check_dtype,
    check_elements_apart,
    check_one_cuda_device,
    check_rank,
    check_same_dtype,
    check_tensor,
    check_writes_apart,
    given,
    resolve_scale,
)

MLA_HEAD_DIM_QK = 576  # kv_lora_rank 512 + qk_rope_head_dim 64 (DeepSeek-V2/V3)
MLA_HEAD_DIM_V = 512


def _check_mla_cache(kv_cache: torch.Tensor, like: torch.Tensor, like_name: str) -> None:
    """The latent cache: `[num_blocks, block_size, 576]` or `[..., 1, 576]`, like's dtype, not empty."""
    if kv_cache.dim() not in (3, 4):
        raise ValueError(f"kv_cache must be 3-D [num_blocks, block_size, {MLA_HEAD_DIM_QK}] or 4-D [num_blocks, "
                         f"block_size, 1, {MLA_HEAD_DIM_QK}], got {kv_cache.dim()}-D shape {tuple(kv_cache.shape)}")
    check_same_dtype(kv_cache, "kv_cache", like, like_name)
    if kv_cache.shape[-1] != MLA_HEAD_DIM_QK or (kv_cache.dim() == 4 and kv_cache.shape[2] != 1):
        raise ValueError(f"kv_cache rows must be [..., {MLA_HEAD_DIM_QK}] with one latent head, got shape "
                         f"{tuple(kv_cache.shape)}")
    if kv_cache.shape[0] < 1 or kv_cache.shape[1] < 1:
        raise ValueError(f"kv_cache must not be empty, got shape {tuple(kv_cache.shape)}")


def validate_paged_mla_inputs(q, kv_cache, block_tables, seq_lens, out=None) -> None:
    """Shape/dtype/layout checks of `paged_mla_attention` (no host synchronisation).

    Raises TypeError/ValueError naming the argument, the expected and the actual value.
    """
    for t, name in ((q, "q"), (kv_cache, "kv_cache"), (block_tables, "block_tables"), (seq_lens, "seq_lens")):
        check_tensor(t, name)
    check_rank(q, "q", 3, f"[batch, num_q_heads, {MLA_HEAD_DIM_QK}]")
    check_dtype(q, "q", DECODE_DTYPES)
    _check_mla_cache(kv_cache, q, "q")
    b, hq, d = q.shape
    if d != MLA_HEAD_DIM_QK:
        raise ValueError(f"q's last dim must be {MLA_HEAD_DIM_QK} (512 latent + 64 rope columns), got {d}")
    if b < 1 or hq < 1:
        raise ValueError(f"q must not be empty, got shape {tuple(q.shape)}")
    _check_paged_geometry(kv_cache.shape[0], kv_cache.shape[1], b, block_tables, seq_lens, "kv_cache")
    if out is not None:
        check_tensor(out, "out")
        if tuple(out.shape) != (b, hq, MLA_HEAD_DIM_V):
            raise ValueError(f"out must have shape {(b, hq, MLA_HEAD_DIM_V)} = [batch, num_q_heads, "
                             f"{MLA_HEAD_DIM_V}], got {tuple(out.shape)}")
        check_same_dtype(out, "out", q, "q")
    check_one_cuda_device([(q, "q"), (kv_cache, "kv_cache"), (block_tables, "block_tables"),
                           (seq_lens, "seq_lens")] + given((out, "out")))
    check_contiguous(kv_cache, "kv_cache")
    _check_rows(q, "q")
    if out is not None:
        _check_rows(out, "out")
        check_elements_apart(out, "out")


def mla_num_splits(batch: int, num_q_heads: int, max_kv_len: int) -> int:
    """Splits `paged_mla_attention(num_splits=0)` uses on the current device.

    The wgmma kernel (Hopper, 32+ heads, 64-head row tiles): from a time model fitted to an
    H100 sweep (a block's 64-key tiles at ~1.8 us each, the cache streamed at ~2.8 TB/s, ~2 ns
    per split of each query row for its fp32 partials, whole waves of blocks), the model's
    minimum up to a bound that never grows for a narrower table or a larger batch (the
    count itself may: `mla_workspace` is sized by the bound, so one serves all such calls);
    many short sequences split less than one block per SM would ask.
    The mma.sync kernel (16-head row tiles): about one thread block per SM
    (SMs / (batch x row tiles), rounded; 1 once that is below 1), two per SM at 64 heads or
    more on at most half the SMs (where two blocks share an SM). Both: splits of at least
    128 keys of `max_kv_len` (the table capacity: host-known, so a captured graph and its
    workspace stay valid for any seq_lens), at most 128."""
    return int(_ops.op("mla_num_splits")(batch, num_q_heads, max_kv_len))


def mla_workspace(batch: int, num_q_heads: int, max_kv_len: int, num_splits: int = 0,
                  device: torch.device | str | None = None) -> torch.Tensor:
    """A float32 workspace for `paged_mla_attention` calls of up to `batch` sequences with
    `num_q_heads` heads and block tables that address `max_kv_len` keys (max_blocks_per_seq x
    block_size: the table's capacity, not the longest sequence) or fewer keys (`num_splits` 0:
    the heuristic's bound at every batch size up to `batch`); a 1-element tensor when no such
    call splits.
    Its contents do not matter (each call writes its partials before reading them)."""
    _check_num_splits(num_splits)
    dev = torch.device(device if device is not None else "cuda")
    with torch.cuda.device(dev):
        n = int(_ops.op("mla_workspace_numel")(batch, num_q_heads, max_kv_len, num_splits))
        return torch.empty(max(n, 1), dtype=torch.float32, device=dev)


def _check_mla_workspace(workspace, q: torch.Tensor, max_kv_len: int, num_splits: int) -> None:
    def need_for():
        b, hq = q.shape[0], q.shape[1]
        with torch.cuda.device(q.device):  # the heuristic reads the SM count of the op's device
            splits = num_splits or mla_num_splits(b, hq, max_kv_len)
        return splits, int(_ops.op("decode_workspace_numel")(b, hq, 1, MLA_HEAD_DIM_V, splits))

    _check_workspace_buffer(workspace, q, "mla_workspace", need_for)


def paged_mla_attention(q: torch.Tensor, kv_cache: torch.Tensor, block_tables: torch.Tensor, seq_lens: torch.Tensor,
                        scale: float = 0.0, out: torch.Tensor | None = None, num_splits: int = 0,
                        workspace: torch.Tensor | None = None, check_indices: bool | None = None,
                        lse: torch.Tensor | None = None,
                        return_lse: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """MLA decode attention over a paged latent cache (module docstring).

    Args:
        q: `[B, Hq, 576]` float16/bfloat16 (absorbed query: `q_nope @ W_UK` then `q_pe`).
        kv_cache: `[num_blocks, block_size, 576]` or `[num_blocks, block_size, 1, 576]`, q's
            dtype, contiguous (`[kv_c | k_pe]` per token).
        block_tables, seq_lens: as `paged_attention` (int32; 0 <= seq_len <= capacity).
        scale: softmax scale; 0 means `1/sqrt(576)` (FlashMLA's default). DeepSeek models
            pass their own: `qk_head_dim ** -0.5` times the YaRN mscale squared.
        out: optional `[B, Hq, 512]` output (q's dtype), written in place and returned.
        num_splits: 0 = heuristic (`mla_num_splits`); 1 = one pass per sequence; > 1 =
            split-KV: the splits' partials merged (log-sum-exp) by a combine kernel.
        workspace: optional buffer from `mla_workspace` (used when the call splits).
        check_indices: host check of block indices and seq_lens (None: on, except during
            CUDA-graph capture / torch.compile), as `paged_attention`.
        lse: optional float32 `[B, Hq]` output: each row's log-sum-exp (natural log).
        return_lse: return `(out, lse)`, allocating `lse` when not given.

    Returns:
        `[B, Hq, 512]` in q's dtype (`out` when given); `(out, lse)` with `return_lse`.
    """
    kernel = _ops.op("paged_mla_attention")

    def explain() -> None:
        validate_paged_mla_inputs(q, kv_cache, block_tables, seq_lens, out)
        _check_num_splits(num_splits)
        resolve_scale(scale, MLA_HEAD_DIM_QK)
        _check_lse(lse, q)
        _check_mla_workspace(workspace, q, block_tables.shape[1] * kv_cache.shape[1], num_splits)
        _check_written_apart(out, lse, workspace, [(q, "q"), (kv_cache, "kv_cache"),
                                                   (block_tables, "block_tables"), (seq_lens, "seq_lens")])

    if _host_checks_allowed(check_indices, "check_indices"):
        explain()
        check_paged_indices(kv_cache, block_tables, seq_lens)

    def call():
        result = q.new_empty(q.shape[0], q.shape[1], MLA_HEAD_DIM_V) if out is None else out
        row_lse = _lse_for(lse, return_lse, q)
        kernel(result, q, kv_cache, block_tables, seq_lens, resolve_scale(scale, MLA_HEAD_DIM_QK), num_splits,
               workspace, row_lse)
        return (result, row_lse) if return_lse else result

    return call_or_explain(call, explain)


def paged_mla_append(kv_c: torch.Tensor, k_pe: torch.Tensor, kv_cache: torch.Tensor,
                     slot_mapping: torch.Tensor | None = None, check_slots: bool | None = None, *,
                     block_tables: torch.Tensor | None = None, seq_lens: torch.Tensor | None = None) -> None:
    """Write new tokens' latent rows into the MLA cache, in place (vLLM's
    `concat_and_cache_mla`): token t's row becomes `[kv_c[t] | k_pe[t]]`, the key (and, its
    first 512 columns, the value) `paged_mla_attention` reads.

    Args:
        kv_c: `[T, 512]` float16/bfloat16, the compressed latent (after its norm); token
            stride free, rows contiguous and 16-byte aligned (a view of a wider projection
            output works as it is).
        k_pe: `[T, 64]`, kv_c's dtype, likewise: the rope part, already rotated (a
            `[T, 1, 64]` tensor: pass `k_pe.squeeze(1)`).
        kv_cache: `[num_blocks, block_size, 576]` or `[num_blocks, block_size, 1, 576]`,
            kv_c's dtype, contiguous (`paged_mla_attention`'s); any block_size >= 1.
        slot_mapping, check_slots, block_tables, seq_lens: as `paged_kv_append`: a flat slot
            per token (int64/int32, negative skips the token), or int32 block_tables and
            seq_lens for decode (token t is sequence t's new token, at position
            `seq_lens[t] - 1`); the host check (one sync; off under CUDA-graph capture and
            torch.compile) reports slots or table entries outside the cache, and the kernel
            never writes outside it in any mode.
    """
    kernel = _ops.op("paged_mla_append")  # first, so a build without kernels says so

    def explain() -> None:
        named = [(kv_c, "kv_c"), (k_pe, "k_pe"), (kv_cache, "kv_cache")]
        named += _append_target_tensors(slot_mapping, block_tables, seq_lens)
        for t, name in named:
            check_tensor(t, name)
        check_rank(kv_c, "kv_c", 2, f"[num_tokens, {MLA_HEAD_DIM_V}]")
        check_rank(k_pe, "k_pe", 2, f"[num_tokens, {MLA_HEAD_DIM_QK - MLA_HEAD_DIM_V}]")
        check_dtype(kv_c, "kv_c", DECODE_DTYPES)
        check_same_dtype(k_pe, "k_pe", kv_c, "kv_c")
        _check_mla_cache(kv_cache, kv_c, "kv_c")
        t = kv_c.shape[0]
        if kv_c.shape[1] != MLA_HEAD_DIM_V:
            raise ValueError(f"kv_c must be [num_tokens, {MLA_HEAD_DIM_V}] (the latent), got {tuple(kv_c.shape)}")
        if tuple(k_pe.shape) != (t, MLA_HEAD_DIM_QK - MLA_HEAD_DIM_V):
            raise ValueError(f"k_pe must be [{t}, {MLA_HEAD_DIM_QK - MLA_HEAD_DIM_V}] (the rope part), got "
                             f"{tuple(k_pe.shape)}")
        _check_append_target(slot_mapping, block_tables, seq_lens, t, "kv_c")
        check_one_cuda_device(named)
        check_contiguous(kv_cache, "kv_cache")
        for x, name in ((kv_c, "kv_c"), (k_pe, "k_pe"), (kv_cache, "kv_cache")):
            _check_rows(x, name)
        check_writes_apart(named, ("kv_cache",))

    if _host_checks_allowed(check_slots, "check_slots"):
        explain()  # this path synchronises anyway
        _host_check_append_slots(kv_cache, kv_c.shape[0], slot_mapping, block_tables, seq_lens)
    call_or_explain(lambda: kernel(kv_c, k_pe, kv_cache, slot_mapping, block_tables, seq_lens), explain)


@_ops.register_fake("paged_mla_append")
def _paged_mla_append_fake(kv_c, k_pe, kv_cache, slot_mapping, block_tables=None, seq_lens=None):
    return None


@_ops.register_fake("paged_mla_attention")
def _paged_mla_attention_fake(out, q, kv_cache, block_tables, seq_lens, scale, num_splits, workspace, lse=None):
    return None
