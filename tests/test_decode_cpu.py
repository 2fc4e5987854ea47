"""CPU tests of the decode area: the paged reference against contiguous SDPA, the
append reference, input validation, the CUDA-graph runner's argument checks and the split
heuristic compiled for the host (scripts/split_counts_host.sh)."""
import math
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import cuda_llm_ops as llm
from cuda_llm_ops import _ops
from cuda_llm_ops.decode import validate_paged_attention_inputs
from cuda_llm_ops.reference import attention_reference, paged_attention_reference, paged_kv_append_reference
from cuda_llm_ops.reference.decode import gather_paged_kv, make_paged_cache


def _sdpa_per_sequence(q, k, v, lens, scale):
    """Contiguous SDPA per sequence: q [B, Hq, D], k/v [B, N, Hkv, D]."""
    outs = []
    g = q.shape[1] // k.shape[2]
    for b, n in enumerate(lens):
        if n == 0:
            outs.append(torch.zeros_like(q[b]))
            continue
        kk = k[b, :n].permute(1, 0, 2).repeat_interleave(g, 0)
        vv = v[b, :n].permute(1, 0, 2).repeat_interleave(g, 0)
        outs.append(F.scaled_dot_product_attention(q[b][:, None], kk, vv, scale=scale)[:, 0])
    return torch.stack(outs)


@settings(max_examples=25, deadline=None)
@given(
    lens=st.lists(st.integers(0, 300), min_size=1, max_size=4),
    block_size=st.sampled_from([8, 16, 32, 64, 256]),
    group=st.sampled_from([1, 2, 3, 4, 8]),
    hkv=st.integers(1, 3),
    d=st.sampled_from([8, 64, 96]),
    seed=st.integers(0, 2**16),
)
def test_paged_reference_matches_contiguous_sdpa(lens, block_size, group, hkv, d, seed):
    g = torch.Generator().manual_seed(seed)
    b, n = len(lens), max(max(lens), 1)
    k = torch.randn(b, n, hkv, d, generator=g, dtype=torch.float64)
    v = torch.randn(b, n, hkv, d, generator=g, dtype=torch.float64)
    q = torch.randn(b, hkv * group, d, generator=g, dtype=torch.float64)
    k_cache, v_cache, table = make_paged_cache(k, v, block_size, extra_blocks=3, generator=g)
    seq_lens = torch.tensor(lens, dtype=torch.int32)
    scale = 0.3
    out = paged_attention_reference(q, k_cache, v_cache, table, seq_lens, scale=scale, dtype=torch.float64)
    ref = _sdpa_per_sequence(q, k, v, lens, scale)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)


def test_paged_reference_default_scale_and_shuffle():
    g = torch.Generator().manual_seed(1)
    k = torch.randn(2, 40, 2, 16, generator=g)
    v = torch.randn(2, 40, 2, 16, generator=g)
    k_cache, v_cache, table = make_paged_cache(k, v, 8, generator=g)
    assert not torch.equal(table.view(-1), torch.arange(table.numel(), dtype=torch.int32)), "blocks not shuffled"
    torch.testing.assert_close(gather_paged_kv(k_cache, table[1], 37), k[1, :37])
    q = torch.randn(2, 4, 16, generator=g)
    out = paged_attention_reference(q, k_cache, v_cache, table, torch.tensor([40, 1], dtype=torch.int32))
    ref = _sdpa_per_sequence(q, k, v, [40, 1], 16 ** -0.5)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


