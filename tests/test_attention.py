"""GPU tests of naive_attention, tiled_attention and flash_attention against the
float32/float64 reference: every head-dim bucket, GQA ratios, odd lengths,
causal with Nq != Nk (fully masked rows), strided inputs, error paths,
opcheck, torch.compile and flash attention's O(N) memory."""
from __future__ import annotations

import os
import re

import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cuda_llm_ops import flash_attention, naive_attention, tiled_attention
from cuda_llm_ops.attention import NAIVE_MAX_SEQ_LEN_K
from cuda_llm_ops.reference import attention_reference
from cuda_llm_ops.testing import assert_close, kernel_names, randn, run_isolated

from conftest import require_op

pytestmark = pytest.mark.cuda

# The flash kernels' dev knobs (dev_knob, csrc/include/cuda_llm_ops/common.cuh) are read on
# every call only when set before the first call: empty values keep the defaults and let
# the Hopper tests below switch them in this process.
for _knob in ("CUDA_LLM_OPS_FLASH_SM90", "CUDA_LLM_OPS_FLASH_SM90_SCHED", "CUDA_LLM_OPS_FLASH_SM90_PERSISTENT",
              "CUDA_LLM_OPS_FLASH_SM90_TILE192", "CUDA_LLM_OPS_FLASH_FP32_TILE", "CUDA_LLM_OPS_FLASH_SM90_CAUSAL_PAIRS",
              "CUDA_LLM_OPS_FLASH_SM90_EARLY_QK", "CUDA_LLM_OPS_FLASH_SM90_Q_STAGES",
              "CUDA_LLM_OPS_FLASH_SM90_D64_STAGES"):
    os.environ.setdefault(_knob, "")

OPS = {"naive_attention": naive_attention, "tiled_attention": tiled_attention, "flash_attention": flash_attention}
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# One D per bucket of the kernels (tensor-core buckets 32..256 step 32, fp32/tiled
# buckets 64/128/256), plus D that are not a bucket size (8, 40, 72, 136, 200).
HEAD_DIMS = [8, 32, 40, 64, 72, 96, 128, 136, 160, 192, 200, 224, 256]


def _dev_seed(seed: int) -> torch.Generator:
    return torch.Generator(device="cuda").manual_seed(seed)


def _inputs(b, hq, hkv, nq, nk, d, dtype, seed=0, strided=False):
    g = _dev_seed(seed)
    if strided:  # [B, N, H, D] contiguous, viewed as [B, H, N, D]: the layout of a fused QKV projection
        q = randn(b, nq, hq, d, dtype=dtype, generator=g).transpose(1, 2)
        k = randn(b, nk, hkv, d, dtype=dtype, generator=g).transpose(1, 2)
        v = randn(b, nk, hkv, d, dtype=dtype, generator=g).transpose(1, 2)
    else:
        q = randn(b, hq, nq, d, dtype=dtype, generator=g)
        k = randn(b, hkv, nk, d, dtype=dtype, generator=g)
        v = randn(b, hkv, nk, d, dtype=dtype, generator=g)
    return q, k, v


def _call_poisoned(fn, q, k, v, **kw):
    """The op returns a new tensor, so poison the memory it will most likely get:
    a NaN-filled block of the output's size, freed to the caching allocator just before."""
    bait = torch.empty(q.shape, dtype=q.dtype, device=q.device).fill_(float("nan"))
    del bait
    return fn(q, k, v, **kw)


def _check(name, q, k, v, scale=0.0, is_causal=False):
    require_op(name)
    out = _call_poisoned(OPS[name], q, k, v, scale=scale, is_causal=is_causal)
    ref_dtype = torch.float64 if q.dtype == torch.float32 else torch.float32
    ref = attention_reference(q, k, v, scale=scale, is_causal=is_causal, dtype=ref_dtype)
    assert out.dtype == q.dtype and out.is_contiguous() and out.device == q.device
    assert not torch.isnan(out).any(), f"{name}: NaN in output"
    assert_close(out, ref, dtype=q.dtype, what=f"{name} {tuple(q.shape)} k {tuple(k.shape)} causal={is_causal}")
    return out


# ---------------------------------------------------------------- every bucket, fixed shapes

@pytest.mark.parametrize("name", list(OPS))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("d", HEAD_DIMS)
@pytest.mark.parametrize("is_causal", [False, True])
def test_head_dim_buckets(name, dtype, d, is_causal):
    # Odd lengths across tile edges; Nq > Nk so causal has rows that see no key.
    q, k, v = _inputs(2, 4, 2, 131, 77, d, dtype, seed=d)
    out = _check(name, q, k, v, is_causal=is_causal)
    if is_causal:  # rows i < Nq - Nk see no key and must be exactly zero
        assert (out[:, :, : 131 - 77] == 0).all()


