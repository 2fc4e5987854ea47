"""GEMM: fp32 SIMT, tensor-core fp16/bf16 and int8, any M, N, K in [1, 2^30].

`gemm` computes `alpha * op(a) @ op(b) + beta * c` with fp32 accumulation and
returns the input dtype; `tensor_core_gemm` returns fp32; `tensor_core_gemm_int8`
is exact (int32 sums: no int8 inputs can overflow them up to K = 131071; past that they wrap
modulo 2^32, as cuBLAS and torch._int_mm do). Transposed layouts are read in place (no copies).

Fast paths need the stored rows readable 16 bytes at a time (contiguous extents
a multiple of 4 fp32 / 8 fp16-bf16 / 16 int8 elements); other shapes run on a
general (slower, still exact-to-fp32) kernel.
"""
from __future__ import annotations

import torch

from . import _ops
from .validation import (FLOAT_DTYPES, _dt, call_or_explain, check_contiguous, check_dtype, check_one_cuda_device,
                         check_out_apart, check_rank, check_tensor, given)

TENSOR_CORE_DTYPES = (torch.float16, torch.bfloat16)
INT8_MIN_CAPABILITY = (8, 0)
MAX_GEMM_DIM = 1 << 30  # each of M, N, K (and the binding's check_matrix)


def _op_shapes(a: torch.Tensor, b: torch.Tensor, trans_a: bool, trans_b: bool):
    m, k = (a.shape[1], a.shape[0]) if trans_a else (a.shape[0], a.shape[1])
    kb, n = (b.shape[1], b.shape[0]) if trans_b else (b.shape[0], b.shape[1])
    return m, k, kb, n


def validate_gemm_inputs(a, b, trans_a: bool = False, trans_b: bool = False, c=None, *,
                         dtypes=FLOAT_DTYPES, c_dtype: torch.dtype | None = None,
                         allow_b_transposed_view: bool = False, out=None) -> tuple[int, int, int]:
    """Check the operands of a GEMM and return `(M, N, K)`.

    a is `[M, K]` (stored `[K, M]` when `trans_a`), b is `[K, N]` (stored `[N, K]`
    when `trans_b`); both 2-D, of one dtype in `dtypes`, non-empty, on one CUDA
    device, contiguous (with `allow_b_transposed_view`, b may also be the
    transpose view of a contiguous `[N, K]`). `c` and `out`, when given, must be
    `[M, N]`, contiguous, of dtype `c_dtype` (default: a's dtype), on a's device;
    `out` must not overlap a or b, and be c itself or apart from it.
    Raises TypeError/ValueError naming the argument, the expected and the actual value;
    the device is checked after the shapes, so CPU tensors get shape errors first.
    """
    check_tensor(a, "a")
    check_tensor(b, "b")
    check_rank(a, "a", 2, "[K, M]" if trans_a else "[M, K]")
    check_rank(b, "b", 2, "[N, K]" if trans_b else "[K, N]")
    check_dtype(a, "a", dtypes)
    if b.dtype != a.dtype:
        raise ValueError(f"b must have the same dtype as a ({_dt(a.dtype)}), got {_dt(b.dtype)}")
    m, k, kb, n = _op_shapes(a, b, trans_a, trans_b)
    if k != kb:
        raise ValueError(
            f"inner dimensions differ: op(a) is [{m}, {k}] and op(b) is [{kb}, {n}] "
            f"(a {tuple(a.shape)} with trans_a={trans_a}, b {tuple(b.shape)} with trans_b={trans_b})")
    for t, name in ((a, "a"), (b, "b")):
        if t.numel() == 0:
            raise ValueError(f"{name} must have no empty dimension (M, N, K >= 1), got shape {tuple(t.shape)}")
        if max(t.shape) > MAX_GEMM_DIM:
            raise ValueError(f"{name} dimensions must be <= 2^30 ({MAX_GEMM_DIM}; the kernels count tiles in "
                             f"32-bit integers), got shape {tuple(t.shape)}")
    want = c_dtype if c_dtype is not None else a.dtype
    for t, name in given((c, "c"), (out, "out")):
        check_tensor(t, name)
        if tuple(t.shape) != (m, n):
            raise ValueError(f"{name} must have shape [M, N] = [{m}, {n}], got {tuple(t.shape)}")
        if t.dtype != want:
            raise ValueError(f"{name} must have dtype {_dt(want)}, got {_dt(t.dtype)}")
    check_one_cuda_device([(a, "a"), (b, "b")] + given((c, "c"), (out, "out")))
    if not a.is_contiguous():
        raise ValueError(f"a must be contiguous, got shape {tuple(a.shape)} with strides {a.stride()}; "
                         "use trans_a for a transposed operand or call .contiguous()")
    if not (b.is_contiguous() or (allow_b_transposed_view and b.t().is_contiguous())):
        what = "contiguous or the transpose of a contiguous [N, K]" if allow_b_transposed_view else "contiguous"
        raise ValueError(f"b must be {what}, got shape {tuple(b.shape)} with strides {b.stride()}; "
                         "call .contiguous()")
    for t, name in given((c, "c"), (out, "out")):
        check_contiguous(t, name)
    check_out_apart(out, ((a, "a"), (b, "b"), (c, "c")), allow_same=("c",))
    return m, n, k


