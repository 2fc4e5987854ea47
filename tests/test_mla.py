"""GPU tests of MLA decode (`paged_mla_attention`): ragged batches, block sizes, head counts
that are and are not multiples of 16, forced and heuristic splits, out= / workspace / lse,
graph capture and replay, bad indices, the error paths, opcheck and torch.compile."""
import os
import re

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import cuda_llm_ops as llm
from cuda_llm_ops.graphs import capture_graph
from cuda_llm_ops.reference import paged_mla_attention_reference
from cuda_llm_ops.testing import assert_close, kernel_names, poison_
from conftest import require_op

pytestmark = pytest.mark.cuda
DTYPES = [torch.float16, torch.bfloat16]
# The MLA dev knobs (CLO_MLA_STAGES, CLO_MLA_SM90) are read on every call only when set before
# the process's first MLA call (dev_knob, common.cuh): empty values keep the defaults and let
# the tests below switch them in this process (collection imports this before any test runs).
for _knob in ("CLO_MLA_STAGES", "CLO_MLA_SM90"):
    os.environ.setdefault(_knob, "")
DQK, DV = 576, 512


def make_mla_problem(lens, hq, block_size, dtype, seed, four_d=False, extra_blocks=2, spare_cols=0):
    """Random q `[B, hq, 576]` and a latent cache holding each sequence's keys in shuffled
    blocks (ragged lengths; unused table entries point at a real block). `spare_cols` > 0:
    the table has that many more columns than the longest sequence needs."""
    g = torch.Generator().manual_seed(seed)
    need = [max(1, -(-n // block_size)) for n in lens]
    width = max(need) + spare_cols
    nb = sum(need) + extra_blocks
    kv = torch.randn(nb, block_size, DQK, generator=g).to(dtype)
    q = torch.randn(len(lens), hq, DQK, generator=g).to(dtype)
    perm = torch.randperm(nb, generator=g)
    table = torch.zeros(len(lens), width, dtype=torch.int32)
    pos = 0
    for i, k in enumerate(need):
        table[i, :k] = perm[pos:pos + k].int()
        table[i, k:] = perm[-1]
        pos += k
    if four_d:
        kv = kv.unsqueeze(2)
    return (q.cuda(), kv.cuda(), table.cuda(), torch.tensor(lens, dtype=torch.int32).cuda())


@example(lens=[1], hq=16, block_size=16, dtype=torch.float16, num_splits=0, four_d=False, seed=0)
@example(lens=[17, 1000, 1], hq=128, block_size=64, dtype=torch.bfloat16, num_splits=0, four_d=True, seed=1)
# 3 x 5 = 15 rows at 2 splits: the combine's four-row blocks end on a block with one row past the end
@example(lens=[3000, 5, 640], hq=5, block_size=16, dtype=torch.float16, num_splits=2, four_d=False, seed=2)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lens=st.lists(st.one_of(st.integers(1, 3000), st.sampled_from([1, 2, 31, 32, 33, 63, 64, 65, 257])),
                  min_size=1, max_size=4),
    hq=st.sampled_from([1, 5, 16, 17, 32, 40, 64, 96, 128, 192]),
    block_size=st.sampled_from([1, 8, 16, 32, 64, 256]),
    dtype=st.sampled_from(DTYPES),
    num_splits=st.sampled_from([0, 0, 1, 2, 7, 33]),
    four_d=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_paged_mla_matches_reference(lens, hq, block_size, dtype, num_splits, four_d, seed):
    require_op("paged_mla_attention")
    q, kv, table, seq_lens = make_mla_problem(lens, hq, block_size, dtype, seed, four_d)
    out = poison_(torch.empty(q.shape[0], hq, DV, device="cuda", dtype=dtype))
    res, lse = llm.paged_mla_attention(q, kv, table, seq_lens, out=out, num_splits=num_splits, return_lse=True)
    assert res is out
    ref, ref_lse = paged_mla_attention_reference(q, kv, table, seq_lens, return_lse=True)
    what = f"paged_mla_attention lens={lens} hq={hq} bs={block_size} splits={num_splits}"
    assert_close(out, ref, dtype=dtype, what=what)
    torch.testing.assert_close(lse, ref_lse, rtol=2e-3, atol=2e-3, msg=lambda m: f"{what} lse: {m}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_paged_mla_scale_splits_agree_and_strided_q(dtype):
    """A given scale, every split count on one long sequence, and q / out as strided views
    (rows contiguous) give the reference's result."""
    require_op("paged_mla_attention")
    q, kv, table, seq_lens = make_mla_problem([4099, 300], 24, 16, dtype, 3)
    qs = torch.empty(2, 24, DQK + 64, device="cuda", dtype=dtype)[:, :, :DQK]
    qs.copy_(q)
    ref = paged_mla_attention_reference(q, kv, table, seq_lens, scale=0.07)
    for ns in (1, 2, 3, 16, 64, 128, 0):
        big = poison_(torch.empty(2, 24, DV + 32, device="cuda", dtype=dtype))
        out = big[:, :, :DV]
        llm.paged_mla_attention(qs, kv, table, seq_lens, scale=0.07, out=out, num_splits=ns)
        assert_close(out, ref, dtype=dtype, what=f"num_splits={ns}")
        assert torch.isnan(big[:, :, DV:]).all(), "wrote past out's rows"


@pytest.mark.parametrize("hq", [16, 64])  # each kernel (wgmma from 32 heads on sm_90a)
def test_paged_mla_zero_length_heuristic_and_unused_entries(hq):
    """Length-0 sequences give zeros and lse -inf; table entries past a sequence's length
    are never read (garbage there is harmless)."""
    require_op("paged_mla_attention")
    q, kv, table, seq_lens = make_mla_problem([0, 5, 2000, 0], hq, 16, torch.float16, 4, spare_cols=40)
    for i, n in enumerate(seq_lens.tolist()):
        table[i, -(-n // 16):] = 123456789  # past the length: must not be dereferenced
    ref = paged_mla_attention_reference(q, kv, table, seq_lens)
    for ns in (0, 1, 5):  # the heuristic splits here; 1: the unsplit epilogue
        out, lse = llm.paged_mla_attention(q, kv, table, seq_lens, num_splits=ns, return_lse=True,
                                           check_indices=True, out=poison_(torch.empty(*q.shape[:2], DV,
                                                                                       device="cuda").half()),
                                           lse=poison_(torch.empty(q.shape[:2], device="cuda")))
        assert_close(out, ref, dtype=torch.float16, what=f"num_splits={ns}")
        assert (out[0] == 0).all() and (out[3] == 0).all()
        assert torch.isneginf(lse[0]).all() and torch.isneginf(lse[3]).all()


@pytest.mark.parametrize("hq", [20, 100])  # each kernel (wgmma from 32 heads on sm_90a)
@pytest.mark.parametrize("num_splits", [1, 4])
def test_paged_mla_bad_indices_give_nan_and_host_errors(num_splits, hq):
    require_op("paged_mla_attention")
    q, kv, table, seq_lens = make_mla_problem([100, 300, 50], hq, 16, torch.float16, 5)
    cap = table.shape[1] * 16
    for what, mutate, pattern in (
            ("block index", lambda t, s: t.__setitem__((1, 2), kv.shape[0]), r"block_tables\[1, 2\]"),
            ("negative block index", lambda t, s: t.__setitem__((1, 0), -3), r"block_tables\[1, 0\]"),
            ("seq_len past the table", lambda t, s: s.__setitem__(1, cap + 1), r"seq_lens\[1\]"),
            ("negative seq_len", lambda t, s: s.__setitem__(1, -1), r"seq_lens\[1\]")):
        t, s = table.clone(), seq_lens.clone()
        mutate(t, s)
        out, lse = llm.paged_mla_attention(q, kv, t, s, num_splits=num_splits, check_indices=False,
                                           return_lse=True, out=torch.full((*q.shape[:2], DV), 7.0, device="cuda",
                                                                           dtype=q.dtype),
                                           lse=torch.full(q.shape[:2], 7.0, device="cuda"))
        assert torch.isnan(out[1]).all() and torch.isnan(lse[1]).all(), what
        assert torch.isfinite(lse[[0, 2]]).all(), what
        good = paged_mla_attention_reference(q, kv, table, seq_lens)
        assert_close(out[[0, 2]], good[[0, 2]], dtype=torch.float16, what=f"{what}: other sequences")
        with pytest.raises(ValueError, match=pattern):
            llm.paged_mla_attention(q, kv, t, s, num_splits=num_splits)


def test_mla_workspace_serves_narrower_tables_and_smaller_batches():
    """One `mla_workspace(B, Hq, L)` fits every `num_splits=0` call of b <= B sequences whose
    table addresses L' <= L keys (a serving loop reuses one buffer across graph buckets and
    table widths), though the heuristic's count is not monotone in the table's length."""
    require_op("mla_workspace_numel")
    from cuda_llm_ops import _ops
    numel, need = _ops.op("mla_workspace_numel"), _ops.op("decode_workspace_numel")
    for hq in (16, 64, 128):
        for batch, cap in ((32, 4096), (4, 16384)):
            have = int(numel(batch, hq, cap, 0))
            for b in range(1, batch + 1):
                for keys in range(1, cap + 1, 31 if cap <= 4096 else 127):
                    splits = llm.mla_num_splits(b, hq, keys)
                    assert int(need(b, hq, 1, DV, splits)) <= have, f"hq={hq} b={b} keys={keys} splits={splits}"


def test_paged_mla_workspace_and_graphs():
    """One workspace from mla_workspace (its contents poisoned: partials are written before
    they are read) serves back-to-back calls of several shapes, and CUDA-graph replays with
    new q, seq_lens and tables (the combine kernel's PDL edge captured too)."""
    require_op("paged_mla_attention")
    dt = torch.bfloat16
    problems = []
    for i, (lens, hq, ns) in enumerate((([5000], 16, 0), ([300, 4096, 1], 128, 5), ([700] * 9, 20, 2))):
        q, kv, table, seq_lens = make_mla_problem(lens, hq, 16, dt, 20 + i)
        problems.append((q, kv, table, seq_lens, ns, paged_mla_attention_reference(q, kv, table, seq_lens)))
    ws = max((llm.mla_workspace(p[0].shape[0], p[0].shape[1], p[2].shape[1] * 16, p[4]) for p in problems),
             key=lambda w: w.numel())
    poison_(ws)
    for rep in range(3):
        outs = []
        for q, kv, table, seq_lens, ns, _ in problems:
            out = poison_(torch.empty(q.shape[0], q.shape[1], DV, device="cuda", dtype=dt))
            outs.append(llm.paged_mla_attention(q, kv, table, seq_lens, out=out, num_splits=ns, workspace=ws,
                                                check_indices=False))
        for out, p in zip(outs, problems):
            assert_close(out, p[5], dtype=dt, what=f"rep {rep}")

    q, kv, table, seq_lens, ns, _ = problems[1]
    out = torch.empty(q.shape[0], q.shape[1], DV, device="cuda", dtype=dt)
    lse = torch.empty(q.shape[0], q.shape[1], device="cuda")
    graph, _ = capture_graph(lambda: llm.paged_mla_attention(q, kv, table, seq_lens, out=out, num_splits=ns,
                                                             workspace=ws, check_indices=False, lse=lse))
    cap = table.shape[1] * 16
    for trial in range(4):
        q.copy_(torch.randn_like(q))
        seq_lens.copy_(torch.randint(0 if trial else 1, cap + 1, seq_lens.shape, dtype=torch.int32))
        table.copy_(table[torch.randperm(table.shape[0])] if trial % 2 else table.flip(1))
        poison_(out)
        poison_(lse)
        graph.replay()
        ref, ref_lse = paged_mla_attention_reference(q, kv, table, seq_lens, return_lse=True)
        assert_close(out, ref, dtype=dt, what=f"replay {trial}")
        torch.testing.assert_close(lse, ref_lse, rtol=2e-3, atol=2e-3)
    # the heuristic's splits with the helper's workspace, in a graph
    q, kv, table, seq_lens, _, ref = problems[0]
    ws0 = poison_(llm.mla_workspace(1, 16, table.shape[1] * 16))
    assert ws0.numel() > 1, "B=1 at 5000 keys splits"
    out = torch.empty(1, 16, DV, device="cuda", dtype=dt)
    graph, _ = capture_graph(lambda: llm.paged_mla_attention(q, kv, table, seq_lens, out=out, workspace=ws0,
                                                             check_indices=False))
    poison_(out)
    graph.replay()
    assert_close(out, ref, dtype=dt, what="heuristic splits in a graph")


def test_paged_mla_errors():
    require_op("paged_mla_attention")
    q, kv, table, seq_lens = make_mla_problem([40, 70], 16, 16, torch.float16, 6)
    call = llm.paged_mla_attention
    cases = [
        (lambda: call(q[..., :512].contiguous(), kv, table, seq_lens), ValueError, r"q's last dim must be 576"),
        (lambda: call(q, kv[..., :512].contiguous(), table, seq_lens), ValueError, r"kv_cache rows must be"),
        (lambda: call(q, kv.unsqueeze(2).expand(-1, -1, 2, -1).contiguous(), table, seq_lens), ValueError,
         r"one latent head"),
        (lambda: call(q, kv.bfloat16(), table, seq_lens), (TypeError, ValueError), r"kv_cache"),
        (lambda: call(q.float(), kv.float(), table, seq_lens), (TypeError, ValueError), r"q must have dtype"),
        (lambda: call(q, kv[:, :15].contiguous(), table, seq_lens), ValueError, r"power of two"),
        (lambda: call(q, kv, table.long(), seq_lens), (TypeError, ValueError), r"block_tables"),
        (lambda: call(q, kv, table[:1], seq_lens), ValueError, r"block_tables must have 2 rows"),
        (lambda: call(q, kv, table, seq_lens, out=torch.empty(2, 16, 576, device="cuda").half()), ValueError,
         r"out must have shape"),
        (lambda: call(q, kv, table, seq_lens, out=q[..., :512]), ValueError, r"out must not overlap q"),
        (lambda: call(q, kv, table, seq_lens, out=torch.empty(1, 16, 512, device="cuda").half().expand(2, 16, 512)),
         ValueError, r"out is written and its elements must not share memory"),
        (lambda: call(q, kv, table, seq_lens, num_splits=129), ValueError, r"num_splits"),
        (lambda: call(q, kv, table, seq_lens, lse=torch.empty(2, 15, device="cuda")), ValueError, r"lse"),
        (lambda: call(q, kv, table, seq_lens, num_splits=4, workspace=torch.empty(10, device="cuda")), ValueError,
         r"workspace must hold at least"),
        (lambda: call(q, torch.cat([kv, kv])[::2], table, seq_lens), ValueError, r"kv_cache must be contiguous"),
    ]
    for i, (fn, exc, pattern) in enumerate(cases):
        with pytest.raises(exc, match=pattern):
            fn()
    # lse and the workspace are written: never over an input or the output
    lse_on_q = q.view(torch.float32).flatten()[:32].view(2, 16)
    ws = torch.empty(60000, device="cuda")
    out_on_ws = ws[:8192].view(torch.float16).view(2, 16, DV)
    for check in (None, False):
        with pytest.raises(ValueError, match=r"lse must not overlap q"):
            call(q, kv, table, seq_lens, lse=lse_on_q, check_indices=check)
        with pytest.raises(ValueError, match=r"workspace must not overlap out"):
            call(q, kv, table, seq_lens, out=out_on_ws, num_splits=2, workspace=ws, check_indices=check)
    # The raw op refuses the same inputs with a RuntimeError naming the argument.
    op = torch.ops.cuda_llm_ops.paged_mla_attention
    out = torch.empty(2, 16, DV, device="cuda").half()
    with pytest.raises(RuntimeError, match=r"q's last dim must be 576"):
        op(out, q[..., :512].contiguous(), kv, table, seq_lens, 0.1, 0, None)
    with pytest.raises(RuntimeError, match=r"out must be \[2, 16, 512\]"):
        op(out[:, :8], q, kv, table, seq_lens, 0.1, 0, None)
    with pytest.raises(RuntimeError, match=r"workspace must hold at least"):
        op(out, q, kv, table, seq_lens, 0.1, 4, torch.empty(10, device="cuda"))
    with pytest.raises(RuntimeError, match=r"lse must not overlap q"):
        op(out, q, kv, table, seq_lens, 0.1, 1, None, lse_on_q)
    with pytest.raises(RuntimeError, match=r"workspace must not overlap out"):
        op(out_on_ws, q, kv, table, seq_lens, 0.1, 2, ws)
    with pytest.raises(RuntimeError, match=r"out is written and its elements must not share memory"):
        op(out[:1].expand(2, 16, DV), q, kv, table, seq_lens, 0.1, 1, None)


def test_paged_mla_opcheck_and_compile():
    require_op("paged_mla_attention")
    q, kv, table, seq_lens = make_mla_problem([40, 300], 16, 16, torch.float16, 7)
    out = torch.empty(2, 16, DV, device="cuda").half()
    torch.library.opcheck(torch.ops.cuda_llm_ops.paged_mla_attention.default,
                          (out, q, kv, table, seq_lens, 0.05, 3, None))
    torch.library.opcheck(torch.ops.cuda_llm_ops.paged_mla_attention.default,
                          (out, q, kv, table, seq_lens, 0.05, 1, None, torch.empty(2, 16, device="cuda")))

    @torch.compile(fullgraph=True)
    def f(q, kv, table, seq_lens):
        return llm.paged_mla_attention(q * 2, kv, table, seq_lens) + 1

    ref = paged_mla_attention_reference(q * 2, kv, table, seq_lens) + 1
    assert_close(f(q, kv, table, seq_lens), ref, dtype=torch.float16)


@pytest.mark.parametrize("stages", [2, 3])
def test_paged_mla_both_pipelines(monkeypatch, stages):
    """Each pipeline depth (CLO_MLA_STAGES forces it; the launcher picks by grid size) on
    grids below and above one block per SM, split and unsplit."""
    require_op("paged_mla_attention")
    monkeypatch.setenv("CLO_MLA_STAGES", str(stages))
    monkeypatch.setenv("CLO_MLA_SM90", "0")
    for lens, hq, ns in (([33, 1000, 1], 40, 0), ([2000] * 40, 128, 1), ([5000], 16, 0), ([77] * 300, 16, 3)):
        q, kv, table, seq_lens = make_mla_problem(lens, hq, 32, torch.bfloat16, len(lens))
        out = poison_(torch.empty(len(lens), hq, 512, device="cuda", dtype=torch.bfloat16))
        names = kernel_names(lambda: llm.paged_mla_attention(q, kv, table, seq_lens, out=out, num_splits=ns))
        assert re.search(rf"mla_decode_attention_kernel<[^<>,]+, (\(int\))?{stages}>", names), names[:300]
        assert_close(out, paged_mla_attention_reference(q, kv, table, seq_lens), dtype=torch.bfloat16,
                     what=f"stages={stages} lens={lens[:3]} hq={hq} splits={ns}")


def _nan_past_lengths(kv, table, seq_lens):
    """NaN in every cache row no sequence reads: the tails of the last blocks and the spare
    blocks (a kernel must not let them into its sums, not even as 0 x NaN)."""
    used = torch.zeros(kv.shape[0], kv.shape[1], dtype=torch.bool, device=kv.device)
    bs = kv.shape[1]
    for i, n in enumerate(seq_lens.tolist()):
        pos = torch.arange(n, device=kv.device)
        used[table[i, pos // bs].long(), pos % bs] = True
    kv[~used] = float("nan")


@pytest.mark.parametrize("kernel", ["mma", "wgmma"])
def test_paged_mla_both_kernels(monkeypatch, kernel):
    """Each kernel forced (CLO_MLA_SM90; the launcher takes wgmma on Hopper from 32 heads) on
    head counts on both sides of 64 and not multiples of it, every block size class, split
    and unsplit, ragged lengths across tile edges, with the lse, over a cache whose unread
    rows are NaN."""
    require_op("paged_mla_attention")
    if kernel == "wgmma" and torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the wgmma kernel runs on sm_90a only")
    monkeypatch.setenv("CLO_MLA_SM90", "1" if kernel == "wgmma" else "0")
    cases = (([1], 1, 16, 0), ([65, 17, 1], 5, 1, 0), ([3000, 63], 17, 64, 7), ([64, 1000], 40, 256, 2),
             ([129, 2, 700], 64, 16, 1), ([4000], 64, 64, 0), ([1000, 63, 65], 100, 8, 33), ([2500, 1], 128, 64, 0),
             ([300] * 3, 128, 32, 1), ([999], 192, 128, 0), ([5000], 128, 64, 0))
    for i, (lens, hq, bs, ns) in enumerate(cases):
        dtype = (torch.float16, torch.bfloat16)[i % 2]
        q, kv, table, seq_lens = make_mla_problem(lens, hq, bs, dtype, i, four_d=i % 3 == 0)
        _nan_past_lengths(kv.view(kv.shape[0], bs, DQK), table, seq_lens)
        out = poison_(torch.empty(len(lens), hq, 512, device="cuda", dtype=dtype))
        lse = poison_(torch.empty(len(lens), hq, device="cuda"))
        names = kernel_names(lambda: llm.paged_mla_attention(q, kv, table, seq_lens, out=out, num_splits=ns, lse=lse))
        if hq >= 32:  # the forced kernel ran (below 32 heads the launcher may keep mma.sync)
            assert ("mla_decode_attention_sm90_kernel" in names) == (kernel == "wgmma"), names[:300]
        ref, ref_lse = paged_mla_attention_reference(q, kv, table, seq_lens, return_lse=True)
        what = f"{kernel} lens={lens[:3]} hq={hq} bs={bs} splits={ns}"
        assert_close(out, ref, dtype=dtype, what=what)
        torch.testing.assert_close(lse, ref_lse, rtol=2e-3, atol=2e-3, msg=lambda m: f"{what} lse: {m}")


def _latent_rows(t, dtype, seed, width=640):
    """kv_c `[t, 512]` and k_pe `[t, 64]` as column views of one wider projection output
    (token stride `width`), the layout a fused down-projection leaves."""
    g = torch.Generator().manual_seed(seed)
    wide = torch.randn(t, width, generator=g).to(dtype).cuda()
    return wide[:, :DV], wide[:, DV + 16:DQK + 16]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("t, block_size, slot_dtype, four_d", [(1, 1, torch.int64, False), (17, 16, torch.int32, True),
                                                                (300, 64, torch.int64, False)])
def test_paged_mla_append_slots(dtype, t, block_size, slot_dtype, four_d):
    """Shuffled slots with padding (-1) into a poisoned cache: exactly the given rows change,
    to [kv_c | k_pe]; then paged_mla_attention reads what was written."""
    require_op("paged_mla_append")
    kv_c, k_pe = _latent_rows(t, dtype, t)
    nb = -(-2 * t // block_size) + 1
    cache = torch.randn(nb, block_size, DQK, device="cuda").to(dtype)
    if four_d:
        cache = cache.unsqueeze(2)
    g = torch.Generator().manual_seed(t)
    slots = torch.randperm(nb * block_size, generator=g)[:t].to(slot_dtype)
    slots[::5] = -1
    slots = slots.cuda()
    want = llm.reference.paged_mla_append_reference(kv_c, k_pe, cache, slots)
    llm.paged_mla_append(kv_c, k_pe, cache, slots)
    torch.testing.assert_close(cache, want, rtol=0, atol=0)
    # One sequence over the written rows in token order (the cache seen as blocks of one
    # row): attention reads exactly what was appended.
    kept = slots[slots >= 0]
    if kept.numel():
        q = torch.randn(1, 16, DQK, device="cuda").to(dtype)
        table = kept.int()[None]
        lens = torch.tensor([kept.numel()], dtype=torch.int32, device="cuda")
        out = llm.paged_mla_attention(q, cache.view(-1, 1, DQK), table, lens)
        rows = torch.cat([kv_c, k_pe], -1)[(slots >= 0).nonzero()[:, 0]]
        s = (q[0].float() @ rows.float().T) * DQK ** -0.5
        ref = (s.softmax(-1) @ rows[:, :DV].float())[None]
        assert_close(out, ref, dtype=dtype, what="attention after append")


def test_paged_mla_append_decode_mode_and_graphs():
    """block_tables / seq_lens (token t at position seq_lens[t] - 1; seq_len 0 skipped), and a
    CUDA graph captured once, replayed with new rows and new slots."""
    require_op("paged_mla_append")
    dtype, bs, nb = torch.bfloat16, 16, 40
    cache = torch.randn(nb, bs, DQK, device="cuda").to(dtype)
    table = torch.randperm(nb).int().view(4, 10).cuda()
    lens = torch.tensor([1, 0, 160, 37], dtype=torch.int32, device="cuda")
    kv_c, k_pe = _latent_rows(4, dtype, 3)
    want = llm.reference.paged_mla_append_reference(kv_c, k_pe, cache, block_tables=table, seq_lens=lens)
    llm.paged_mla_append(kv_c, k_pe, cache, block_tables=table, seq_lens=lens)
    torch.testing.assert_close(cache, want, rtol=0, atol=0)

    slots = torch.zeros(8, dtype=torch.int64, device="cuda")
    src_c, src_p = torch.zeros(8, DV, device="cuda", dtype=dtype), torch.zeros(8, DQK - DV, device="cuda", dtype=dtype)
    graph, _ = capture_graph(lambda: llm.paged_mla_append(src_c, src_p, cache, slots))
    for seed in range(2):
        new_c, new_p = _latent_rows(8, dtype, 10 + seed)
        src_c.copy_(new_c)
        src_p.copy_(new_p)
        slots.copy_(torch.randperm(nb * bs, generator=torch.Generator().manual_seed(seed))[:8])
        slots[3] = -1
        want = llm.reference.paged_mla_append_reference(src_c, src_p, cache, slots)
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(cache, want, rtol=0, atol=0)


def test_paged_mla_append_errors():
    require_op("paged_mla_append")
    kv_c, k_pe = _latent_rows(4, torch.float16, 0)
    cache = torch.randn(4, 8, DQK, device="cuda").half()
    slots = torch.arange(4, device="cuda")
    with pytest.raises(ValueError, match="past the cache"):
        llm.paged_mla_append(kv_c, k_pe, cache, torch.tensor([0, 1, 32, 2], device="cuda"))
    with pytest.raises(ValueError, match=r"k_pe must be"):
        llm.paged_mla_append(kv_c, k_pe[:, :32], cache, slots)
    with pytest.raises(ValueError, match=r"k_pe"):
        llm.paged_mla_append(kv_c, k_pe[:, None], cache, slots)
    with pytest.raises(ValueError, match=r"kv_c must be"):
        llm.paged_mla_append(kv_c[:, :256], k_pe, cache, slots)
    with pytest.raises((TypeError, ValueError), match=r"kv_cache"):
        llm.paged_mla_append(kv_c, k_pe, cache.bfloat16(), slots)
    with pytest.raises(ValueError, match=r"kv_cache rows"):
        llm.paged_mla_append(kv_c, k_pe, torch.randn(4, 8, 2, DQK, device="cuda").half(), slots)
    with pytest.raises(ValueError, match=r"not both"):
        llm.paged_mla_append(kv_c, k_pe, cache, slots, block_tables=torch.zeros(4, 1, dtype=torch.int32,
                                                                                device="cuda"))
    with pytest.raises(ValueError, match=r"slot_mapping must have 4"):
        llm.paged_mla_append(kv_c, k_pe, cache, slots[:3])
    flat = cache.view(-1, DQK)
    with pytest.raises(ValueError, match=r"kv_cache must not overlap kv_c"):
        llm.paged_mla_append(flat[:4, :DV], k_pe, cache, slots)
    # Past the cache without the host check: the kernel skips the token, writes the others.
    bad = torch.tensor([0, 1, 10**6, -7], device="cuda")
    want = llm.reference.paged_mla_append_reference(kv_c, k_pe, cache, torch.tensor([0, 1, -1, -1], device="cuda"))
    llm.paged_mla_append(kv_c, k_pe, cache, bad, check_slots=False)
    torch.testing.assert_close(cache, want, rtol=0, atol=0)
    # The raw op names the argument too.
    with pytest.raises(RuntimeError, match=r"k_pe must be"):
        torch.ops.cuda_llm_ops.paged_mla_append(kv_c, k_pe[:, :32], cache, slots)
    with pytest.raises(RuntimeError, match=r"slot_mapping must have dtype"):
        torch.ops.cuda_llm_ops.paged_mla_append(kv_c, k_pe, cache, slots.float())
    torch.library.opcheck(torch.ops.cuda_llm_ops.paged_mla_append.default, (kv_c, k_pe, cache, slots))