@pytest.mark.parametrize("name", list(OPS))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("is_causal", [False, True])
def test_long_keys_and_more_queries(name, dtype, is_causal):
    q, k, v = _inputs(1, 2, 1, 300, 2500, 128, dtype, seed=5)
    _check(name, q, k, v, is_causal=is_causal)


# ---------------------------------------------------------------- Hypothesis sweep

_lengths = st.one_of(st.integers(1, 1024), st.sampled_from([1, 2, 15, 16, 17, 63, 64, 65, 127, 129, 1000, 1023, 1024]))


@st.composite
def attention_cases(draw):
    b = draw(st.integers(1, 4))
    hkv = draw(st.integers(1, 8))
    ratio = draw(st.sampled_from([1, 2, 3, 4, 8]))
    nq, nk = draw(_lengths), draw(_lengths)
    d = draw(st.sampled_from([8, 16, 32, 40, 64, 72, 96, 128, 160, 192, 224, 256]))
    dtype = draw(st.sampled_from(DTYPES))
    causal = draw(st.booleans())
    # Keep one example's reference (B*Hq*Nq*Nk fp32 scores) small enough to stay fast.
    while b * hkv * ratio * nq * nk > 2**25 and b * hkv > 1:
        if b > 1:
            b -= 1
        else:
            hkv = max(1, hkv // 2)
    return b, hkv * ratio, hkv, nq, nk, d, dtype, causal


def _hypothesis_case(name, case, seed):
    b, hq, hkv, nq, nk, d, dtype, causal = case
    q, k, v = _inputs(b, hq, hkv, nq, nk, d, dtype, seed=seed)
    _check(name, q, k, v, is_causal=causal)


_hyp = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)


@pytest.mark.parametrize("name", list(OPS))
@_hyp
@given(case=attention_cases(), seed=st.integers(0, 2**16))
@example(case=(1, 8, 1, 1024, 1024, 256, torch.bfloat16, True), seed=1)
@example(case=(4, 24, 8, 1, 1023, 40, torch.float16, True), seed=2)
@example(case=(3, 3, 1, 1000, 17, 72, torch.float32, True), seed=3)
def test_matches_reference(name, case, seed):
    _hypothesis_case(name, case, seed)


# ---------------------------------------------------------------- layouts, scale, consistency

@pytest.mark.parametrize("name", list(OPS))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_strided_inputs(name, dtype):
    q, k, v = _inputs(2, 8, 2, 70, 90, 64, dtype, seed=11, strided=True)
    assert not q.is_contiguous()
    out = _check(name, q, k, v, is_causal=True)
    ref_contig = OPS[name](q.contiguous(), k.contiguous(), v.contiguous(), is_causal=True)
    torch.testing.assert_close(out, ref_contig, rtol=0, atol=0)


@pytest.mark.parametrize("name", list(OPS))
def test_explicit_scale(name):
    q, k, v = _inputs(1, 2, 2, 33, 45, 64, torch.float16, seed=12)
    _check(name, q, k, v, scale=0.3)
    _check(name, q, k, v, scale=0.3, is_causal=True)


@pytest.mark.parametrize("name", list(OPS))
def test_large_scores_stay_finite(name):
    # Large logits: exp must be taken against the running max, never overflow.
    q, k, v = _inputs(1, 2, 1, 64, 200, 128, torch.float16, seed=13)
    _check(name, q * 8, k * 8, v)


def test_naive_at_its_length_limit():
    require_op("naive_attention")
    q, k, v = _inputs(1, 1, 1, 2, NAIVE_MAX_SEQ_LEN_K, 64, torch.float16, seed=14)
    _check("naive_attention", q, k, v, is_causal=True)


def _naive_limit_child():
    return dict(code="""import pytest, torch, cuda_llm_ops

q = torch.randn(1, 1, 1, 64, device="cuda", dtype=torch.float16)
k = torch.randn(1, 1, 32769, 64, device="cuda", dtype=torch.float16)
with pytest.raises(RuntimeError, match="NAIVE_MAX_SEQ_LEN_K"):  # the op itself refuses too
    torch.ops.cuda_llm_ops.naive_attention(q, k, k, 0.125, False)
""")


@pytest.mark.isolated(_naive_limit_child, ops=("naive_attention",))
def test_naive_length_limit_error():
    require_op("naive_attention")
    q = torch.randn(1, 1, 1, 64, device="cuda", dtype=torch.float16)
    k = torch.randn(1, 1, NAIVE_MAX_SEQ_LEN_K + 1, 64, device="cuda", dtype=torch.float16)
    with pytest.raises(ValueError, match=rf"seq_len_k <= {NAIVE_MAX_SEQ_LEN_K}, got {NAIVE_MAX_SEQ_LEN_K + 1}"):
        naive_attention(q, k, k)
    run_isolated(**_naive_limit_child())