def gemm(a: torch.Tensor, b: torch.Tensor, alpha: float = 1.0, beta: float = 0.0, trans_a: bool = False,
         trans_b: bool = False, c: torch.Tensor | None = None, out: torch.Tensor | None = None) -> torch.Tensor:
    """`alpha * op(a) @ op(b) + beta * c`, fp32 accumulation, output in the input dtype.

    Args:
        a: `[M, K]`, or `[K, M]` with `trans_a` (op(a) = a.T, read in place);
            float32, float16 or bfloat16, contiguous, CUDA.
        b: `[K, N]`, or `[N, K]` with `trans_b`; same dtype and device as a.
        alpha: scale of the product (default 1).
        beta: scale of `c`; ignored when `c` is None (default 0); with 0, `c` is not read (as
            BLAS: NaN or unset values there do not reach the output).
        trans_a, trans_b: layouts as above (NN, NT, TN, TT all supported).
        c: optional `[M, N]` addend in a's dtype.
        out: optional `[M, N]` contiguous output in a's dtype, written in place and returned
            (no allocation). It may be `c` itself (`out = alpha * op(a) @ op(b) + beta * out`,
            e.g. a residual add); any other overlap with a, b or c is refused (checked on
            eager calls; under torch.compile tensors have no addresses to compare).

    fp32 runs on a SIMT register-tiled kernel (no TF32); fp16/bf16 on tensor cores.
    Decode shapes (M <= 16, a not transposed, 16-byte aligned rows) run on the skinny
    kernels, which stream b once (`csrc/gemm/gemm_skinny.cu`), and on Hopper fp16/bf16 up to
    M = 256 (batched decode) on a wgmma tile with the weight as the 64-row operand; for
    nn.Linear's weight `w [N, K]` call `gemm(x, w, trans_b=True)`.
    Any M, N, K in [1, 2^30]. Returns a new contiguous `[M, N]` tensor in a's dtype (`out` when given).

    Scratch: calls that split K across blocks take a workspace from PyTorch's caching
    allocator for the call (so CUDA-graph capture works): the skinny kernels and tiles, and on Hopper
    fp16/bf16 a last wave of tiles at most half full, which is cut along K over the idle SMs
    (up to one 128 KB fp32 chunk per SM, ~17 MB on an H100). Results are the same bits on
    every call with the same inputs.
    """
    kernel = _ops.op("gemm")  # first, so a build without kernels says so
    if out is None:
        return call_or_explain(lambda: kernel(a, b, float(alpha), float(beta), bool(trans_a), bool(trans_b), c),
                               lambda: validate_gemm_inputs(a, b, trans_a, trans_b, c))
    return _gemm_into(out, a, b, alpha, beta, trans_a, trans_b, c, None)


def _gemm_into(out, a, b, alpha, beta, trans_a, trans_b, c, out_dtype):
    """The `gemm_out` op (out's dtype picks the epilogue), checked as `gemm`; returns out."""
    kernel = _ops.op("gemm_out")

    def call():
        # The op takes either epilogue's dtype: hold each function to its own (explain() says so).
        if out.dtype != (a.dtype if out_dtype is None else out_dtype) or (
                out_dtype is not None and a.dtype not in TENSOR_CORE_DTYPES):
            raise ValueError("out or a dtype")
        kernel(out, a, b, float(alpha), float(beta), bool(trans_a), bool(trans_b), c)
        return out

    dtypes = FLOAT_DTYPES if out_dtype is None else TENSOR_CORE_DTYPES
    return call_or_explain(call, lambda: validate_gemm_inputs(a, b, trans_a, trans_b, c, dtypes=dtypes,
                                                              c_dtype=out_dtype, out=out))


