"""Reference attention with GQA and bottom-right-aligned causal masking."""
from __future__ import annotations

import torch


def causal_mask(nq: int, nk: int, device=None) -> torch.Tensor:
    """Bool `[nq, nk]`, True where query i may see key j: j <= i + nk - nq.

    Aligned bottom-right as FlashAttention 2 does; equal to SDPA's is_causal when nq == nk.
    """
    i = torch.arange(nq, device=device).unsqueeze(1)
    j = torch.arange(nk, device=device).unsqueeze(0)
    return j <= i + (nk - nq)


def attention_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: float = 0.0,
    is_causal: bool = False,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """softmax(q k^T * scale) v in `dtype` (float32 default, float64 on request).

    q `[B, Hq, Nq, D]`, k and v `[B, Hkv, Nk, D]`, Hq a multiple of Hkv (query head
    h reads KV head h // (Hq // Hkv)). `scale == 0` means 1/sqrt(D). With
    `is_causal`, query i sees key j when j <= i + Nk - Nq; a row that sees no key
    outputs zeros. Returns `[B, Hq, Nq, D]` in `dtype`.
    """
    b, hq, nq, d = q.shape
    hkv, nk = k.shape[1], k.shape[2]
    if hq % hkv:
        raise ValueError(f"num_q_heads ({hq}) must be a multiple of num_kv_heads ({hkv})")
    scale = scale if scale > 0 else d ** -0.5
    group = hq // hkv
    qf, kf, vf = q.to(dtype), k.to(dtype), v.to(dtype)
    if group > 1:
        kf = kf.repeat_interleave(group, dim=1)
        vf = vf.repeat_interleave(group, dim=1)
    scores = torch.matmul(qf, kf.transpose(-1, -2)) * scale
    if is_causal:
        allowed = causal_mask(nq, nk, q.device)
        scores = scores.masked_fill(~allowed, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        probs = torch.nan_to_num(probs, nan=0.0)  # rows with no visible key: all -inf -> zeros
    else:
        probs = torch.softmax(scores, dim=-1)
    return torch.matmul(probs, vf)
