"""GPU tests of lightning attention decode against the float64 reference recurrence."""
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cuda_llm_ops import lightning_attention_decode
from cuda_llm_ops.bench.triton_lightning import triton_available, triton_lightning_decode
from cuda_llm_ops.reference import lightning_decode_reference
from cuda_llm_ops.testing import REL_TOL, assert_close, poison_, run_isolated
from conftest import require_op

pytestmark = pytest.mark.cuda

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
DIMS = [96, 64, 128, 80, 33, 1, 17, 66, 127]


@pytest.fixture(autouse=True)
def _need_op():
    require_op("lightning_attention_decode")


def make_inputs(b, h, n, d, e, dtype, seed=0, slope_1d=False, device="cuda"):
    g = torch.Generator(device="cpu").manual_seed(seed)
    q = torch.randn(b, h, n, d, generator=g).to(dtype).to(device)
    k = torch.randn(b, h, n, d, generator=g).to(dtype).to(device)
    v = torch.randn(b, h, n, e, generator=g).to(dtype).to(device)
    kv = torch.randn(b, h, d, e, generator=g).to(device)
    slope = (torch.rand(h, generator=g) * 0.9 + 0.05).to(device)
    if not slope_1d:
        slope = slope.reshape(h, 1, 1)
    return q, k, v, kv, slope


def check_against_reference(q, k, v, kv0, slope, o, new_kv):
    o_ref, kv_ref = lightning_decode_reference(q, k, v, kv0, slope, dtype=torch.float64)
    assert o.dtype == q.dtype and new_kv.dtype == torch.float32
    assert_close(o, o_ref, dtype=q.dtype, what="o")
    assert_close(new_kv, kv_ref, dtype=torch.float32, rel_tol=REL_TOL[torch.float32], what="new_kv")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(b=st.integers(1, 3), h=st.integers(1, 5), n=st.one_of(st.integers(1, 8), st.sampled_from([9, 16, 17, 25])),
       d=st.sampled_from(DIMS),
       e=st.sampled_from(DIMS), dtype=st.sampled_from(DTYPES), in_place=st.booleans(), give_out=st.booleans(),
       slope_1d=st.booleans(), seed=st.integers(0, 2**16))
def test_matches_reference(b, h, n, d, e, dtype, in_place, give_out, slope_1d, seed):
    q, k, v, kv, slope = make_inputs(b, h, n, d, e, dtype, seed, slope_1d)
    kv0 = kv.clone()
    out = poison_(torch.empty(b, h, n, e, dtype=dtype, device="cuda")) if give_out else None
    if in_place:  # kv itself, or a whole view of it (the in-place op either way)
        o, new_kv = lightning_attention_decode(q, k, v, kv, slope, out=out, new_kv=kv if seed % 2 else kv.view_as(kv))
        assert new_kv.data_ptr() == kv.data_ptr()
    else:
        new_kv_buf = poison_(torch.empty_like(kv))
        o, new_kv = lightning_attention_decode(q, k, v, kv, slope, out=out, new_kv=new_kv_buf)
        assert new_kv is new_kv_buf
        assert torch.equal(kv, kv0), "kv changed by an out-of-place call"
    if give_out:
        assert o is out
    check_against_reference(q, k, v, kv0, slope, o, new_kv)


@pytest.mark.parametrize("n", [9, 16, 19])
def test_many_tokens_cross_shared_memory_chunks(n):
    q, k, v, kv, slope = make_inputs(2, 3, n, 96, 96, torch.bfloat16, seed=n)
    o, new_kv = lightning_attention_decode(q, k, v, kv, slope)
    check_against_reference(q, k, v, kv, slope, o, new_kv)


def test_model_shape_decode_and_allocated_outputs():
    q, k, v, kv, slope = make_inputs(4, 64, 1, 96, 96, torch.bfloat16, seed=3)
    o, new_kv = lightning_attention_decode(q, k, v, kv, slope)
    assert o.shape == (4, 64, 1, 96) and new_kv.shape == kv.shape and new_kv.data_ptr() != kv.data_ptr()
    check_against_reference(q, k, v, kv, slope, o, new_kv)


