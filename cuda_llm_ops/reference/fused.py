"""Reference fused decode attention block (plain PyTorch, any device): QKV projection,
rotary embedding, KV-cache append, paged attention and output projection of one decode step."""
from __future__ import annotations

from typing import Any, Sequence

import torch

from .decode import paged_attention_reference

ROPE_THETA = 10000.0


def rotate_half(t: torch.Tensor) -> torch.Tensor:
    """`cat(-t[..., D/2:], t[..., :D/2])` over the last dim (the rotate-half / NeoX form)."""
    h = t.shape[-1] // 2
    return torch.cat((-t[..., h:], t[..., :h]), dim=-1)


def apply_rotary(t: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """`t * cos + rotate_half(t) * sin` for t `[B, H, D]` and cos, sin `[B, D]` (one position
    per sequence, shared by its heads), in the tensors' dtype (the caller picks it)."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return t * cos + rotate_half(t) * sin


def rotary_cos_sin(positions: torch.Tensor, head_dim: int, dtype: torch.dtype,
                   theta: float = ROPE_THETA) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin `[B, head_dim]` in `dtype` of Llama's rotary embedding at `positions` `[B]`
    (Hugging Face's layout: the D/2 frequencies theta^(-2i/D) twice over), made in float64."""
    inv_freq = theta ** -(torch.arange(0, head_dim, 2, dtype=torch.float64, device=positions.device) / head_dim)
    angles = positions.to(torch.float64).unsqueeze(1) * inv_freq
    emb = torch.cat((angles, angles), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def fused_decode_block_reference(
    x: torch.Tensor,
    w_qkv: torch.Tensor,
    w_o: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    cos: torch.Tensor | None = None,
    sin: torch.Tensor | None = None,
    scale: float = 0.0,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """One decode step of an attention block, computed in `dtype` (float32 default, float64
    on request), rounded to x's dtype wherever a pipeline of separate x-dtype ops would round.

    x `[B, hidden]`; w_qkv `[(Hq + 2 Hkv) * D, hidden]` (a fused qkv_proj's nn.Linear weight:
    the Hq query heads' rows, then the Hkv key heads', then the Hkv value heads', D rows each);
    w_o `[hidden, Hq * D]` (o_proj's weight); caches `[num_blocks, block_size, Hkv, D]`;
    int32 block_tables `[B, max_blocks]` and seq_lens `[B]` (>= 1: the keys including the
    new token, which sits at position seq_lens[b] - 1); cos, sin `[B, D]` or None (no rotary
    embedding): the rotate-half (NeoX / Hugging Face Llama) form applied to q and k of every
    head, `t * cos + rotate_half(t) * sin`. `scale == 0` means 1/sqrt(D).

    Steps: qkv = x @ w_qkv^T (rounded); q, k = rope(q), rope(k) (rounded); the new k and v
    are written into k_cache and v_cache IN PLACE (caches' dtype) at slot
    block_tables[b][(L - 1) // block_size] * block_size + (L - 1) % block_size; o = paged
    attention of q over the caches (rounded); returns o @ w_o^T `[B, hidden]` in `dtype`.
    """
    b = x.shape[0]
    bs, hkv, d = k_cache.shape[1:]
    hq = w_qkv.shape[0] // d - 2 * hkv
    if w_qkv.shape[0] % d or hq <= 0 or hq % hkv:
        raise ValueError(f"w_qkv must have (Hq + 2 * Hkv) * D rows, Hq a positive multiple of Hkv = {hkv} "
                         f"and D = {d} (the caches'), got {w_qkv.shape[0]}")
    if tuple(w_o.shape) != (x.shape[1], hq * d):
        raise ValueError(f"w_o must be [hidden, Hq * D] = {(x.shape[1], hq * d)}, got {tuple(w_o.shape)}")
    if (cos is None) != (sin is None):
        raise ValueError("cos and sin must be given together (or neither: no rotary embedding)")
    lens = seq_lens.long()
    if bool((lens < 1).any()):
        raise ValueError(f"seq_lens must be >= 1 (they count the new token), got {seq_lens.tolist()}")

    def rnd(t: torch.Tensor) -> torch.Tensor:  # where a separate op would store x's dtype
        return t.to(x.dtype).to(dtype)

    qkv = rnd(torch.matmul(x.to(dtype), w_qkv.to(dtype).t()))
    q, k, v = qkv.split([hq * d, hkv * d, hkv * d], dim=-1)
    q, k, v = q.reshape(b, hq, d), k.reshape(b, hkv, d), v.reshape(b, hkv, d)
    if cos is not None:
        c, s = cos.to(dtype), sin.to(dtype)
        q, k = rnd(apply_rotary(q, c, s)), rnd(apply_rotary(k, c, s))
    pos = lens - 1
    blocks = block_tables.long().gather(1, (pos // bs).unsqueeze(1)).squeeze(1)
    k_cache[blocks, pos % bs] = k.to(k_cache.dtype)
    v_cache[blocks, pos % bs] = v.to(v_cache.dtype)
    o = rnd(paged_attention_reference(q, k_cache, v_cache, block_tables, seq_lens, scale, dtype))
    return torch.matmul(o.reshape(b, hq * d), w_o.to(dtype).t())


def make_fused_decode_problem(B: int, hidden: int, Hq: int, Hkv: int, D: int, lens: int | Sequence[int],
                              block_size: int, dtype: torch.dtype, device: Any, extra_blocks: int = 0,
                              rope: bool = True, generator: torch.Generator | None = None) -> dict[str, Any]:
    """Random inputs of `fused_decode_block` in `dtype` on `device`, as keyword arguments.

    x `[B, hidden]` ~ N(0, 1); w_qkv `[(Hq + 2 Hkv) * D, hidden]` and w_o `[hidden, Hq * D]`
    ~ N(0, 1 / fan_in), so q, k, v and the output stay O(1); caches `[num_blocks, block_size,
    Hkv, D]` ~ N(0, 1) everywhere (no zeros, the new token's slot included) with num_blocks =
    B * ceil(max(lens) / block_size) + extra_blocks, each sequence on a random set of
    physical blocks (int32 block_tables `[B, ceil(max(lens) / block_size)]`); int32 seq_lens
    from `lens` (one per sequence, or one int for all); cos, sin `[B, D]` of Llama's rotary
    embedding (theta 10000) at positions seq_lens - 1, or None without `rope`. Drawn from
    `generator` (on its device, then moved) or, without one, torch's RNG on `device`.
    """
    lens = [lens] * B if isinstance(lens, int) else [int(n) for n in lens]
    if len(lens) != B or min(lens) < 1:
        raise ValueError(f"lens must hold B = {B} lengths >= 1, got {lens}")
    gen_device = generator.device if generator is not None else torch.device(device)

    def randn(*shape: int, std: float = 1.0) -> torch.Tensor:
        t = torch.randn(*shape, generator=generator, device=gen_device, dtype=dtype)
        return (t.mul_(std) if std != 1.0 else t).to(device)

    bps = -(-max(lens) // block_size)
    num_blocks = B * bps + extra_blocks
    x = randn(B, hidden)
    w_qkv = randn((Hq + 2 * Hkv) * D, hidden, std=hidden ** -0.5)
    w_o = randn(hidden, Hq * D, std=(Hq * D) ** -0.5)
    k_cache = randn(num_blocks, block_size, Hkv, D)
    v_cache = randn(num_blocks, block_size, Hkv, D)
    perm = torch.randperm(num_blocks, generator=generator, device=gen_device)[: B * bps]
    block_tables = perm.view(B, bps).to(device=device, dtype=torch.int32)
    seq_lens = torch.tensor(lens, dtype=torch.int32, device=device)
    cos, sin = rotary_cos_sin(seq_lens - 1, D, dtype) if rope else (None, None)
    return {"x": x, "w_qkv": w_qkv, "w_o": w_o, "k_cache": k_cache, "v_cache": v_cache,
            "block_tables": block_tables, "seq_lens": seq_lens, "cos": cos, "sin": sin}
