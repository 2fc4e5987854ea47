"""Fused decode attention block: one decode step of a transformer layer's attention in one kernel.

For one new token per sequence (hidden state `x [B, hidden]`)::

    q, k, v = split(x @ w_qkv^T)                    # per head, D = head_dim
    q, k = rope(q), rope(k)                         # optional, rotate-half form
    k_cache, v_cache <- k, v at position seq_lens - 1  (through the block table)
    o = softmax(q K^T * scale) V                    # over the seq_lens cached tokens
    out = o @ w_o^T                                 # [B, hidden]

Two paths run the same contract:
- one kernel (Hopper, sm_90a build; MHA, head_dim 128, batch <= 16, hidden a multiple of 512),
  in which a thread-block cluster per head splits the projections and the keys and exchanges
  q/k/v and the partial softmax states through distributed shared memory (ClusterFusion's
  dataflow); intermediate values never go through global memory;
- this package's unfused ops, four launches: `gemm` (qkv), `paged_kv_append` (the rotary
  embedding of q and k and the cache append at seq_lens - 1 in one launch), `paged_attention`,
  `gemm` (o).
By default (`path="auto"`) a call takes the one-kernel path only where it measured faster on
the H100: batch 1 with a block table of at most 1024 keys (csrc/fused/NOTES.md, "Which path").
`fused_decode_block_path` says which path a call takes and why.
"""
from __future__ import annotations

import torch

from . import _ops
from .decode import DECODE_DTYPES, _check_head_dim, _host_checks_allowed, check_paged_indices
from .reference.fused import apply_rotary
from .validation import (call_or_explain, check_contiguous, check_dtype, check_one_cuda_device, check_writes_apart,
                         check_rank, check_same_dtype, check_tensor, given, resolve_scale)

def _shape_info(x, w_o, k_cache):
    b, hidden = x.shape
    hkv, d = k_cache.shape[2], k_cache.shape[3]
    hq = w_o.shape[1] // d if d else 0
    return b, hidden, hq, hkv, d


