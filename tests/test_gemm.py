"""GPU tests of the GEMM family against float64 torch.matmul (int8: exact)."""
import math
import os
import re

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cuda_llm_ops as llm
from cuda_llm_ops.gemm import _gemm_variant
from cuda_llm_ops.reference import gemm_reference, int8_gemm_reference
from cuda_llm_ops.testing import REL_TOL, assert_close, kernel_grid_blocks, kernel_names, poison_, run_isolated
from conftest import require_op

pytestmark = pytest.mark.cuda

# The skinny kernels' dev knob (dev_knob, csrc/include/cuda_llm_ops/common.cuh) is read on every
# call only when set before the first call: empty keeps the default and lets a test switch it.
os.environ.setdefault("CLO_SKINNY_PIPE", "")
os.environ.setdefault("CLO_SKINNY_KWARPS", "")
os.environ.setdefault("CLO_GEMM_WGMMA_CLUSTER", "")
os.environ.setdefault("CLO_GEMM_WGMMA_PERSISTENT", "")
os.environ.setdefault("CLO_GEMM_WGMMA_TMA_STORE", "")
os.environ.setdefault("CLO_GEMM_WGMMA_RASTER", "")
os.environ.setdefault("CLO_GEMM_WGMMA_TAIL_SPLIT", "")
os.environ.setdefault("CLO_GEMM_WGMMA_SHORT_SPLIT", "")
os.environ.setdefault("CLO_GEMM_SKINNY_WGMMA", "")
os.environ.setdefault("CLO_GEMM_INT8_WGMMA", "")
os.environ.setdefault("CLO_GEMM_INT8_SPLITK", "")
os.environ.setdefault("CLO_GEMM_INT8_SKINNY", "")
os.environ.setdefault("CLO_GEMM_PDL", "")
os.environ.setdefault("CLO_GEMM_SKINNY_TT16", "")
os.environ.setdefault("CLO_GEMM_SKINNY_TT_EVEN", "")
os.environ.setdefault("CLO_GEMM_SKINNY_BOX_CLIP", "")
os.environ.setdefault("CLO_GEMM_SKINNY_WIDE", "")
os.environ.setdefault("CLO_GEMM_SKINNY_WIDE_SPLIT", "")

FLOATS = [torch.float32, torch.float16, torch.bfloat16]
# Any size 1..1024, or a multiple of 16 (the tensor-core / vectorised paths with edge tiles).
DIM = st.one_of(st.integers(1, 1024), st.integers(1, 64).map(lambda x: 16 * x), st.sampled_from([1, 17, 1000]))
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _poison_allocator(nbytes: int) -> None:
    """Fill then free a NaN block so the op's freshly allocated output starts as NaN, not zeros."""
    n = max(nbytes // 4, 1) + 1024
    torch.empty(n, dtype=torch.float32, device="cuda").fill_(float("nan"))


def _rand(shape, dtype):
    return torch.randn(*shape, device="cuda").to(dtype)


def _tol(dtype, k):
    # fp32: accumulation-order error grows with K; half types: the output rounding dominates.
    return REL_TOL[dtype] * (4 if dtype == torch.float32 and k > 256 else 1)


@settings(max_examples=70, **SETTINGS)
@given(m=DIM, n=DIM, k=DIM, dtype=st.sampled_from(FLOATS), trans_a=st.booleans(), trans_b=st.booleans(),
       alpha=st.sampled_from([1.0, -0.5, 2.0]), beta=st.sampled_from([0.0, 1.0, -1.5]), with_c=st.booleans())
def test_gemm_matches_float64(m, n, k, dtype, trans_a, trans_b, alpha, beta, with_c):
    require_op("gemm")
    a = _rand((k, m) if trans_a else (m, k), dtype)
    b = _rand((n, k) if trans_b else (k, n), dtype)
    c = _rand((m, n), dtype) if with_c else None
    _poison_allocator(m * n * 4)
    out = llm.gemm(a, b, alpha, beta, trans_a, trans_b, c)
    ref = gemm_reference(a, b, alpha, beta, trans_a, trans_b, c, dtype=torch.float64)
    assert out.dtype == dtype and out.shape == (m, n)
    assert_close(out, ref, dtype, rel_tol=_tol(dtype, k), what=f"gemm {dtype} {m}x{n}x{k} ta={trans_a} tb={trans_b}")
    # into a NaN-filled out (the bait above need not come back): every element written
    into = poison_(torch.empty(m, n, dtype=dtype, device="cuda"))
    assert_close(llm.gemm(a, b, alpha, beta, trans_a, trans_b, c, out=into), ref, dtype, rel_tol=_tol(dtype, k),
                 what=f"gemm out= {dtype} {m}x{n}x{k} ta={trans_a} tb={trans_b}")


@settings(max_examples=25, **SETTINGS)
@given(m=DIM, n=DIM, k=DIM, dtype=st.sampled_from([torch.float16, torch.bfloat16]),
       alpha=st.sampled_from([1.0, 0.25]), beta=st.sampled_from([0.0, 2.0]), with_c=st.booleans())
def test_tensor_core_gemm_matches_float64(m, n, k, dtype, alpha, beta, with_c):
    require_op("tensor_core_gemm")
    a, b = _rand((m, k), dtype), _rand((k, n), dtype)
    c = torch.randn(m, n, device="cuda") if with_c else None
    _poison_allocator(m * n * 4)
    out = llm.tensor_core_gemm(a, b, alpha, beta, c)
    assert out.dtype == torch.float32
    ref = gemm_reference(a, b, alpha, beta, c=c, dtype=torch.float64)
    # fp32 output: only the accumulation error remains.
    assert_close(out, ref, torch.float32, rel_tol=1e-4, what=f"tensor_core_gemm {dtype} {m}x{n}x{k}")
    into = poison_(torch.empty(m, n, device="cuda"))  # into a NaN-filled out: every element written
    assert_close(llm.tensor_core_gemm(a, b, alpha, beta, c, out=into), ref, torch.float32, rel_tol=1e-4,
                 what=f"tensor_core_gemm out= {dtype} {m}x{n}x{k}")


def _int8_case(m, n, k, col_major_b):
    """One exact int8 call on fresh data into a NaN-poisoned allocation; returns the names of
    the kernels the call runs (kernel_names: one string)."""
    a = torch.randint(-128, 128, (m, k), dtype=torch.int8, device="cuda")
    if col_major_b:
        b = torch.randint(-128, 128, (n, k), dtype=torch.int8, device="cuda").t()
    else:
        b = torch.randint(-128, 128, (k, n), dtype=torch.int8, device="cuda")
    out = poison_(torch.empty(m, n, dtype=torch.int32, device="cuda"))  # a sentinel, never a freed answer
    llm.tensor_core_gemm_int8(a, b, out=out)
    assert out.dtype == torch.int32 and out.shape == (m, n)
    _poison_allocator(m * n * 4)
    assert torch.equal(llm.tensor_core_gemm_int8(a, b), out)  # the allocating call too
    assert torch.equal(out, int8_gemm_reference(a, b)), f"int8 {m}x{n}x{k} col_major_b={col_major_b}"
    return kernel_names(lambda: llm.tensor_core_gemm_int8(a, b))


def _assert_int8_full_sums(m, n, k, col_major_b):
    """Every entry -128 over K = k: each sum is 2^14 k (2^27 at K = 8192, past fp32's 2^24),
    exact, written into a poisoned `out=`."""
    a = torch.full((m, k), -128, dtype=torch.int8, device="cuda")
    b = (torch.full((n, k), -128, dtype=torch.int8, device="cuda").t() if col_major_b
         else torch.full((k, n), -128, dtype=torch.int8, device="cuda"))
    out = poison_(torch.empty(m, n, dtype=torch.int32, device="cuda"))
    llm.tensor_core_gemm_int8(a, b, out=out)
    assert torch.equal(out, torch.full((m, n), 16384 * k, dtype=torch.int32, device="cuda")), (m, n, k, col_major_b)


def _assert_int8_graph_replays(a, b, what, replays=2):
    """Captures `tensor_core_gemm_int8(a, b, out=)` in a CUDA graph (one call before, outside
    it), then `replays` times: new random a and b, `out` holding a stale value (only what the
    graph writes clears it), a replay, `out` exact against float64."""
    out = torch.empty(a.shape[0], b.shape[1], dtype=torch.int32, device="cuda")
    llm.tensor_core_gemm_int8(a, b, out=out)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        llm.tensor_core_gemm_int8(a, b, out=out)
    for _ in range(replays):
        a.copy_(torch.randint_like(a, -128, 128))
        b.copy_(torch.randint_like(b, -128, 128))
        out.fill_(0x3F3F3F3F)
        graph.replay()
        assert torch.equal(out, int8_gemm_reference(a, b)), what


INT8_DIM = st.one_of(st.integers(1, 1024), st.integers(1, 64).map(lambda x: 16 * x))


@settings(max_examples=25, **SETTINGS)
@given(m=INT8_DIM, n=INT8_DIM, k=INT8_DIM, col_major_b=st.booleans())
def test_int8_gemm_exact(m, n, k, col_major_b):
    require_op("tensor_core_gemm_int8")
    _int8_case(m, n, k, col_major_b)


@pytest.mark.parametrize("m,n,k", [(4096, 4096, 256), (384, 768, 4096), (257, 264, 1032)])
def test_int8_gemm_exact_large(m, n, k):
    require_op("tensor_core_gemm_int8")
    a = torch.randint(-128, 128, (m, k), dtype=torch.int8, device="cuda")
    b = torch.randint(-128, 128, (k, n), dtype=torch.int8, device="cuda")
    assert torch.equal(llm.tensor_core_gemm_int8(a, b), int8_gemm_reference(a, b))
    assert torch.equal(llm.tensor_core_gemm_int8(a, b.t().contiguous().t()), int8_gemm_reference(a, b))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("variant", ["pipelined", "unpipelined", "small_tile", "generic", "alt_a", "alt_b"])
@pytest.mark.parametrize("m,n,k", [(256, 512, 512), (200, 264, 136), (1, 8, 8), (130, 1000, 48)])
def test_gemm_variants(variant, dtype, m, n, k):
    """Every kernel the benchmark compares computes the same product, edges included."""
    require_op("_gemm_variant")
    a, b = _rand((m, k), dtype), _rand((k, n), dtype)
    _poison_allocator(m * n * 4)
    out = _gemm_variant(a, b, variant)
    assert_close(out, gemm_reference(a, b, dtype=torch.float64), dtype, rel_tol=_tol(dtype, k), what=variant)
    if dtype != torch.float32:
        out32 = _gemm_variant(a, b, variant, out_fp32=True)
        assert out32.dtype == torch.float32
        assert_close(out32, gemm_reference(a, b, dtype=torch.float64), torch.float32, rel_tol=1e-4, what=variant)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (False, True), (True, False), (True, True)])
def test_gemm_large_tiles_all_layouts(dtype, trans_a, trans_b):
    """Sizes that give more than a wave of the default tiles (the kAuto choice for large problems), ragged edges."""
    require_op("gemm")
    m, n, k = 2056, 2312, 264
    a = _rand((k, m) if trans_a else (m, k), dtype)
    b = _rand((n, k) if trans_b else (k, n), dtype)
    c = _rand((m, n), dtype)
    out = llm.gemm(a, b, 0.5, -1.0, trans_a, trans_b, c)
    ref = gemm_reference(a, b, 0.5, -1.0, trans_a, trans_b, c, dtype=torch.float64)
    assert_close(out, ref, dtype, rel_tol=_tol(dtype, k))


@pytest.mark.parametrize("variant", ["auto", "pipelined", "unpipelined", "alt_a", "alt_b", "small_tile"])
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (False, True), (True, False), (True, True)])
@pytest.mark.parametrize("m,n,k", [(200, 264, 136), (1000, 1032, 1000), (132, 68, 20), (2056, 2312, 264),
                                   (1024, 1024, 36)])
def test_gemm_fp32_tiles_all_layouts(variant, trans_a, trans_b, m, n, k):
    """Each fp32 kernel (large tile and its one-stage twin, long, medium, small) in every
    layout: k-major operands are copied straight, k-contiguous ones transposed while staging; ragged
    edges in M, N and K (2056x2312 gives auto the large tile, 1000x1032 and 1024x1024 the medium one,
    the others the small one; K = 20, 36, 136, 264 leave partial k-tiles of BK 16 and 32)."""
    require_op("_gemm_variant")
    a = _rand((k, m) if trans_a else (m, k), torch.float32)
    b = _rand((n, k) if trans_b else (k, n), torch.float32)
    c = _rand((m, n), torch.float32)
    _poison_allocator(m * n * 4)
    out = _gemm_variant(a, b, variant, False, trans_a, trans_b, 0.5, -1.0, c)
    ref = gemm_reference(a, b, 0.5, -1.0, trans_a, trans_b, c, dtype=torch.float64)
    assert_close(out, ref, torch.float32, rel_tol=_tol(torch.float32, k), what=f"{variant} ta={trans_a} tb={trans_b}")