@settings(max_examples=25, deadline=None)
@given(
    lens=st.lists(st.integers(0, 200), min_size=1, max_size=3),
    window_left=st.integers(0, 80),
    cap=st.sampled_from([0.0, 0.5, 5.0]),
    block_size=st.sampled_from([8, 16]),
    seed=st.integers(0, 2**16),
)
def test_paged_reference_window_and_soft_cap(lens, window_left, cap, block_size, seed):
    """The sliding window and the soft cap of the paged reference against a per-row
    loop written from their definitions: keys seq_len - 1 - window_left .. seq_len - 1,
    scores cap * tanh(scale * q.k / cap)."""
    g = torch.Generator().manual_seed(seed)
    b, n, hkv, group, d, scale = len(lens), max(max(lens), 1), 2, 3, 16, 0.4
    k = torch.randn(b, n, hkv, d, generator=g, dtype=torch.float64)
    v = torch.randn(b, n, hkv, d, generator=g, dtype=torch.float64)
    q = torch.randn(b, hkv * group, d, generator=g, dtype=torch.float64)
    k_cache, v_cache, table = make_paged_cache(k, v, block_size, generator=g)
    out = paged_attention_reference(q, k_cache, v_cache, table, torch.tensor(lens, dtype=torch.int32), scale=scale,
                                    dtype=torch.float64, window_left=window_left, logits_soft_cap=cap)
    ref = torch.zeros_like(q)
    for i, length in enumerate(lens):
        lo = max(0, length - 1 - window_left)
        for h in range(hkv * group):
            if length == 0:
                continue
            s = (k[i, lo:length, h // group] @ q[i, h]) * scale
            if cap > 0:
                s = cap * torch.tanh(s / cap)
            ref[i, h] = torch.softmax(s, 0) @ v[i, lo:length, h // group]
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)


def test_paged_reference_new_tokens_are_the_last_keys():
    """4-D q (Nq new tokens): row i equals a one-token call on a sequence cut to its first
    seq_len - Nq + i + 1 keys (rows before the sequence's start see nothing: zeros)."""
    g = torch.Generator().manual_seed(9)
    k = torch.randn(2, 50, 2, 16, generator=g, dtype=torch.float64)
    v = torch.randn(2, 50, 2, 16, generator=g, dtype=torch.float64)
    kc, vc, table = make_paged_cache(k, v, 8, generator=g)
    q = torch.randn(2, 4, 5, 16, generator=g, dtype=torch.float64)
    lens = torch.tensor([50, 3], dtype=torch.int32)
    out = paged_attention_reference(q, kc, vc, table, lens, dtype=torch.float64, window_left=20)
    for i in range(5):
        cut = (lens - 5 + i + 1).clamp(min=0).to(torch.int32)
        one = paged_attention_reference(q[:, :, i], kc, vc, table, cut, dtype=torch.float64, window_left=20)
        torch.testing.assert_close(out[:, :, i], one)
    assert torch.all(out[1, :, :2] == 0)  # sequence of 3 keys: its first 2 of 5 new tokens see none
    # is_causal=False: every row sees all its sequence's keys, as a one-token call on the whole sequence
    out = paged_attention_reference(q, kc, vc, table, lens, dtype=torch.float64, is_causal=False)
    for i in range(5):
        torch.testing.assert_close(out[:, :, i], paged_attention_reference(q[:, :, i], kc, vc, table, lens,
                                                                           dtype=torch.float64))


def test_attention_reference_window_rows():
    """Several query rows: row i (at key position i + nk - nq) sees keys from its own
    window start; causal or not, the window bounds them from below."""
    g = torch.Generator().manual_seed(5)
    q = torch.randn(1, 2, 4, 8, generator=g, dtype=torch.float64)
    k = torch.randn(1, 1, 30, 8, generator=g, dtype=torch.float64)
    v = torch.randn(1, 1, 30, 8, generator=g, dtype=torch.float64)
    for causal in (False, True):
        out = attention_reference(q, k, v, is_causal=causal, window_left=5, dtype=torch.float64)
        for i in range(4):
            pos = i + 26
            hi = pos + 1 if causal else 30
            s = q[0, :, i] @ k[0, 0, pos - 5:hi].T / math.sqrt(8)
            torch.testing.assert_close(out[0, :, i], torch.softmax(s, -1) @ v[0, 0, pos - 5:hi])


def test_paged_kv_append_reference():
    g = torch.Generator().manual_seed(2)
    k_cache = torch.randn(4, 8, 2, 16, generator=g)
    v_cache = torch.randn(4, 8, 2, 16, generator=g)
    k = torch.randn(3, 2, 16, generator=g)
    v = torch.randn(3, 2, 16, generator=g)
    slots = torch.tensor([5, -1, 31])
    kc, vc = paged_kv_append_reference(k, v, k_cache, v_cache, slots)
    torch.testing.assert_close(kc[0, 5], k[0])
    torch.testing.assert_close(vc[3, 7], v[2])
    mask = torch.ones(32, dtype=torch.bool)
    mask[[5, 31]] = False
    torch.testing.assert_close(kc.view(32, 2, 16)[mask], k_cache.view(32, 2, 16)[mask])  # the rest untouched



def test_decode_append_slots_and_rotary_reference():
    """Slots at seq_lens - 1 through the table (skips: length 0, a page past the table, a
    block outside the cache); k rotated per token with its own cos/sin row before the write."""
    from cuda_llm_ops.reference import decode_append_slots
    table = torch.tensor([[3, 1], [0, 2], [2, 9], [1, 0]], dtype=torch.int32)
    lens = torch.tensor([9, 0, 12, 17], dtype=torch.int32)  # block size 8: pages 1, -, 1 (block 9), 2 (past)
    assert decode_append_slots(table, lens, 8, 4).tolist() == [1 * 8 + 0, -1, -1, -1]
    lens = torch.tensor([1, 16, 4, 8], dtype=torch.int32)
    assert decode_append_slots(table, lens, 8, 4).tolist() == [3 * 8, 2 * 8 + 7, 2 * 8 + 3, 1 * 8 + 7]
    g = torch.Generator().manual_seed(4)
    kc, vc = torch.zeros(4, 8, 2, 16), torch.zeros(4, 8, 2, 16)
    k, v = torch.randn(4, 2, 16, generator=g), torch.randn(4, 2, 16, generator=g)
    cos, sin = torch.randn(4, 16, generator=g), torch.randn(4, 16, generator=g)
    nk, nv = paged_kv_append_reference(k, v, kc, vc, block_tables=table, seq_lens=lens, cos=cos, sin=sin)
    t, h = 2, 1
    x = k[t, h]
    want = torch.cat((x[:8] * cos[t, :8] - x[8:] * sin[t, :8], x[8:] * cos[t, 8:] + x[:8] * sin[t, 8:]))
    torch.testing.assert_close(nk[2, 3, h], want)
    torch.testing.assert_close(nv[2, 3, h], v[t, h])
    assert nk.abs().sum(dim=(2, 3)).count_nonzero() == 4  # one slot per token, nothing else

def _inputs(**over):
    a = dict(q=torch.randn(2, 8, 64, dtype=torch.float16), k_cache=torch.randn(10, 16, 2, 64, dtype=torch.float16),
             v_cache=torch.randn(10, 16, 2, 64, dtype=torch.float16),
             block_tables=torch.zeros(2, 4, dtype=torch.int32), seq_lens=torch.ones(2, dtype=torch.int32))
    a.update(over)
    return a


@pytest.mark.parametrize("over, match", [
    (dict(q=torch.randn(2, 8, 1, 1, 64, dtype=torch.float16)), r"q must be 3-D .* or 4-D .* got 5-D"),
    (dict(q=torch.randn(2, 8, 0, 64, dtype=torch.float16)), r"num_new_tokens \(q dim 2\) must be in \[1, 65535\], got 0"),
    (dict(q=torch.randn(2, 8, 64)), r"q must have dtype float16 or bfloat16, got float32"),
    (dict(block_tables=torch.zeros(2, 4, dtype=torch.int64)), r"block_tables must have dtype int32, got int64"),
    (dict(seq_lens=torch.ones(2, dtype=torch.int64)), r"seq_lens must have dtype int32"),
    (dict(v_cache=torch.randn(10, 16, 2, 64, dtype=torch.bfloat16)), r"v_cache must have the same dtype as k_cache"),
    (dict(k_cache=torch.randn(10, 16, 2, 64, dtype=torch.bfloat16),
          v_cache=torch.randn(10, 16, 2, 64, dtype=torch.bfloat16)), r"k_cache must have the same dtype as q"),
    (dict(k_cache=torch.randn(10, 16, 2, 64).to(torch.float8_e4m3fn)),
     r"v_cache must have the same dtype as k_cache \(float8_e4m3fn\), got float16"),
    (dict(v_cache=torch.randn(10, 8, 2, 64, dtype=torch.float16)), r"v_cache must have k_cache's shape"),
    (dict(k_cache=torch.randn(10, 16, 3, 64, dtype=torch.float16),
          v_cache=torch.randn(10, 16, 3, 64, dtype=torch.float16)), r"multiple of k_cache's num_kv_heads, got 3"),
    (dict(q=torch.randn(2, 8, 84, dtype=torch.float16), k_cache=torch.randn(10, 16, 2, 84, dtype=torch.float16),
          v_cache=torch.randn(10, 16, 2, 84, dtype=torch.float16)),
     r"head_dim must be a multiple of 8 in \[8, 256\] for the decode kernels, got 84"),
    (dict(q=torch.randn(2, 8, 264, dtype=torch.float16), k_cache=torch.randn(10, 16, 2, 264, dtype=torch.float16),
          v_cache=torch.randn(10, 16, 2, 264, dtype=torch.float16)), r"multiple of 8 in \[8, 256\] .* got 264"),
    (dict(k_cache=torch.randn(10, 12, 2, 64, dtype=torch.float16),
          v_cache=torch.randn(10, 12, 2, 64, dtype=torch.float16)), r"block_size .* power of two, got 12"),
    (dict(q=torch.randn(0, 8, 64, dtype=torch.float16), block_tables=torch.zeros(0, 4, dtype=torch.int32),
          seq_lens=torch.ones(0, dtype=torch.int32)),
     r"q's batch \(dim 0\) must be >= 1, got q shape \(0, 8, 64\)"),
    (dict(k_cache=torch.randn(0, 16, 2, 64, dtype=torch.float16),
          v_cache=torch.randn(0, 16, 2, 64, dtype=torch.float16)),
     r"k_cache must hold at least one block \(num_blocks, dim 0, >= 1\), got shape \(0, 16, 2, 64\)"),
    (dict(block_tables=torch.zeros(3, 4, dtype=torch.int32)), r"block_tables must have 2 rows"),
    (dict(seq_lens=torch.ones(5, dtype=torch.int32)), r"seq_lens must have 2 entries"),
    ({}, r"q must be a CUDA tensor"),
])
def test_validation_errors(over, match):
    with pytest.raises(ValueError, match=match):
        validate_paged_attention_inputs(**_inputs(**over))


def test_validation_out_shape():
    a = _inputs()
    with pytest.raises(ValueError, match=r"out must have q's shape"):
        validate_paged_attention_inputs(**a, out=torch.empty(2, 8, 32, dtype=torch.float16))
    with pytest.raises(TypeError, match=r"seq_lens must be a torch.Tensor"):
        validate_paged_attention_inputs(**dict(a, seq_lens=[1, 2]))


@pytest.mark.skipif(_ops.kernels_available(), reason="kernels are built here")
def test_ops_without_kernels_raise_runtime_error():
    with pytest.raises(RuntimeError, match=r"paged_attention"):
        llm.paged_attention(**_inputs())
    with pytest.raises(RuntimeError, match=r"paged_kv_append"):
        llm.paged_kv_append(torch.randn(1, 2, 64), torch.randn(1, 2, 64), torch.randn(2, 8, 2, 64),
                            torch.randn(2, 8, 2, 64), torch.zeros(1, dtype=torch.int64))


def test_cuda_graph_runner_argument_checks():
    q = torch.randn(3, 4)
    with pytest.raises(ValueError, match=r"buckets must be positive"):
        llm.CUDAGraphRunner(lambda x: x, (q,), (0,), buckets=(0, 2))
    with pytest.raises(ValueError, match=r"batch_args entry 1 must index a tensor"):
        llm.CUDAGraphRunner(lambda x, s: x, (q, 1.0), (1,))
    with pytest.raises(ValueError, match=r"pad_values must have one value"):
        llm.CUDAGraphRunner(lambda x: x, (q,), (0,), pad_values=(0, 1))
    with pytest.raises(ValueError, match=r"batch_args must name at least one batched argument"):
        llm.CUDAGraphRunner(lambda x: x, (q,), ())
    r = llm.CUDAGraphRunner(lambda x: x, (q,), (0,), buckets=(8, 1, 4))
    assert r.buckets == (1, 4, 8)
    assert [r.bucket_for(n) for n in (1, 2, 4, 5, 8)] == [1, 4, 4, 8, 8]
    with pytest.raises(ValueError, match=r"larger than the largest captured bucket \(8\)"):
        r.bucket_for(9)


class _ReplayGraph:
    """A CUDA graph's stand-in on the CPU: replay() reruns the captured call, which (as a
    captured kernel would) writes into the buffers it wrote at capture."""

    def __init__(self, fn):
        self.fn = fn

    def replay(self):
        self.fn()


@pytest.fixture
def fake_capture(monkeypatch):
    """CUDAGraphRunner on the CPU: each capture's memory pool recorded in the returned list."""
    import cuda_llm_ops.graphs as graphs
    captured = []

    def capture(fn, warmup=1, pool=None):
        out = fn()
        captured.append(pool)
        return _ReplayGraph(fn), out

    monkeypatch.setattr(graphs, "capture_graph", capture)
    monkeypatch.setattr(torch.cuda, "graph_pool_handle", lambda: "pool")
    return captured


def test_cuda_graph_runner_replays_pads_and_slices(fake_capture):
    """Bucketing, padding rows, outputs sliced to the call's batch (a tensor, a tuple with a
    non-tensor item, None for an in-place step), and the batched arguments' checks."""
    outs, seen = {}, []

    def step(x, lens, w):  # writes its static output, as a captured kernel does
        out = outs.setdefault(x.shape[0], torch.empty_like(x))
        torch.mul(x, w, out=out)
        seen.append((x.clone(), lens.clone()))
        return out, "tag", lens

    ex = (torch.randn(2, 3), torch.ones(2, dtype=torch.int32), 2.0)
    r = llm.CUDAGraphRunner(step, ex, batch_args=(0, 1), buckets=(1, 4, 8), pad_values=(-7.0, 0))
    x = torch.randn(3, 3)
    lens = torch.tensor([5, 6, 7], dtype=torch.int32)
    y, tag, l_out = r(x, lens)
    assert r.captured == (4,) and tag == "tag"
    xs, ls = seen[0]  # the capture ran on this call's rows, not the example's (stale by now in serving)
    assert torch.equal(xs[:3], x) and (xs[3] == -7.0).all() and ls.tolist() == [5, 6, 7, 0]
    torch.testing.assert_close(y, x * 2.0)
    assert y.shape == (3, 3) and l_out.tolist() == [5, 6, 7]
    xs, ls = seen[-1]  # the replay's inputs: the call's rows, then the padding
    assert torch.equal(xs[:3], x) and (xs[3] == -7.0).all() and ls.tolist() == [5, 6, 7, 0]
    x1 = torch.randn(1, 3)
    y1, _, _ = r(x1, lens[:1])  # a smaller batch in the same bucket's range pads the rows the last call used
    assert r.captured == (1, 4)
    torch.testing.assert_close(y1, x1 * 2.0)
    y2, _, _ = r(x[:2], lens[:2])
    xs, ls = seen[-1]
    assert r.captured == (1, 4) and (xs[2:] == -7.0).all() and ls.tolist() == [5, 6, 0, 0]
    torch.testing.assert_close(y2, x[:2] * 2.0)
    r.capture_all()  # the remaining bucket, one pool for all, on the example's rows
    assert r.captured == (1, 4, 8) and fake_capture == ["pool"] * 3
    xs, ls = seen[-1]
    assert torch.equal(xs[:2], ex[0]) and (xs[2:] == -7.0).all() and ls.tolist() == [1, 1] + [0] * 6
    with pytest.raises(ValueError,
                       match=r"batched argument 1 must be \[3, \*\(\)\] torch.int32, got \(3,\) torch.int64"):
        r(x, lens.long())
    with pytest.raises(ValueError,
                       match=r"batched argument 0 must be on cpu \(the captured buffers' device\), got meta"):
        r(x.to("meta"), lens.to("meta"))
    with pytest.raises(TypeError, match=r"batched argument 1 must be a torch.Tensor, got list"):
        r(x, [5, 6, 7])
    with pytest.raises(ValueError, match=r"batched argument 0 must have the batch as dim 0, got a 0-d tensor"):
        r(torch.tensor(1.0), lens)
    with pytest.raises(ValueError, match=r"expected 2 batched arguments, got 1"):
        r(x)
    with pytest.raises(ValueError, match=r"batch size must be >= 1, got 0"):
        r(x[:0], lens[:0])

    from collections import namedtuple
    Pair = namedtuple("Pair", "out total")
    rn = llm.CUDAGraphRunner(lambda x: Pair(outs.setdefault("n", torch.empty(4, 3)).copy_(x), torch.tensor(7.0)),
                             (torch.zeros(1, 3),), batch_args=(0,), buckets=(4,))
    got = rn(x)
    assert isinstance(got, Pair) and got.out.shape == (3, 3) and float(got.total) == 7.0  # 0-d: as captured
    torch.testing.assert_close(got.out, x)

    cache = torch.zeros(8, 3)

    def append(slots, rows):  # an in-place step: returns None; padding rows carry slot -1
        ok = slots >= 0
        cache.index_copy_(0, slots[ok], rows[ok])

    ra = llm.CUDAGraphRunner(append, (torch.zeros(1, dtype=torch.int64), torch.zeros(1, 3)), batch_args=(0, 1),
                             buckets=(4,), pad_values=(-1, 9.0))
    rows = torch.randn(2, 3)
    assert ra(torch.tensor([6, 1]), rows) is None
    assert torch.equal(cache[6], rows[0]) and torch.equal(cache[1], rows[1])
    assert cache[0].abs().sum() == 0  # the padding rows wrote nothing


def test_cuda_graph_runner_dict_and_scalar_outputs(fake_capture):
    """A step returning a dict (its tensors sliced to the batch) or a 0-d tensor (returned as captured)."""
    def step(x):
        return {"y": x * 3, "n": torch.tensor(x.shape[0]), "name": "s"}

    r = llm.CUDAGraphRunner(step, (torch.randn(4, 2),), batch_args=(0,), buckets=(4,))
    x = torch.randn(3, 2)
    out = r(x)
    torch.testing.assert_close(out["y"], x * 3)
    assert out["n"].item() == 4 and out["name"] == "s"
    r0 = llm.CUDAGraphRunner(lambda x: x.sum(), (torch.randn(4, 2),), batch_args=(0,), buckets=(4,))
    assert r0(x).dim() == 0


def test_decode_constants():
    assert llm.decode.DECODE_KERNEL_HEAD_DIMS == (64, 96, 128, 256)
    kd = llm.decode.decode_kernel_head_dim
    assert [kd(d) for d in (8, 32, 64, 72, 80, 96, 104, 112, 128, 136, 192, 256)] == \
        [64, 64, 64, 96, 96, 96, 128, 128, 128, 256, 256, 256]
    assert [kd(d) for d in (0, 4, 12, 84, 257, 264, -8)] == [0] * 7
    assert math.log2(llm.decode.DECODE_MAX_QUERY_ROWS) == 4


def test_num_splits_validation():
    for bad in (-1, 129, 2.0, True, None):
        with pytest.raises(ValueError, match=r"num_splits must be an int in \[0, 128\] \(0: heuristic\), got "):
            llm.decode._check_num_splits(bad)
    for ok in (0, 1, 128):
        llm.decode._check_num_splits(ok)


@pytest.mark.parametrize("window_left, cap, match", [
    (-2, 0.0, r"window_left must be an int >= -1 \(-1: no sliding window\), got -2"),
    (1.5, 0.0, r"window_left must be an int >= -1"),
    (True, 0.0, r"window_left must be an int >= -1 \(-1: no sliding window\), got True"),
    (-1, -1.0, r"logits_soft_cap must be finite and >= 0 \(0: off\), got -1.0"),
    (-1, float("nan"), r"logits_soft_cap must be finite and >= 0"),
    (-1, float("inf"), r"logits_soft_cap must be finite and >= 0"),
    (-1, 1e-300, r"logits_soft_cap must be 0 or a normal float32 of at most 1.7e38, got 1e-300"),  # float32 0: off
    (-1, 3e38, r"logits_soft_cap must be 0 or a normal float32 of at most 1.7e38, got 3e\+38"),
])
def test_window_and_soft_cap_validation(window_left, cap, match):
    with pytest.raises(ValueError, match=match):
        llm.decode._check_window_and_soft_cap(window_left, cap)
    llm.decode._check_window_and_soft_cap(7, 30.0)  # valid: no error
    assert llm.decode._read_kv_len(4096, 1, -1) == 4096 and llm.decode._read_kv_len(4096, 1, 1023) == 1087
    assert llm.decode._read_kv_len(500, 3, 1023) == 500


@pytest.mark.parametrize("split", [0, 1, 17, 40])
def test_merge_attention_states_is_attention_over_the_union(split):
    """Attention over keys [0, split) and [split, n) merged by their log-sum-exps equals
    attention over all n keys (an empty side, lse = -inf, contributes nothing)."""
    g = torch.Generator().manual_seed(split)
    q = torch.randn(2, 4, 3, 16, generator=g, dtype=torch.float64)
    k = torch.randn(2, 2, 40, 16, generator=g, dtype=torch.float64)
    v = torch.randn(2, 2, 40, 16, generator=g, dtype=torch.float64)
    empty = (torch.zeros_like(q), torch.full(q.shape[:-1], -math.inf, dtype=torch.float64))

    def part(lo, hi):
        if lo == hi:
            return empty
        return attention_reference(q, k[:, :, lo:hi], v[:, :, lo:hi], dtype=torch.float64, logits_soft_cap=3.0,
                                   return_lse=True)

    full, lse_full = part(0, 40)
    (a, lse_a), (b, lse_b) = part(0, split), part(split, 40)
    out, lse = llm.merge_attention_states(a, lse_a, b, lse_b)
    torch.testing.assert_close(out, full)
    torch.testing.assert_close(lse, lse_full)
    none, lse_none = llm.merge_attention_states(torch.zeros_like(q), torch.full(q.shape[:-1], -math.inf),
                                                torch.zeros_like(q), torch.full(q.shape[:-1], -math.inf))
    assert torch.all(none == 0) and torch.all(torch.isneginf(lse_none))


def test_quantize_fp8_e4m3_rounds_and_saturates():
    from cuda_llm_ops.reference import quantize_fp8_e4m3
    x = torch.tensor([0.0, 1.0, 1.0624, 1.0626, 447.0, 460.0, 1e6, -1e6, 2.0 ** -9, 2.0 ** -11, float("nan")])
    got = quantize_fp8_e4m3(x, 1.0).float()
    # e4m3 near 1 has a step of 1/8: 1.0624 rounds down, 1.0626 up; 447 -> 448; past 448 saturates;
    # 2^-9 is the smallest denormal, 2^-11 rounds to 0; NaN stays NaN
    want = torch.tensor([0.0, 1.0, 1.0, 1.125, 448.0, 448.0, 448.0, -448.0, 2.0 ** -9, 0.0, float("nan")])
    assert torch.equal(got[:-1], want[:-1]) and torch.isnan(got[-1])
    assert torch.equal(quantize_fp8_e4m3(torch.tensor([3.0]), 2.0).float(), torch.tensor([1.5]))


def test_paged_references_on_fp8_caches():
    from cuda_llm_ops.reference import quantize_fp8_e4m3
    from cuda_llm_ops.reference.decode import make_paged_problem
    q, kc, vc, table, lens = make_paged_problem([37, 5], 2, 3, 32, 8, torch.float32, 3, device="cpu")
    kc8, vc8 = quantize_fp8_e4m3(kc, 0.01), quantize_fp8_e4m3(vc, 0.02)
    got = paged_attention_reference(q, kc8, vc8, table, lens, k_scale=0.01, v_scale=0.02, dtype=torch.float64)
    want = paged_attention_reference(q, kc8.double() * 0.01, vc8.double() * 0.02, table, lens, dtype=torch.float64)
    torch.testing.assert_close(got, want)
    k = torch.randn(4, 2, 32)
    slots = torch.tensor([3, -1, 40, 0])
    nk, nv = paged_kv_append_reference(k, k * 2, kc8, vc8, slots, 0.01, 0.02)
    assert nk.dtype == torch.float8_e4m3fn
    flat = nk.view(torch.uint8).view(-1, 2, 32)
    assert torch.equal(flat[40], quantize_fp8_e4m3(k[2], 0.01).view(torch.uint8))
    assert torch.equal(flat[1], kc8.view(torch.uint8).view(-1, 2, 32)[1])  # untouched slot


def _element_bytes(t: torch.Tensor) -> list[set[int]]:
    """Each element's byte addresses (brute force, for small tensors)."""
    es, base = t.element_size(), t.data_ptr()
    offsets = torch.zeros((), dtype=torch.long)
    for n, step in zip(t.shape, t.stride()):
        offsets = offsets.unsqueeze(-1) + torch.arange(n) * step
    return [set(range(base + o * es, base + (o + 1) * es)) for o in offsets.flatten().tolist()]


def test_written_tensor_checks_against_brute_force():
    """`check_elements_apart` never passes a tensor two of whose elements share memory and
    passes every permutation, slice and narrow of a dense buffer; `ranges_overlap` is exact for
    nested views (fused qkv layouts: [T, q | k | v heads, D], GPT-NeoX's [T, H, q | k | v],
    Bloom's [T, H, 3, D]) and never calls overlapping views apart. The C++ twins
    (csrc/bindings/checks.h) have the same arithmetic."""
    from cuda_llm_ops.validation import check_elements_apart, ranges_overlap
    gen = torch.Generator().manual_seed(5)
    buf = torch.empty(4096, dtype=torch.float16)

    def pick(lo: int, hi: int) -> int:
        return int(torch.randint(lo, hi + 1, (), generator=gen))

    for _ in range(400):
        shape = [pick(0, 4) for _ in range(pick(1, 3))]
        t = buf.as_strided(shape, [pick(0, 12) for _ in shape], pick(0, 40))
        elems = _element_bytes(t)
        shares = len(set().union(*elems)) < sum(map(len, elems)) if elems else False
        try:
            check_elements_apart(t, "out")
        except ValueError as e:
            assert "out is written and its elements must not share memory" in str(e)
        else:
            assert not shares, (t.shape, t.stride())
    dense = torch.empty(3, 4, 5, 8)
    for view in (dense, dense.permute(2, 0, 3, 1), dense[:, ::2], dense.narrow(2, 1, 3), dense.transpose(1, 2)[1:],
                 dense[:, 1]):
        check_elements_apart(view, "view")

    def truth(a, b):
        return bool(set().union(*_element_bytes(a)) & set().union(*_element_bytes(b)))

    for _ in range(600):  # views of one stride layout, nested: exact; others: never "apart" when they meet
        tokens, heads, d = pick(1, 4), pick(1, 3), 4 * pick(1, 2)
        row = heads * d * pick(1, 3) + 4 * pick(0, 2)
        views = [buf.as_strided((tokens, pick(1, heads), d), (row, d * pick(1, 2), 1), pick(0, 60)) for _ in "ab"]
        nested = True
        if pick(0, 4) == 0:
            views[0] = buf.as_strided((pick(1, 4), pick(1, 4)), (pick(0, 9), pick(0, 3)), pick(0, 50))
            nested = False
        a, b = views
        got = ranges_overlap(a, b)
        assert got or not truth(a, b), (a.shape, a.stride(), a.storage_offset(), b.shape, b.storage_offset())
        if nested and a.stride() == b.stride() and a.shape[1] * a.stride(1) <= row and b.shape[1] * b.stride(1) <= row:
            assert got == truth(a, b), (a.shape, a.stride(), a.storage_offset(), b.shape, b.stride(),
                                        b.storage_offset())
    qkv = torch.empty(3, 8, 64, dtype=torch.float16)  # [T, q | k | v heads, D]
    q, k, v = qkv.split([4, 2, 2], dim=1)
    assert not ranges_overlap(q, k) and not ranges_overlap(q, v) and ranges_overlap(qkv[:, 3:5], k)
    neox = torch.empty(3, 4, 3 * 64, dtype=torch.float16)  # GPT-NeoX: [T, H, q | k | v]
    q, k, v = neox.split(64, dim=-1)
    assert not ranges_overlap(q, k) and not ranges_overlap(q, v) and ranges_overlap(q, neox[..., 32:96])
    bloom = torch.empty(3, 4, 3, 64, dtype=torch.float16)  # Bloom: [T, H, 3, D]
    q, k, v = bloom.unbind(2)
    assert not ranges_overlap(q, k) and not ranges_overlap(k, v) and ranges_overlap(q, bloom[:, 1:3, 0])
    # every "must not overlap" check goes through it: interleaved column blocks pass, shared elements do not
    from cuda_llm_ops.validation import check_out_apart
    check_out_apart(q, [(k, "k"), (v, "v")], out_name="q")
    with pytest.raises(ValueError, match="q must not overlap k"):
        check_out_apart(q, [(bloom[:, :, 0:2].transpose(1, 2)[:, 0], "k")], out_name="q")


# (B, N, Hkv, rows per KV head, Nq, D, paged) -> the count, per part (scripts/split_counts_host.sh
# stand-ins): the H100's own bands (csrc/decode/NOTES.md "Stop 107"), the H200's HBM3e rules
# (stops 77, 86-88) and an sm_80 part without the sm_90 rules
_HOST_SPLIT_CASES = {
    (): [((40, 2048, 8, 4, 1, 64, 1), 1),      # paged D = 64 head pairs in their band: 1 split
         ((34, 16384, 8, 4, 1, 96, 1), 3),     # paged D = 96 past 2 units per SM from 4096 keys: 3
         ((42, 4096, 8, 4, 1, 96, 1), 2),      # ... to 2.5 below 8192 keys
         ((42, 8192, 8, 4, 1, 96, 1), 3),      # ... to 2.7 from there
         ((40, 2048, 8, 4, 1, 64, 0), 3),      # contiguous D = 64 at 2-2.7 below 8192 keys: 3
         ((40, 8192, 8, 4, 1, 64, 0), 2),      # ... the balanced 2 from 8192
         ((9, 8192, 8, 4, 1, 64, 1), 3),       # paged D = 64 / 96 at 0.5-0.67 units per SM: 3
         ((11, 2048, 8, 4, 1, 96, 1), 3),
         ((9, 8192, 8, 4, 1, 64, 0), 3),       # ... contiguous D = 64 from 8192 keys (stop 108)
         ((12, 8192, 8, 4, 1, 96, 1), 1),      # ... not past 2/3
         ((9, 1024, 8, 4, 1, 64, 1), 1),       # ... not below 2048 keys
         ((11, 8192, 8, 4, 1, 128, 1), 3),     # paged D = 128 at 0.5-0.67 units per SM from 8192 keys: 3
         ((11, 8191, 8, 4, 1, 128, 1), 1),
         ((10, 2048, 8, 4, 1, 96, 0), 3),      # contiguous D = 96 from 2048, D = 64 from 8192
         ((10, 8191, 8, 4, 1, 64, 0), 1),
         ((37, 4096, 8, 4, 1, 128, 1), 3),     # D = 128 at 2.1-2.5 units per SM from 4096 keys: 3
         ((37, 4095, 8, 4, 1, 128, 0), 2),     # ... 2 below
         ((9, 8192, 32, 1, 1, 128, 1), 2),     # ... and for one-row units (MHA)
         ((34, 16384, 8, 4, 1, 128, 1), 3),    # ... from just past 2 units per SM (2.06)
         ((33, 16384, 8, 4, 1, 128, 0), 1),    # ... not at exactly 2
         ((44, 8192, 8, 4, 1, 128, 0), 3),     # 2.5-2.8 from 8192 keys: 3
         ((44, 4096, 8, 4, 1, 128, 1), 1),
         ((47, 16384, 8, 4, 1, 128, 1), 2),    # ... 2 past 2.8 to under 3
         ((47, 4096, 8, 4, 1, 128, 1), 1),
         ((10, 16384, 8, 4, 1, 128, 1), 2),    # ... 2 to 5/8 (stop 109)
         ((9, 8192, 8, 4, 1, 128, 1), 2),
         ((6, 16384, 8, 4, 1, 128, 0), 3),     # contiguous D = 128 small grids (TMA 3), 0.33-0.4 units per SM: 3 from 8192 keys
         ((6, 8191, 8, 4, 1, 128, 0), 2),      # ... the generic SMs // units below
         ((7, 2048, 8, 4, 1, 128, 0), 1),      # ... 0.4-0.5: 1
         ((2, 16384, 32, 1, 1, 128, 0), 1),    # ... one-row units (MHA) too
         ((3, 16384, 16, 1, 1, 128, 0), 2),    # ... but not their 3 (MHA 16 heads, 0.36: the generic count)
         ((5, 16384, 8, 4, 1, 128, 0), 3),     # ... below a third the generic SMs // units
         ((9, 16384, 8, 4, 1, 128, 0), 1),
         ((20, 16384, 8, 4, 1, 224, 1), 8),    # paged rows sharing lines, one-tail band: 2048 keys a split to 16 (stop 110)
         ((20, 65536, 8, 4, 1, 224, 1), 16),
         ((20, 12288, 8, 4, 1, 224, 1), 6),
         ((20, 8191, 8, 4, 1, 224, 1), 3),     # ... 3 from 4096 keys below 8192
         ((40, 8192, 8, 4, 1, 224, 1), 4),     # ... past the band from 4096 keys too (stop 111)
         ((64, 6000, 8, 4, 1, 176, 1), 2),
         ((40, 4095, 8, 4, 1, 224, 1), 1),
         ((40, 16384, 8, 4, 1, 192, 1), 1),    # (D = 192 rows are whole lines)
         ((6, 16384, 8, 4, 1, 224, 1), 8),     # ... below one unit per SM from 16384 keys past a wave
         ((6, 16383, 8, 4, 1, 224, 1), 2),     # ... else SMs // units
         ((4, 16384, 8, 4, 1, 224, 1), 4),     # ... also where that cuts splits of 4096 keys or fewer
         ((2, 32768, 8, 4, 1, 224, 1), 8),
         ((4, 32768, 8, 4, 1, 224, 1), 16),
         ((1, 16384, 8, 4, 1, 224, 1), 16),
         ((1, 16384, 8, 4, 1, 128, 1), 16)],   # the issue's B=1/16K GQA: SMs // 8 rows' units
    ("--mem-khz", "3201000"): [((40, 2048, 8, 4, 1, 64, 1), 4),   # HBM3e pairs: the spread tail's pieces
                               ((16, 4096, 8, 4, 1, 64, 1), 2),   # HBM3e small grids: two blocks per SM
                               ((38, 8192, 8, 4, 1, 96, 1), 4),   # HBM3e paged D = 96 from 8192 keys: 4
                               ((9, 8192, 32, 1, 1, 128, 1), 3),  # HBM3e D = 128 past 2 units per SM: 3, MHA too
                               ((9, 16384, 8, 4, 1, 128, 0), 3),  # HBM3e's partial wave (contiguous 0.5-0.7)
                               ((48, 16384, 8, 4, 1, 128, 1), 2),  # HBM3e's wave top
                               ((6, 16384, 8, 4, 1, 128, 0), 2),  # HBM3e contiguous below half: the generic count
                               ((9, 16384, 8, 4, 1, 128, 1), 3),  # HBM3e paged 0.5-0.9: 2 SMs // units
                               ((20, 16384, 8, 4, 1, 224, 1), 3),  # HBM3e paged rows sharing lines: 3
                               ((40, 16384, 8, 4, 1, 224, 1), 1),  # ... 1 past the band
                               ((6, 16384, 8, 4, 1, 224, 1), 2)],  # ... small grids SMs // units
    ("--sms", "108", "--cc", "8.0", "--mem-khz", "1593000"): [((40, 2048, 8, 4, 1, 64, 1), 1),
                                                              ((1, 16384, 8, 4, 1, 128, 1), 13)],
}


@pytest.mark.skipif(shutil.which("nvcc") is None or shutil.which("nm") is None, reason="needs nvcc and nm")
def test_split_counts_host():
    """scripts/split_counts_host.sh lists decode_attention_num_splits on the host for a given
    part: the counts of a few rules per part, without a GPU (the rules' host logic on CI)."""
    script = Path(__file__).resolve().parents[1] / "scripts" / "split_counts_host.sh"
    for args, cases in _HOST_SPLIT_CASES.items():
        rows = "".join(" ".join(map(str, row)) + "\n" for row, _ in cases)
        done = subprocess.run(["bash", str(script), *args], input=rows, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        got = [int(line.rsplit(":", 1)[1]) for line in done.stdout.splitlines()]
        assert got == [want for _, want in cases], (args, done.stdout)


def test_import_leaves_torch_dynamo_unloaded_and_marks_the_constant():
    """`import cuda_llm_ops` does not import torch._dynamo (~0.5 s), yet the head-dim query stays a
    constant to torch.compile: marked as the installed torch's assume_constant_result marks."""
    import subprocess
    import sys
    code = "import sys, cuda_llm_ops; print('torch._dynamo' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "False", r.stdout + r.stderr
    import torch._dynamo
    marked = torch._dynamo.assume_constant_result(lambda: 0)
    attrs = {k for k in vars(marked) if k.startswith("_dynamo")}
    assert attrs == {"_dynamo_marked_constant"} and marked._dynamo_marked_constant is True
    assert llm.decode._head_dim_fits_on._dynamo_marked_constant is True
