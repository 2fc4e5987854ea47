"""CPU tests (no GPU needed): the attention reference against
F.scaled_dot_product_attention, the input checks that fire before the device
check, and the install-without-kernels path."""
from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F

import cuda_llm_ops
from cuda_llm_ops import _ops, flash_attention, naive_attention, tiled_attention, validate_attention_inputs
from cuda_llm_ops.reference import attention_reference, causal_mask
from cuda_llm_ops.validation import call_or_explain, resolve_scale


def _qkv(b, hq, hkv, nq, nk, d, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(b, hq, nq, d, generator=g, dtype=dtype), torch.randn(b, hkv, nk, d, generator=g, dtype=dtype),
            torch.randn(b, hkv, nk, d, generator=g, dtype=dtype))


@pytest.mark.parametrize("is_causal", [False, True])
@pytest.mark.parametrize("d", [8, 40, 64, 128])
def test_reference_matches_sdpa(is_causal, d):
    q, k, v = _qkv(2, 4, 4, 37, 37, d, dtype=torch.float64, seed=d)
    out = attention_reference(q, k, v, is_causal=is_causal, dtype=torch.float64)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
    torch.testing.assert_close(out, ref, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("ratio", [2, 3, 4, 8])
def test_reference_gqa_matches_repeated_kv(ratio):
    q, k, v = _qkv(2, 2 * ratio, 2, 19, 23, 32, seed=ratio)
    out = attention_reference(q, k, v)
    ref = F.scaled_dot_product_attention(q, k.repeat_interleave(ratio, 1), v.repeat_interleave(ratio, 1))
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("nq,nk", [(5, 17), (17, 5), (1, 9), (9, 1), (16, 16)])
def test_reference_causal_bottom_right(nq, nk):
    q, k, v = _qkv(1, 2, 1, nq, nk, 16, dtype=torch.float64, seed=nq * 100 + nk)
    out = attention_reference(q, k, v, scale=0.5, is_causal=True, dtype=torch.float64)
    mask = causal_mask(nq, nk)
    assert mask.shape == (nq, nk)
    # query i sees key j iff j <= i + nk - nq
    for i in range(nq):
        for j in range(nk):
            assert bool(mask[i, j]) == (j <= i + nk - nq)
    visible = mask.any(dim=1)
    kr, vr = k.repeat_interleave(2, 1), v.repeat_interleave(2, 1)
    ref = F.scaled_dot_product_attention(q[:, :, visible], kr, vr, attn_mask=mask[visible], scale=0.5)
    torch.testing.assert_close(out[:, :, visible], ref, rtol=1e-10, atol=1e-10)
    # rows that see no key (only when nq > nk) are exactly zero
    assert int((~visible).sum()) == max(0, nq - nk)
    assert (out[:, :, ~visible] == 0).all()


def test_reference_float64_and_low_precision_inputs():
    q, k, v = _qkv(1, 2, 2, 8, 8, 16, dtype=torch.float16)
    assert attention_reference(q, k, v).dtype == torch.float32
    out64 = attention_reference(q, k, v, dtype=torch.float64)
    assert out64.dtype == torch.float64
    ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double())
    torch.testing.assert_close(out64, ref, rtol=1e-12, atol=1e-12)


def test_reference_default_scale():
    q, k, v = _qkv(1, 1, 1, 6, 6, 64)
    torch.testing.assert_close(attention_reference(q, k, v), attention_reference(q, k, v, scale=64 ** -0.5))


def test_reference_rejects_bad_gqa():
    q, k, v = _qkv(1, 3, 2, 4, 4, 8)
    with pytest.raises(ValueError, match=r"num_q_heads \(3\) must be a multiple of num_kv_heads \(2\)"):
        attention_reference(q, k, v)


# ---------------------------------------------------------------- validation testable on CPU

def test_validate_wrong_rank():
    q, k, v = _qkv(1, 2, 2, 4, 4, 8)
    with pytest.raises(ValueError, match=r"q must be 4-D \[batch, num_q_heads, seq_len_q, head_dim\], got 3-D with shape \(2, 4, 8\)"):
        validate_attention_inputs(q[0], k, v)
    with pytest.raises(ValueError, match=r"v must be 4-D .* got 5-D"):
        validate_attention_inputs(q, k, v[None])


