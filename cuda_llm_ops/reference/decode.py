"""Reference paged decode attention and paged KV append (plain PyTorch, any device)."""
from __future__ import annotations

import torch

from .attention import attention_reference


def gather_paged_kv(cache: torch.Tensor, block_table_row: torch.Tensor, seq_len: int) -> torch.Tensor:
    """The first `seq_len` tokens of one sequence from a paged cache
    `[num_blocks, block_size, Hkv, D]` through its block-table row: `[seq_len, Hkv, D]`."""
    bs = cache.shape[1]
    n_blocks = (seq_len + bs - 1) // bs
    blocks = block_table_row[:n_blocks].long()
    return cache[blocks].reshape(n_blocks * bs, *cache.shape[2:])[:seq_len]


def paged_attention_reference(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_tables: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float = 0.0,
    dtype: torch.dtype = torch.float32,
    window_left: int = -1,
    logits_soft_cap: float = 0.0,
    return_lse: bool = False,
    k_scale: float = 1.0,
    v_scale: float = 1.0,
    is_causal: bool = True,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Decode attention through the block table, in `dtype` (float32 default, float64 on request).

    q `[B, Hq, D]`, or `[B, Hq, Nq, D]` for the last Nq keys of each sequence (query i at key
    seq_lens[b] - Nq + i, causal unless `is_causal=False`: then every row sees all keys); caches `[num_blocks, block_size, Hkv, D]`; block_tables `[B, max_blocks]`;
    seq_lens `[B]` (sequence b sees its keys 0 .. seq_lens[b] - 1, with `window_left >= 0`
    only from seq_lens[b] - 1 - window_left; 0 keys give zeros); `logits_soft_cap` as
    `attention_reference`. FP8 caches (`torch.float8_e4m3fn`) stand for `k_cache * k_scale`
    and `v_cache * v_scale`. Returns q's shape in `dtype` (with `return_lse` also the rows'
    log-sum-exp, q's shape without D; -inf for rows that see no key).
    """
    if k_cache.dtype == torch.float8_e4m3fn:
        k_cache = k_cache.to(dtype) * k_scale
        v_cache = v_cache.to(dtype) * v_scale
    multi = q.dim() == 4
    q4 = q if multi else q.unsqueeze(2)
    out = torch.zeros(q4.shape, dtype=dtype, device=q.device)
    lse = torch.full(q4.shape[:-1], float("-inf"), dtype=dtype, device=q.device)
    lens = [int(x) for x in seq_lens.tolist()]
    for i, n in enumerate(lens):
        if n <= 0:
            continue
        k = gather_paged_kv(k_cache, block_tables[i], n).permute(1, 0, 2).unsqueeze(0)  # [1, Hkv, n, D]
        v = gather_paged_kv(v_cache, block_tables[i], n).permute(1, 0, 2).unsqueeze(0)
        o, row_lse = attention_reference(q4[i:i + 1], k, v, scale=scale, dtype=dtype, is_causal=is_causal,
                                         window_left=window_left, logits_soft_cap=logits_soft_cap,
                                         return_lse=True)  # [1, Hq, Nq, D], [1, Hq, Nq]
        out[i] = o[0]
        lse[i] = row_lse[0]
    if not multi:
        out, lse = out[:, :, 0], lse[:, :, 0]
    return (out, lse) if return_lse else out


def paged_mla_attention_reference(q: torch.Tensor, kv_cache: torch.Tensor, block_tables: torch.Tensor,
                                  seq_lens: torch.Tensor, scale: float = 0.0, head_dim_v: int = 512,
                                  dtype: torch.dtype = torch.float32,
                                  return_lse: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """MLA decode (absorbed form) through the block table, in `dtype`: q `[B, Hq, Dqk]`, kv_cache
    `[num_blocks, block_size, (1,) Dqk]` whose rows are each token's key and whose first
    `head_dim_v` columns are its value; scale 0 means `1/sqrt(Dqk)`. Returns `[B, Hq, head_dim_v]`
    (0 for a sequence of length 0), with `return_lse` also the rows' log-sum-exp `[B, Hq]`."""
    if kv_cache.dim() == 3:
        kv_cache = kv_cache.unsqueeze(2)
    b, hq, d = q.shape
    scale = scale if scale != 0.0 else d ** -0.5
    out = torch.zeros(b, hq, head_dim_v, dtype=dtype, device=q.device)
    lse = torch.full((b, hq), float("-inf"), dtype=dtype, device=q.device)
    for i, n in enumerate(int(x) for x in seq_lens.tolist()):
        if n <= 0:
            continue
        rows = gather_paged_kv(kv_cache, block_tables[i], n)[:, 0].to(dtype)  # [n, Dqk]
        s = (q[i].to(dtype) @ rows.T) * scale  # [Hq, n]
        lse[i] = torch.logsumexp(s, dim=-1)
        out[i] = torch.softmax(s, dim=-1) @ rows[:, :head_dim_v]
    return (out, lse) if return_lse else out


def quantize_fp8_e4m3(x: torch.Tensor, scale: float) -> torch.Tensor:
    """`x / scale` as float8_e4m3fn the way `paged_kv_append` stores it: x (as float32)
    times the float32 reciprocal of the scale, saturated to +-448, rounded to nearest."""
    inv = torch.tensor(1.0, dtype=torch.float32) / torch.tensor(scale, dtype=torch.float32)
    return (x.float() * inv.to(x.device)).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)


