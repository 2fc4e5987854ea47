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


def window_mask(nq: int, nk: int, window_left: int, device=None) -> torch.Tensor:
    """Bool `[nq, nk]`, True where key j is inside query i's sliding window: j >=
    i + nk - nq - window_left (query i sits at key position i + nk - nq)."""
    i = torch.arange(nq, device=device).unsqueeze(1)
    j = torch.arange(nk, device=device).unsqueeze(0)
    return j >= i + (nk - nq) - window_left


def attention_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    scale: float = 0.0,
    is_causal: bool = False,
    dtype: torch.dtype = torch.float32,
    window_left: int = -1,
    logits_soft_cap: float = 0.0,
    return_lse: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """softmax(q k^T * scale) v in `dtype` (float32 default, float64 on request).

    q `[B, Hq, Nq, D]`, k and v `[B, Hkv, Nk, D]`, Hq a multiple of Hkv (query head
    h reads KV head h // (Hq // Hkv)). `scale == 0` means 1/sqrt(D). With
    `is_causal`, query i sees key j when j <= i + Nk - Nq; with `window_left >= 0`
    only when j >= i + Nk - Nq - window_left (a sliding window). `logits_soft_cap > 0`
    maps the scores to cap * tanh(scores / cap) before the softmax. A row that sees
    no key outputs zeros. Returns `[B, Hq, Nq, D]` in `dtype`; with `return_lse` also each
    row's log-sum-exp of its (masked) scores `[B, Hq, Nq]` (natural log, -inf: no key).
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
    if logits_soft_cap > 0:
        scores = logits_soft_cap * torch.tanh(scores / logits_soft_cap)
    if is_causal or window_left >= 0:
        allowed = causal_mask(nq, nk, q.device) if is_causal else torch.ones(nq, nk, dtype=torch.bool, device=q.device)
        if window_left >= 0:
            allowed = allowed & window_mask(nq, nk, window_left, q.device)
        scores = scores.masked_fill(~allowed, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        probs = torch.nan_to_num(probs, nan=0.0)  # rows with no visible key: all -inf -> zeros
    else:
        probs = torch.softmax(scores, dim=-1)
    out = torch.matmul(probs, vf)
    return (out, torch.logsumexp(scores, dim=-1)) if return_lse else out