def test_repeated_in_place_steps_equal_one_multi_token_call():
    q, k, v, kv, slope = make_inputs(2, 4, 5, 64, 80, torch.float32, seed=11)
    o_multi, kv_multi = lightning_attention_decode(q, k, v, kv, slope)
    state = kv.clone()
    outs = []
    for t in range(5):
        o_t, state_ret = lightning_attention_decode(q[:, :, t:t + 1].contiguous(), k[:, :, t:t + 1].contiguous(),
                                                    v[:, :, t:t + 1].contiguous(), state, slope, new_kv=state)
        assert state_ret is state
        outs.append(o_t)
    assert_close(torch.cat(outs, dim=2), o_multi, rel_tol=1e-6, what="o")
    assert_close(state, kv_multi, rel_tol=1e-6, what="state")


@pytest.mark.parametrize("offset_floats", [1, 2])
def test_unaligned_state_uses_narrower_loads(offset_floats):
    # e % 4 == 0 but the state starts 4 or 8 bytes past a 16-byte boundary: the
    # launcher must fall back to 1- or 2-float accesses, not fault or misread.
    b, h, n, d, e = 2, 3, 2, 64, 96
    q, k, v, kv, slope = make_inputs(b, h, n, d, e, torch.float16, seed=5)
    buf = torch.empty(kv.numel() + 4, device="cuda")
    kv_view = buf[offset_floats:offset_floats + kv.numel()].view(b, h, d, e)
    kv_view.copy_(kv)
    nbuf = poison_(torch.empty(kv.numel() + 4, device="cuda"))
    new_kv = nbuf[offset_floats:offset_floats + kv.numel()].view(b, h, d, e)
    o, _ = lightning_attention_decode(q, k, v, kv_view, slope, new_kv=new_kv)
    check_against_reference(q, k, v, kv, slope, o, new_kv)
    # the neighbours of the unaligned new_kv stay untouched
    assert torch.isnan(nbuf[:offset_floats]).all() and torch.isnan(nbuf[offset_floats + kv.numel():]).all()


def test_state_grid_edges_not_written_past():
    # e = 33: the second 32-column slice has one live column; neighbouring memory must stay poisoned.
    b, h, n, d, e = 1, 2, 3, 33, 33
    q, k, v, kv, slope = make_inputs(b, h, n, d, e, torch.bfloat16, seed=9)
    nbuf = poison_(torch.empty(kv.numel() + 64, device="cuda"))
    new_kv = nbuf[:kv.numel()].view(b, h, d, e)
    obuf = poison_(torch.empty(b * h * n * e + 64, device="cuda", dtype=torch.bfloat16))
    out = obuf[:b * h * n * e].view(b, h, n, e)
    o, _ = lightning_attention_decode(q, k, v, kv, slope, out=out, new_kv=new_kv)
    check_against_reference(q, k, v, kv, slope, o, new_kv)
    assert torch.isnan(nbuf[kv.numel():]).all() and torch.isnan(obuf[b * h * n * e:]).all()


def _good(dtype=torch.float16, n=1, d=96, e=96):
    q, k, v, kv, slope = make_inputs(2, 4, n, d, e, dtype)
    return dict(q=q, k=k, v=v, kv=kv, slope=slope)