def tensor_core_gemm(a: torch.Tensor, b: torch.Tensor, alpha: float = 1.0, beta: float = 0.0,
                     c: torch.Tensor | None = None, out: torch.Tensor | None = None) -> torch.Tensor:
    """`alpha * a @ b + beta * c` on tensor cores, fp16/bf16 in, float32 out.

    Args:
        a: `[M, K]` float16 or bfloat16, contiguous, CUDA.
        b: `[K, N]`, same dtype and device.
        alpha, beta: scales (finite as float32); beta is ignored when `c` is None, and with 0 `c`
            is not read.
        c: optional `[M, N]` float32 addend.
        out: optional `[M, N]` contiguous float32 output, written in place and returned; it may
            be `c` itself (fp32 accumulation in place), no other overlap.

    Any M, N, K in [1, 2^30] (K and N multiples of 8 take the tensor-core path: TMA + wgmma on
    compute capability 9.0 with the sm_90a build, mma.sync otherwise; others a general
    kernel). Returns a new `[M, N]` float32 tensor (`out` when given).
    """
    kernel = _ops.op("tensor_core_gemm")
    if out is not None:
        return _gemm_into(out, a, b, alpha, beta, False, False, c, torch.float32)
    return call_or_explain(
        lambda: kernel(a, b, float(alpha), float(beta), c),
        lambda: validate_gemm_inputs(a, b, c=c, dtypes=TENSOR_CORE_DTYPES, c_dtype=torch.float32))


def _check_int8_device(a: torch.Tensor) -> None:
    if torch.compiler.is_compiling():
        return  # the op itself checks again on the device
    cap = torch.cuda.get_device_capability(a.device)
    if cap < INT8_MIN_CAPABILITY:
        raise RuntimeError(
            f"tensor_core_gemm_int8 needs int8 tensor cores (mma.sync m16n8k32, compute capability >= "
            f"{INT8_MIN_CAPABILITY[0]}.{INT8_MIN_CAPABILITY[1]}); {torch.cuda.get_device_name(a.device)} has "
            f"{cap[0]}.{cap[1]}")