def test_validate_dtypes():
    q, k, v = _qkv(1, 2, 2, 4, 4, 8)
    with pytest.raises(ValueError, match=r"q must have dtype float32 or float16 or bfloat16, got float64"):
        validate_attention_inputs(q.double(), k, v)
    with pytest.raises(ValueError, match=r"v must have the same dtype as q \(float32\), got bfloat16"):
        validate_attention_inputs(q, k, v.bfloat16())


def test_validate_cpu_tensors():
    q, k, v = _qkv(1, 2, 2, 4, 4, 8)
    with pytest.raises(ValueError, match=r"q must be a CUDA tensor, got device 'cpu'"):
        validate_attention_inputs(q, k, v)


def test_validate_not_a_tensor():
    q, k, v = _qkv(1, 2, 2, 4, 4, 8)
    with pytest.raises(TypeError, match=r"k must be a torch.Tensor, got ndarray"):
        validate_attention_inputs(q, k.numpy(), v)


def test_resolve_scale():
    assert resolve_scale(0.0, 64) == pytest.approx(0.125)
    assert resolve_scale(0.3, 64) == 0.3
    with pytest.raises(ValueError, match=r"scale must be finite and >= 0 \(0 means 1/sqrt\(head_dim\)\), got -0.5"):
        resolve_scale(-0.5, 64)
    for bad in ("nan", "inf", "-inf", "1e+39"):
        with pytest.raises(ValueError, match=rf"scale must be finite and >= 0 .*got {re.escape(str(float(bad)))}"):
            resolve_scale(float(bad), 64)
    assert resolve_scale(1.7e38, 64) == 1.7e38
    # a float32, but scale * log2(e) would not be; and one that float32 rounds to 0 or a denormal
    for bad in (3.4e38, 1e-40, 1e-300):
        with pytest.raises(ValueError, match=rf"scale must be 0 or a normal float32 of at most 1.7e38 .*got {re.escape(str(bad))}$"):
            resolve_scale(bad, 64)
    with pytest.raises(ValueError, match=r"head_dim \(q's last dimension\) must be >= 1, got 0"):
        resolve_scale(0.0, 0)


def test_call_or_explain():
    """The op runs first; when it refuses, the Python checks explain (their error, not
    chained to the op's); when they find nothing, the op's own error goes up."""
    assert call_or_explain(lambda: 7, lambda: pytest.fail("no explaining after a success")) == 7

    def refuses():
        raise RuntimeError("op: k must be 4-D")

    def explains():
        raise ValueError("k must be 4-D [batch, num_kv_heads, seq_len_k, head_dim], got 3-D")

    with pytest.raises(ValueError, match="k must be 4-D") as info:
        call_or_explain(refuses, explains)
    assert info.value.__context__ is None and info.value.__cause__ is None
    with pytest.raises(RuntimeError, match="op: k must be 4-D"):
        call_or_explain(refuses, lambda: None)


# ---------------------------------------------------------------- with and without the kernels

@pytest.mark.skipif(cuda_llm_ops.kernels_available(), reason="the CUDA kernels are built here")
@pytest.mark.parametrize("fn", [naive_attention, tiled_attention, flash_attention])
def test_without_kernels_raises_build_hint(fn):
    q, k, v = _qkv(1, 2, 2, 4, 4, 8)
    # The kernel lookup comes before validation, so even CPU inputs get this message.
    with pytest.raises(RuntimeError, match=r"installed without its CUDA kernels.*pip install --no-build-isolation"):
        fn(q, k, v)
    assert cuda_llm_ops.build_info() == "not built"
    assert not _ops.has_op(fn.__name__)


@pytest.mark.skipif(not cuda_llm_ops.kernels_available(), reason="installed without the CUDA kernels")
def test_with_kernels_ops_are_registered():
    info = cuda_llm_ops.build_info()
    assert info.startswith("areas=")
    if "attention" in info or info == "areas=unknown":
        for name in ("naive_attention", "tiled_attention", "flash_attention"):
            assert _ops.has_op(name), f"{name} missing from a build with {info}"
            assert callable(_ops.op(name))
    with pytest.raises(RuntimeError, match=r"no 'no_such_op' kernel"):
        _ops.op("no_such_op")