def validate_fused_decode_block_inputs(x, w_qkv, w_o, k_cache, v_cache, block_tables, seq_lens, cos=None, sin=None,
                                       out=None, workspace=None) -> None:
    """Shape/dtype/layout checks of `fused_decode_block` (no host synchronisation).

    Raises TypeError/ValueError naming the argument, the expected and the actual value.
    """
    named = [(x, "x"), (w_qkv, "w_qkv"), (w_o, "w_o"), (k_cache, "k_cache"), (v_cache, "v_cache"),
             (block_tables, "block_tables"), (seq_lens, "seq_lens")] + given((cos, "cos"), (sin, "sin"), (out, "out"))
    if (cos is None) != (sin is None):
        raise ValueError("cos and sin must be given together (both [B, head_dim]) or both be None")
    for t, name in named:
        check_tensor(t, name)
    check_rank(x, "x", 2, "[batch, hidden]")
    check_rank(w_qkv, "w_qkv", 2, "[(num_heads + 2 * num_kv_heads) * head_dim, hidden]")
    check_rank(w_o, "w_o", 2, "[hidden, num_heads * head_dim]")
    check_rank(k_cache, "k_cache", 4, "[num_blocks, block_size, num_kv_heads, head_dim]")
    check_rank(block_tables, "block_tables", 2, "[batch, max_blocks_per_seq]")
    check_rank(seq_lens, "seq_lens", 1, "[batch]")
    check_dtype(x, "x", DECODE_DTYPES)
    for t, name in named[1:5]:
        check_same_dtype(t, name, x, "x")
    check_dtype(block_tables, "block_tables", torch.int32)
    check_dtype(seq_lens, "seq_lens", torch.int32)
    b, hidden = x.shape
    if b < 1 or hidden < 1:
        raise ValueError(f"x must have no empty dimension, got shape {tuple(x.shape)}")
    nb, bs, hkv, d = k_cache.shape
    if nb < 1 or hkv < 1 or d < 1:
        raise ValueError(f"k_cache must have no empty dimension, got shape {tuple(k_cache.shape)}")
    _check_head_dim(d, k_cache.device)  # k_cache.shape[3], which the unfused path's decode kernels take
    if bs < 1 or bs & (bs - 1):
        raise ValueError(f"k_cache's block_size (dim 1) must be a power of two, got {bs}")
    if tuple(v_cache.shape) != tuple(k_cache.shape):
        raise ValueError(f"v_cache must have k_cache's shape {tuple(k_cache.shape)}, got {tuple(v_cache.shape)}")
    if w_o.shape[0] != hidden or w_o.shape[1] % d:
        raise ValueError(f"w_o must have shape ({hidden}, num_heads * {d}) = [hidden, num_heads * head_dim], "
                         f"got {tuple(w_o.shape)}")
    hq = w_o.shape[1] // d
    if hq < 1 or hq % hkv:
        raise ValueError(f"num_heads (w_o.shape[1] / head_dim = {hq}) must be a positive multiple of "
                         f"num_kv_heads (k_cache.shape[2] = {hkv})")
    want = ((hq + 2 * hkv) * d, hidden)
    if tuple(w_qkv.shape) != want:
        raise ValueError(f"w_qkv must have shape {want} = [(num_heads + 2 * num_kv_heads) * head_dim, hidden], "
                         f"got {tuple(w_qkv.shape)}")
    if block_tables.shape[0] != b or block_tables.shape[1] < 1:
        raise ValueError(f"block_tables must have shape ({b}, max_blocks_per_seq >= 1), got "
                         f"{tuple(block_tables.shape)}")
    if tuple(seq_lens.shape) != (b,):
        raise ValueError(f"seq_lens must have shape ({b},), got {tuple(seq_lens.shape)}")
    for t, name in ((cos, "cos"), (sin, "sin")):
        if t is not None:
            check_same_dtype(t, name, x, "x")
            if tuple(t.shape) != (b, d):
                raise ValueError(f"{name} must have shape ({b}, {d}) = [batch, head_dim], got {tuple(t.shape)}")
    if d % 2 and cos is not None:
        raise ValueError(f"rotary embedding needs an even head_dim, got {d}")
    if out is not None:
        check_same_dtype(out, "out", x, "x")
        if tuple(out.shape) != (b, hidden):
            raise ValueError(f"out must have shape ({b}, {hidden}) = [batch, hidden], got {tuple(out.shape)}")
    check_one_cuda_device(named)
    for t, name in named:
        check_contiguous(t, name)
    _check_writes_apart(x, w_qkv, w_o, k_cache, v_cache, block_tables, seq_lens, cos, sin, out, workspace)


def _check_writes_apart(x, w_qkv, w_o, k_cache, v_cache, block_tables, seq_lens, cos, sin, out, workspace):
    """What a call writes lands apart from every other argument, on either path (so the path
    never changes what is allowed): out (the one kernel adds heads' output projections into it
    while other heads still read the inputs), the caches and the workspace.
    csrc/bindings/fused.cpp."""
    named = ((x, "x"), (w_qkv, "w_qkv"), (w_o, "w_o"), (k_cache, "k_cache"), (v_cache, "v_cache"),
             (block_tables, "block_tables"), (seq_lens, "seq_lens"), (cos, "cos"), (sin, "sin"), (out, "out"),
             (workspace, "workspace"))
    check_writes_apart(named, ("out", "k_cache", "v_cache", "workspace"))


_DIRTY_WORKSPACE = ("workspace's sums and counters (its first fused_decode_block_workspace_bytes(hidden) bytes) "
                    "are not zero: allocate it with fused_decode_block_workspace (an empty or overwritten buffer is "
                    "not one); out would never be written")


