"""CPU tests of MLA decode: the paged reference against contiguous SDPA, and the input
validation's messages (everything but the device, which the GPU tests cover)."""
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from cuda_llm_ops.mla import MLA_HEAD_DIM_QK, MLA_HEAD_DIM_V, validate_paged_mla_inputs
from cuda_llm_ops.reference import decode_append_slots, paged_mla_append_reference, paged_mla_attention_reference


def _problem(lens, hq, bs, four_d, seed, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    need = [max(1, -(-n // bs)) for n in lens]
    nb = sum(need) + 1
    kv = torch.randn(nb, bs, MLA_HEAD_DIM_QK, generator=g, dtype=dtype)
    q = torch.randn(len(lens), hq, MLA_HEAD_DIM_QK, generator=g, dtype=dtype)
    perm = torch.randperm(nb, generator=g).int()
    table = torch.zeros(len(lens), max(need), dtype=torch.int32)
    pos = 0
    for i, k in enumerate(need):
        table[i, :k] = perm[pos:pos + k]
        pos += k
    return q, (kv.unsqueeze(2) if four_d else kv), table, torch.tensor(lens, dtype=torch.int32)


@settings(max_examples=25, deadline=None)
@given(lens=st.lists(st.integers(0, 300), min_size=1, max_size=3), hq=st.sampled_from([1, 3, 16]),
       bs=st.sampled_from([1, 4, 16, 64]), four_d=st.booleans(), scale=st.sampled_from([0.0, 0.1]),
       seed=st.integers(0, 2**16))
def test_mla_reference_matches_contiguous_sdpa(lens, hq, bs, four_d, scale, seed):
    q, kv, table, seq_lens = _problem(lens, hq, bs, four_d, seed)
    out, lse = paged_mla_attention_reference(q, kv, table, seq_lens, scale=scale, dtype=torch.float64,
                                             return_lse=True)
    rows = kv.reshape(kv.shape[0] * bs, MLA_HEAD_DIM_QK)
    s = scale or MLA_HEAD_DIM_QK ** -0.5
    for b, n in enumerate(lens):
        if n == 0:
            assert (out[b] == 0).all() and torch.isneginf(lse[b]).all()
            continue
        idx = (table[b].long()[:, None] * bs + torch.arange(bs)[None, :]).flatten()[:n]
        k = rows[idx]
        ref = F.scaled_dot_product_attention(q[b][None], k[None], k[None, :, :MLA_HEAD_DIM_V], scale=s)[0]
        torch.testing.assert_close(out[b], ref, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(lse[b], torch.logsumexp(q[b] @ k.T * s, -1), rtol=1e-10, atol=1e-10)


def test_validate_paged_mla_inputs_messages():
    q, kv, table, seq_lens = _problem([40, 70], 16, 16, False, 0, torch.float16)
    cases = [
        ((q[..., :512], kv, table, seq_lens), r"q's last dim must be 576"),
        ((q[0], kv, table, seq_lens), r"q must be 3-D"),
        ((q, kv[..., :512], table, seq_lens), r"kv_cache rows must be"),
        ((q, kv[:, :, None].expand(-1, -1, 2, -1), table, seq_lens), r"one latent head"),
        ((q, kv[None, None], table, seq_lens), r"kv_cache must be 3-D .* or 4-D"),
        ((q, kv.bfloat16(), table, seq_lens), r"kv_cache must have the same dtype as q"),
        ((q.float(), kv.float(), table, seq_lens), r"q must have dtype float16 or bfloat16"),
        ((q, kv[:, :12], table, seq_lens), r"power of two"),
        ((q, kv, table.long(), seq_lens), r"block_tables must have dtype int32"),
        ((q, kv, table[:1], seq_lens), r"block_tables must have 2 rows"),
        ((q, kv, table, seq_lens[:1]), r"seq_lens must have 2 entries"),
        ((q, kv, table[:, :0], seq_lens), r"block_tables must not be empty"),
        ((q, kv, table, seq_lens), r"q must be a CUDA tensor"),
    ]
    for args, pattern in cases:
        with pytest.raises(ValueError, match=pattern):
            validate_paged_mla_inputs(*args)
    with pytest.raises(ValueError, match=r"out must have shape \(2, 16, 512\)"):
        validate_paged_mla_inputs(q, kv, table, seq_lens, out=torch.empty(2, 16, 576, dtype=torch.float16))


def test_mla_append_reference_writes_rows_at_slots():
    """Row t lands at slot t (flat block * block_size + offset), skipped slots change nothing,
    and the block-table form resolves each sequence's new position (seq_len 0: skipped)."""
    g = torch.Generator().manual_seed(0)
    cache = torch.randn(3, 4, 1, MLA_HEAD_DIM_QK, generator=g)
    kv_c = torch.randn(3, MLA_HEAD_DIM_V, generator=g)
    k_pe = torch.randn(3, MLA_HEAD_DIM_QK - MLA_HEAD_DIM_V, generator=g)
    out = paged_mla_append_reference(kv_c, k_pe, cache, torch.tensor([5, -1, 11]))
    assert torch.equal(out[1, 1, 0], torch.cat([kv_c[0], k_pe[0]]))
    assert torch.equal(out[2, 3, 0], torch.cat([kv_c[2], k_pe[2]]))
    changed = (out != cache).any(-1).flatten().nonzero().flatten().tolist()
    assert changed == [5, 11]
    table = torch.tensor([[2, 0], [1, 0], [0, 2]], dtype=torch.int32)
    lens = torch.tensor([3, 0, 6], dtype=torch.int32)
    assert decode_append_slots(table, lens, 4, 3).tolist() == [10, -1, 9]
    out = paged_mla_append_reference(kv_c, k_pe, cache, block_tables=table, seq_lens=lens)
    assert torch.equal(out[2, 2, 0], torch.cat([kv_c[0], k_pe[0]]))
    assert torch.equal(out[2, 1, 0], torch.cat([kv_c[2], k_pe[2]]))
    assert torch.equal(out[1], cache[1]) and torch.equal(out[0], cache[0])
