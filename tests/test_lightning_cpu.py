"""CPU tests: the lightning decode reference against closed forms, input
validation of CPU-checkable errors, the benchmark cases and the Triton peer's
lazy import."""
import importlib.util

import pytest
import torch

import cuda_llm_ops
from cuda_llm_ops import _ops
from cuda_llm_ops.bench.cases_lightning import (lightning_cases, lightning_decode_bytes, lightning_decode_torch_eager,
                                                make_lightning_inputs)
from cuda_llm_ops.bench.triton_lightning import triton_unavailable_reason
from cuda_llm_ops.reference import lightning_decode_reference
from cuda_llm_ops.validation import check_contiguous  # noqa: F401  (the shared helpers stay importable)


def _inputs(b, h, n, d, e, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, h, n, d, generator=g, dtype=dtype)
    k = torch.randn(b, h, n, d, generator=g, dtype=dtype)
    v = torch.randn(b, h, n, e, generator=g, dtype=dtype)
    kv = torch.randn(b, h, d, e, generator=g, dtype=dtype)
    slope = torch.rand(h, 1, 1, generator=g, dtype=dtype) + 0.1
    return q, k, v, kv, slope


def _closed_form(q, k, v, kv, slope):
    """kv_t = r^t kv_0 + sum_{s<=t} r^(t-s) k_s^T v_s,  o_t = q_t kv_t, written out per element."""
    b, h, n, d = q.shape
    e = v.shape[-1]
    o = torch.zeros(b, h, n, e, dtype=torch.float64)
    states = []
    for bi in range(b):
        for hi in range(h):
            r = float(torch.exp(-slope.reshape(-1)[hi]))
            for t in range(n):
                st = (r ** (t + 1)) * kv[bi, hi].double()
                for s in range(t + 1):
                    st = st + (r ** (t - s)) * torch.outer(k[bi, hi, s].double(), v[bi, hi, s].double())
                o[bi, hi, t] = q[bi, hi, t].double() @ st
                if t == n - 1:
                    states.append(st)
    return o, torch.stack(states).reshape(b, h, d, e)


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("d, e", [(4, 5), (7, 3), (96, 96)])
def test_reference_matches_closed_form(n, d, e):
    q, k, v, kv, slope = _inputs(2, 3, n, d, e, seed=n * 100 + d)
    o, new_kv = lightning_decode_reference(q, k, v, kv, slope, dtype=torch.float64)
    o_cf, kv_cf = _closed_form(q, k, v, kv, slope)
    assert o.dtype == torch.float64 and new_kv.dtype == torch.float64
    torch.testing.assert_close(o, o_cf, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(new_kv, kv_cf, rtol=1e-10, atol=1e-10)


def test_reference_n2_unrolled_by_hand():
    q, k, v, kv, slope = _inputs(1, 2, 2, 5, 6, seed=7)
    r = torch.exp(-slope)  # [h, 1, 1]
    kv1 = r * kv + k[:, :, 0, :, None] * v[:, :, 0, None, :]
    kv2 = r * kv1 + k[:, :, 1, :, None] * v[:, :, 1, None, :]
    o0 = (q[:, :, 0, :, None] * kv1).sum(-2)
    o1 = (q[:, :, 1, :, None] * kv2).sum(-2)
    o, new_kv = lightning_decode_reference(q, k, v, kv, slope, dtype=torch.float64)
    torch.testing.assert_close(o, torch.stack([o0, o1], dim=2))
    torch.testing.assert_close(new_kv, kv2)


def test_reference_slope_shapes_and_dtypes():
    q, k, v, kv, slope = _inputs(2, 4, 3, 8, 8, seed=1, dtype=torch.float32)
    o3, kv3 = lightning_decode_reference(q.bfloat16(), k.bfloat16(), v.bfloat16(), kv, slope)
    o1, kv1 = lightning_decode_reference(q.bfloat16(), k.bfloat16(), v.bfloat16(), kv, slope.reshape(4))
    assert o3.dtype == torch.float32 and kv3.dtype == torch.float32
    torch.testing.assert_close(o3, o1)
    torch.testing.assert_close(kv3, kv1)
    kv_before = kv.clone()
    lightning_decode_reference(q, k, v, kv, slope)
    assert torch.equal(kv, kv_before), "the reference must not modify its inputs"


def test_seed_articles_eager_code_matches_reference_in_float64():
    q, k, v, kv, slope = _inputs(2, 3, 4, 6, 7, seed=3)
    o, new_kv = lightning_decode_torch_eager(q, k, v, kv.float(), slope.float())
    o_ref, kv_ref = lightning_decode_reference(q, k, v, kv, slope, dtype=torch.float64)
    torch.testing.assert_close(o.double(), o_ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(new_kv.double(), kv_ref, rtol=1e-5, atol=1e-5)


def _cpu_args(**over):
    q, k, v, kv, slope = _inputs(2, 4, 1, 96, 96, dtype=torch.float32)
    args = dict(q=q.half(), k=k.half(), v=v.half(), kv=kv, slope=slope)
    args.update(over)
    return args


@pytest.mark.parametrize("over, exc, match", [
    (dict(kv=torch.zeros(2, 4, 96, 96, dtype=torch.float16)), ValueError, "kv must have dtype float32, got float16"),
    (dict(slope=torch.zeros(4, 1, 1, dtype=torch.float64)), ValueError, "slope must have dtype float32, got float64"),
    (dict(k=torch.zeros(2, 4, 1, 96)), ValueError, r"k must have the same dtype as q \(float16\), got float32"),
    (dict(q=torch.zeros(2, 4, 96, dtype=torch.float16)), ValueError, r"q must be 4-D \[batch, heads, n, d\]"),
    (dict(kv=torch.zeros(2, 4, 96)), ValueError, r"kv must be 4-D \[batch, heads, d, e\]"),
    (dict(k=torch.zeros(2, 4, 1, 64, dtype=torch.float16)), ValueError, r"k must have q's shape \(2, 4, 1, 96\)"),
    (dict(v=torch.zeros(2, 3, 1, 96, dtype=torch.float16)), ValueError, r"v must have shape \(2, 4, 1, e\)"),
    (dict(kv=torch.zeros(2, 4, 96, 64)), ValueError, r"kv must have shape \(2, 4, 96, 96\)"),
    (dict(slope=torch.zeros(4, 1)), ValueError, r"slope must have shape \(4, 1, 1\) or \(4,\), got \(4, 1\)"),
    (dict(slope=torch.zeros(5)), ValueError, r"slope must have shape \(4, 1, 1\) or \(4,\), got \(5,\)"),
    (dict(q=torch.zeros(2, 4, 1, 200, dtype=torch.float16), k=torch.zeros(2, 4, 1, 200, dtype=torch.float16)),
     ValueError, "must be <= 128, got d=200, e=96"),
    (dict(out=torch.zeros(2, 4, 1, 96)), ValueError, "out must have dtype float16, got float32"),
    (dict(out=torch.zeros(2, 4, 2, 96, dtype=torch.float16)), ValueError, r"out must have shape \(2, 4, 1, 96\)"),
    (dict(new_kv=torch.zeros(2, 4, 96, 96, dtype=torch.bfloat16)), ValueError, "new_kv must have dtype float32"),
    (dict(new_kv=torch.zeros(2, 4, 95, 96)), ValueError, "new_kv must have kv's shape"),
    (dict(v=[0.0]), TypeError, "v must be a torch.Tensor, got list"),
    ({}, ValueError, "q must be a CUDA tensor, got device 'cpu'"),
])
def test_validation_errors_on_cpu(over, exc, match):
    with pytest.raises(exc, match=match):
        cuda_llm_ops.validate_lightning_decode_inputs(**_cpu_args(**over))


def test_validation_empty_dimension():
    args = _cpu_args()
    args.update(q=args["q"][:, :, :0], k=args["k"][:, :, :0], v=args["v"][:, :, :0])
    with pytest.raises(ValueError, match="q must have no empty dimension"):
        cuda_llm_ops.validate_lightning_decode_inputs(**args)


def test_validation_grid_past_int32():
    """batch * heads * ceil(e / 32) thread blocks past 2^31 - 1 (meta tensors: no memory)."""
    b, h = 2**16, 2**14
    m = dict(device="meta")
    args = dict(q=torch.empty(b, h, 1, 1, dtype=torch.float16, **m), k=torch.empty(b, h, 1, 1, dtype=torch.float16, **m),
                v=torch.empty(b, h, 1, 33, dtype=torch.float16, **m), kv=torch.empty(b, h, 1, 33, **m),
                slope=torch.empty(h, **m))
    with pytest.raises(ValueError, match=r"batch \* heads \* ceil\(e / 32\) <= 2\^31 - 1 .*got n=1 and 2147483648 blocks"):
        cuda_llm_ops.validate_lightning_decode_inputs(**args)
    args.update(v=args["v"][..., :32], kv=args["kv"][..., :32])  # 2^30 blocks: on to the device check
    with pytest.raises(ValueError, match=r"must be a CUDA tensor"):
        cuda_llm_ops.validate_lightning_decode_inputs(**args)


@pytest.mark.skipif(_ops.kernels_available(), reason="kernels are built here")
def test_op_without_kernels_says_how_to_build():
    with pytest.raises(RuntimeError, match="lightning_attention_decode.*without its CUDA kernels"):
        cuda_llm_ops.lightning_attention_decode(**_cpu_args())


def test_bench_cases_describe_the_model_shape_without_a_gpu():
    cases = lightning_cases(torch.bfloat16, "all", quick=False)
    assert [c.shape["B"] for c in cases] == [1, 16, 64]
    assert [c.shape["B"] for c in lightning_cases(torch.bfloat16, "all", quick=True)] == [1, 16]
    assert lightning_cases(torch.int8, "all", quick=False) == []
    assert lightning_cases(torch.float16, "llama-7b", quick=False) == []
    c = cases[1]
    assert c.shape == {"B": 16, "H": 64, "N": 1, "D": 96, "E": 96} and c.cold_l2
    assert all(x.cuda_graph and x.cold_l2 for x in cases)  # graph replays over rotated (cold) inputs
    state = 16 * 64 * 96 * 96 * 4
    assert c.bytes == 2 * state + 16 * 64 * (2 * 96 + 2 * 96) * 2 + 64 * 4
    assert {i.name for i in c.impls} == {"cuda_llm_ops", "torch-eager", "triton"}
    assert lightning_decode_bytes(1, 1, 1, 1, 1, torch.float32) == 8 + 16 + 4


def test_bench_inputs_and_reference_on_cpu():
    x = make_lightning_inputs(1, 4, 1, 8, 8, torch.float32, device="cpu")
    assert x["slope"].shape == (4, 1, 1) and bool((x["slope"] > 0).all()) and bool((x["slope"] <= 1).all())
    o, kv = lightning_cases(torch.float32, "all", True)[0].reference(x)
    o2, kv2 = lightning_decode_torch_eager(x["q"], x["k"], x["v"], x["kv"], x["slope"])
    torch.testing.assert_close(o, o2)
    torch.testing.assert_close(kv, kv2)


def test_triton_peer_reports_why_it_cannot_run():
    reason = triton_unavailable_reason()
    if importlib.util.find_spec("triton") is None:
        assert reason == "triton is not installed"
    elif not torch.cuda.is_available():
        assert reason == "no CUDA GPU"
    else:
        assert reason is None
