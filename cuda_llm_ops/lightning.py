"""Lightning (linear) attention decode, as in MiniMax-01's lightning attention.

For each head and each of the n new tokens t in order::

    kv  = exp(-slope[h]) * kv + k_t^T v_t      # kv: the [d, e] fp32 state
    o_t = q_t kv

One launch runs the whole recurrence; n = 1 is the decode step.
"""
from __future__ import annotations

import torch

from . import _ops
from .validation import (FLOAT_DTYPES, call_or_explain, check_contiguous, check_dtype, check_nonempty,
                         check_one_cuda_device, check_rank, check_same_dtype, check_tensor, given)

# Largest d and e the kernel supports (a block keeps a [d, 32] slice of the state in registers).
LIGHTNING_MAX_HEAD_DIM = 128
LIGHTNING_STATE_CHUNK = 32  # state columns (of e) a thread block owns (kChunkCols)
_INT32_MAX = 2**31 - 1


def validate_lightning_decode_inputs(q, k, v, kv, slope, out=None, new_kv=None) -> None:
    """Check the arguments of `lightning_attention_decode`; raise TypeError/ValueError naming
    the argument, the expected and the actual value (see that function for the contract)."""
    named = [(q, "q"), (k, "k"), (v, "v"), (kv, "kv"), (slope, "slope")] + given((out, "out"), (new_kv, "new_kv"))
    for t, name in named:
        check_tensor(t, name)
    check_rank(q, "q", 4, "[batch, heads, n, d]")
    check_rank(k, "k", 4, "[batch, heads, n, d]")
    check_rank(v, "v", 4, "[batch, heads, n, e]")
    check_rank(kv, "kv", 4, "[batch, heads, d, e]")
    check_dtype(q, "q", FLOAT_DTYPES)
    check_same_dtype(k, "k", q, "q")
    check_same_dtype(v, "v", q, "q")
    check_dtype(kv, "kv", torch.float32)
    check_dtype(slope, "slope", torch.float32)
    for t, name in named[:4]:
        check_nonempty(t, name, "batch, heads, n/d, d/e")
    b, h, n, d = q.shape
    e = v.shape[3]
    if tuple(k.shape) != tuple(q.shape):
        raise ValueError(f"k must have q's shape {tuple(q.shape)}, got {tuple(k.shape)}")
    if tuple(v.shape[:3]) != (b, h, n):
        raise ValueError(f"v must have shape ({b}, {h}, {n}, e) to match q {tuple(q.shape)}, got {tuple(v.shape)}")
    if d > LIGHTNING_MAX_HEAD_DIM or e > LIGHTNING_MAX_HEAD_DIM:
        raise ValueError(f"d (q's last dim) and e (v's last dim) must be <= {LIGHTNING_MAX_HEAD_DIM}, got d={d}, e={e}")
    blocks = b * h * -(-e // LIGHTNING_STATE_CHUNK)
    if n > _INT32_MAX or blocks > _INT32_MAX:
        raise ValueError(f"q and v must have n <= 2^31 - 1 and batch * heads * ceil(e / {LIGHTNING_STATE_CHUNK}) "
                         f"<= 2^31 - 1 (one thread block each), got n={n} and {blocks} blocks")
    if tuple(kv.shape) != (b, h, d, e):
        raise ValueError(f"kv must have shape ({b}, {h}, {d}, {e}) = [batch, heads, d, e], got {tuple(kv.shape)}")
    if tuple(slope.shape) not in ((h, 1, 1), (h,)):
        raise ValueError(f"slope must have shape ({h}, 1, 1) or ({h},), got {tuple(slope.shape)}")
    if out is not None:
        check_dtype(out, "out", q.dtype)
        if tuple(out.shape) != tuple(v.shape):
            raise ValueError(f"out must have shape {tuple(v.shape)} = [batch, heads, n, e], got {tuple(out.shape)}")
    if new_kv is not None:
        check_dtype(new_kv, "new_kv", torch.float32)
        if tuple(new_kv.shape) != tuple(kv.shape):
            raise ValueError(f"new_kv must have kv's shape {tuple(kv.shape)}, got {tuple(new_kv.shape)}")
    check_one_cuda_device(named)
    for t, name in named:
        check_contiguous(t, name)


def lightning_attention_decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kv: torch.Tensor,
                               slope: torch.Tensor, out: torch.Tensor | None = None,
                               new_kv: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Lightning attention decode: n steps of the linear-attention recurrence in one launch.

    Args:
        q, k: `[b, h, n, d]` float32, float16 or bfloat16, contiguous, on a CUDA device.
        v: `[b, h, n, e]`, q's dtype. d and e any value from 1 to 128; n >= 1 (1 = decode).
        kv: `[b, h, d, e]` float32 state before the n tokens. Left unchanged unless `new_kv is kv`.
        slope: `[h, 1, 1]` or `[h]` float32 decay rates: each token multiplies the state by
            `exp(-slope[h])` before adding `k_t^T v_t`.
        out: optional `[b, h, n, e]` tensor of q's dtype to write o into.
        new_kv: optional `[b, h, d, e]` float32 tensor for the new state; `new_kv=kv` updates
            the state in place (no extra memory, the usual decode loop). Any other overlap
            between outputs and inputs is rejected.

    Returns:
        `(o, new_kv)`: o `[b, h, n, e]` in q's dtype (`o[:, :, t] = q_t kv_t`, fp32
        accumulation) and the state after the last token, `[b, h, d, e]` float32.
        These are `out` and `new_kv` when given.
    """
    kernel = _ops.op("lightning_attention_decode")  # first, so a build without kernels says so

    def call():
        o = torch.empty(v.shape, dtype=q.dtype, device=q.device) if out is None else out
        # kv itself, or (eager) a view of all of it (view_as, [:]): the in-place op, whose schema says
        # kv is written (torch.compile cannot compare data pointers: there only `new_kv is kv`)
        if new_kv is kv or (new_kv is not None and not torch.compiler.is_compiling()
                            and new_kv.data_ptr() == kv.data_ptr() and new_kv.dtype == kv.dtype
                            and new_kv.shape == kv.shape and new_kv.stride() == kv.stride()):
            _ops.op("lightning_attention_decode_inplace")(q, k, v, kv, slope, o)
            return o, new_kv
        state = torch.empty(kv.shape, dtype=torch.float32, device=kv.device) if new_kv is None else new_kv
        kernel(q, k, v, kv, slope, o, state)
        return o, state

    return call_or_explain(call, lambda: validate_lightning_decode_inputs(q, k, v, kv, slope, out, new_kv))


@_ops.register_fake("lightning_attention_decode")
def _lightning_attention_decode_fake(q, k, v, kv, slope, out, new_kv) -> None:
    # Writes out and new_kv in place, returns nothing: the schema's (a!)/(b!) carry the effect.
    return None


@_ops.register_fake("lightning_attention_decode_inplace")
def _lightning_attention_decode_inplace_fake(q, k, v, kv, slope, out) -> None:
    return None
