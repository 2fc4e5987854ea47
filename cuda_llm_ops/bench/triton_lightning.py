"""Triton peer of lightning attention decode, written the way the seed article's
optimized Triton kernel works (SGLang PR 2966): one program per (batch, head)
holds the whole [d, e] state as one tile padded to powers of two, with masks
instead of padded copies; outer product and row reduction with tl ops.
Generalized to n tokens (a loop inside the program) and an out-of-place state.

Benchmark-only: triton is imported lazily, so this module imports without it.
"""
from __future__ import annotations

import functools
import importlib.util

import torch


def triton_available() -> bool:
    return importlib.util.find_spec("triton") is not None


def triton_unavailable_reason(inputs=None) -> str | None:
    """None when the Triton peer can run, else why not (BenchImpl.unavailable)."""
    if not triton_available():
        return "triton is not installed"
    if not torch.cuda.is_available():
        return "no CUDA GPU"
    return None


@functools.cache
def _decode_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def _lightning_decode_kernel(Q, K, V, KV, NEW_KV, Out, S, n, h: tl.constexpr, d: tl.constexpr,
                                 e: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_E: tl.constexpr):
        off_bh = tl.program_id(0)
        off_h = off_bh % h
        qk_offset = off_bh * n * d
        vo_offset = off_bh * n * e
        kv_offset = off_bh * d * e

        ratio = tl.exp(-tl.load(S + off_h))
        d_idx = tl.arange(0, BLOCK_D)
        e_idx = tl.arange(0, BLOCK_E)
        d_mask = d_idx < d
        e_mask = e_idx < e
        kv_ptrs = d_idx[:, None] * e + e_idx[None, :]
        kv_mask = d_mask[:, None] & e_mask[None, :]
        kv = tl.load(KV + kv_offset + kv_ptrs, mask=kv_mask, other=0.0)
        for t in range(n):
            q = tl.load(Q + qk_offset + t * d + d_idx, mask=d_mask, other=0.0).to(tl.float32)
            k = tl.load(K + qk_offset + t * d + d_idx, mask=d_mask, other=0.0).to(tl.float32)
            v = tl.load(V + vo_offset + t * e + e_idx, mask=e_mask, other=0.0).to(tl.float32)
            kv = ratio * kv + k[:, None] * v[None, :]
            o = tl.sum(q[:, None] * kv, axis=0)
            tl.store(Out + vo_offset + t * e + e_idx, o.to(Out.dtype.element_ty), mask=e_mask)
        tl.store(NEW_KV + kv_offset + kv_ptrs, kv, mask=kv_mask)

    return _lightning_decode_kernel


def _next_pow2(x: int) -> int:
    return 1 << (max(1, x) - 1).bit_length()


def triton_lightning_decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kv: torch.Tensor,
                            slope: torch.Tensor, out: torch.Tensor | None = None,
                            new_kv: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Same contract as `cuda_llm_ops.lightning_attention_decode` (contiguous inputs; new_kv may be kv).

    Minimal checks: a benchmark peer, not a public op.
    """
    b, h, n, d = q.shape
    e = v.shape[-1]
    for t, name in ((q, "q"), (k, "k"), (v, "v"), (kv, "kv"), (slope, "slope")):
        if not t.is_contiguous():
            raise ValueError(f"triton_lightning_decode: {name} must be contiguous")
    if kv.dtype != torch.float32 or tuple(kv.shape) != (b, h, d, e):
        raise ValueError(f"triton_lightning_decode: kv must be float32 {(b, h, d, e)}, got {kv.dtype} {tuple(kv.shape)}")
    if out is None:
        out = torch.empty(b, h, n, e, dtype=q.dtype, device=q.device)
    if new_kv is None:
        new_kv = torch.empty_like(kv)
    _decode_kernel()[(b * h,)](q, k, v, kv, new_kv, out, slope, n, h=h, d=d, e=e, BLOCK_D=_next_pow2(d),
                               BLOCK_E=_next_pow2(e))
    return out, new_kv