@pytest.mark.parametrize("change, exc, match", [
    (lambda a: a.update(kv=a["kv"].half()), ValueError, "kv must have dtype float32, got float16"),
    (lambda a: a.update(slope=a["slope"].double()), ValueError, "slope must have dtype float32"),
    (lambda a: a.update(k=a["k"].float()), ValueError, "k must have the same dtype as q"),
    (lambda a: a.update(q=a["q"].to(torch.int32)), ValueError, "q must have dtype float32 or float16 or bfloat16"),
    (lambda a: a.update(q=a["q"][0]), ValueError, r"q must be 4-D \[batch, heads, n, d\], got 3-D"),
    (lambda a: a.update(k=a["k"][:, :3]), ValueError, "k must have q's shape"),
    (lambda a: a.update(v=a["v"][:1]), ValueError, "v must have shape"),
    (lambda a: a.update(kv=a["kv"][:, :, :64]), ValueError, r"kv must have shape \(2, 4, 96, 96\)"),
    (lambda a: a.update(slope=a["slope"][:3]), ValueError, r"slope must have shape \(4, 1, 1\) or \(4,\)"),
    (lambda a: a.update(slope=a["slope"].reshape(1, 4, 1, 1)), ValueError, "slope must have shape"),
    (lambda a: a.update(kv=a["kv"].cpu()), ValueError, "kv must be on the same device as q"),
    (lambda a: a.update(q=torch.cat([a["q"], a["q"]], dim=-1)[..., :96]), ValueError, "q must be contiguous"),
    (lambda a: a.update(kv=a["kv"].transpose(2, 3)), ValueError, "kv must be contiguous"),
    (lambda a: a.update(out=torch.empty(2, 4, 1, 96, device="cuda")), ValueError,
     "out must have dtype float16, got float32"),
    (lambda a: a.update(out=torch.empty(2, 4, 2, 96, device="cuda", dtype=torch.float16)), ValueError,
     "out must have shape"),
    (lambda a: a.update(new_kv=torch.empty(2, 4, 96, 96, device="cuda", dtype=torch.float16)), ValueError,
     "new_kv must have dtype float32"),
    (lambda a: a.update(new_kv=torch.empty(2, 4, 96, 95, device="cuda")), ValueError, "new_kv must have kv's shape"),
    (lambda a: a.update(q=a["q"][:, :, :0], k=a["k"][:, :, :0], v=a["v"][:, :, :0]), ValueError,
     "q must have no empty dimension"),
    (lambda a: a.update(q=[1.0]), TypeError, "q must be a torch.Tensor"),
])
def test_bad_inputs_raise(change, exc, match):
    args = _good()
    change(args)
    with pytest.raises(exc, match=match):
        lightning_attention_decode(**args)


def test_head_dim_over_128_rejected():
    args = _good(d=129, e=64)
    with pytest.raises(ValueError, match=r"d \(q's last dim\) and e \(v's last dim\) must be <= 128, got d=129"):
        lightning_attention_decode(**args)
    args = _good(d=64, e=160)
    with pytest.raises(ValueError, match="must be <= 128, got d=64, e=160"):
        lightning_attention_decode(**args)


_DIRECT_OP_ERRORS = r"""
import re, torch, cuda_llm_ops
op = torch.ops.cuda_llm_ops.lightning_attention_decode
def mk(d=96, e=96):
    q = torch.randn(2, 4, 1, d, device="cuda", dtype=torch.float16)
    v = torch.randn(2, 4, 1, e, device="cuda", dtype=torch.float16)
    kv = torch.randn(2, 4, d, e, device="cuda")
    return q, q.clone(), v, kv, torch.rand(4, 1, 1, device="cuda")
def expect(match, *args):
    try:
        op(*args)
    except RuntimeError as exc:
        assert re.search(match, str(exc)), f"message {str(exc)[:300]!r} does not match {match!r}"
        return
    raise AssertionError(f"no error, expected {match!r}")
q, k, v, kv, slope = mk()
out = torch.empty(2, 4, 1, 96, device="cuda", dtype=torch.float16)
expect("out must not overlap v", q, k, v, kv, slope, v, torch.empty_like(kv))
flat = torch.empty(kv.numel() + 8, device="cuda")
kv2 = flat[:kv.numel()].view_as(kv)
expect("new_kv must not overlap kv", q, k, v, kv2, slope, out, flat[4:4 + kv.numel()].view_as(kv))
expect("new_kv must not overlap kv", q, k, v, kv, slope, out, kv)  # the read-only-kv op: in place is the other op
expect("kv must have dtype Float, got Double", q, k, v, kv.double(), slope, out, torch.empty_like(kv))
expect(r"slope must have shape \[4, 1, 1\] or \[4\], got \[3\]", q, k, v, kv, slope[:3, 0, 0], out,
       torch.empty_like(kv))
expect(r"kv must have shape \[2, 4, 96, 96\] = \[batch, heads, d, e\], got \[2, 4, 96, 64\]", q, k, v,
       kv[..., :64].contiguous(), slope, out, torch.empty_like(kv))
expect("q must be contiguous", torch.cat([q, q], -1)[..., :96], k, v, kv, slope, out, torch.empty_like(kv))
q2, k2, v2, kv3, slope2 = mk(d=130, e=8)
expect("d and e must be <= 128, got d=130 e=8", q2, k2, v2, kv3, slope2,
       torch.empty(2, 4, 1, 8, device="cuda", dtype=torch.float16), torch.empty_like(kv3))
print("ALL_RAISED")
"""


def _direct_op_errors_child():
    return dict(code=_DIRECT_OP_ERRORS)