def decode_append_slots(block_tables: torch.Tensor, seq_lens: torch.Tensor, block_size: int,
                        num_blocks: int) -> torch.Tensor:
    """int64 `[B]`: the flat slot of each sequence's new token (position `seq_lens - 1`) as
    `paged_kv_append(..., block_tables=, seq_lens=)` derives it; -1 where the token is
    skipped (seq_lens <= 0, a position past the table, a block index outside the cache)."""
    lens = seq_lens.long()
    pos = (lens - 1).clamp(min=0)
    page = pos // block_size
    inside = (lens > 0) & (page < block_tables.shape[1])
    blk = block_tables.long().gather(1, page.clamp(max=block_tables.shape[1] - 1)[:, None])[:, 0]
    inside &= (blk >= 0) & (blk < num_blocks)
    return torch.where(inside, blk * block_size + pos % block_size, torch.full_like(blk, -1))


def paged_kv_append_reference(k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                              slot_mapping: torch.Tensor | None = None, k_scale: float = 1.0, v_scale: float = 1.0,
                              *, block_tables: torch.Tensor | None = None, seq_lens: torch.Tensor | None = None,
                              cos: torch.Tensor | None = None,
                              sin: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """New caches with token t's K/V `[Hkv, D]` written at flat slot slot_mapping[t]
    (block = slot // block_size, offset = slot % block_size); negative slots skipped.
    Without slot_mapping the slots are `decode_append_slots(block_tables, seq_lens, ...)`.
    With cos/sin, k is rotated first (`apply_rotary` in float32, rounded to k's dtype).
    FP8 caches get `quantize_fp8_e4m3(k, k_scale)` / `(v, v_scale)`."""
    if slot_mapping is None:
        slot_mapping = decode_append_slots(block_tables, seq_lens, k_cache.shape[1], k_cache.shape[0])
    if cos is not None:
        from .fused import apply_rotary
        k = apply_rotary(k.float(), cos.float(), sin.float()).to(k.dtype)
    if k_cache.dtype == torch.float8_e4m3fn:
        k, v = quantize_fp8_e4m3(k, k_scale).view(torch.uint8), quantize_fp8_e4m3(v, v_scale).view(torch.uint8)
        kc, vc = paged_kv_append_reference(k, v, k_cache.view(torch.uint8), v_cache.view(torch.uint8), slot_mapping)
        return kc.view(torch.float8_e4m3fn), vc.view(torch.float8_e4m3fn)
    kc, vc = k_cache.clone(), v_cache.clone()
    nb, bs = kc.shape[0], kc.shape[1]
    flat_k = kc.view(nb * bs, *kc.shape[2:])
    flat_v = vc.view(nb * bs, *vc.shape[2:])
    keep = slot_mapping >= 0
    slots = slot_mapping[keep].long()
    flat_k[slots] = k[keep]
    flat_v[slots] = v[keep]
    return kc, vc


def paged_mla_append_reference(kv_c: torch.Tensor, k_pe: torch.Tensor, kv_cache: torch.Tensor,
                               slot_mapping: torch.Tensor | None = None, *, block_tables: torch.Tensor | None = None,
                               seq_lens: torch.Tensor | None = None) -> torch.Tensor:
    """A new MLA cache with token t's row `[kv_c[t] (512) | k_pe[t] (64)]` at flat slot
    slot_mapping[t] (negative: skipped); without slot_mapping the slots are
    `decode_append_slots(block_tables, seq_lens, ...)`."""
    if slot_mapping is None:
        slot_mapping = decode_append_slots(block_tables, seq_lens, kv_cache.shape[1], kv_cache.shape[0])
    out = kv_cache.clone()
    flat = out.view(kv_cache.shape[0] * kv_cache.shape[1], kv_cache.shape[-1])
    keep = slot_mapping >= 0
    flat[slot_mapping[keep].long()] = torch.cat([kv_c, k_pe], dim=-1)[keep]
    return out


def make_paged_cache(k: torch.Tensor, v: torch.Tensor, block_size: int, extra_blocks: int = 0,
                     generator: torch.Generator | None = None, shuffle: bool = True):
    """Scatter contiguous per-sequence K/V `[B, N, Hkv, D]` into a paged cache.

    Returns `(k_cache, v_cache, block_tables)`: caches `[num_blocks, block_size, Hkv, D]`
    with `num_blocks = B * ceil(N / block_size) + extra_blocks`, and an int32 table
    `[B, ceil(N / block_size)]` whose physical blocks are a random permutation
    (`shuffle`) so no sequence is contiguous in memory. Unused blocks hold copies of
    random rows (never zeros).
    """
    b, n, hkv, d = k.shape
    bps = (n + block_size - 1) // block_size
    nb = b * bps + extra_blocks
    if shuffle:
        perm = torch.randperm(nb, generator=generator, device="cpu")[: b * bps].to(k.device)
    else:
        perm = torch.arange(b * bps, device=k.device)
    table = perm.view(b, bps).to(torch.int32)
    pad = bps * block_size - n
    kp = torch.nn.functional.pad(k, (0, 0, 0, 0, 0, pad)).view(b * bps, block_size, hkv, d)
    vp = torch.nn.functional.pad(v, (0, 0, 0, 0, 0, pad)).view(b * bps, block_size, hkv, d)
    fill = torch.randint(0, max(b * bps, 1), (nb,), generator=generator, device="cpu").to(k.device)
    k_cache = kp[fill].clone()
    v_cache = vp[fill].clone()
    k_cache[table.view(-1).long()] = kp
    v_cache[table.view(-1).long()] = vp
    return k_cache, v_cache, table


def make_paged_problem(lens, num_kv_heads: int, group: int, head_dim: int, block_size: int, dtype: torch.dtype,
                       seed: int, extra_blocks: int = 3, device: str = "cuda"):
    """A random decode problem for tests: `(q, k_cache, v_cache, block_tables, seq_lens)`
    with q `[B, Hkv * group, D]`, one sequence per entry of `lens` (its key count) in a
    shuffled paged cache (`make_paged_cache`), int32 seq_lens. Seeded (CPU generator)."""
    g = torch.Generator().manual_seed(seed)
    b, n = len(lens), max(max(lens), 1)
    k = torch.randn(b, n, num_kv_heads, head_dim, generator=g).to(dtype).to(device)
    v = torch.randn(b, n, num_kv_heads, head_dim, generator=g).to(dtype).to(device)
    q = torch.randn(b, num_kv_heads * group, head_dim, generator=g).to(dtype).to(device)
    k_cache, v_cache, table = make_paged_cache(k, v, block_size, extra_blocks=extra_blocks, generator=g)
    seq_lens = torch.tensor(list(lens), dtype=torch.int32, device=device)
    return q, k_cache, v_cache, table, seq_lens