def _small_smem_child():
    """A GPU with 99 KB of shared memory per block (sm_86/89/120; the CLO_SMEM_LIMIT knob makes
    this one such a GPU, read once per process)."""
    # CUDA_LLM_OPS_FLASH_SM90=0: fp16 flash on the mma.sync kernels such a GPU runs (not Hopper's wgmma one)
    return dict(env=dict(CLO_SMEM_LIMIT=str(99 * 1024), CUDA_LLM_OPS_FLASH_SM90="0"),
                code="""import torch, cuda_llm_ops as llm
from cuda_llm_ops.reference import attention_reference
from cuda_llm_ops.testing import assert_close, kernel_names

def randn(*shape, dtype=torch.float16):
    return torch.randn(*shape, device="cuda", dtype=torch.float32).to(dtype)

def refused(fn, want):
    try:
        fn()
    except RuntimeError as exc:
        assert want in str(exc), (want, str(exc)[:400])
    else:
        raise AssertionError("ran: " + want)

# tiled: head_dim 248 fits (99840 bytes), 256 (102912) is refused by name
q, k, v = randn(1, 2, 40, 248), randn(1, 2, 70, 248), randn(1, 2, 70, 248)
assert_close(llm.tiled_attention(q, k, v, is_causal=True), attention_reference(q, k, v, is_causal=True),
             dtype=torch.float16, what="tiled D=248 at 99 KB")
q, k = randn(1, 2, 40, 256), randn(1, 2, 70, 256)
refused(lambda: llm.tiled_attention(q, k, k), "tiled_attention at head_dim 256 needs 102912 bytes of shared memory "
        "per block, more than this GPU allows (101376 bytes); use flash_attention")
assert_close(llm.flash_attention(q, k, k), attention_reference(q, k, k), dtype=torch.float16,
             what="flash D=256 at 99 KB")  # the mma.sync D = 256 kernel needs exactly 101376 bytes
names = kernel_names(lambda: llm.flash_attention(q, k, k))
assert "flash_attention_mma_kernel" in names and "sm90" not in names, names
# naive: one score per key; at head_dim 64, 25248 keys fill the 101376 bytes, 25249 are refused
q, k, v = randn(1, 1, 1, 64), randn(1, 1, 25249, 64), randn(1, 1, 25249, 64)
assert_close(llm.naive_attention(q, k[:, :, :25248], v[:, :, :25248]),
             attention_reference(q, k[:, :, :25248], v[:, :, :25248]), dtype=torch.float16, what="naive 25248 keys")
refused(lambda: llm.naive_attention(q, k, v), "naive_attention keeps one fp32 score per key in shared memory: "
        "seq_len_k 25249 at head_dim 64 needs 101380 bytes per block, more than this GPU allows (101376 bytes: "
        "seq_len_k <= 25248 here); use flash_attention")
refused(lambda: torch.ops.cuda_llm_ops.naive_attention(q, k, v, 0.125, False), "seq_len_k <= 25248 here")
# fp32 flash on the compact tile that 99 KB holds (54-79 KB), still fp32-accurate
q, k = randn(1, 2, 33, 256, dtype=torch.float32), randn(1, 2, 90, 256, dtype=torch.float32)
assert_close(llm.flash_attention(q, k, k, is_causal=True), attention_reference(q, k, k, is_causal=True),
             dtype=torch.float32, what="flash fp32 D=256 at 99 KB")
""")


@pytest.mark.isolated(_small_smem_child, ops=("naive_attention", "tiled_attention", "flash_attention"))
def test_small_smem_gpu_refusals():
    """On a 99-KB GPU the CUDA-core kernels refuse what their shared memory cannot hold with a
    message naming the size (naive: seq_len_k past ~25K keys; tiled: head_dim 256), instead of
    a launch failure; what fits still runs right."""
    for op in ("naive_attention", "tiled_attention", "flash_attention"):
        require_op(op)
    run_isolated(**_small_smem_child())


# ---------------------------------------------------------------- validation errors

def _good(dtype=torch.float16):
    return _inputs(2, 4, 2, 16, 24, 64, dtype)


