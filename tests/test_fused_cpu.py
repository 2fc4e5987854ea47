"""CPU tests of the fused decode block's reference: against a dense per-sequence float64
implementation written here (its own gather, rotary embedding and SDPA), its in-place cache
append, its rounding points and its input checks."""
import math

import pytest
import torch
import torch.nn.functional as F

from cuda_llm_ops.reference import fused_decode_block_reference, make_fused_decode_problem
from cuda_llm_ops.testing import rel_error


def _rope_at(t, pos, rnd):
    """Llama's rotary embedding of t `[H, D]` at position `pos` as a complex rotation: element
    i pairs with i + D/2 and turns by pos * 10000^(-2i/D) (its cos and sin through `rnd`)."""
    h = t.shape[-1] // 2
    angle = pos * 10000.0 ** (-torch.arange(h, dtype=torch.float64) * 2 / t.shape[-1])
    turn = torch.complex(rnd(angle.cos()), rnd(angle.sin()))
    z = torch.complex(t[:, :h].double(), t[:, h:].double()) * turn
    return torch.cat((z.real, z.imag), -1)


def _dense_block(p, k_cache, v_cache, rope, scale=None, rnd=lambda t: t):
    """One decode step per sequence in float64 on the caches as they were before the call:
    qkv projection, rotary embedding, contiguous K/V gathered token by token from the blocks
    plus the new k/v, SDPA, o_proj. `rnd` rounds where an unfused x-dtype pipeline would
    (and the rotary tables, which come in x's dtype).
    Returns the output `[B, hidden]` and the new (k, v) `[B, Hkv, D]` each."""
    bs, hkv, d = k_cache.shape[1:]
    hq = p["w_qkv"].shape[0] // d - 2 * hkv
    outs, new_k, new_v = [], [], []
    for b in range(p["x"].shape[0]):
        n = int(p["seq_lens"][b])
        qkv = rnd(p["w_qkv"].double() @ p["x"][b].double())
        q, k, v = qkv[:hq * d].view(hq, d), qkv[hq * d:(hq + hkv) * d].view(hkv, d), qkv[(hq + hkv) * d:].view(hkv, d)
        if rope:
            q, k = rnd(_rope_at(q, n - 1, rnd)), rnd(_rope_at(k, n - 1, rnd))
        rows = [(int(p["block_tables"][b, t // bs]), t % bs) for t in range(n - 1)]
        keys = torch.stack([k_cache[blk, off].double() for blk, off in rows] + [k])  # [n, Hkv, D]
        vals = torch.stack([v_cache[blk, off].double() for blk, off in rows] + [v])
        keys = keys.permute(1, 0, 2).repeat_interleave(hq // hkv, 0)  # [Hq, n, D]
        vals = vals.permute(1, 0, 2).repeat_interleave(hq // hkv, 0)
        o = rnd(F.scaled_dot_product_attention(q[:, None], keys, vals, scale=scale)[:, 0])
        outs.append(p["w_o"].double() @ o.reshape(-1))
        new_k.append(k)
        new_v.append(v)
    return torch.stack(outs), torch.stack(new_k), torch.stack(new_v)


def _slots(p):
    """The (block, offset) of each sequence's new token."""
    bs = p["k_cache"].shape[1]
    return [(int(p["block_tables"][b, (n - 1) // bs]), (n - 1) % bs) for b, n in enumerate(p["seq_lens"].tolist())]


# (B, lens, Hq, Hkv, D, block_size): odd hidden, a single key, 17 keys, a whole number of blocks, MHA and GQA 4/1
SHAPES = [
    (1, [17], 2, 2, 64, 8),
    (3, [1, 17, 32], 8, 2, 128, 16),
    (3, [16, 1, 17], 4, 4, 128, 8),
    (1, [1], 4, 1, 64, 16),
]


@pytest.mark.parametrize("B, lens, Hq, Hkv, D, block_size", SHAPES)
def test_reference_matches_dense_float64(B, lens, Hq, Hkv, D, block_size):
    g = torch.Generator().manual_seed(sum(lens) + D)
    p = make_fused_decode_problem(B, 80, Hq, Hkv, D, lens, block_size, torch.float64, "cpu", extra_blocks=3,
                                  generator=g)
    want, _, _ = _dense_block(p, p["k_cache"].clone(), p["v_cache"].clone(), rope=True)
    got = fused_decode_block_reference(**p, dtype=torch.float64)
    assert got.dtype == torch.float64 and got.shape == (B, 80)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
    scaled = make_fused_decode_problem(B, 80, Hq, Hkv, D, lens, block_size, torch.float64, "cpu",
                                       generator=torch.Generator().manual_seed(1))
    want, _, _ = _dense_block(scaled, scaled["k_cache"].clone(), scaled["v_cache"].clone(), rope=True, scale=0.3)
    torch.testing.assert_close(fused_decode_block_reference(**scaled, scale=0.3, dtype=torch.float64), want,
                               rtol=1e-10, atol=1e-10)


def test_new_token_slot_holds_roped_k_and_v_and_nothing_else_changes():
    g = torch.Generator().manual_seed(3)
    p = make_fused_decode_problem(3, 96, 8, 2, 64, [17, 1, 24], 8, torch.float64, "cpu", extra_blocks=2, generator=g)
    assert not torch.equal(p["block_tables"].view(-1), torch.arange(p["block_tables"].numel(), dtype=torch.int32))
    assert bool((p["k_cache"] != 0).all()) and bool((p["v_cache"] != 0).all())
    k_before, v_before = p["k_cache"].clone(), p["v_cache"].clone()
    _, new_k, new_v = _dense_block(p, k_before, v_before, rope=True)
    fused_decode_block_reference(**p, dtype=torch.float64)
    changed = torch.zeros(p["k_cache"].shape[:2], dtype=torch.bool)
    for b, (blk, off) in enumerate(_slots(p)):
        torch.testing.assert_close(p["k_cache"][blk, off], new_k[b], rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(p["v_cache"][blk, off], new_v[b], rtol=1e-12, atol=1e-12)
        changed[blk, off] = True
    assert torch.equal(p["k_cache"][~changed], k_before[~changed])
    assert torch.equal(p["v_cache"][~changed], v_before[~changed])
    k_after = p["k_cache"].clone()
    fused_decode_block_reference(**p, dtype=torch.float64)  # a repeated call writes the same values (benchmarks repeat it)
    assert torch.equal(p["k_cache"], k_after)


def test_without_cos_and_sin_no_rotary_embedding():
    g = torch.Generator().manual_seed(4)
    p = make_fused_decode_problem(2, 64, 4, 2, 64, [17, 5], 16, torch.float64, "cpu", rope=False, generator=g)
    assert p["cos"] is None and p["sin"] is None
    want, new_k, _ = _dense_block(p, p["k_cache"].clone(), p["v_cache"].clone(), rope=False)
    roped, _, _ = _dense_block(p, p["k_cache"].clone(), p["v_cache"].clone(), rope=True)
    assert rel_error(want, roped) > 1e-2  # positions 16 and 4: the rotation matters
    torch.testing.assert_close(fused_decode_block_reference(**p, dtype=torch.float64), want, rtol=1e-10, atol=1e-10)
    blk, off = _slots(p)[0]
    torch.testing.assert_close(p["k_cache"][blk, off], new_k[0])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_rounds_where_an_unfused_pipeline_rounds(dtype):
    """16-bit inputs: equal to the dense implementation that rounds qkv, the roped q/k and o to
    x's dtype (up to an odd last-bit flip), and measurably apart from one that never rounds."""
    g = torch.Generator().manual_seed(5)
    p = make_fused_decode_problem(3, 128, 8, 2, 64, [1, 17, 40], 16, dtype, "cpu", generator=g)
    k0, v0 = p["k_cache"].clone(), p["v_cache"].clone()
    rounded, new_k, _ = _dense_block(p, k0, v0, rope=True, rnd=lambda t: t.to(dtype).double())
    exact, _, _ = _dense_block(p, k0, v0, rope=True)
    got = fused_decode_block_reference(**p, dtype=torch.float64)
    eps = torch.finfo(dtype).eps
    assert rel_error(got, rounded) < eps / 64 and rel_error(got, exact) > eps / 10  # (measured: 0 and ~eps / 4)
    blk, off = _slots(p)[2]
    assert p["k_cache"].dtype == dtype
    assert (p["k_cache"][blk, off].double() - new_k[2]).abs().max() <= eps * new_k[2].abs().max()


def test_rotary_tables_are_llamas():
    p = make_fused_decode_problem(2, 32, 2, 2, 16, [1, 10], 8, torch.float32, "cpu",
                                  generator=torch.Generator().manual_seed(6))
    assert torch.equal(p["cos"][0], torch.ones(16)) and torch.equal(p["sin"][0], torch.zeros(16))
    assert p["cos"][1, 1].item() == pytest.approx(math.cos(9 * 10000 ** (-2 / 16)), rel=1e-6)
    assert torch.equal(p["sin"][1, :8], p["sin"][1, 8:])


@pytest.mark.parametrize("over, match", [
    (dict(seq_lens=torch.tensor([0, 3], dtype=torch.int32)), r"seq_lens must be >= 1"),
    (dict(sin=None), r"cos and sin must be given together"),
    (dict(w_qkv=torch.randn(5 * 16, 32)), r"w_qkv must have \(Hq \+ 2 \* Hkv\) \* D rows"),
    (dict(w_o=torch.randn(32, 16)), r"w_o must be \[hidden, Hq \* D\] = \(32, 32\)"),
])
def test_reference_input_errors(over, match):
    p = make_fused_decode_problem(2, 32, 2, 2, 16, [3, 3], 8, torch.float32, "cpu",
                                  generator=torch.Generator().manual_seed(7))
    with pytest.raises(ValueError, match=match):
        fused_decode_block_reference(**{**p, **over})