def _fused_workspace_dirty(workspace: torch.Tensor | None, hidden: int) -> list:
    """For `check_paged_indices(also=)`: whether the one kernel's sums and counters, the
    workspace's first bytes, are off zero (0-d bool on the GPU, no synchronisation), as
    `fused_decode_block_workspace` makes them and every call leaves them; with others a count
    never reaches its last warp and out is never written. Empty where there is nothing to check
    (no workspace, or one the op refuses itself)."""
    if workspace is None or not workspace.is_contiguous():
        return []
    nbytes = int(_ops.op("fused_decode_block_workspace_bytes")(hidden))
    if workspace.numel() * workspace.element_size() < nbytes:
        return []
    return [(workspace.reshape(-1).view(torch.uint8)[:nbytes].any(), _DIRTY_WORKSPACE)]


_PATH_CACHE: dict[tuple, tuple[bool, str]] = {}
PATHS = ("auto", "fused", "unfused")
# Where "auto" takes the one-kernel path (H100, Llama-2-7B shapes, graphs, cold L2; csrc/fused/NOTES.md
# "Which path"). `llm-speed bench fused_decode_block` at 92aa957, one kernel / our unfused ops, us,
# fp16: B=1 N=1024 68.7 / 69.5, N=4096 90.8 / 86.1, N=16384 169.8 / 151.6; B=4 and 16: the unfused
# ops ahead by 9-21%. A sequence's length is on the GPU, so the table's capacity
# (max_blocks_per_seq x block_size) bounds it.
FUSED_AUTO_MAX_BATCH = 1
FUSED_AUTO_MAX_TABLE_KEYS = 1024


def fused_decode_block_path(x: torch.Tensor, w_o: torch.Tensor, k_cache: torch.Tensor,
                            block_tables: torch.Tensor | None = None, path: str = "auto") -> tuple[bool, str]:
    """`(fused, why)`: whether `fused_decode_block(..., path=path)` runs the one-kernel path on
    these shapes and x's device (else the unfused ops; `why` says what rules the kernel out).

    `path="auto"`: where the kernel supports the shapes and measured faster, batch
    <= FUSED_AUTO_MAX_BATCH with a block table of at most FUSED_AUTO_MAX_TABLE_KEYS keys
    (`block_tables` None: judged by the batch alone). `"fused"`: wherever the kernel supports
    the shapes. `"unfused"`: never. Remembered per device and shape: a decode loop asks on
    every call."""
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}, got {path!r}")
    table_keys = None if block_tables is None else int(block_tables.shape[1]) * int(k_cache.shape[1])
    key = (x.device, tuple(x.shape), tuple(w_o.shape), tuple(k_cache.shape[1:]), table_keys, path)
    known = _PATH_CACHE.get(key)
    if known is None:
        b, hidden, hq, hkv, d = _shape_info(x, w_o, k_cache)
        if path == "unfused":
            known = (False, "path='unfused'")
        elif not _ops.has_op("fused_decode_block"):
            known = (False, "this build has no fused kernel (area 'fused' not built)")
        else:
            with torch.cuda.device(x.device):
                why = _ops.op("fused_decode_block_unsupported")(b, hidden, hq, hkv, d, k_cache.shape[1])
            if not why and path == "auto":
                if b > FUSED_AUTO_MAX_BATCH:
                    why = (f"the unfused ops measured faster at batch > {FUSED_AUTO_MAX_BATCH} (got {b}); "
                           f"path='fused' forces the kernel")
                elif table_keys is not None and table_keys > FUSED_AUTO_MAX_TABLE_KEYS:
                    why = (f"the unfused ops measured faster beyond {FUSED_AUTO_MAX_TABLE_KEYS} keys (the block "
                           f"table holds {table_keys}); path='fused' forces the kernel")
            known = (why == "", why)
        _PATH_CACHE[key] = known
    return known


_ATTN_WS_ALIGN = 256  # bytes: where the unfused path's attention workspace starts in the buffer
_WORKSPACE_LAYOUTS: dict[tuple, tuple[int, int]] = {}