def _bad_cases():
    q, k, v = _good()
    wide = torch.randn(2, 4, 16, 128, device="cuda", dtype=torch.float16)
    flat = torch.randn(2 * 4 * 16 * 64 + 8, device="cuda", dtype=torch.float16)
    return [
        ("rank", (q[0], k, v), ValueError, r"q must be 4-D \[batch, num_q_heads, seq_len_q, head_dim\], got 3-D"),
        ("rank_k", (q, k[0], v), ValueError, r"k must be 4-D .* got 3-D"),
        ("int_dtype", (q.to(torch.int32), k, v), ValueError, r"q must have dtype float32 or float16 or bfloat16, got int32"),
        ("dtype_mismatch", (q, k.float(), v), ValueError, r"k must have the same dtype as q \(float16\), got float32"),
        ("cpu", (q.cpu(), k.cpu(), v.cpu()), ValueError, r"q must be a CUDA tensor, got device 'cpu'"),
        ("device_mismatch", (q, k.cpu(), v), ValueError, r"k must be on the same device as q"),
        ("empty", (q[:, :, :0], k, v), ValueError, r"q must have no empty dimension .* got shape \(2, 4, 0, 64\)"),
        ("kv_shape", (q, k, v[:, :, :5]), ValueError, r"k and v must have the same shape"),
        ("batch", (q, k[:1], v[:1]), ValueError, r"k batch size \(dim 0\) must match q's \(2\), got 1"),
        ("head_dim_mismatch", (q, k[..., :32], v[..., :32]), ValueError, r"k head_dim \(dim 3\) must match q's \(64\), got 32"),
        ("gqa", (q[:, :3], k, v), ValueError, r"q's number of heads \(3\) must be a multiple of k/v's number of heads, got num_kv_heads=2"),
        ("head_dim_12", (q[..., :12], k[..., :12], v[..., :12]), ValueError, r"head_dim must be a multiple of 8 between 8 and 256, got 12"),
        ("head_dim_264", tuple(torch.randn(1, 1, 4, 264, device="cuda", dtype=torch.float16) for _ in range(3)),
         ValueError, r"head_dim must be a multiple of 8 between 8 and 256, got 264"),
        ("last_dim_strided", (wide[..., ::2], k, v), ValueError, r"q must have a contiguous last dimension and 16-byte aligned rows"),
        ("misaligned", (flat[1:1 + q.numel()].view(q.shape), k, v), ValueError, r"q must have a contiguous last dimension .* data_ptr % 16 = 2"),
        ("not_tensor", ([1.0], k, v), TypeError, r"q must be a torch.Tensor, got list"),
    ]


@pytest.mark.parametrize("name", list(OPS))
@pytest.mark.parametrize("case", range(16))
def test_validation_errors(name, case):
    require_op(name)
    cases = _bad_cases()
    assert len(cases) == 16
    _, args, exc, pattern = cases[case]
    with pytest.raises(exc, match=pattern):
        OPS[name](*args)


@pytest.mark.parametrize("name", list(OPS))
def test_bad_scale(name):
    require_op(name)
    q, k, v = _good()
    with pytest.raises(ValueError, match=r"scale must be finite and >= 0 \(0 means 1/sqrt\(head_dim\)\), got -1.0"):
        OPS[name](q, k, v, scale=-1.0)
    with pytest.raises(ValueError, match=r"scale must be finite and >= 0 .* got nan"):
        OPS[name](q, k, v, scale=float("nan"))
    with pytest.raises(ValueError, match=r"scale must be 0 or a normal float32 of at most 1.7e38"):
        OPS[name](q, k, v, scale=3e38)


def _op_level_checks_child(name):
    return dict(code=f"""import pytest, torch, cuda_llm_ops

op = torch.ops.cuda_llm_ops.{name}
q = torch.randn(2, 4, 16, 64, device="cuda", dtype=torch.float16)
k = torch.randn(2, 2, 24, 64, device="cuda", dtype=torch.float16)
v = torch.randn(2, 2, 24, 64, device="cuda", dtype=torch.float16)
wide = torch.randn(2, 4, 16, 128, device="cuda", dtype=torch.float16)
with pytest.raises(RuntimeError, match="q must have a contiguous last dimension"):
    op(wide[..., ::2], k, v, 0.125, False)
with pytest.raises(RuntimeError, match="scale must be finite and > 0 as a float32"):
    op(q, k, v, 0.0, False)
with pytest.raises(RuntimeError, match="scale must be a normal float32 of at most 1.7e38"):
    op(q, k, v, 3e38, False)  # scale * log2(e) would overflow float32 (NaN rows)
with pytest.raises(RuntimeError, match="must be a multiple of k/v's number of heads"):
    op(q[:, :3], k, v, 0.125, False)
with pytest.raises(RuntimeError, match="head_dim must be a multiple of 8"):
    op(q[..., :12].contiguous(), k[..., :12].contiguous(), v[..., :12].contiguous(), 0.125, False)
with pytest.raises(RuntimeError, match="k must have dtype"):
    op(q, k.float(), v, 0.125, False)
""")