@pytest.mark.isolated(_direct_op_errors_child, ops=("lightning_attention_decode",))
def test_direct_op_call_checks_raise_runtime_errors():
    # The C++ checks keep a direct torch.ops call (no Python validation) from reaching the kernel.
    # Run in a subprocess: a crash while raising from C++ must fail this test, not end the session.
    run_isolated(**_direct_op_errors_child())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_opcheck(dtype):
    q, k, v, kv, slope = make_inputs(2, 3, 2, 64, 80, dtype)
    out = torch.empty(2, 3, 2, 80, dtype=dtype, device="cuda")
    torch.library.opcheck(torch.ops.cuda_llm_ops.lightning_attention_decode.default,
                          (q, k, v, kv, slope, out, torch.empty_like(kv)))
    torch.library.opcheck(torch.ops.cuda_llm_ops.lightning_attention_decode_inplace.default,
                          (q, k, v, kv.clone(), slope, out))


def test_torch_compile_fullgraph():
    q, k, v, kv, slope = make_inputs(2, 4, 3, 96, 96, torch.bfloat16, seed=21)
    kv0 = kv.clone()

    @torch.compile(fullgraph=True)
    def step_out_of_place(q, k, v, kv, slope):
        o, new_kv = lightning_attention_decode(q, k, v, kv, slope)
        return o.float() * 2, new_kv

    @torch.compile(fullgraph=True)
    def step_in_place(q, k, v, kv, slope):
        o, _ = lightning_attention_decode(q, k, v, kv, slope, new_kv=kv)
        return o

    @torch.compile(fullgraph=True)
    def step_into(q, k, v, kv, slope, buf):  # a given new_kv: no data-pointer test under tracing
        o, new_kv = lightning_attention_decode(q, k, v, kv, slope, new_kv=buf)
        return o, new_kv

    o2, new_kv = step_out_of_place(q, k, v, kv, slope)
    o_ref, kv_ref = lightning_decode_reference(q, k, v, kv0, slope, dtype=torch.float64)
    assert torch.equal(kv, kv0)
    buf = poison_(torch.empty_like(kv))
    o3, into = step_into(q, k, v, kv, slope, buf)
    assert_close(o3, o_ref, dtype=torch.bfloat16)
    assert_close(buf, kv_ref, rel_tol=REL_TOL[torch.float32], what="new_kv=buf under torch.compile")
    assert torch.equal(kv, kv0)
    assert_close(o2 / 2, o_ref, dtype=torch.bfloat16)
    assert_close(new_kv, kv_ref, rel_tol=REL_TOL[torch.float32])
    o = step_in_place(q, k, v, kv, slope)
    assert_close(o, o_ref, dtype=torch.bfloat16)
    assert_close(kv, kv_ref, rel_tol=REL_TOL[torch.float32], what="kv updated in place under torch.compile")


@pytest.mark.skipif(not triton_available(), reason="triton not installed")
@pytest.mark.parametrize("b, h, n, d, e, dtype, in_place", [
    (2, 64, 1, 96, 96, torch.bfloat16, False),
    (1, 3, 4, 33, 80, torch.float16, True),
    (3, 2, 2, 128, 64, torch.float32, False),
])
def test_triton_peer_matches_reference(b, h, n, d, e, dtype, in_place):
    q, k, v, kv, slope = make_inputs(b, h, n, d, e, dtype, seed=b + n)
    kv0 = kv.clone()
    out = poison_(torch.empty(b, h, n, e, dtype=dtype, device="cuda"))
    new_kv = kv if in_place else poison_(torch.empty_like(kv))
    o, new_kv = triton_lightning_decode(q, k, v, kv, slope, out=out, new_kv=new_kv)
    check_against_reference(q, k, v, kv0, slope, o, new_kv)


def test_torch_eager_peer_matches_reference():
    from cuda_llm_ops.bench.cases_lightning import lightning_decode_torch_eager

    q, k, v, kv, slope = make_inputs(2, 8, 3, 96, 96, torch.bfloat16, seed=4)
    o, new_kv = lightning_decode_torch_eager(q, k, v, kv, slope)
    o_ref, kv_ref = lightning_decode_reference(q, k, v, kv, slope, dtype=torch.float64)
    assert_close(o, o_ref, dtype=torch.bfloat16)
    assert_close(new_kv, kv_ref, dtype=torch.bfloat16)  # k^T v rounded to bf16 in the peer