def _workspace_layout(x, w_o, k_cache, block_tables) -> tuple[int, int]:
    """(offset in bytes, float32 elements) of the unfused path's paged-attention workspace
    inside a `fused_decode_block_workspace` buffer, after the kernel's bytes; remembered per
    device and shape."""
    b, hidden, hq, hkv, d = _shape_info(x, w_o, k_cache)
    cap = int(block_tables.shape[1]) * int(k_cache.shape[1])
    key = (x.device, b, hidden, hq, hkv, d, cap, k_cache.dtype)
    known = _WORKSPACE_LAYOUTS.get(key)
    if known is None:
        with torch.cuda.device(x.device):
            fused_bytes = (int(_ops.op("fused_decode_block_workspace_bytes")(hidden))
                           if _ops.has_op("fused_decode_block_workspace_bytes") else 0)
            numel = int(_ops.op("decode_workspace_numel_upto")(b, hq, hkv, 1, d, cap, k_cache.dtype, True, 0))
        known = (-(-fused_bytes // _ATTN_WS_ALIGN) * _ATTN_WS_ALIGN, max(numel, 1))
        _WORKSPACE_LAYOUTS[key] = known
    return known


def fused_decode_block_workspace(x: torch.Tensor, w_o: torch.Tensor, k_cache: torch.Tensor | None = None,
                                 block_tables: torch.Tensor | None = None) -> torch.Tensor:
    """A workspace for `fused_decode_block` calls of x's batch (or fewer) and hidden size
    `w_o.shape[0]` on x's device: uint8, the one-kernel path's fp32 sums and counters first
    (zeroed, left zero by every call). With `k_cache` and `block_tables` (their shapes: the
    table's width and the caches' block size, heads and dtype) it also holds the unfused
    path's paged-attention workspace, so a call on either path launches only its kernels.
    Allocate once, reuse on one stream; calls on concurrent streams need one each."""
    if k_cache is None or block_tables is None:
        nbytes = _ops.op("fused_decode_block_workspace_bytes")(int(w_o.shape[0]))
        return torch.zeros(nbytes, dtype=torch.uint8, device=x.device)
    off, numel = _workspace_layout(x, w_o, k_cache, block_tables)
    ws = torch.zeros(off + 4 * numel, dtype=torch.uint8, device=x.device)
    with torch.cuda.device(x.device):
        _ops.op("decode_workspace_init")(ws[off:].view(torch.float32))  # split counters at rest
    # Tagged, so only this tensor (not a view, not another buffer of a fitting size, whose
    # counters would not be at rest) lends the unfused path its attention part.
    ws._clo_attention_workspace = (off, numel)
    return ws


def _attention_workspace(workspace, x, w_o, k_cache, block_tables) -> torch.Tensor | None:
    """The unfused path's part of a workspace that `fused_decode_block_workspace` made with
    k_cache and block_tables and that is large enough for this call, else None
    (paged_attention then allocates one per call)."""
    made = getattr(workspace, "_clo_attention_workspace", None)
    if made is None:
        return None
    off, numel = _workspace_layout(x, w_o, k_cache, block_tables)
    if off != made[0] or numel > made[1]:  # another hidden size, or too small for this call
        return None
    # All of it: the split counters sit at the end of the part that was initialised.
    return workspace[off:].view(torch.float32)


def _unfused(x, w_qkv, w_o, k_cache, v_cache, block_tables, seq_lens, cos, sin, scale, out, attn_workspace=None):
    # The four ops' raw kernels, not their Python wrappers (host time per eager call, NOTES.md
    # "Host time of an eager call"): each op checks what its kernel relies on, and the caller's
    # call_or_explain names this op's argument when one refuses.
    b, hidden, hq, hkv, d = _shape_info(x, w_o, k_cache)
    if out is not None and out.dtype != x.dtype:  # gemm_out would take a float32 out (another epilogue)
        raise ValueError("out must have x's dtype")
    qkv = _ops.op("gemm")(x, w_qkv, 1.0, 0.0, False, True, None)
    # Views of qkv, one narrow each: q is rotated in place below, which autograd refuses on the
    # outputs of a multi-output view such as split() when the weights require grad.
    heads = qkv.view(b, hq + 2 * hkv, d)
    q, k, v = heads.narrow(1, 0, hq), heads.narrow(1, hq, hkv), heads.narrow(1, hq + hkv, hkv)
    rope_q = None
    if cos is not None and d % 16:  # no 16-byte halves for the append's rotation: in fp32, rounded once
        c, s_ = cos.float(), sin.float()
        q, k = apply_rotary(q.float(), c, s_).to(q.dtype), apply_rotary(k.float(), c, s_).to(k.dtype)
        cos = sin = None
    elif cos is not None:
        cos, sin, rope_q = cos.contiguous(), sin.contiguous(), q
    # One launch: q rotated in place (in qkv), k rotated and appended with v at seq_lens - 1.
    _ops.op("paged_kv_append")(k, v, k_cache, v_cache, None, 1.0, 1.0, block_tables, seq_lens, cos, sin, rope_q)
    o = torch.empty((b, hq, d), dtype=x.dtype, device=x.device)
    _ops.op("paged_attention")(o, q, k_cache, v_cache, block_tables, seq_lens, scale, 0, attn_workspace, -1, 0.0,
                               None, 1.0, 1.0)
    if out is None:
        return _ops.op("gemm")(o.view(b, hq * d), w_o, 1.0, 0.0, False, True, None)
    _ops.op("gemm_out")(out, o.view(b, hq * d), w_o, 1.0, 0.0, False, True, None)
    return out


def fused_decode_block(x: torch.Tensor, w_qkv: torch.Tensor, w_o: torch.Tensor, k_cache: torch.Tensor,
                       v_cache: torch.Tensor, block_tables: torch.Tensor, seq_lens: torch.Tensor,
                       cos: torch.Tensor | None = None, sin: torch.Tensor | None = None, scale: float = 0.0,
                       out: torch.Tensor | None = None, workspace: torch.Tensor | None = None,
                       check_indices: bool | None = None, cluster_size: int = 0, path: str = "auto") -> torch.Tensor:
    """One decode step of an attention block: QKV projection, rotary embedding, KV-cache
    append, paged attention and output projection.

    Args:
        x: `[B, hidden]` float16/bfloat16 hidden states (one new token per sequence), CUDA.
        w_qkv: `[(Hq + 2 * Hkv) * D, hidden]`, x's dtype: a fused qkv_proj's nn.Linear weight
            (rows of the Hq query heads, then the Hkv key heads, then the Hkv value heads).
        w_o: `[hidden, Hq * D]`, x's dtype: o_proj's nn.Linear weight (no biases).
        k_cache, v_cache: `[num_blocks, block_size, Hkv, D]`, x's dtype (block_size a power
            of two). The new token's k (after the rotary embedding) and v are written at
            position `seq_lens[b] - 1`, in place.
        block_tables: int32 `[B, max_blocks_per_seq]`, physical block of each logical block.
        seq_lens: int32 `[B]`, tokens per sequence *including* the new one (>= 1).
        cos, sin: optional `[B, D]` in x's dtype: the rotary embedding at each sequence's new
            position, rotate-half (NeoX / Hugging Face Llama) form; None skips it.
        scale: softmax scale; 0 means `1/sqrt(D)`.
        out: optional `[B, hidden]` output tensor in x's dtype.
        workspace: from `fused_decode_block_workspace` (allocated per call when None; made
            with k_cache and block_tables it serves the unfused path too). With
            `out=`, a workspace and `check_indices=False` a call allocates nothing and never
            synchronises (CUDA-graph capturable).
        check_indices: host check of seq_lens and the block-table entries the call uses, and on
            the one-kernel path that a given workspace's sums and counters are zero (one
            synchronisation; None: on except under CUDA-graph capture / torch.compile). The kernel never reads or writes outside the caches
            either way.
        cluster_size: thread blocks per head on the fused path: 2 or 4; 0 (default) takes 4,
            measured faster at every Llama-2-7B shape.
        path: "auto" (default): the one-kernel path where it supports the shapes and measured
            faster (`fused_decode_block_path`), else the unfused ops; "fused": the one-kernel
            path (ValueError where it does not support the shapes); "unfused": the unfused ops.

    Returns:
        `[B, hidden]` (`out` when given): `o @ w_o^T`, fp32 accumulation, rounded to x's dtype
        where unfused ops would round (q/k/v, the rotary embedding, o). The fused path sums
        the heads' output projections with fp32 atomics, so the last bit may differ between
        calls.
    """
    if not _ops.kernels_available():
        _ops.op("fused_decode_block")  # raises: the package was installed without kernels, how to build them

    validated = False

    def validate():
        nonlocal validated
        if not validated:
            validate_fused_decode_block_inputs(x, w_qkv, w_o, k_cache, v_cache, block_tables, seq_lens, cos, sin,
                                               out, workspace)
            validated = True

    if cluster_size not in (0, 2, 4):
        raise ValueError(f"cluster_size must be 0 (the default, 4), 2 or 4, got {cluster_size}")
    if not isinstance(scale, (int, float)) or isinstance(scale, bool):
        raise ValueError(f"scale must be a float (0: 1/sqrt(head_dim)), got {scale!r}")
    try:  # fused_decode_block_path also refuses an unknown `path`
        fused, why = fused_decode_block_path(x, w_o, k_cache, block_tables, path)
        d = k_cache.shape[3]
        attn_workspace = None if fused else _attention_workspace(workspace, x, w_o, k_cache, block_tables)
    except (AttributeError, IndexError, RuntimeError, TypeError, ValueError, ZeroDivisionError):
        validate()  # malformed inputs: say which
        raise
    if path == "fused" and not fused:
        validate()
        raise ValueError(f"path='fused': the one-kernel path does not run these shapes: {why}")
    if _host_checks_allowed(check_indices, "check_indices"):
        validate()
        # seq_lens count the new token; on the unfused path its attention workspace's counters too
        check_paged_indices(k_cache, block_tables, seq_lens, min_seq_len=1, workspace=attn_workspace,
                            also=_fused_workspace_dirty(workspace, x.shape[1]) if fused else [])
    scale = resolve_scale(float(scale), d)
    if not fused:
        # The unfused ops check what their kernels rely on; when one refuses, validate() says
        # which of this op's arguments is wrong (their messages would name their own).
        def unfused():
            if cos is not None and d % 16:
                validate()  # the rotation runs in PyTorch ops, which would broadcast a misshapen cos
            _check_writes_apart(x, w_qkv, w_o, k_cache, v_cache, block_tables, seq_lens, cos, sin, out, workspace)
            return _unfused(x, w_qkv, w_o, k_cache, v_cache, block_tables, seq_lens, cos, sin, scale, out,
                            attn_workspace)

        return call_or_explain(unfused, validate)
    kernel = _ops.op("fused_decode_block")

    def call():
        o = torch.empty(x.shape, dtype=x.dtype, device=x.device) if out is None else out
        ws = fused_decode_block_workspace(x, w_o) if workspace is None else workspace
        kernel(x, w_qkv, w_o, k_cache, v_cache, block_tables, seq_lens, cos, sin, scale, o, ws, cluster_size)
        return o

    return call_or_explain(call, validate)


@_ops.register_fake("fused_decode_block")
def _fused_decode_block_fake(x, w_qkv, w_o, k_cache, v_cache, block_tables, seq_lens, cos, sin, scale, out,
                             workspace, cluster_size) -> None:
    # Writes the caches, out and the workspace in place: the schema's (a!)..(d!) carry the effect.
    return None