@pytest.mark.isolated(_op_level_checks_child, ops=lambda name: (name,))
@pytest.mark.parametrize("name", list(OPS))
def test_op_level_checks(name):
    """A direct torch.ops call skips the Python validation; the C++ checks still refuse."""
    require_op(name)
    run_isolated(**_op_level_checks_child(name))


# ---------------------------------------------------------------- torch.library / compile

@pytest.mark.parametrize("name", list(OPS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_opcheck(name, dtype):
    require_op(name)
    q, k, v = _inputs(1, 4, 2, 19, 23, 64, dtype, seed=21)
    torch.library.opcheck(getattr(torch.ops.cuda_llm_ops, name), (q, k, v, 0.125, True))
    torch.library.opcheck(getattr(torch.ops.cuda_llm_ops, name), (q, k, v, 0.125, False))


@pytest.mark.parametrize("name", list(OPS))
def test_torch_compile_fullgraph(name):
    require_op(name)
    fn = OPS[name]

    @torch.compile(fullgraph=True)
    def block(q, k, v):
        return fn(q * 1.5, k, v, is_causal=True) + 1.0

    q, k, v = _inputs(1, 4, 1, 40, 40, 64, torch.float16, seed=22)
    out = block(q, k, v)
    ref = attention_reference(q * 1.5, k, v, is_causal=True) + 1.0
    assert_close(out, ref, dtype=torch.float16)


# ---------------------------------------------------------------- O(N) memory

@pytest.mark.parametrize("is_causal", [False, True])
def test_flash_memory_is_linear(is_causal):
    require_op("flash_attention")
    b, h, n, d = 1, 16, 32768, 128
    q, k, v = _inputs(b, h, h, n, n, d, torch.float16, seed=31)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    out = flash_attention(q, k, v, is_causal=is_causal)
    torch.cuda.synchronize()
    extra = torch.cuda.max_memory_allocated() - base
    out_bytes = out.numel() * out.element_size()
    # An N x N fp32 score matrix would be 64 GiB per head here; we allow 2x the output.
    assert extra <= 2 * out_bytes, f"peak extra memory {extra / 2**20:.0f} MiB > 2 x output {out_bytes / 2**20:.0f} MiB"
    # Spot-check a few rows against the reference (the full N x N reference would not fit).
    rows = torch.tensor([0, 1, 4097, n - 1], device="cuda")
    ref = attention_reference(q[:, :2, rows], k[:, :2], v[:, :2], is_causal=False)
    if is_causal:  # row i of the full problem sees keys 0..i
        ref = torch.stack([attention_reference(q[:, :2, r:r + 1], k[:, :2, :r + 1], v[:, :2, :r + 1])[:, :, 0]
                           for r in rows.tolist()], dim=2)
    assert_close(out[:, :2, rows], ref, dtype=torch.float16)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("nq", [1, 7, 16])
def test_flash_op_few_query_rows(dtype, nq):
    """flash_attention may route few-row fp16/bf16 calls to the decode kernel;
    the flash op itself must still be right there."""
    require_op("flash_attention")
    q, k, v = _inputs(2, 8, 2, nq, 333, 128, dtype, seed=40 + nq)
    for causal in (False, True):
        out = torch.ops.cuda_llm_ops.flash_attention(q, k, v, 128 ** -0.5, causal)
        ref_dtype = torch.float64 if dtype == torch.float32 else torch.float32
        assert_close(out, attention_reference(q, k, v, is_causal=causal, dtype=ref_dtype), dtype=dtype)


# ---------------------------------------------------------------- the Hopper wgmma kernel

def _on_sm90() -> bool:
    return torch.cuda.get_device_capability() == (9, 0)


_SM90_CASES = [  # b, hq, hkv, nq, nk, d, causal
    (2, 4, 2, 131, 77, 128, True),       # Nq > Nk: rows that see no key
    (1, 8, 2, 1000, 1000, 128, True),    # GQA, odd length, diagonal tiles
    (2, 4, 4, 300, 2500, 128, False),    # long keys, tail tile
    (1, 4, 1, 17, 4097, 128, True),      # few rows (the op, not the decode route), MQA
    (3, 6, 3, 257, 129, 96, False),      # D = 96 on the 128 tile (TMA zero-fills columns)
    (1, 2, 2, 129, 64, 72, True),        # D = 72, one key tile
    (2, 4, 2, 64, 65, 120, False),       # D = 120, one row tile, keys one past a tile
    (2, 4, 2, 300, 333, 64, True),       # the 64 tile: GQA, tails on both sides
    (1, 4, 4, 129, 1000, 40, False),     # D = 40 on the 64 tile (D <= 32 stays on mma.sync)
    (2, 4, 2, 200, 200, 256, True),      # the 256 tile (64-key tiles), causal
    (1, 4, 1, 77, 1500, 256, False),     # D = 256, MQA, long keys
    (2, 2, 2, 130, 65, 160, True),       # D = 160 on the 192 tile (a chunk half zero-filled), Nq > Nk
    (1, 4, 2, 257, 300, 192, False),     # D = 192 (96-key tiles)
    (2, 8, 2, 400, 700, 136, True),      # D = 136 on the 192 tile, GQA, causal
    # More work tiles than an H100 has SMs: persistent CTAs walk several, the K/V ring and
    # the Q barrier phases run on across them.
    (4, 16, 8, 1000, 1000, 128, True),   # 512 work tiles of unequal length (causal)
    (3, 16, 4, 700, 1200, 64, False),    # 192 on the three-consumer 64 tile
    (2, 16, 16, 600, 300, 256, True),    # 160, some of them rows that see no key (zeros)
    (4, 16, 8, 1000, 1000, 192, False),  # 512 full-row work tiles on the 192 tile (one shared O slot)
    (4, 16, 8, 1000, 1000, 128, False),  # 512 full-row work tiles on the 128 tile (ping-pong)
]


# The sm90 kernel's instance in a profile: Config<tile D, ping-pong, consumer warpgroups, K/V
# stages> and kEarlyQK (flash_attention_sm90.cuh)
# (integers may print as "(int)128", booleans as "(bool)1", as the decode tests' patterns allow)
_I, _B = r"(?:\(int\))?(\d+)", r"(true|false|\(bool\)[01])"
_SM90_INSTANCE = re.compile(rf"flash_attention_fwd_sm90_kernel<[^<>]*Config<{_I}, {_B}, {_I}, {_I}>, {_B}>")


def _sm90_instance(call) -> tuple[int, bool, int, int, bool]:
    """(tile D, ping-pong, consumers, stages, early QK) of the sm90 kernel one `call` ran."""
    names = kernel_names(call)
    found = _SM90_INSTANCE.search(names)
    assert found, names[:400]
    tile, pingpong, consumers, stages, early = found.groups()
    return int(tile), pingpong in ("true", "(bool)1"), int(consumers), int(stages), early in ("true", "(bool)1")


@pytest.mark.parametrize("case", _SM90_CASES, ids=lambda c: "-".join(map(str, c)))
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_sm90_kernel_matches_reference(monkeypatch, case, dtype):
    """On an H100 the fp16/bf16 flash op runs the wgmma/TMA kernel (checked by name; D in
    (32, 256] on the 64, 128, 192 and 256 tiles); it and the mma.sync kernel (dev knob)
    both match the reference."""
    require_op("flash_attention")
    b, hq, hkv, nq, nk, d, causal = case
    q, k, v = _inputs(b, hq, hkv, nq, nk, d, dtype, seed=nq + nk + d)
    ref = attention_reference(q, k, v, is_causal=causal, dtype=torch.float32)
    op = torch.ops.cuda_llm_ops.flash_attention

    def call():
        return _call_poisoned(lambda q, k, v: op(q, k, v, d ** -0.5, causal), q, k, v)

    if _on_sm90():
        assert "flash_attention_fwd_sm90" in kernel_names(call)
    # fp16 confirms each knob took (the kernel's instance in a profile); bf16 runs the same instances
    confirm = _on_sm90() and dtype == torch.float16
    tile_d = 64 if d <= 64 else 128 if d <= 128 else 192 if d <= 192 else 256
    # The rule's choice, then each schedule forced (kSchedOverlap 1, kSchedPingPong 2, at
    # D <= 64 also kSchedThreeConsumers 3); monkeypatch puts the caller's knob values back.
    for sched in ("", "1", "2") + (("3",) if d <= 64 else ()):
        monkeypatch.setenv("CUDA_LLM_OPS_FLASH_SM90_SCHED", sched)
        out = call()
        assert not torch.isnan(out).any()
        assert_close(out, ref, dtype=dtype, what=f"sm90 path {case} schedule {sched or 'auto'}")
        if causal and nq > nk:
            assert (out[:, :, : nq - nk] == 0).all()
        if confirm and sched:
            tile, pingpong, consumers, _, _ = _sm90_instance(call)
            assert (tile, pingpong, consumers) == (tile_d, sched == "2", 3 if sched == "3" else 2), (case, sched)
    monkeypatch.setenv("CUDA_LLM_OPS_FLASH_SM90_SCHED", "")
    # A work tile's first S = Q K^T issued after the tile before's epilogue (EARLY_QK 0, full
    # rows' default) or with its last P V (1, causal calls'), on one Q buffer or two (causal
    # calls' default where they fit), under the rule's schedule and with ping-pong turns held
    # while the next tile's operands land.
    for sched in ("", "2"):
        monkeypatch.setenv("CUDA_LLM_OPS_FLASH_SM90_SCHED", sched)
        for early, q_stages in (("0", "1"), ("0", "2"), ("1", "1"), ("1", "2")):
            monkeypatch.setenv("CUDA_LLM_OPS_FLASH_SM90_EARLY_QK", early)
            monkeypatch.setenv("CUDA_LLM_OPS_FLASH_SM90_Q_STAGES", q_stages)
            assert_close(call(), ref, dtype=dtype,
                         what=f"sm90 path {case}, schedule {sched or 'auto'} early_qk={early} q_stages={q_stages}")
            if confirm:
                assert _sm90_instance(call)[4] == (early == "1"), (case, sched, early)
    monkeypatch.setenv("CUDA_LLM_OPS_FLASH_SM90_SCHED", "")
    monkeypatch.setenv("CUDA_LLM_OPS_FLASH_SM90_EARLY_QK", "")
    monkeypatch.setenv("CUDA_LLM_OPS_FLASH_SM90_Q_STAGES", "")
    if d <= 64:  # the 64 tile's two-consumer schedules on a K/V ring of 2 stages (3 by default)
        monkeypatch.setenv("CUDA_LLM_OPS_FLASH_SM90_D64_STAGES", "2")
        for sched in ("1", "2"):
            monkeypatch.setenv("CUDA_LLM_OPS_FLASH_SM90_SCHED", sched)
            assert_close(call(), ref, dtype=dtype, what=f"sm90 path {case}, 2 stages, schedule {sched}")
            if confirm:
                assert _sm90_instance(call)[:4] == (64, sched == "2", 2, 2), (case, sched)
        monkeypatch.setenv("CUDA_LLM_OPS_FLASH_SM90_SCHED", "")
        monkeypatch.setenv("CUDA_LLM_OPS_FLASH_SM90_D64_STAGES", "")
    monkeypatch.setenv("CUDA_LLM_OPS_FLASH_SM90_PERSISTENT", "0")  # one CTA per work tile
    out = call()
    assert_close(out, ref, dtype=dtype, what=f"sm90 path {case}, a CTA per work tile")
    monkeypatch.setenv("CUDA_LLM_OPS_FLASH_SM90_PERSISTENT", "")
    if causal:  # causal row blocks paired (heaviest with lightest) or one per unit, forced both ways
        for pairs in ("0", "1"):
            monkeypatch.setenv("CUDA_LLM_OPS_FLASH_SM90_CAUSAL_PAIRS", pairs)
            assert_close(call(), ref, dtype=dtype, what=f"sm90 path {case}, causal pairs={pairs}")
        monkeypatch.setenv("CUDA_LLM_OPS_FLASH_SM90_CAUSAL_PAIRS", "")
    if 128 < d <= 192:  # the 256 tile, which these D ran on before the 192 tile
        monkeypatch.setenv("CUDA_LLM_OPS_FLASH_SM90_TILE192", "0")
        assert_close(call(), ref, dtype=dtype, what=f"sm90 path {case}, 256 tile")
        if confirm:
            assert _sm90_instance(call)[0] == 256, case
        monkeypatch.setenv("CUDA_LLM_OPS_FLASH_SM90_TILE192", "")
    monkeypatch.setenv("CUDA_LLM_OPS_FLASH_SM90", "0")
    names = kernel_names(call)
    assert "flash_attention_fwd_sm90" not in names and "flash_attention_mma" in names
    assert_close(call(), ref, dtype=dtype, what=f"mma.sync path {case}")


def test_sm90_d64_schedule_rule():
    """The 64 tile's rule: three consumer warpgroups, except causal calls over at most 2048 keys,
    which take two with ping-pong (NOTES.md v8) on a K/V ring of 3 stages (v11). Checked by the
    kernel's template name and against the reference."""
    require_op("flash_attention")
    if not _on_sm90():
        pytest.skip("the wgmma kernel runs on compute capability 9.0 only")
    import re
    for nk, causal, expect in ((1000, True, r"Config<64, ?true, ?2, ?3>"), (2048, True, r"Config<64, ?true, ?2, ?3>"),
                               (2049, True, r"Config<64, ?false, ?3, ?2>"), (1000, False, r"Config<64, ?false, ?3, ?2>")):
        q, k, v = _inputs(1, 4, 2, 300, nk, 64, torch.float16, seed=nk)
        names = kernel_names(lambda: flash_attention(q, k, v, is_causal=causal))
        assert re.search(expect, names), (nk, causal, names)
        ref = attention_reference(q, k, v, is_causal=causal, dtype=torch.float32)
        assert_close(flash_attention(q, k, v, is_causal=causal), ref, dtype=torch.float16,
                     what=f"D=64 rule nk={nk} causal={causal}")


# (b, hq, hkv, nq, nk, d, causal) for the fp32 tensor-core kernel: every head-dim bucket
# (32, 64, 96, 128, 192, 256), D between buckets, ragged edges, GQA, Nq > Nk (zero rows).
_FP32_TC_CASES = [
    (1, 2, 1, 1, 1, 32, False),
    (2, 4, 2, 17, 33, 24, True),
    (1, 3, 1, 200, 1000, 64, False),
    (2, 4, 4, 129, 65, 96, True),
    (1, 8, 2, 1000, 1000, 128, True),
    (2, 2, 1, 70, 300, 136, False),
    (1, 4, 2, 257, 100, 192, True),
    (1, 2, 2, 65, 130, 256, False),
]


@pytest.mark.parametrize("case", _FP32_TC_CASES, ids=lambda c: "-".join(map(str, c)))
def test_fp32_flash_tensor_core_kernel(monkeypatch, case):
    """fp32 flash runs the 3xTF32 tensor-core kernel (checked by name) within the fp32
    tolerance of a float64 reference, on the rule's tile and on each forced one."""
    require_op("flash_attention")
    if torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("TF32 mma.sync needs sm_80")
    b, hq, hkv, nq, nk, d, causal = case
    q, k, v = _inputs(b, hq, hkv, nq, nk, d, torch.float32, seed=nq + nk + d)
    ref = attention_reference(q, k, v, is_causal=causal, dtype=torch.float64)
    op = torch.ops.cuda_llm_ops.flash_attention

    def call():
        return _call_poisoned(lambda q, k, v: op(q, k, v, d ** -0.5, causal), q, k, v)

    assert "flash_attention_fp32_tf32x3" in kernel_names(call)
    smem = getattr(torch.cuda.get_device_properties(0), "shared_memory_per_block_optin", 0)
    for tile in ("", "1", "2", "3"):  # the rule's choice, 4 warps, 8 warps, the 99-KB-GPU tile
        if tile == "2" and d > 192 and smem < 207 * 1024:
            continue  # 8 warps at D = 256 take 203 KB (Hopper only)
        monkeypatch.setenv("CUDA_LLM_OPS_FLASH_FP32_TILE", tile)
        out = call()
        assert_close(out, ref, dtype=torch.float32, what=f"fp32 tensor-core path {case} tile {tile or 'default'}")
        if causal and nq > nk:
            assert (out[:, :, : nq - nk] == 0).all()
    monkeypatch.setenv("CUDA_LLM_OPS_FLASH_FP32_TILE", "")


def test_sm90_rule_keeps_small_head_dims_on_mma_sync():
    """D <= 32 runs the mma.sync kernel on every GPU (it measured faster than the 64 tile)."""
    require_op("flash_attention")
    q, k, v = _inputs(1, 4, 2, 100, 150, 32, torch.float16, seed=32)
    call = lambda: flash_attention(q, k, v, is_causal=True)  # noqa: E731
    names = kernel_names(call)
    assert "flash_attention_fwd_sm90" not in names and "flash_attention_mma" in names
    assert_close(call(), attention_reference(q, k, v, is_causal=True, dtype=torch.float32), dtype=torch.float16)


def test_sm90_kernel_strided_and_broadcast_inputs():
    """[B, N, H, D] views (a fused QKV projection's layout) take the TMA kernel; K/V
    expanded over the heads (head stride 0) give the same answer whichever kernel runs."""
    require_op("flash_attention")
    q, k, v = _inputs(2, 8, 2, 200, 300, 128, torch.bfloat16, seed=77, strided=True)
    ref = attention_reference(q, k, v, is_causal=True, dtype=torch.float32)
    if _on_sm90():
        assert "flash_attention_fwd_sm90" in kernel_names(lambda: flash_attention(q, k, v, is_causal=True))
    assert_close(flash_attention(q, k, v, is_causal=True), ref, dtype=torch.bfloat16)
    k1, v1 = k[:, :1].expand(2, 8, 300, 128), v[:, :1].expand(2, 8, 300, 128)
    assert k1.stride(1) == 0
    ref1 = attention_reference(q, k1.contiguous(), v1.contiguous(), is_causal=False, dtype=torch.float32)
    assert_close(flash_attention(q, k1, v1), ref1, dtype=torch.bfloat16)