@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (False, True), (True, False), (True, True)])
@pytest.mark.parametrize("case", ["two waves", "one wave of 128 rows", "one and a half waves"])
def test_gemm_fp32_auto_long_tile(case, trans_a, trans_b):
    """`gemm`'s fp32 tile rule: on Hopper NN and TT take the long tile (NN 256x128, TT 128x256,
    BK 16) where its blocks' useful work fills 15/16 of whole waves of the SMs, the large 128x128
    tile elsewhere; TN and NT, and other GPUs, always the large one. Shapes sized from the SM
    count: two waves (the last block column 216 wide for TT, 88 for NN: long for both), one wave of 128 rows
    (TT's 128x256 blocks fill it; NN's 256-row blocks would be half empty: large), one and a
    half waves (large). Checks the kernel that ran and the result."""
    require_op("gemm")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    m, n = {"two waves": (256, 256 * sms - 40), "one wave of 128 rows": (128, 256 * sms),
            "one and a half waves": (256, 192 * sms)}[case]
    k = 72  # five k-tiles of 16 or three of 32, the last partial
    a = _rand((k, m) if trans_a else (m, k), torch.float32)
    b = _rand((n, k) if trans_b else (k, n), torch.float32)
    hopper = torch.cuda.get_device_capability()[0] == 9
    bm, bn = (128, 256) if trans_a else (256, 128)
    blocks = -(-m // bm) * -(-n // bn)
    slots = -(-blocks // sms) * sms
    long_tile = hopper and trans_a == trans_b and m * n * 16 >= slots * bm * bn * 15
    assert long_tile == (hopper and trans_a == trans_b and (case == "two waves" or case.startswith("one wave") and trans_a))
    _poison_allocator(m * n * 4)
    out = llm.gemm(a, b, trans_a=trans_a, trans_b=trans_b)
    ref = gemm_reference(a, b, 1.0, 0.0, trans_a, trans_b, None, dtype=torch.float64)
    assert_close(out, ref, torch.float32, rel_tol=_tol(torch.float32, k), what=f"{m}x{n} ta={trans_a} tb={trans_b}")
    names = kernel_names(lambda: llm.gemm(a, b, trans_a=trans_a, trans_b=trans_b))
    found = re.search(r"gemm_simt_fp32_v2_kernel<(true|false), (true|false), (\d+), (\d+)", names)
    assert found, names
    tile = (int(found.group(3)), int(found.group(4)))
    assert tile == ((bm, bn) if long_tile else (128, 128)), f"expected the {'long' if long_tile else 'large'} tile: {names}"


# ---- skinny (decode) kernels: M <= 16, b either layout, kAuto's choice there ----------------

@settings(max_examples=60, **SETTINGS)
@given(m=st.integers(1, 16), n4=st.one_of(st.integers(1, 400), st.sampled_from([1, 2, 1026])),
       k4=st.one_of(st.integers(1, 600), st.sampled_from([1, 2, 6, 1026])), dtype=st.sampled_from(FLOATS),
       trans_b=st.booleans(), alpha=st.sampled_from([1.0, -0.5]), beta=st.sampled_from([0.0, 1.5]),
       with_c=st.booleans(), out_fp32=st.booleans())
def test_skinny_matches_float64(m, n4, k4, dtype, trans_b, alpha, beta, with_c, out_fp32):
    """Every M bucket (1, 2, 4, 8, 16; the 16-bit kernels 8 and 16), both layouts of b, K and N
    tails (multiples of 4 fp32 / 8 fp16-bf16), the k-warp splits of small N, c and fp32 output."""
    require_op("_gemm_variant")
    step = 4 if dtype == torch.float32 else 8
    n, k = step * ((4 * n4 + step - 1) // step), step * ((4 * k4 + step - 1) // step)
    _decode_shape_case("skinny", m, n, k, dtype, trans_b, alpha, beta, with_c, out_fp32 and dtype != torch.float32)


def _assert_graph_replays(f, a, b, trans_b, dtype, k, what, replays=1):
    """Captures `f` (a gemm of a and b) in a CUDA graph, then `replays` times: new random a and
    b, the output poisoned with NaN, a replay, the output against float64. Returns the last
    reference."""
    graph = torch.cuda.CUDAGraph()
    f()
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        out = f()
    for _ in range(replays):
        a.copy_(torch.randn_like(a))
        b.copy_(torch.randn_like(b))
        out.fill_(float("nan"))
        graph.replay()
        ref = gemm_reference(a, b, trans_b=trans_b, dtype=torch.float64)
        assert_close(out, ref, dtype, rel_tol=_tol(dtype, k), what=what)
    return ref


def _decode_shape_case(variant, m, n, k, dtype, trans_b, alpha, beta, with_c, out_fp32, kernel=None):
    """`_gemm_variant(variant)` of a stored [m, k] a against float64, with c, fp32 out; `kernel`: a
    pattern the call's kernel names must match."""
    out_dtype = torch.float32 if out_fp32 else dtype
    a = _rand((m, k), dtype)
    b = _rand((n, k) if trans_b else (k, n), dtype)
    c = _rand((m, n), out_dtype) if with_c else None
    if kernel is not None:
        names = kernel_names(lambda: _gemm_variant(a, b, variant, out_fp32, False, trans_b, alpha, beta, c))
        assert re.search(kernel, names), names
    _poison_allocator(m * n * 4)
    out = _gemm_variant(a, b, variant, out_fp32, False, trans_b, alpha, beta, c)
    ref = gemm_reference(a, b, alpha, beta, False, trans_b, c, dtype=torch.float64)
    assert out.dtype == out_dtype and out.shape == (m, n)
    tol = 1e-4 * (4 if k > 256 else 1) if out_fp32 else _tol(dtype, k)
    assert_close(out, ref, out_dtype, rel_tol=tol, what=f"{variant} {dtype} {m}x{n}x{k} tb={trans_b} out32={out_fp32}")


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("m,n,k", [(1, 12288, 4096), (16, 4096, 4096), (5, 135168, 24), (9, 36864, 136)])
def test_skinny_decode_shapes_auto(monkeypatch, dtype, trans_b, m, n, k):
    """gemm (kAuto) on decode shapes: a Llama projection, long K, and N wide enough that every
    kernel runs with one k-warp per block (the other end of the split heuristic). With the
    wgmma skinny tile off (CLO_GEMM_SKINNY_WGMMA=0; on Hopper it takes 16-bit decode shapes,
    test_wgmma_skinny_*) kAuto runs the skinny kernels."""
    require_op("gemm")
    monkeypatch.setenv("CLO_GEMM_SKINNY_WGMMA", "0")
    a = _rand((m, k), dtype)
    b = _rand((n, k) if trans_b else (k, n), dtype)
    _poison_allocator(m * n * 4)
    out = llm.gemm(a, b, trans_b=trans_b)
    ref = gemm_reference(a, b, trans_b=trans_b, dtype=torch.float64)
    assert_close(out, ref, dtype, rel_tol=_tol(dtype, k), what=f"gemm {dtype} {m}x{n}x{k} tb={trans_b}")
    assert torch.equal(out, _gemm_variant(a, b, "skinny", False, False, trans_b)), "auto did not take the skinny kernel"


@pytest.mark.parametrize("pipe", ["0", "1"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("m,n,k", [(1, 12288, 4096), (16, 4104, 4096), (5, 136, 2056), (9, 40, 24), (3, 8, 8)])
def test_skinny_mma_kernels(monkeypatch, pipe, dtype, trans_b, m, n, k):
    """Both 16-bit kernel kinds (dev knob CLO_SKINNY_PIPE: 0 register batches, 1 cp.async rings)
    in both layouts: N and K tails, across-block splits (small N), fewer stages than the
    ring (K = 8, 24)."""
    require_op("_gemm_variant")
    monkeypatch.setenv("CLO_SKINNY_PIPE", pipe)
    a, b = _rand((m, k), dtype), _rand((n, k) if trans_b else (k, n), dtype)
    c = _rand((m, n), dtype)
    _poison_allocator(m * n * 4)
    out = _gemm_variant(a, b, "skinny", False, False, trans_b, 0.5, -1.0, c)
    ref = gemm_reference(a, b, 0.5, -1.0, False, trans_b, c, dtype=torch.float64)
    assert_close(out, ref, dtype, rel_tol=_tol(dtype, k), what=f"skinny pipe={pipe} {dtype} {m}x{n}x{k} tb={trans_b}")
    if pipe == "0":  # the knob took: register batches, not the rings the rule picks for b [N, K] and M <= 8
        names = kernel_names(lambda: _gemm_variant(a, b, "skinny", False, False, trans_b, 0.5, -1.0, c))
        assert "_mma_pipe_kernel" not in names and "_mma_kernel" in names, names[:300]


@pytest.mark.parametrize("k_warps", ["", "1", "2", "4", "8"])
@pytest.mark.parametrize("m,n,k", [(16, 4100, 4096), (16, 1028, 8196), (1, 12288, 4096), (7, 260, 1000), (3, 12, 40),
                                   (12, 2052, 36)])
def test_skinny_fp32_kn_kernel(monkeypatch, k_warps, m, n, k):
    """fp32 with b [K, N] (the staged kernel: 128-column warp strips, A staged per 32-k unit)
    under every k-warp count (dev knob CLO_SKINNY_KWARPS; empty: the fill rule's choice): N tails
    inside a strip, K tails inside a unit, units split across blocks (long K) and k-warps with
    no unit at all (K = 36, 40)."""
    require_op("_gemm_variant")
    monkeypatch.setenv("CLO_SKINNY_KWARPS", k_warps)
    a, b, c = _rand((m, k), torch.float32), _rand((k, n), torch.float32), _rand((m, n), torch.float32)
    _poison_allocator(m * n * 4)
    out = _gemm_variant(a, b, "skinny", False, False, False, 0.5, -1.0, c)
    ref = gemm_reference(a, b, 0.5, -1.0, False, False, c, dtype=torch.float64)
    assert_close(out, ref, torch.float32, rel_tol=_tol(torch.float32, k), what=f"skinny fp32 kn kw={k_warps} {m}x{n}x{k}")
    if k_warps:  # the knob took: kn_strip_plan's grid at that count (strips of 128 x 8 / k-warps columns, splits to a wave)
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        blocks_x = -(-n // (128 * 8 // int(k_warps)))
        k_splits = max(1, min(max(1, min(16, k // 256)), sms // blocks_x))
        grid = kernel_grid_blocks(lambda: _gemm_variant(a, b, "skinny", False, False, False, 0.5, -1.0, c),
                                  "gemm_skinny_kn_fp32_kernel")
        assert grid == blocks_x * k_splits, (k_warps, m, n, k, grid, blocks_x, k_splits)


def test_skinny_errors():
    require_op("_gemm_variant")
    b = _rand((64, 32), torch.float16)
    with pytest.raises(RuntimeError, match=r"skinny kernels take a stored \[M, K\] .* with M <= 16, got M=17"):
        _gemm_variant(_rand((17, 64), torch.float16), b, "skinny")
    with pytest.raises(RuntimeError, match=r"skinny kernels take .* got M=4 trans_a=true"):
        _gemm_variant(_rand((64, 4), torch.float16), b, "skinny", trans_a=True)
    with pytest.raises(RuntimeError, match=r"16-byte aligned rows"):
        _gemm_variant(_rand((4, 60), torch.float16), _rand((60, 32), torch.float16), "skinny")


# ---- Hopper wgmma/TMA family (explicit variant; kAuto also takes it for large problems) --------

def _require_sm90():
    require_op("_gemm_variant")
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip(f"the wgmma family needs compute capability 9.0, got {torch.cuda.get_device_capability()}")


def _wgmma_case(variant, m, n, k, dtype, trans_a, trans_b, alpha, beta, with_c, out_fp32):
    a = _rand((k, m) if trans_a else (m, k), dtype)
    b = _rand((n, k) if trans_b else (k, n), dtype)
    c = (torch.randn(m, n, device="cuda") if out_fp32 else _rand((m, n), dtype)) if with_c else None
    _poison_allocator(m * n * 4)
    out = _gemm_variant(a, b, variant, out_fp32, trans_a, trans_b, alpha, beta, c)
    ref = gemm_reference(a, b, alpha, beta, trans_a, trans_b, c, dtype=torch.float64)
    assert out.shape == (m, n) and out.dtype == (torch.float32 if out_fp32 else dtype)
    what = f"{variant} {dtype} {m}x{n}x{k} ta={trans_a} tb={trans_b} alpha={alpha} beta={beta} c={with_c}"
    if out_fp32:
        assert_close(out, ref, torch.float32, rel_tol=1e-4, what=what)
    else:
        assert_close(out, ref, dtype, rel_tol=_tol(dtype, k), what=what)


# TMA needs 16-byte row strides: the contiguous extent of each stored operand is a multiple of 8.
_ANY = st.one_of(st.integers(1, 1024), st.sampled_from([1, 17, 127, 129, 255, 257]))
_MUL8 = st.one_of(st.integers(1, 128).map(lambda x: 8 * x), st.sampled_from([8, 64, 72, 136, 264]))


@settings(max_examples=40, **SETTINGS)
@given(variant=st.sampled_from(["wgmma", "wgmma_n128"]), m=_ANY, n=_MUL8, k=_MUL8,
       dtype=st.sampled_from([torch.float16, torch.bfloat16]), trans_a=st.booleans(), trans_b=st.booleans(),
       alpha=st.sampled_from([1.0, -0.5, 2.0]), beta=st.sampled_from([0.0, 1.0, -1.5]), with_c=st.booleans(),
       out_fp32=st.booleans())
def test_wgmma_matches_float64(variant, m, n, k, dtype, trans_a, trans_b, alpha, beta, with_c, out_fp32):
    _require_sm90()
    if trans_a:
        m = (m + 7) // 8 * 8  # A^T is stored [K, M]: M is its contiguous extent
    _wgmma_case(variant, m, n, k, dtype, trans_a, trans_b, alpha, beta, with_c, out_fp32)


@pytest.mark.parametrize("variant", ["wgmma", "wgmma_n128"])
@pytest.mark.parametrize("trans_a,trans_b", [(False, False), (False, True), (True, False), (True, True)])
@pytest.mark.parametrize("m,n,k", [(264, 520, 1032), (1, 8, 8), (136, 264, 56)])
def test_wgmma_layouts_and_ring_wrap(variant, trans_a, trans_b, m, n, k):
    """Every layout; K = 1032 is 17 k-tiles (the 4/6-stage ring wraps several times), K = 56 < one k-tile."""
    _require_sm90()
    if trans_a:
        m = (m + 7) // 8 * 8  # A^T stored [K, M]: TMA needs M * 2 bytes to be a multiple of 16
    for dtype in (torch.float16, torch.bfloat16):
        _wgmma_case(variant, m, n, k, dtype, trans_a, trans_b, 0.5, -1.0, True, False)


@pytest.mark.parametrize("cluster,persistent,tma_store,raster",
                         [(1, 0, 0, 8), (1, 1, 1, 8), (1, 1, 1, -4), (2, 0, 1, -4), (2, 1, 0, 16), (2, 1, 1, -8)])
@pytest.mark.parametrize("variant", ["wgmma", "wgmma_n128"])
def test_wgmma_schedules(monkeypatch, variant, cluster, persistent, tma_store, raster):
    """Every schedule (dev knobs: pairs along M, persistence, TMA-store epilogue, raster) in every
    layout. M = 2312 is 19 tile rows: a pair's second tile lies wholly past M. 90-171 work units
    exceed the co-resident CTAs, so persistent CTAs take several tiles each, and K = 328 (6
    k-tiles) makes the ring's phases carry across tiles. N = 2056 ends in a partial box (TMA
    stores clip it); the third layout adds C (register epilogue whatever the knob says), the
    fourth writes fp32 (TMA stores of 32-column boxes). N = 2051 with b [N, K] gives D rows that
    are not 16-byte multiples: the register epilogue, in 16-bit and fp32 output."""
    _require_sm90()
    monkeypatch.setenv("CLO_GEMM_WGMMA_CLUSTER", str(cluster))
    monkeypatch.setenv("CLO_GEMM_WGMMA_PERSISTENT", str(persistent))
    monkeypatch.setenv("CLO_GEMM_WGMMA_TMA_STORE", str(tma_store))
    monkeypatch.setenv("CLO_GEMM_WGMMA_RASTER", str(raster))
    for i, (trans_a, trans_b) in enumerate([(False, False), (False, True), (True, False), (True, True)]):
        dtype = torch.float16 if i % 2 == 0 else torch.bfloat16
        _wgmma_case(variant, 2312, 2056, 328, dtype, trans_a, trans_b, 0.5, -1.0, i == 2, i == 3)
    for out_fp32 in (False, True):
        _wgmma_case(variant, 2312, 2051, 328, torch.bfloat16, False, True, 1.0, 0.0, False, out_fp32)
    # The knobs took (launch_wgmma_cfg's grid): one cluster per unit of `cluster` tiles along M
    # without persistence, at most one CTA per SM with it (pairs: whole clusters)
    a, b = _rand((2312, 328), torch.float16), _rand((328, 2056), torch.float16)
    tile_rows, tile_cols = -(-2312 // 128), -(-2056 // (256 if variant == "wgmma" else 128))
    units = -(-tile_rows // cluster) * tile_cols
    grid = kernel_grid_blocks(lambda: _gemm_variant(a, b, variant), "gemm_wgmma_sm90_kernel")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    if persistent:
        assert grid <= sms and grid % cluster == 0 and (cluster == 2 or grid == min(units, sms)), (grid, units)
    else:
        assert grid == units * cluster, (grid, units, cluster)


@pytest.mark.parametrize("variant", ["wgmma", "wgmma_n128"])
def test_wgmma_tail_split(monkeypatch, variant):
    """The last wave split along K, forced (CLO_GEMM_WGMMA_TAIL_SPLIT=2), in every layout, with C and
    fp32 out. 2312 x 2056 on one persistent CTA per SM: 171 units (wgmma) / 323 (n128), a last
    wave of 39 / 59 units cut into at most 3 / 2 chunks (plan_tail_split: also about
    sqrt(k-tiles / 2)). K = 328 (6 k-tiles): 2 chunks of 3; K = 1000 (16 k-tiles, the last
    partial): 3 / 2 chunks; K = 64 (one k-tile per unit): nothing to split, whole units. N = 2051 with b [N, K]: the register epilogue. The split's
    workspace counters are zeroed by a memset before the kernel (seen in the profile only when
    the tail splits); the last chunk sums the chunks in order, so repeated calls agree bit for
    bit; a CUDA graph replays the split on new data."""
    _require_sm90()
    monkeypatch.setenv("CLO_GEMM_WGMMA_TAIL_SPLIT", "2")
    for i, (trans_a, trans_b) in enumerate([(False, False), (False, True), (True, False), (True, True)]):
        dtype = torch.float16 if i % 2 == 0 else torch.bfloat16
        _wgmma_case(variant, 2312, 2056, 328, dtype, trans_a, trans_b, 0.5, -1.0, i == 2, i == 3)
    for k in (1000, 64):
        _wgmma_case(variant, 2312, 2056, k, torch.float16, False, False, 1.0, 0.0, False, False)
    for out_fp32 in (False, True):
        _wgmma_case(variant, 2312, 2051, 328, torch.bfloat16, False, True, 1.0, 0.0, False, out_fp32)

    a, b = _rand((2312, 1000), torch.float16), _rand((1000, 2056), torch.float16)
    f = lambda: _gemm_variant(a, b, variant)
    assert "Memset" in kernel_names(f)
    first = f()
    for _ in range(3):
        again = f()
        assert torch.equal(again, first)
        poison_(again)  # freed holding NaN, not the answer a later call could be handed
    monkeypatch.setenv("CLO_GEMM_WGMMA_TAIL_SPLIT", "0")
    assert "Memset" not in kernel_names(lambda: poison_(f()))
    whole = f()
    assert_close(whole, first, torch.float16, rel_tol=_tol(torch.float16, 1000), what="whole units vs split tail")

    monkeypatch.setenv("CLO_GEMM_WGMMA_TAIL_SPLIT", "2")
    a64, b64 = a[:, :64].contiguous(), b[:64].contiguous()
    assert "Memset" not in kernel_names(lambda: _gemm_variant(a64, b64, variant))  # one k-tile: no split
    _assert_graph_replays(f, a, b, False, torch.float16, 1000, f"{variant} split tail graph replay", replays=2)


_K16 = st.one_of(st.integers(1, 64).map(lambda x: 16 * x), st.sampled_from([16, 144, 1040]))


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(m=_ANY, n=st.one_of(_ANY, _K16), k=_K16, col_major_b=st.booleans())
def test_int8_wgmma_exact(monkeypatch, m, n, k, col_major_b):
    """int8 on the wgmma family wherever it can run (CLO_GEMM_INT8_WGMMA=2: 128 x 256 tiles even
    for one tile): A [M, K] with any M, K a multiple of 16 (k-tiles of 128 with a zero-filled
    tail); B stored [N, K] with any N (TMA clips the int32 stores, or the register epilogue where
    D's rows are not 16-byte multiples), or B [K, N] (N a multiple of 16), transposed into the
    workspace first. Exact against float64. (A row-major B with N not a multiple of 16 runs the
    generic kernel, as every dtype does.)"""
    _require_sm90()
    if not col_major_b and n % 16:
        n = 16 * (n // 16 + 1)
    monkeypatch.setenv("CLO_GEMM_INT8_WGMMA", "2")
    monkeypatch.setenv("CLO_GEMM_INT8_SKINNY", "0")  # B [K, N] at M <= 16 too (the skinny int8 kernel's)
    names = _int8_case(m, n, k, col_major_b)
    if n == 1:  # b [K, 1] is contiguous however it was made: row-major with N = 1, the generic kernel
        assert "gemm_generic_kernel" in names, names
        return
    assert "gemm_wgmma_sm90_kernel" in names, names
    assert ("transpose_int8_to_nk" in names) != col_major_b, names


@pytest.mark.parametrize("m,n,k", [(4096, 4096, 4096), (2312, 2064, 8192), (4352, 2048, 4096)])
def test_int8_wgmma_auto_large(monkeypatch, m, n, k):
    """The default rule takes the wgmma family for these (a wave of tiles or more), both B layouts.
    K = 8192 with all entries -128: sums of 2^27, past fp32's 2^24, exact. 4352 x 2048 with the
    last wave's split forced (CLO_GEMM_WGMMA_TAIL_SPLIT=2): the int32 chunks sum exactly. The
    mma.sync kernel (CLO_GEMM_INT8_WGMMA=0) on the same data agrees."""
    _require_sm90()
    for col_major_b in (True, False):
        assert "gemm_wgmma_sm90_kernel" in _int8_case(m, n, k, col_major_b)
    _assert_int8_full_sums(m, n, k, True)
    monkeypatch.setenv("CLO_GEMM_WGMMA_TAIL_SPLIT", "2")
    a = torch.randint(-128, 128, (m, k), dtype=torch.int8, device="cuda")
    b = torch.randint(-128, 128, (n, k), dtype=torch.int8, device="cuda").t()
    # 512 units on 132 SMs leave a last wave of 116: nothing to split; the others split.
    assert ("Memset" in kernel_names(lambda: llm.tensor_core_gemm_int8(a, b))) == ((m, n) != (4096, 4096))
    split = llm.tensor_core_gemm_int8(a, b)
    assert torch.equal(split, int8_gemm_reference(a, b))
    monkeypatch.setenv("CLO_GEMM_WGMMA_TAIL_SPLIT", "")
    monkeypatch.setenv("CLO_GEMM_INT8_WGMMA", "0")
    names = kernel_names(lambda: llm.tensor_core_gemm_int8(a, b))
    assert "gemm_wgmma_sm90_kernel" not in names and "gemm_mma_int8_kernel" in names, names
    mma = poison_(torch.empty_like(split))
    llm.tensor_core_gemm_int8(a, b, out=mma)
    assert torch.equal(mma, split)


def _short_wave_splits(units, ktiles, sms):
    """Mirror of plan_tail_split (gemm_wgmma_sm90.cuh, mode 1) for a grid of one wave or less:
    the chunks each unit's k-tiles are cut into, 1 for none."""
    if units * 4 > sms:  # kShortWaveMaxFill: only a quarter wave or less
        return 1
    splits = min(sms // units, ktiles, max(2, int(math.floor(math.sqrt(ktiles / 2) + 0.5))))
    return splits if splits >= 2 and ktiles - -(-ktiles // splits) >= 8 else 1


@pytest.mark.parametrize("m,n,k", [(17, 4096, 14336), (64, 4096, 14336), (64, 12288, 4096), (128, 2048, 2064),
                                   (100, 1000, 4096), (48, 4096, 1536)])
def test_int8_wgmma_short_wave_split(monkeypatch, m, n, k):
    """int8 with 17-128 rows and B stored [N, K] where the skinny tile declines
    (CLO_GEMM_SKINNY_WGMMA=0 here): the family's 256-wide tiles where they fill more than a
    quarter wave (whole units) or, past 32 rows, where a grid of a quarter wave or less is cut
    along K (every unit in `splits` chunks, about sqrt(k-tiles / 2), at most SMs / units:
    units * splits CTAs); else mma.sync, which splits K itself (17 rows; K = 1536, 12 k-tiles,
    nothing to save). The family forced (CLO_GEMM_INT8_WGMMA=2) runs the same split or whole
    units. Exact against float64 and against the unsplit grid (CLO_GEMM_WGMMA_SHORT_SPLIT=0);
    sums past 2^24 (all -128) exact through the int32 chunks; a CUDA graph replays the split on
    new data."""
    _require_sm90()
    monkeypatch.setenv("CLO_GEMM_SKINNY_WGMMA", "0")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    units = -(-m // 128) * -(-n // 256)
    splits = _short_wave_splits(units, -(-k // 128), sms)
    takes = units * 4 > sms or (m > 32 and splits > 1)
    names = _int8_case(m, n, k, True)
    family = "gemm_wgmma_sm90_kernel<signed char, false, true, 256,"
    assert (family in names) == takes and ("gemm_mma_int8_kernel" in names) != takes, (m, n, k, names)
    if takes:
        assert ("Memset" in names) == (splits > 1), (m, n, k, names)
    monkeypatch.setenv("CLO_GEMM_INT8_WGMMA", "2")
    a = torch.randint(-128, 128, (m, k), dtype=torch.int8, device="cuda")
    b = torch.randint(-128, 128, (n, k), dtype=torch.int8, device="cuda").t()
    f = lambda: llm.tensor_core_gemm_int8(a, b)
    assert kernel_grid_blocks(f, "gemm_wgmma_sm90_kernel") == units * splits, (m, n, k, units, splits)
    split = f()
    assert torch.equal(split, int8_gemm_reference(a, b))
    monkeypatch.setenv("CLO_GEMM_WGMMA_SHORT_SPLIT", "0")
    assert kernel_grid_blocks(f, "gemm_wgmma_sm90_kernel") == units
    assert torch.equal(f(), split)
    monkeypatch.setenv("CLO_GEMM_WGMMA_SHORT_SPLIT", "")
    _assert_int8_full_sums(m, n, k, True)
    _assert_int8_graph_replays(a, b, f"int8 short-wave split graph replay {m}x{n}x{k}")


@pytest.mark.parametrize("k", [8192, 8191])  # 16-byte rows (the tile kernels) and not (the general kernel)
@pytest.mark.parametrize("col_major_b", [True, False])
@pytest.mark.parametrize("wgmma", ["", "0"])
def test_int8_sums_past_2_24_are_exact(monkeypatch, k, col_major_b, wgmma):
    """Large odd int8 values over K = 8192 (rows of a all 127 or all -127, b 125 or 127 at random):
    sums near +-2^27 with odd terms, which a float32 accumulator would round, exact on every int8
    kernel (the wgmma family on sm_90a, mma.sync with CLO_GEMM_INT8_WGMMA=0 or elsewhere, the
    general kernel where rows are not 16-byte aligned)."""
    require_op("tensor_core_gemm_int8")
    monkeypatch.setenv("CLO_GEMM_INT8_WGMMA", wgmma)
    g = torch.Generator(device="cuda").manual_seed(k + 2 * col_major_b)
    sign = torch.where(torch.rand(40, 1, device="cuda", generator=g) < 0.5, -1, 1)
    a = (127 * sign).expand(40, k).to(torch.int8).contiguous()
    b = torch.where(torch.rand(k, 72, device="cuda", generator=g) < 0.5, 125, 127).to(torch.int8)
    b = b.t().contiguous().t() if col_major_b else b
    ref = int8_gemm_reference(a, b)
    assert ref.abs().min() > 2**24
    out = poison_(torch.empty(40, 72, dtype=torch.int32, device="cuda"))
    llm.tensor_core_gemm_int8(a, b, out=out)
    assert torch.equal(out, ref), (k, col_major_b, wgmma)


@settings(max_examples=25, **SETTINGS)
@given(m=st.integers(1, 16), n=st.one_of(st.integers(2, 1024), st.sampled_from([17, 129, 1536])), k=_K16)
def test_int8_wgmma_skinny_exact(m, n, k):
    """int8 decode shapes (M <= 16) with B stored [N, K] run on the wgmma family's skinny tile
    (swapped operands; whole units of N or stream-K over the k-tiles, plan_skinny), exact."""
    _require_sm90()
    names = _int8_case(m, n, k, True)
    assert re.search(r"gemm_wgmma_sm90_kernel<signed char, false, true, 16,", names), names


@pytest.mark.parametrize("n,k,stream_k", [(4096, 4096, False), (4096, 14336, True), (4000, 4096, False)])
def test_int8_skinny_short_wave_rule(n, k, stream_k):
    """int8 decode shapes whose units fill under 70% of the SMs: one short wave of whole 64-row
    units where its busiest CTA ends before stream-K's estimate (4096 x 4096: 64 units, no
    counters to clear), stream-K where not (K = 14336: each unit 917 KB); exact either way."""
    _require_sm90()
    names = _int8_case(16, n, k, True)
    assert re.search(r"gemm_wgmma_sm90_kernel<signed char, false, true, 16,", names), names
    assert ("Memset" in names) == stream_k, names


def test_int8_wgmma_skinny_large():
    """Llama-size decode projections: M = 1 and 16 over a 12288 x 4096 weight stored [N, K], and
    sums of 2^27 (all -128, K = 8192) exact; B stored [K, N] runs on the skinny int8 kernel up to
    16 rows where the weight is at least 32 MiB, else on mma.sync up to 128 rows, and up to 256
    where the weight is over 32 MiB (its transpose per call would triple the bytes). B stored
    [N, K] up to 256 rows runs on the skinny tile (swapped, 32-128 wide; past 128 rows in
    token tiles) where 128-wide tiles would not fill a wave and the weight has 1024 rows or
    more; wherever the family takes more than 16 rows it runs 256-wide tiles on any grid
    (test_int8_wgmma_short_wave_split)."""
    _require_sm90()
    for m in (1, 16):
        assert "gemm_wgmma_sm90_kernel" in _int8_case(m, 12288, 4096, True)
    _assert_int8_full_sums(3, 640, 8192, True)
    # Also where N alone fills a wave of 128-wide tiles (the tile rule would take it from ~16.8K
    # columns): 28672 x 4096, Llama-3-8B's gate/up projection; up to 256 rows (batched decode).
    for m, n, k in ((16, 4096, 1024), (1, 28672, 4096), (16, 28672, 4096), (17, 28672, 4096), (200, 28672, 4096)):
        names = _int8_case(m, n, k, False)
        kernel = "gemm_skinny_kn_int8_kernel" if m <= 16 and n * k >= 32 << 20 else "gemm_mma_int8_kernel"
        assert kernel in names and "gemm_wgmma_sm90_kernel" not in names, (m, n, k, names)
    names = _int8_case(257, 28672, 4096, False)  # past 256 rows the transpose pays: the family takes it
    assert "gemm_wgmma_sm90_kernel" in names and "transpose_int8_to_nk" in names, names
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for m, n, col_major_b in ((129, 4096, False), (256, 4096, False), (129, 4096, True), (512, 4096, True),
                              (200, 1000, True), (129, 12288, False), (129, 12288, True), (64, 12288, True),
                              (17, 4096, True), (64, 4096, False)):
        names = _int8_case(m, n, 4096, col_major_b)
        tile = (col_major_b and m <= 256 and n >= 1024 and -(-m // 128) * -(-n // 128) < sms
                and (m <= 128 or _skinny_token_tiles(n, m, True) is not None))
        assert bool(re.search(_INT8_SKINNY_TILE, names)) == tile, (m, n, names)
        # B [N, K] past the skinny tile: the family; B [K, N] up to 128 rows, and 12288 x 4096 (48 MiB) up to 256: mma.sync.
        takes = (col_major_b and not tile) or (not col_major_b and m > 128 and n * 4096 <= 32 << 20)
        # Every int8 grid the family takes here runs 256-wide tiles (not the tile rule's 128 or mma.sync).
        assert ("gemm_wgmma_sm90_kernel<signed char, false, true, 256," in names) == takes, (m, n, names)
        assert ("gemm_mma_int8_kernel" in names) == (not takes and not tile), (m, n, names)
        assert ("transpose_int8_to_nk" in names) == (takes and not col_major_b), (m, n, names)


_INT8_SKINNY_TILE = r"gemm_wgmma_sm90_kernel<signed char, false, true, \d+, \d+, 1, true>"


@pytest.mark.parametrize("m,n,k,forced", [(17, 4096, 4096, False), (40, 6144, 1040, False), (64, 12288, 4096, False),
                                          (100, 2056, 528, False), (128, 4096, 14336, False), (33, 1024, 16, False),
                                          (200, 4096, 4096, False), (256, 6144, 1024, False), (160, 4096, 272, False),
                                          (100, 1000, 528, True)])
def test_int8_skinny_tile_batched(monkeypatch, m, n, k, forced):
    """int8 batched decode (17-256 rows, B stored [N, K]) on the swapped skinny tile, 32, 64 or
    128 wide (all rows of A in one tile, whole units or 64-row units split along K, or token
    tiles past 128 rows), as the 16-bit types run it; forced (CLO_GEMM_SKINNY_WGMMA=2) below
    1024 weight rows. Exact against float64 (N and K tails: 2056 and 1000 rows, K = 1040, 528, 272, 16); sums
    of 2^27 (all -128, K = 8192) exact; a CUDA graph replays it on new data."""
    _require_sm90()
    if forced:
        monkeypatch.setenv("CLO_GEMM_SKINNY_WGMMA", "2")
    names = _int8_case(m, n, k, True)
    assert re.search(_INT8_SKINNY_TILE, names) and "gemm_mma_int8_kernel" not in names, (m, n, k, names)
    _assert_int8_full_sums(m, n, 8192, True)
    a = torch.randint(-128, 128, (m, k), dtype=torch.int8, device="cuda")
    b = torch.randint(-128, 128, (n, k), dtype=torch.int8, device="cuda").t()
    _assert_int8_graph_replays(a, b, f"int8 skinny tile graph replay {m}x{n}x{k}")


def _kn_int8_plan(n, k, sms, k_warps=8):
    """Mirror of gemm_skinny.cu kn_strip_plan for the int8 B [K, N] skinny kernels (warps of 128
    columns, one block per SM, 8 k-warps unless CLO_SKINNY_KWARPS says otherwise): blocks of
    128 * 8 / k_warps columns, splits along K filling at most one wave. (k_splits, blocks_x)."""
    blocks_x = -(-n // (128 * 8 // k_warps))
    return max(1, min(max(1, min(16, k // 256)), sms // blocks_x)), blocks_x


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(m=st.integers(1, 16), n=st.one_of(st.integers(1, 80).map(lambda x: 16 * x), st.sampled_from([4096, 12288])),
       k=st.one_of(_K16, st.sampled_from([4096, 4112])))
def test_int8_skinny_kn_exact(monkeypatch, m, n, k):
    """int8 decode shapes with B stored [K, N] (N and K multiples of 16) on the skinny int8
    kernel (16 columns of 8 k rows a lane, transposed by byte permutes; CLO_GEMM_INT8_SKINNY=2:
    any weight size), exact: N tails inside a warp's 128 columns, K tails inside a 32-k step,
    splits across blocks summed in int32."""
    require_op("tensor_core_gemm_int8")
    monkeypatch.setenv("CLO_GEMM_INT8_SKINNY", "2")
    names = _int8_case(m, n, k, False)
    assert "gemm_skinny_kn_int8_kernel" in names and "gemm_mma_int8_kernel" not in names, names
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert ("gemm_skinny_reduce_kernel" in names) == (_kn_int8_plan(n, k, sms)[0] > 1), (m, n, k, names)


@pytest.mark.parametrize("k_warps", ["", "1", "2", "4"])
@pytest.mark.parametrize("m,n,k", [(16, 4096, 4096), (9, 1040, 8208), (1, 12288, 4096), (8, 48, 16), (3, 2064, 48)])
def test_int8_skinny_kn_plans(monkeypatch, k_warps, m, n, k):
    """The skinny int8 kernel (forced: CLO_GEMM_INT8_SKINNY=2) under every k-warp count
    (CLO_SKINNY_KWARPS; empty: 8), as `_kn_int8_plan` mirrors: the grid, the split partials'
    reduce, exact sums; k-warps with no step at all (K = 16, 48)."""
    require_op("tensor_core_gemm_int8")
    monkeypatch.setenv("CLO_GEMM_INT8_SKINNY", "2")
    monkeypatch.setenv("CLO_SKINNY_KWARPS", k_warps)
    names = _int8_case(m, n, k, False)
    assert "gemm_skinny_kn_int8_kernel" in names, names
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    k_splits, blocks_x = _kn_int8_plan(n, k, sms, int(k_warps) if k_warps else 8)
    a = torch.randint(-128, 128, (m, k), dtype=torch.int8, device="cuda")
    b = torch.randint(-128, 128, (k, n), dtype=torch.int8, device="cuda")
    grid = kernel_grid_blocks(lambda: llm.tensor_core_gemm_int8(a, b), "gemm_skinny_kn_int8_kernel")
    assert grid == blocks_x * k_splits, (k_warps, m, n, k, grid, blocks_x, k_splits)
    assert ("gemm_skinny_reduce_kernel" in names) == (k_splits > 1), names


def test_int8_skinny_kn_sums_graph_and_knob(monkeypatch):
    """The default rule: the skinny int8 kernel for weights of 32 MiB and more, mma.sync below.
    Sums of 2^27 (all -128, K = 8192) across k-warps and split blocks are exact; a captured
    graph replays the split (its partials in the caching allocator's workspace) over a stale
    output; the dev knob CLO_GEMM_INT8_SKINNY=0 gives the call back to mma.sync, same result."""
    require_op("tensor_core_gemm_int8")
    for m, n, k, skinny in ((1, 8192, 4096, True), (16, 4096, 8192, True), (16, 4096, 4096, False),
                            (4, 8192, 4080, False)):  # 32 MiB, 32 MiB, 16 MiB, 128 KiB under 32 MiB
        names = _int8_case(m, n, k, False)
        assert ("gemm_skinny_kn_int8_kernel" in names) == skinny and ("gemm_mma_int8_kernel" in names) != skinny, \
            (m, n, k, names)
    monkeypatch.setenv("CLO_GEMM_INT8_SKINNY", "2")  # 16 x 4096 x 4096: split across blocks
    for m, n in ((16, 1024), (1, 4096), (5, 12288)):
        _assert_int8_full_sums(m, n, 8192, False)
    a = torch.randint(-128, 128, (16, 4096), dtype=torch.int8, device="cuda")
    b = torch.randint(-128, 128, (4096, 4096), dtype=torch.int8, device="cuda")
    assert "gemm_skinny_reduce_kernel" in kernel_names(lambda: llm.tensor_core_gemm_int8(a, b))
    _assert_int8_graph_replays(a, b, "int8 skinny graph replay")
    skinny = llm.tensor_core_gemm_int8(a, b)
    monkeypatch.setenv("CLO_GEMM_INT8_SKINNY", "0")
    names = kernel_names(lambda: llm.tensor_core_gemm_int8(a, b))
    assert "gemm_skinny_kn_int8_kernel" not in names and "gemm_mma_int8_kernel" in names, names
    assert torch.equal(llm.tensor_core_gemm_int8(a, b), skinny)


def _int8_k_splits(m, n, k, sms):
    """Mirror of gemm_int8.cu int8_k_splits (default rule): 128x256 tiles, 64-deep k-tiles, the
    split count of least modelled time in k-tile steps."""
    tiles, ktiles = -(-m // 128) * -(-n // 256), -(-k // 64)
    if m > 128 or ktiles < 8 or tiles >= sms:
        return 1
    best, best_cost = 1, float(ktiles)
    for s in range(2, min(16, ktiles // 4, 2 * sms // tiles) + 1):
        waves = -(-tiles * s // sms)
        cost = float(waves * -(-ktiles // s)) + 9.5 + float(s) * float(m) * float(n) / 131072.0
        if cost < best_cost - 1e-9:
            best, best_cost = s, cost
    return best


def test_int8_mma_split_k(monkeypatch):
    """One row tile of A over too few 128x256 tiles for the SMs: mma.sync splits K (the rule
    mirrored by `_int8_k_splits`), its blocks adding into a zeroed D (exact in any order), B in
    both layouts, a last k-tile cut short at a split's end; a K of < 8 k-tiles is not split; the
    dev knob CLO_GEMM_INT8_SPLITK (0 off, n splits); a graph replays the zeroing."""
    require_op("tensor_core_gemm_int8")
    monkeypatch.setenv("CLO_GEMM_INT8_WGMMA", "0")  # mma.sync for B [N, K] too (sm_90a takes the family there)
    monkeypatch.setenv("CLO_GEMM_INT8_SKINNY", "0")  # and for B [K, N] at M <= 16 (the skinny kernel's)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    split_seen = False
    for m, n, k, col_major_b in ((1, 12288, 4096, False), (16, 4096, 4096, False), (100, 4096, 1008, True),
                                 (128, 2048, 528, False), (16, 4096, 256, False), (1, 12288, 4096, True),
                                 (128, 12288, 4096, False), (64, 4096, 4096, True)):
        names = _int8_case(m, n, k, col_major_b)
        splits = _int8_k_splits(m, n, k, sms)
        split_seen |= splits > 1
        assert "gemm_mma_int8_kernel" in names and ("Memset" in names) == (splits > 1), (m, n, k, splits, names)
    assert split_seen or sms < 20, sms  # the first cases split on any GPU of 20 SMs or more
    monkeypatch.setenv("CLO_GEMM_INT8_SPLITK", "0")
    assert "Memset" not in _int8_case(1, 12288, 4096, False)
    monkeypatch.setenv("CLO_GEMM_INT8_SPLITK", "7")  # 30 k-tiles in 7 splits of 5: 6 hold them, the last cut short
    assert "Memset" in _int8_case(16, 1008, 1904, True)
    monkeypatch.setenv("CLO_GEMM_INT8_SPLITK", "100000")  # clamped to 16
    assert "Memset" in _int8_case(7, 320, 8192, False)
    monkeypatch.setenv("CLO_GEMM_INT8_SPLITK", "")
    _assert_int8_full_sums(5, 1024, 8192, False)  # sums of 2^27 across the splits
    a = torch.randint(-128, 128, (16, 4096), dtype=torch.int8, device="cuda")
    b = torch.randint(-128, 128, (4096, 4096), dtype=torch.int8, device="cuda")
    _assert_int8_graph_replays(a, b, "int8 split-K graph replay")  # stale out: only the graph's zeroing clears it


def test_wgmma_tail_split_auto():
    """The default (CLO_GEMM_WGMMA_TAIL_SPLIT unset or 1) splits a last wave at most half full when
    a CTA saves >= 8 k-tiles by it: 4352 x 2048 x 2048 is 272 units on 132 SMs, 2 waves + 8 (cut
    into 4 chunks of 8 k-tiles); 4096 x 2048 x 2048 is 256 units, a last wave of 124: whole."""
    _require_sm90()
    a, b = _rand((4352, 2048), torch.float16), _rand((2048, 2048), torch.float16)
    assert "Memset" in kernel_names(lambda: llm.gemm(a, b))
    assert_close(llm.gemm(a, b), gemm_reference(a, b, dtype=torch.float64), torch.float16,
                 rel_tol=_tol(torch.float16, 2048), what="gemm 4352x2048x2048 (split tail)")
    assert "Memset" not in kernel_names(lambda: llm.gemm(a[:4096], b))
    # 128 k-tiles: 8 chunks of 16, the last chunk sums 8 (bf16, B given as [N, K]).
    a, b = _rand((4352, 8192), torch.bfloat16), _rand((2048, 8192), torch.bfloat16)
    out = llm.gemm(a, b, trans_b=True)
    assert_close(out, gemm_reference(a, b, trans_b=True, dtype=torch.float64), torch.bfloat16,
                 rel_tol=_tol(torch.bfloat16, 8192), what="gemm 4352x2048x8192 bf16 (split tail, 8 chunks)")


@settings(max_examples=40, **SETTINGS)
@given(m=st.integers(1, 16), n8=st.one_of(st.integers(1, 400), st.sampled_from([1, 16, 17, 1536])),
       k8=st.one_of(st.integers(1, 300), st.sampled_from([1, 8, 9, 520])),
       dtype=st.sampled_from([torch.float16, torch.bfloat16]), trans_b=st.booleans(),
       alpha=st.sampled_from([1.0, -0.5]), beta=st.sampled_from([0.0, 1.5]), with_c=st.booleans(),
       out_fp32=st.booleans())
def test_wgmma_skinny_matches_float64(m, n8, k8, dtype, trans_b, alpha, beta, with_c, out_fp32):
    """The Hopper skinny tile (kAuto, M <= 16, 16-bit): D^T = op(B)^T A^T on 128x16x64 wgmma tiles,
    the weight through TMA in both layouts, stream-K over every tile. N and K multiples of 8 up
    to 12288 / 4160 (tails of the 128-row tiles and 64-wide k-tiles; fewer k-tiles than SMs,
    ranges inside one tile, ranges over several whole tiles), M tails of the 16-wide operand
    (TMA zero-fills its rows past M), c, alpha, beta and fp32 output (the transposed epilogue)."""
    _require_sm90()
    os.environ["CLO_GEMM_SKINNY_WGMMA"] = "2"  # wherever it can (the default takes M >= 8 only)
    try:
        _decode_shape_case("auto", m, 8 * n8, 8 * k8, dtype, trans_b, alpha, beta, with_c, out_fp32)
    finally:
        os.environ["CLO_GEMM_SKINNY_WGMMA"] = ""


@settings(max_examples=40, **SETTINGS)
@given(m=st.one_of(st.integers(17, 256), st.sampled_from([33, 64, 65, 128, 129, 256])),
       n8=st.one_of(st.integers(1, 400), st.sampled_from([1, 16, 17, 513, 768, 1023])),
       k8=st.one_of(st.integers(1, 300), st.sampled_from([1, 8, 9, 520])),
       dtype=st.sampled_from([torch.float16, torch.bfloat16]), trans_b=st.booleans(),
       alpha=st.sampled_from([1.0, -0.5]), beta=st.sampled_from([0.0, 1.5]), with_c=st.booleans(),
       out_fp32=st.booleans())
def test_wgmma_skinny_batched_matches_float64(m, n8, k8, dtype, trans_b, alpha, beta, with_c, out_fp32):
    """Batched decode (16 < M <= 256, kAuto, 16-bit) on the Hopper skinny tile: the rows of a as
    the wide operand, all of them (64 or 128 wide, up to M = 128) or token tiles of them (32 to
    128 wide, where the weight's rows make a wave of whole units x tiles: N from ~2000; TMA
    zero-fills rows past M), the weight in both layouts, N and K tails, c, alpha, beta and fp32
    output (the transposed epilogue). Forced (CLO_GEMM_SKINNY_WGMMA=2): the default leaves
    N < 1024 to the other kernels; M > 128 without a token-tile deal runs elsewhere (these N are too
    few rows for the wide tile's whole units: test_wgmma_skinny_wide_epilogue)."""
    _require_sm90()
    os.environ["CLO_GEMM_SKINNY_WGMMA"] = "2"
    try:
        _decode_shape_case("auto", m, 8 * n8, 8 * k8, dtype, trans_b, alpha, beta, with_c, out_fp32)
    finally:
        os.environ["CLO_GEMM_SKINNY_WGMMA"] = ""


@pytest.mark.parametrize("m,n,k,dtype,trans_b,alpha,beta,with_c,out_fp32",
                         [(144, 12288, 264, torch.float16, True, -0.5, 1.5, True, False),
                          (190, 12288, 136, torch.bfloat16, False, 1.0, 0.0, False, True),
                          (176, 28672, 72, torch.bfloat16, True, 1.0, 1.5, True, True)])
def test_wgmma_skinny_wide_epilogue(m, n, k, dtype, trans_b, alpha, beta, with_c, out_fp32):
    """The wide skinny tile (129-192 tokens in one tile 192 wide, kAuto, by the kernel name) with
    alpha, beta, c and fp32 output (the transposed register epilogue over 96 accumulators a
    thread) against float64; 28672 rows: two 112-row units a CTA."""
    _require_sm90()
    _decode_shape_case("auto", m, n, k, dtype, trans_b, alpha, beta, with_c, out_fp32,
                       kernel=r"gemm_wgmma_sm90_kernel<[^>]*, 192, \d+, 1, true>")


def _skinny_token_tiles(rows, tokens, k_major, tt16=False, ktiles=0, even=True, wide_split=True):
    """plan_skinny_token_tiles (gemm_wgmma_sm90.cuh): (kernel width, weight rows a unit, token tile
    width) of the whole units x token tiles that fill 90% of the SMs in one wave, the fewest rows a
    CTA reads a k-tile (weight rows + tile width, with `even` 16 more for units taller than 64
    rows; a tie to fewer tiles).
    With `even` (the default; dev knob CLO_GEMM_SKINNY_TT_EVEN=0 off) the tokens are cut into tiles
    as even as multiples of 8 allow, on the narrowest kernel at least that wide; without, tiles of
    the kernel's width. None where there is no such deal (or one token tile). Tiles of 16 tokens
    or fewer are weighed with tt16 (dev knob CLO_GEMM_SKINNY_TT16=1) or by the default rule: a
    16-bit call (ktiles: its 128-byte k-tiles; 0 for int8) of at most 128 k-tiles. With
    `wide_split` (the default; dev knob CLO_GEMM_SKINNY_WIDE_SPLIT=0 off) none for 129-192 tokens of
    a 16-bit call above 128 k-tiles where 2 chunks of every 64-row unit fit the SMs
    (skinny_wide_split)."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    best, best_rows, best_tiles = None, 0, 0
    tt16 = tt16 or 0 < ktiles <= 128
    if tokens <= 16 or (wide_split and 128 < tokens <= 192 and ktiles > 128 and 2 * -(-rows // 64) <= sms):
        return None
    for bn in (128, 64, 32, 16):
        for tile_n in range(bn, bn // 2 if even else bn - 8, -8):
            if tile_n <= 16 and not tt16:
                continue
            tiles = -(-tokens // tile_n)
            if tiles < 2 or (even and -(-tokens // tiles) <= tile_n - 8):
                continue
            for r in range(64, 129, 8 if k_major else 32):
                items = -(-rows // r) * tiles
                if items > sms or items * 10 < sms * 9:
                    continue
                cost = r + tile_n + (16 if even and r > 64 else 0)  # kSkinnyTallUnitRows
                if best is None or cost < best_rows or (cost == best_rows and tiles < best_tiles):
                    best, best_rows, best_tiles = (bn, r, tile_n), cost, tiles
    return best


@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("knob,m,n,k,width", [("CLO_GEMM_SKINNY_TT16", 17, 4096, 4104, 16),
                                              ("CLO_GEMM_SKINNY_TT16", 32, 6144, 520, 16),
                                              ("CLO_GEMM_SKINNY_TT16", 20, 4096, 1032, 16),
                                              ("CLO_GEMM_SKINNY_TT_EVEN", 144, 4096, 1032, 64),
                                              ("CLO_GEMM_SKINNY_TT_EVEN", 225, 4096, 4104, 128),
                                              ("CLO_GEMM_SKINNY_BOX_CLIP", 72, 4096, 1032, 64),
                                              ("CLO_GEMM_SKINNY_BOX_CLIP", 145, 6144, 520, 128)])
def test_wgmma_skinny_token_tile_knobs(monkeypatch, trans_b, knob, m, n, k, width):
    """The token-tile deal's dev knobs: CLO_GEMM_SKINNY_TT16=1 (17-32 tokens in two 16-wide tiles on
    the decode tile's kernel, at any K; 6144 rows in 96-row units) and CLO_GEMM_SKINNY_TT_EVEN=0
    (tiles of the kernel's width, the last one short: 144 tokens on 4096 rows in 96-row units x 3
    tiles of 64, the last of 16; 225 in 64-row units x 2 of 128, the last of 97). The kernel is the
    mirror's width (`width` on 132 SMs), whole units (no counters to zero); against float64
    (K = 4104 and 1032: a partial last k-tile), bit for bit on a second call, and a CUDA graph
    replays it on new data. CLO_GEMM_SKINNY_BOX_CLIP=0 turns off the default clip of the last
    token tile's box to its tokens (72: even tiles of 40, the last of 32 in a 40-row box, 8 rows
    past M; 145: tiles of 80 on the 128-wide kernel, the last of 65 in an 80-row box)."""
    _require_sm90()
    off = knob.endswith("BOX_CLIP") or knob.endswith("TT_EVEN")
    monkeypatch.setenv(knob, "0" if off else "1")
    tokens = _skinny_token_tiles(n, m, trans_b, tt16=knob.endswith("TT16"), even=not knob.endswith("TT_EVEN"))
    assert tokens is not None
    if torch.cuda.get_device_properties(0).multi_processor_count == 132:
        assert tokens[0] == width, tokens
    dtype = torch.float16
    a, b = _rand((m, k), dtype), _rand((n, k) if trans_b else (k, n), dtype)
    f = lambda: llm.gemm(a, b, trans_b=trans_b)
    names = kernel_names(f)
    assert re.search(rf"gemm_wgmma_sm90_kernel<[^>]*, {tokens[0]}, \d+, 1, true>", names), names
    assert "Memset" not in names, names
    out = f()
    assert_close(out, gemm_reference(a, b, trans_b=trans_b, dtype=torch.float64), dtype, rel_tol=_tol(dtype, k),
                 what=f"{knob} {m}x{n}x{k} tb={trans_b}")
    assert torch.equal(f(), out)
    _assert_graph_replays(f, a, b, trans_b, dtype, k, f"{knob} graph replay")


@pytest.mark.parametrize("force", ["", "2"])
@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("m,n,k", [(64, 4096, 4096), (64, 6144, 4096), (128, 4096, 14336), (17, 28672, 512),
                                   (100, 136, 2056), (65, 8, 24), (33, 12288, 520), (65, 4096, 4104),
                                   (17, 4096, 4104), (17, 4096, 8328), (256, 4096, 1032), (129, 4096, 520),
                                   (200, 6144, 264), (256, 5120, 520), (256, 1000, 520), (256, 700, 520),
                                   (144, 12288, 520), (256, 12288, 264), (160, 16384, 136), (192, 12360, 1032),
                                   (160, 28672, 136), (144, 4096, 1032), (40, 4096, 4104), (97, 5120, 264)])
def test_wgmma_skinny_batched_shapes(monkeypatch, force, trans_b, m, n, k):
    """kAuto sends 16 < M <= 256 to the skinny tile (kernel name) unless the 128-wide tiles fill a
    wave or the weight has fewer than 1024 rows. Where whole units of weight rows x token tiles
    fill a wave (plan_skinny_token_tiles: 4096 rows at M = 64 in 64-row units x 2 tiles 32 wide,
    M = 128 x 64 wide, M = 256 x 128 wide; 6144 rows in units of 96; even tiles narrower than the
    kernel: M = 129 and 144 in 2 tiles of 72 on the 128-wide kernel (the last of 57 tokens at 129),
    M = 40 in 2 of 24 on the 32-wide one, 97 x 5120 with b [N, K] in 80-row units x 2 of 56
    (b [K, N]: 128-row units x 3 of 40); M = 17-32 at
    K <= 8192: 2 tiles 16 wide, 17 x 4096 x 4104), one a CTA; otherwise
    (M <= 128) all of a in one tile, 64 wide up to M = 64 and 128 above, in whole units as for
    decode or (too few weight rows for a wave of them) 64-row units each split along K over the
    SMs, at most ~sqrt(k-tiles / 2) ranges a unit (M = 17, 4096 rows, K = 8328: 64 x 2 ranges of
    65.5 k-tiles, which cross unit boundaries; forced, 136 rows: 3 units of 4 ranges). M = 256
    on 5120 rows of a weight stored [K, N] runs 128-row units x 3 tiles of 88; on 700 and 1000
    rows (too few for the tile rule) the other kernels, and when forced 11 tiles of 24 and 8 of 32
    (700 stored [K, N]: rows not 16-byte aligned, never).
    M > 128 without one, where plan_skinny deals whole units in a wave (12288 rows: 128 units of
    96; 12360: a last unit of 72; 16384: 128 of 128; 28672 with b [N, K]: 256 units of 112, two a
    CTA, and with b [K, N] none), runs up to M = 192 in one tile 192 wide, its last token box
    clipped to M (144: 144 rows of 192; 160: 160), even where the 128-wide tiles fill a wave
    (above 192 rows the other kernels: 256 x 12288); CLO_GEMM_SKINNY_WIDE=0 sends those to the
    other kernels.
    Repeated calls agree bit for bit; a CUDA graph replays it on new data;
    CLO_GEMM_SKINNY_WGMMA=0 gives the 128-row tiles or mma.sync back, with the same result."""
    _require_sm90()
    tokens = _skinny_token_tiles(n, m, trans_b, ktiles=-(-k // 64))
    wide = 128 < m <= 192 and not tokens and _skinny_whole_units(n, trans_b)
    bn = tokens[0] if tokens else 64 if m <= 64 else 128 if m <= 128 else 192 if wide else None
    # Not where the 128-wide tiles fill a wave (17 x 28672: 224 of them), nor below 1024 weight
    # rows (136, 8): the other kernels run. Forced (CLO_GEMM_SKINNY_WGMMA=2) the tile takes all
    # it can run. The wide tile runs wherever its units go whole.
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    # b [K, N] rows of N elements must be 16-byte aligned for TMA (700: the general kernel).
    tile = bn is not None and (trans_b or n % 8 == 0) and (
        force == "2" or wide or (-(-m // 128) * -(-n // 128) < sms and n >= 1024))
    if sms == 132 and 128 < m <= 192 and (n in (12288, 12360, 16384) or (n == 28672 and trans_b)):
        assert wide and tile, (m, n, trans_b)
    monkeypatch.setenv("CLO_GEMM_SKINNY_WGMMA", force)
    for dtype in (torch.float16, torch.bfloat16):
        a, b = _rand((m, k), dtype), _rand((n, k) if trans_b else (k, n), dtype)
        f = lambda: llm.gemm(a, b, trans_b=trans_b)
        names = kernel_names(f)
        assert bool(re.search(rf"gemm_wgmma_sm90_kernel<[^>]*, {bn}, \d+, 1, true>", names)) == tile, names
        if tokens:  # whole units: no counters to zero
            assert "Memset" not in names, names
        out = f()
        ref = gemm_reference(a, b, trans_b=trans_b, dtype=torch.float64)
        assert_close(out, ref, dtype, rel_tol=_tol(dtype, k), what=f"wgmma skinny batched {dtype} {m}x{n}x{k} tb={trans_b}")
        assert torch.equal(f(), out)
    ref = _assert_graph_replays(f, a, b, trans_b, dtype, k, "wgmma skinny batched graph replay")
    if wide:
        monkeypatch.setenv("CLO_GEMM_SKINNY_WIDE", "0")
        assert not re.search(r"gemm_wgmma_sm90_kernel<[^>]*, true>", kernel_names(f))
        assert_close(f(), ref, dtype, rel_tol=_tol(dtype, k), what="batched decode without the wide tile")
        monkeypatch.setenv("CLO_GEMM_SKINNY_WIDE", "")
    monkeypatch.setenv("CLO_GEMM_SKINNY_WGMMA", "0")
    assert not re.search(r"gemm_wgmma_sm90_kernel<[^>]*, true>", kernel_names(f))
    assert_close(f(), ref, dtype, rel_tol=_tol(dtype, k), what="batched decode without the skinny tile")


@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("m,n,k,splits", [(144, 4096, 8328, 2), (160, 2816, 8264, 3), (129, 4136, 8200, 2),
                                          (192, 4096, 8200, 2)])
def test_wgmma_skinny_wide_split(monkeypatch, trans_b, m, n, k, splits):
    """The default skinny_wide_split (dev knob CLO_GEMM_SKINNY_WIDE_SPLIT=0 off): 129-192 tokens above 128 k-tiles,
    where two chunks of every 64-row unit fit a wave, run in one 192-wide tile with each 64-row
    unit cut along K into `splits` chunks (4096 rows: 64 units x 2; 2816: 44 x 3; 4136: a last
    unit of 40 rows; K = 8200 and 8264 end on a partial k-tile), the last chunk summing them all
    from the workspace in chunk order (its counters zeroed: the memset) instead of two token
    tiles. Against float64, bit for bit on a second call, a CUDA graph replays it on new data;
    with the knob off the token tiles run and agree within rounding. Then alpha, beta, c and fp32
    output through the same split."""
    _require_sm90()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    units = -(-n // 64)
    if sms == 132:
        assert min(sms // units, -(-k // 64), round((-(-k // 64) / 2) ** 0.5)) == splits
    monkeypatch.setenv("CLO_GEMM_SKINNY_WIDE_SPLIT", "")
    assert _skinny_token_tiles(n, m, trans_b, ktiles=-(-k // 64)) is None
    assert _skinny_token_tiles(n, m, trans_b, ktiles=-(-k // 64), wide_split=False) is not None
    dtype = torch.float16
    a, b = _rand((m, k), dtype), _rand((n, k) if trans_b else (k, n), dtype)
    f = lambda: llm.gemm(a, b, trans_b=trans_b)
    names = kernel_names(f)
    assert re.search(r"gemm_wgmma_sm90_kernel<[^>]*, 192, \d+, 1, true>", names) and "Memset" in names, names
    out = f()
    ref = gemm_reference(a, b, trans_b=trans_b, dtype=torch.float64)
    assert_close(out, ref, dtype, rel_tol=_tol(dtype, k), what=f"wide split {m}x{n}x{k} tb={trans_b}")
    assert torch.equal(f(), out)
    _assert_graph_replays(f, a, b, trans_b, dtype, k, "wide split graph replay", replays=2)
    monkeypatch.setenv("CLO_GEMM_SKINNY_WIDE_SPLIT", "0")
    a2, b2 = _rand((m, k), dtype), _rand((n, k) if trans_b else (k, n), dtype)
    a.copy_(a2), b.copy_(b2)
    assert not re.search(r"gemm_wgmma_sm90_kernel<[^>]*, 192, \d+, 1, true>", kernel_names(f))
    split_off = f()
    monkeypatch.setenv("CLO_GEMM_SKINNY_WIDE_SPLIT", "")
    assert_close(f(), split_off.double(), dtype, rel_tol=_tol(dtype, k), what="wide split against token tiles")
    _decode_shape_case("auto", m, n, k, torch.bfloat16, trans_b, -0.5, 1.5, True, True,
                       kernel=r"gemm_wgmma_sm90_kernel<[^>]*, 192, \d+, 1, true>")


def _skinny_whole_units(n, trans_b):
    """plan_skinny's choice (gemm_wgmma_sm90.cuh): a weight stored [N, K] goes in whole units of
    64..128 rows (the busiest SM's rows fewest, then the most rows) where they keep 90% of the
    SMs busy; one stored [K, N] in whole units of the shortest of 64, 96 or 128 rows that fit
    one wave, where they keep 70% of the SMs busy; otherwise stream-K over 128-row units."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    if not trans_b:
        r = 64
        while r < 128 and -(-n // r) > sms:
            r += 32
        units = -(-n // r)
        return units <= sms and units * 10 >= sms * 7
    best = min(range(128, 63, -8), key=lambda r: (-(-(-(-n // r)) // sms) * r, -r))
    if -(-n // best) * 10 >= sms * 9:
        return True
    best = max(64, -(-(-(-n // sms)) // 8) * 8)  # one wave of the shortest units, 70% of the SMs
    return best <= 128 and -(-n // best) * 10 >= sms * 7


@pytest.mark.parametrize("n", [6144, 8192, 12288, 12320, 12360, 14336])
def test_wgmma_skinny_kn_unit_heights(n):
    """b [K, N] on the skinny tile in whole units (no counters to zero), by plan_skinny's rule
    on 132 SMs: of 64 rows (N = 6144, 8192), 96 (12288; 12320: a last unit of 32 rows, its
    32-row box wholly past N; 12360: a last unit of 72, its 32-row box partly past N) or 128
    (14336). The names do not tell 96 from 128 rows; a wrong 32-row box or descriptor would
    corrupt rows 64-95 of every unit. k = 520 ends on a partial k-tile. Exact against float64,
    bit for bit on a second call."""
    _require_sm90()
    whole = _skinny_whole_units(n, False)
    if torch.cuda.get_device_properties(0).multi_processor_count == 132:
        assert whole
    for m, dtype in ((16, torch.float16), (9, torch.bfloat16)):
        a, b = _rand((m, 520), dtype), _rand((520, n), dtype)
        f = lambda: llm.gemm(a, b)
        names = kernel_names(f)
        assert "gemm_wgmma_sm90_kernel" in names and ("Memset" in names) == (not whole), names
        out = f()
        assert_close(out, gemm_reference(a, b, dtype=torch.float64), dtype, rel_tol=_tol(dtype, 520),
                     what=f"wgmma skinny b [K, N] {dtype} {m}x{n}x520")
        assert torch.equal(f(), out)


@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("m,n,k", [(1, 12288, 4096), (16, 12288, 4096), (16, 4096, 14336), (5, 28672, 512),
                                   (9, 136, 2056), (3, 8, 24)])
def test_wgmma_skinny_decode_shapes(monkeypatch, trans_b, m, n, k):
    """Decode projections through kAuto on Hopper take the wgmma skinny tile (kernel name).
    b [N, K] with enough rows goes in whole units (N = 12288: 128 units of 96 rows; 28672: 256
    of 112), b [K, N] at N = 12288 in 128 units of 96 rows (a 64-row box and a 32-row one in
    the 64-byte swizzle), one a CTA: no counters to zero.
    Elsewhere the memset of the counters runs wherever a unit is split: b [K, N] with too few
    64-row units for a wave splits each along K (4096 rows at K = 14336: 64 units x 2 ranges;
    136 rows at K = 2056: 3 units x 4), else stream-K (28672 rows: 224 tiles dealt to 132 SMs,
    ranges over whole tiles and pieces); b [N, K] at 136 x 2056 stream-K, two tiles in 66
    one-k-tile pieces; 8 x 24 one k-tile, whole. Repeated calls
    agree bit for bit; a CUDA graph replays it on new data; CLO_GEMM_SKINNY_WGMMA=0 gives the
    skinny kernels back. Forced (CLO_GEMM_SKINNY_WGMMA=2); the default rule takes M >= 8 with
    b [K, N] or N >= 8192, and b [N, K] at any M where the units go whole."""
    _require_sm90()
    monkeypatch.setenv("CLO_GEMM_SKINNY_WGMMA", "2")
    whole = _skinny_whole_units(n, trans_b)
    if torch.cuda.get_device_properties(0).multi_processor_count == 132:  # H100 SXM: the rule as documented
        assert whole == (n >= 8192 if trans_b else n == 12288)
    for dtype in (torch.float16, torch.bfloat16):
        a, b = _rand((m, k), dtype), _rand((n, k) if trans_b else (k, n), dtype)
        f = lambda: llm.gemm(a, b, trans_b=trans_b)
        names = kernel_names(f)
        assert "gemm_wgmma_sm90_kernel" in names, names
        # whole units, or one k-tile in one tile: no counters to zero
        assert ("Memset" in names) == (k > 64 and not whole), names
        out = f()
        assert_close(out, gemm_reference(a, b, trans_b=trans_b, dtype=torch.float64), dtype, rel_tol=_tol(dtype, k),
                     what=f"wgmma skinny {dtype} {m}x{n}x{k} tb={trans_b}")
        assert torch.equal(f(), out)
    _assert_graph_replays(f, a, b, trans_b, dtype, k, "wgmma skinny graph replay")
    monkeypatch.setenv("CLO_GEMM_SKINNY_WGMMA", "0")
    assert "gemm_wgmma_sm90_kernel" not in kernel_names(f)
    monkeypatch.setenv("CLO_GEMM_SKINNY_WGMMA", "1")
    takes = (m >= 8 and (not trans_b or n >= 8192)) or (trans_b and whole)
    assert ("gemm_wgmma_sm90_kernel" in kernel_names(f)) == takes


@pytest.mark.parametrize("pdl", ["0", "1", "2"])
@pytest.mark.parametrize("m,n,kernel", [
    (1, 4096, r"gemm_skinny_nk_mma"),                                         # mma.sync skinny
    (16, -4096, r"gemm_wgmma_sm90_kernel<[^>]*, 16, \d+, 1, true>"),         # b [K, N]: split, memset
    (1, 12288, r"gemm_wgmma_sm90_kernel<[^>]*, 16, \d+, 1, true>"),          # whole units
    (16, 8192, r"gemm_wgmma_sm90_kernel<[^>]*, 16, \d+, 1, true>"),           # decode tile
    (24, 4096, r"gemm_wgmma_sm90_kernel<[^>]*, 64, \d+, 1, true>"),           # split along K (16-wide tiles off)
    (32, 4096, r"gemm_wgmma_sm90_kernel<[^>]*, 16, \d+, 1, true>"),           # 16-wide token tiles
    (256, 4096, r"gemm_wgmma_sm90_kernel<[^>]*, 128, \d+, 1, true>"),         # token tiles
    (128, 6144, r"gemm_wgmma_sm90_kernel<[^>]*, 64, \d+, 1, true>"),          # 96-row units (mode 1: no PDL)
    (2048, 2048, r"gemm_wgmma_sm90_kernel<[^>]*, 256, 4, 1(, false)?>"),      # persistent tiles
])
def test_gemm_pdl_chain(monkeypatch, pdl, m, n, kernel):
    """Back-to-back gemms under each PDL mode (dev knob CLO_GEMM_PDL: 0 none, 1 where it pays, 2
    every kernel): each call reads the output of the one before and writes over the
    buffer the one before read (two buffers in turn), eagerly and replayed from a CUDA graph
    with new input and the other buffer poisoned. A call that read before the previous kernel
    had finished, or wrote while it still read, breaks the chain against a float64 one rounded
    to fp16 at every step as the kernels round."""
    _require_sm90()
    monkeypatch.setenv("CLO_GEMM_PDL", pdl)
    if m == 24:  # the split along K: 17-32 tokens at K <= 8192 go to 16-wide token tiles by default
        monkeypatch.setenv("CLO_GEMM_SKINNY_TT16", "0")
    trans_b, n = n > 0, abs(n)  # n < 0: the weights stored [K, N]
    dtype, steps = torch.float16, 6
    weights = [(torch.randn(n, n, device="cuda") / n ** 0.5).to(dtype) for _ in range(2)]
    bufs = [_rand((m, n), dtype), torch.full((m, n), float("nan"), device="cuda", dtype=dtype)]

    def chain():
        for i in range(steps):
            llm.gemm(bufs[i % 2], weights[i % 2], trans_b=trans_b, out=bufs[(i + 1) % 2])

    def check(x0, what):
        ref = x0.double()
        for i in range(steps):
            w = weights[i % 2].double()
            ref = (ref @ (w.T if trans_b else w)).to(dtype).double()
        assert_close(bufs[steps % 2], ref, dtype, rel_tol=2 * _tol(dtype, n),
                     what=f"{what} {m}x{n} trans_b={trans_b} CLO_GEMM_PDL={pdl}")

    names = kernel_names(lambda: llm.gemm(bufs[0], weights[0], trans_b=trans_b))
    assert re.search(kernel, names), names
    x0 = bufs[0].clone()
    chain()
    check(x0, "eager chain")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        chain()
    for _ in range(2):
        x0 = _rand((m, n), dtype)
        bufs[0].copy_(x0)
        bufs[1].fill_(float("nan"))
        graph.replay()
        check(x0, "graph replay")


def test_wgmma_errors():
    _require_sm90()
    a, b = _rand((8, 16), torch.float32), _rand((16, 24), torch.float32)
    with pytest.raises(RuntimeError, match=r"wgmma variants take float16 or bfloat16"):
        _gemm_variant(a, b, "wgmma")
    with pytest.raises(RuntimeError, match=r"16-byte aligned rows"):
        _gemm_variant(_rand((8, 12), torch.float16), _rand((12, 24), torch.float16), "wgmma")


def test_gemm_beta_ignored_without_c():
    require_op("gemm")
    a, b = _rand((33, 40), torch.float16), _rand((40, 24), torch.float16)
    assert torch.equal(llm.gemm(a, b, 1.0, 5.0), llm.gemm(a, b, 1.0, 0.0))


def test_gemm_unaligned_view_offsets():
    """A base pointer off 16-byte alignment (a slice) must still be right (generic path)."""
    require_op("gemm")
    big = _rand((65 * 72 + 1,), torch.float16)
    a = big[1:].view(65, 72)  # data_ptr % 16 == 2
    b = _rand((72, 40), torch.float16)
    assert_close(llm.gemm(a, b), gemm_reference(a, b, dtype=torch.float64), torch.float16)


# ---- out= ------------------------------------------------------------------------------------

def _nan_out(m, n, dtype, offset=0):
    """A NaN-filled [m, n] output; `offset` elements into a larger buffer (a base off 16 bytes)."""
    fill = 0 if dtype == torch.int32 else float("nan")
    big = torch.full((m * n + offset,), fill, dtype=dtype, device="cuda")
    if dtype == torch.int32:
        big.fill_(-(2**31))
    return big[offset:].view(m, n)


# (m, n, k): the skinny kernels (m <= 16; with b [K, N] at 16 x 4096 x 4096 on H100 the wgmma
# skinny tile's stream-K pieces), the mma.sync tiles, the Hopper family with its split last wave
# (2176 x 4096), the generic kernel (n, k not multiples of 8).
OUT_SHAPES = [(1, 4096, 4096), (16, 4096, 4096), (16, 1032, 520), (264, 1032, 4096), (2176, 4096, 1024),
              (200, 264, 136), (37, 45, 29)]
LAYOUTS = [(False, False), (False, True), (True, False), (True, True)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("m,n,k", OUT_SHAPES)
@pytest.mark.parametrize("offset", [0, 1])
def test_gemm_out_matches_gemm(dtype, m, n, k, offset):
    """gemm(out=) writes the same bits as gemm into the caller's tensor (aligned or not) and
    returns it; tensor_core_gemm(out=) likewise for its float32 output."""
    require_op("gemm_out")
    for trans_a, trans_b in LAYOUTS:
        a = _rand((k, m) if trans_a else (m, k), dtype)
        b = _rand((n, k) if trans_b else (k, n), dtype)
        c = _rand((m, n), dtype)
        for with_c in (False, True):
            out = _nan_out(m, n, dtype, offset)
            cc = c if with_c else None
            got = llm.gemm(a, b, 0.5, 2.0, trans_a, trans_b, cc, out=out)
            assert got is out
            want = llm.gemm(a, b, 0.5, 2.0, trans_a, trans_b, cc)
            assert torch.equal(out, want), \
                f"gemm out= {dtype} {m}x{n}x{k} off={offset} ta={trans_a} tb={trans_b} c={with_c}"
    if dtype != torch.float32:
        a, b, c = _rand((m, k), dtype), _rand((k, n), dtype), torch.randn(m, n, device="cuda")
        out = _nan_out(m, n, torch.float32, offset)
        assert llm.tensor_core_gemm(a, b, 1.0, -1.0, c, out=out) is out
        assert torch.equal(out, llm.tensor_core_gemm(a, b, 1.0, -1.0, c))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("m,n,k", OUT_SHAPES)
@pytest.mark.parametrize("offset", [0, 1])
def test_gemm_out_is_c_in_place(dtype, m, n, k, offset):
    """out=c: c <- alpha * op(a) @ op(b) + beta * c (e.g. the residual add of a linear layer),
    the same bits as into a separate output, c aligned or not."""
    require_op("gemm_out")
    for trans_a, trans_b in LAYOUTS:
        a = _rand((k, m) if trans_a else (m, k), dtype)
        b = _rand((n, k) if trans_b else (k, n), dtype)
        c = _nan_out(m, n, dtype, offset).copy_(_rand((m, n), dtype))
        want = llm.gemm(a, b, 0.75, -1.25, trans_a, trans_b, c)
        assert llm.gemm(a, b, 0.75, -1.25, trans_a, trans_b, c, out=c) is c
        assert torch.equal(c, want), f"gemm out=c {dtype} {m}x{n}x{k} off={offset} ta={trans_a} tb={trans_b}"
    if dtype != torch.float32:
        a, b = _rand((m, k), dtype), _rand((k, n), dtype)
        acc = _nan_out(m, n, torch.float32, offset).copy_(torch.randn(m, n, device="cuda"))
        want = llm.tensor_core_gemm(a, b, 1.0, 1.0, acc)
        llm.tensor_core_gemm(a, b, 1.0, 1.0, acc, out=acc)
        assert torch.equal(acc, want)


@pytest.mark.parametrize("m,n,k", [(1, 4096, 4096), (264, 1032, 4096), (4096, 4096, 256), (37, 45, 29)])
@pytest.mark.parametrize("col_major_b", [False, True])
@pytest.mark.parametrize("offset", [0, 1])
def test_int8_gemm_out_exact(m, n, k, col_major_b, offset):
    require_op("tensor_core_gemm_int8_out")
    a = torch.randint(-128, 128, (m, k), dtype=torch.int8, device="cuda")
    b = torch.randint(-128, 128, (n, k) if col_major_b else (k, n), dtype=torch.int8, device="cuda")
    b = b.t() if col_major_b else b
    out = _nan_out(m, n, torch.int32, offset)
    assert llm.tensor_core_gemm_int8(a, b, out=out) is out
    assert torch.equal(out, int8_gemm_reference(a, b)), f"int8 out= {m}x{n}x{k} col={col_major_b} off={offset}"


def test_gemm_out_graph_capture_replay():
    """With out= the call writes the caller's tensor: captured once, replayed on new inputs
    (a split-K workspace, where one is used, comes from the graph's pool)."""
    require_op("gemm_out")
    x, w = _rand((4, 4096), torch.float16), _rand((4096, 4096), torch.float16)
    out = torch.empty(4, 4096, dtype=torch.float16, device="cuda")
    llm.gemm(x, w, trans_b=True, out=out)  # warm-up outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        llm.gemm(x, w, trans_b=True, out=out)
    for _ in range(2):
        x.copy_(_rand((4, 4096), torch.float16))
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, llm.gemm(x, w, trans_b=True))


def test_gemm_out_errors():
    require_op("gemm_out")
    a, b = _rand((8, 16), torch.float16), _rand((16, 24), torch.float16)
    with pytest.raises(ValueError, match=r"out must have shape \[M, N\] = \[8, 24\], got \(8, 23\)"):
        llm.gemm(a, b, out=_rand((8, 23), torch.float16))
    with pytest.raises(ValueError, match=r"out must have dtype float16, got float32"):
        llm.gemm(a, b, out=_rand((8, 24), torch.float32))
    with pytest.raises(ValueError, match=r"out must have dtype float32, got float16"):
        llm.tensor_core_gemm(a, b, out=_rand((8, 24), torch.float16))
    with pytest.raises(ValueError, match=r"a must have dtype float16 or bfloat16, got float32"):
        llm.tensor_core_gemm(a.float(), b.float(), out=_rand((8, 24), torch.float32))
    with pytest.raises(ValueError, match=r"out must be contiguous"):
        llm.gemm(a, b, out=_rand((24, 8), torch.float16).t())
    with pytest.raises(ValueError, match=r"out must be on the same device as a"):
        llm.gemm(a, b, out=torch.empty(8, 24, dtype=torch.float16))
    buf = _rand((8 * 24 + 16 * 24,), torch.float16)
    bb = buf[:16 * 24].view(16, 24)
    with pytest.raises(ValueError, match=r"out must not overlap b"):
        llm.gemm(a, bb, out=buf[16 * 24 - 8:16 * 24 - 8 + 8 * 24].view(8, 24))
    big = _rand((2 * 8 * 24,), torch.float16)
    with pytest.raises(ValueError, match=r"out must not overlap c \(it may be c itself\)"):
        llm.gemm(a, b, 1.0, 1.0, c=big[:8 * 24].view(8, 24), out=big[4:4 + 8 * 24].view(8, 24))
    sq = _rand((16, 16), torch.float16)
    with pytest.raises(ValueError, match=r"out must not overlap a"):
        llm.gemm(sq, sq, out=sq)
    ai = torch.randint(-5, 5, (8, 16), dtype=torch.int8, device="cuda")
    bi = torch.randint(-5, 5, (16, 24), dtype=torch.int8, device="cuda")
    with pytest.raises(ValueError, match=r"out must have dtype int32, got float32"):
        llm.tensor_core_gemm_int8(ai, bi, out=torch.empty(8, 24, device="cuda"))
    buf = torch.randint(-5, 5, (376 + 8 * 24 * 4,), dtype=torch.int8, device="cuda")
    with pytest.raises(ValueError, match=r"out must not overlap b"):  # b = w.t(), out over w's last 8 bytes
        llm.tensor_core_gemm_int8(ai, buf[:24 * 16].view(24, 16).t(), out=buf[376:].view(torch.int32).view(8, 24))


def test_beta_zero_reads_no_c_and_scales_are_finite():
    """beta = 0 does not read c (as BLAS; stop 95): NaN in c, or out=c over an unset buffer, does
    not reach the output, on the tile kernels and the general one; alpha / beta must be finite."""
    require_op("gemm")
    for k in (64, 13):  # 16-byte rows: the tile kernels; K = 13: the general kernel
        a, b = _rand((32, k), torch.float16), _rand((k, 40), torch.float16)
        ref = gemm_reference(a, b, alpha=0.5)
        c = torch.full((32, 40), float("nan"), dtype=torch.float16, device="cuda")
        assert_close(llm.gemm(a, b, 0.5, 0.0, c=c), ref, dtype=torch.float16, what=f"beta 0, NaN c, K={k}")
        llm.gemm(a, b, 0.5, 0.0, c=c, out=c)
        assert_close(c, ref, dtype=torch.float16, what=f"beta 0, out=c over NaN, K={k}")
        c32 = torch.full((32, 40), float("nan"), device="cuda")
        assert_close(llm.tensor_core_gemm(a, b, 0.5, 0.0, c=c32), ref.float(), dtype=torch.float16,
                     what=f"tensor_core_gemm beta 0, K={k}")
    for alpha, beta in ((float("nan"), 0.0), (1.0, float("inf")), (1e39, 0.0)):
        with pytest.raises((RuntimeError, ValueError), match=r"alpha and beta must be finite as float32"):
            llm.gemm(a, b, alpha, beta, c=c)


def test_general_kernel_past_65535_row_tiles():
    """op(A) taller than 65535 tiles of 64 rows on the general kernel (K = 3: rows not 16-byte
    aligned): the grid's y dimension holds 65535 tiles and each block loops over the rest
    (the launch used to fail with 'invalid argument'; stop 95)."""
    require_op("gemm")
    m = 65535 * 64 + 17
    a, b = _rand((m, 3), torch.float16), _rand((3, 5), torch.float16)
    out = torch.full((m, 5), float("nan"), dtype=torch.float16, device="cuda")
    llm.gemm(a, b, out=out)
    assert_close(out, gemm_reference(a, b), dtype=torch.float16, what="4.2M rows, general kernel")
    ai = torch.randint(-5, 5, (m, 3), dtype=torch.int8, device="cuda")
    bi = torch.randint(-5, 5, (3, 5), dtype=torch.int8, device="cuda")
    assert torch.equal(llm.tensor_core_gemm_int8(ai, bi), int8_gemm_reference(ai, bi))


# ---- errors ---------------------------------------------------------------------------------

def test_gemm_errors():
    require_op("gemm")
    a, b = _rand((8, 16), torch.float16), _rand((16, 24), torch.float16)
    with pytest.raises(ValueError, match=r"a must be 2-D"):
        llm.gemm(a[None], b)
    with pytest.raises(ValueError, match=r"inner dimensions differ: op\(a\) is \[8, 16\] and op\(b\) is \[24, 16\]"):
        llm.gemm(a, b, trans_b=True)
    with pytest.raises(ValueError, match=r"b must have the same dtype as a \(float16\), got float32"):
        llm.gemm(a, b.float())
    with pytest.raises(ValueError, match=r"a must have dtype float32 or float16 or bfloat16, got int8"):
        llm.gemm(a.to(torch.int8), b.to(torch.int8))
    with pytest.raises(ValueError, match=r"a must be a CUDA tensor"):
        llm.gemm(a.cpu(), b.cpu())
    with pytest.raises(ValueError, match=r"b must be on the same device as a"):
        llm.gemm(a, b.cpu())
    with pytest.raises(ValueError, match=r"a must have no empty dimension"):
        llm.gemm(a[:0], b)
    with pytest.raises(ValueError, match=r"c must have shape \[M, N\] = \[8, 24\], got \(8, 23\)"):
        llm.gemm(a, b, c=_rand((8, 23), torch.float16))
    with pytest.raises(ValueError, match=r"c must have dtype float16, got float32"):
        llm.gemm(a, b, c=_rand((8, 24), torch.float32))
    with pytest.raises(ValueError, match=r"a must be contiguous"):
        llm.gemm(_rand((16, 8), torch.float16).t(), b)
    with pytest.raises(TypeError, match=r"b must be a torch.Tensor"):
        llm.gemm(a, [[1.0]])
    with pytest.raises(ValueError, match=r"must have dtype float16 or bfloat16, got float32"):
        llm.tensor_core_gemm(a.float(), b.float())
    with pytest.raises(ValueError, match=r"c must have dtype float32, got float16"):
        llm.tensor_core_gemm(a, b, c=_rand((8, 24), torch.float16))
    with pytest.raises(ValueError, match=r"variant must be one of"):
        _gemm_variant(a, b, "fast")


_DIRECT_OP_CHECKS = r"""
import torch, cuda_llm_ops
ops = torch.ops.cuda_llm_ops
a = torch.randn(8, 16, device="cuda").half(); b = torch.randn(16, 24, device="cuda").half()
cc = torch.randn(2 * 8 * 24, device="cuda").half()
calls = [
    ("inner dimensions differ", lambda: ops.gemm(a, b, 1.0, 0.0, True, False, None)),
    ("b must have dtype", lambda: ops.gemm(a, b.float(), 1.0, 0.0, False, False, None)),
    ("c must have shape", lambda: ops.gemm(a, b, 1.0, 1.0, False, False, a)),
    ("tile kernels need 16-byte aligned rows",
     lambda: ops._gemm_variant(torch.randn(8, 12, device="cuda").half(), torch.randn(12, 24, device="cuda").half(), 1, False)),
    ("inner dimensions differ", lambda: ops.tensor_core_gemm_int8(a.to(torch.int8), a.to(torch.int8))),
    ("out must have shape [8, 24]", lambda: ops.gemm_out(a, a, b, 1.0, 0.0, False, False, None)),
    ("out must have a's dtype", lambda: ops.gemm_out(torch.empty(8, 24, device="cuda", dtype=torch.int32), a, b,
                                                     1.0, 0.0, False, False, None)),
    ("out must not overlap b", lambda: ops.gemm_out(b[:8], a, b, 1.0, 0.0, False, False, None)),
    ("out must be c itself or not overlap it",
     lambda: ops.gemm_out(cc[1:1 + 8 * 24].view(8, 24), a, b, 1.0, 1.0, False, False, cc[:8 * 24].view(8, 24))),
    ("out must have dtype Int", lambda: ops.tensor_core_gemm_int8_out(torch.empty(8, 24, device="cuda"),
                                                                      a.to(torch.int8), b.to(torch.int8))),
    # K past 2^30 (expanded views: no memory): refused before the kernels' int tile counts wrap
    ("a dimensions must be <= 2^30", lambda: ops.gemm(a[:1, :1].expand(1, 2**30 + 1), a[:1, :1].expand(2**30 + 1, 8),
                                                      1.0, 0.0, False, False, None)),
]
for want, call in calls:
    try:
        call()
    except RuntimeError as exc:
        assert want in str(exc), (want, str(exc)[:200])
    else:
        raise AssertionError("no error: " + want)
print("DIRECT-OK")
"""


def _direct_op_child():
    return dict(code=_DIRECT_OP_CHECKS)


@pytest.mark.isolated(_direct_op_child, ops=("gemm",))
def test_direct_op_checks():
    """The C++ layer rejects what the Python layer would have (direct torch.ops calls).

    Run in a subprocess: a C++ exception that fails to cross into Python (a toolchain
    mismatch) then fails this test instead of killing the whole pytest process."""
    require_op("gemm")
    run_isolated(**_direct_op_child())


def test_int8_errors():
    require_op("tensor_core_gemm_int8")
    a = torch.randint(-5, 5, (8, 16), dtype=torch.int8, device="cuda")
    b = torch.randint(-5, 5, (16, 24), dtype=torch.int8, device="cuda")
    with pytest.raises(ValueError, match=r"a must have dtype int8, got float16"):
        llm.tensor_core_gemm_int8(a.half(), b.half())
    with pytest.raises(ValueError, match=r"inner dimensions differ"):
        llm.tensor_core_gemm_int8(a, b.t().contiguous())
    with pytest.raises(ValueError, match=r"b must be contiguous or the transpose of a contiguous"):
        llm.tensor_core_gemm_int8(a, torch.randint(-5, 5, (16, 48), dtype=torch.int8, device="cuda")[:, ::2])


# ---- torch integration ----------------------------------------------------------------------

def test_opcheck():
    require_op("gemm")
    a, b = _rand((24, 40), torch.float16), _rand((40, 16), torch.float16)
    c = _rand((24, 16), torch.float16)
    ops = torch.ops.cuda_llm_ops
    torch.library.opcheck(ops.gemm.default, (a, b, 1.0, 0.5, False, False, c))
    torch.library.opcheck(ops.gemm.default, (a.float().t().contiguous(), b.float(), 2.0, 0.0, True, False, None))
    torch.library.opcheck(ops.tensor_core_gemm.default, (a, b, 1.0, 0.0, None))
    ai = torch.randint(-128, 128, (24, 32), dtype=torch.int8, device="cuda")
    bi = torch.randint(-128, 128, (32, 16), dtype=torch.int8, device="cuda")
    torch.library.opcheck(ops.tensor_core_gemm_int8.default, (ai, bi))
    torch.library.opcheck(ops._gemm_variant.default, (a, b, 1, True))
    torch.library.opcheck(ops.gemm_out.default, (torch.empty(24, 16, device="cuda").half(), a, b, 1.0, 0.5, False,
                                                 False, c))
    torch.library.opcheck(ops.gemm_out.default, (torch.empty(24, 16, device="cuda"), a, b, 1.0, 0.0, False, False,
                                                 None))
    torch.library.opcheck(ops.gemm_out.default, (c.clone(), a, b, 1.0, 1.0, False, False, None))
    cc = c.clone()
    torch.library.opcheck(ops.gemm_out.default, (cc, a, b, 1.0, 1.0, False, False, cc))  # out is c
    torch.library.opcheck(ops.tensor_core_gemm_int8_out.default,
                          (torch.empty(24, 16, dtype=torch.int32, device="cuda"), ai, bi))


def test_torch_compile_fullgraph():
    require_op("gemm")
    a, b = _rand((48, 32), torch.bfloat16), _rand((32, 40), torch.bfloat16)
    ai = torch.randint(-128, 128, (48, 32), dtype=torch.int8, device="cuda")
    bi = torch.randint(-128, 128, (32, 40), dtype=torch.int8, device="cuda")

    def f(a, b, ai, bi):
        x = llm.gemm(a, b, 2.0) + 1
        y = llm.tensor_core_gemm(a, b)
        z = llm.tensor_core_gemm_int8(ai, bi)
        return x, y, z

    x, y, z = torch.compile(f, fullgraph=True)(a, b, ai, bi)
    assert_close(x, gemm_reference(a, b, 2.0, dtype=torch.float64) + 1, torch.bfloat16)
    # out= inside a compiled graph: the mutation of out is carried by the op's (a!) schema.

    def g(a, b, o, c):
        llm.gemm(a, b, out=o)
        llm.gemm(a, b, 1.0, 1.0, c=c, out=c)  # in place
        return o * 2

    o = torch.full((48, 40), float("nan"), dtype=torch.bfloat16, device="cuda")
    c = _rand((48, 40), torch.bfloat16)
    c_want = llm.gemm(a, b, 1.0, 1.0, c=c)
    doubled = torch.compile(g, fullgraph=True)(a, b, o, c)
    assert torch.equal(o, llm.gemm(a, b)) and torch.equal(doubled, o * 2) and torch.equal(c, c_want)
    assert_close(y, gemm_reference(a, b, dtype=torch.float64), torch.float32, rel_tol=1e-4)
    assert torch.equal(z, int8_gemm_reference(ai, bi))