def tensor_core_gemm_int8(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Exact int8 GEMM on tensor cores: int8 `[M, K]` @ int8 `[K, N]` -> int32 `[M, N]`.

    Args:
        a: `[M, K]` int8, contiguous, CUDA.
        b: `[K, N]` int8: contiguous (row-major), or the transpose view `w.t()` of a
            contiguous `[N, K]` w (column-major, the layout of `torch._int_mm`'s fast path).
        out: optional `[M, N]` contiguous int32 output, written in place and returned
            (must not overlap a or b).

    Needs compute capability >= 8.0 (RuntimeError otherwise). Any M, N, K in [1, 2^30]
    (K and N multiples of 16 take the tensor-core path). Returns a new int32 tensor
    (`out` when given).

    Decode shapes (M <= 16) stream the weight once: a row-major b of 32 MiB or more (K and N
    multiples of 16) through a skinny mma.sync kernel that transposes bytes in registers
    (smaller ones: mma.sync with K split across blocks), a column-major b through wgmma on
    Hopper. On Hopper (H100, a build with sm_90a) larger calls run on wgmma
    where the tiles allow: fastest with the column-major b (`w.t()`); a row-major b is first
    transposed into a scratch buffer (K * N bytes, ~10-15% of the call at 4096^3) past 128
    rows of a, and past 256 for weights over 32 MiB (below that the transpose costs more than
    it saves: mma.sync, splitting K where its tiles leave SMs idle). From 17 to 256 rows keep b
    column-major: it runs on the batched-decode wgmma tile (Llama-8B projections at 0.96-2.20x
    `torch._int_mm` on CUDA graphs), a row-major b on mma.sync at up to half that speed.
    """
    kernel = _ops.op("tensor_core_gemm_int8" if out is None else "tensor_core_gemm_int8_out")

    def call():
        if out is None:
            return kernel(a, b)
        kernel(out, a, b)
        return out

    def explain():
        validate_gemm_inputs(a, b, dtypes=(torch.int8,), c_dtype=torch.int32, allow_b_transposed_view=True, out=out)
        _check_int8_device(a)

    return call_or_explain(call, explain)


# Fake (meta) kernels: shapes and dtypes only, for torch.compile and opcheck.
@_ops.register_fake("gemm")
def _gemm_fake(a, b, alpha, beta, trans_a, trans_b, c):
    m = a.shape[1] if trans_a else a.shape[0]
    n = b.shape[0] if trans_b else b.shape[1]
    return a.new_empty((m, n))


@_ops.register_fake("tensor_core_gemm")
def _tensor_core_gemm_fake(a, b, alpha, beta, c):
    return a.new_empty((a.shape[0], b.shape[1]), dtype=torch.float32)


@_ops.register_fake("tensor_core_gemm_int8")
def _tensor_core_gemm_int8_fake(a, b):
    return a.new_empty((a.shape[0], b.shape[1]), dtype=torch.int32)


@_ops.register_fake("gemm_out")
def _gemm_out_fake(out, a, b, alpha, beta, trans_a, trans_b, c) -> None:
    return None


@_ops.register_fake("tensor_core_gemm_int8_out")
def _tensor_core_gemm_int8_out_fake(out, a, b) -> None:
    return None


@_ops.register_fake("_gemm_variant")
def _gemm_variant_fake(a, b, variant, out_fp32, trans_a=False, trans_b=False, alpha=1.0, beta=0.0, c=None):
    m = a.shape[1] if trans_a else a.shape[0]
    n = b.shape[0] if trans_b else b.shape[1]
    return a.new_empty((m, n), dtype=torch.float32 if out_fp32 else a.dtype)


GEMM_VARIANTS = {"auto": 0, "pipelined": 1, "unpipelined": 2, "small_tile": 3, "generic": 4, "alt_a": 5, "alt_b": 6,
                 "wgmma": 7, "wgmma_n128": 8, "skinny": 9}


def _gemm_variant(a: torch.Tensor, b: torch.Tensor, variant: str = "auto", out_fp32: bool = False,
                  trans_a: bool = False, trans_b: bool = False, alpha: float = 1.0, beta: float = 0.0,
                  c: torch.Tensor | None = None) -> torch.Tensor:
    """Benchmark/test hook: `alpha * op(a) @ op(b) + beta * c` with a chosen kernel (layouts as in `gemm`).

    variant: "pipelined" (the default tile for large problems, multi-stage pipeline:
    fp16/bf16 128x128x64 x 3 stages cp.async, 4 warps; fp32 128x128, BK 16 (NN, TT) or 32 (TN,
    NT), 256 threads, register-staged double buffer), "unpipelined" (its one-stage twin),
    "small_tile", "generic", "auto", and two kept for comparison: fp16/bf16 "alt_a" =
    128x256x64 x 3 stages (8 warps) and "alt_b" = its one-stage twin; fp32 "alt_a" = the
    medium 128x64x32 tile (auto's choice when large tiles give less than a wave) and "alt_b" =
    the long tile (one block per SM, BK 16: NN 256x128 with 16x8 a thread, TT 128x256 with 8x16;
    auto's choice for NN and TT on Hopper where its blocks' useful work fills 15/16 of whole
    waves; TN and NT: 128x256 at BK 32, benchmark only).
    "wgmma" / "wgmma_n128": the Hopper family (fp16/bf16; TMA + wgmma, warp-specialised,
    128x256x64 x 4 stages / 128x128x64 x 6 stages; RuntimeError unless the device has compute
    capability 9.0 and the build has sm_90a), every layout.
    "skinny": the decode-shape kernels (`csrc/gemm/gemm_skinny.cu`; auto's choice for M <= 16): a
    stored [M, K] (trans_a=False, RuntimeError otherwise) with M <= 16, b either layout, any float dtype.
    fp16/bf16 "unpipelined", "alt_a", "alt_b" take only the NN layout (RuntimeError otherwise);
    the fp32 variants take every layout.
    `out_fp32` picks fp32 output for fp16/bf16 (the tensor_core_gemm epilogue; `c` is then float32).
    Tile variants need 16-byte aligned rows (RuntimeError otherwise).
    """
    kernel = _ops.op("_gemm_variant")
    if variant not in GEMM_VARIANTS:
        raise ValueError(f"variant must be one of {sorted(GEMM_VARIANTS)}, got {variant!r}")
    return call_or_explain(
        lambda: kernel(a, b, GEMM_VARIANTS[variant], bool(out_fp32), bool(trans_a), bool(trans_b), float(alpha),
                       float(beta), c),
        lambda: validate_gemm_inputs(a, b, trans_a, trans_b, c, c_dtype=torch.float32 if out_fp32 else None))
