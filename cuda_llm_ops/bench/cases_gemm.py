"""Benchmark cases of the GEMM family against cuBLAS (`torch.matmul`, TF32 off for fp32)
and `torch._int_mm`.

Op `gemm`: `gemm` (and, for fp16/bf16, `tensor_core_gemm`, fp32 out) vs cuBLAS at
square 1024/2048/4096, the Llama-style projection 4096x12288x4096, a prefill of 4352 tokens
through Llama-8B's MLP down projection (4352x4096x14336: 544 tiles of 128x256, a last wave of 16
on 132 SMs; fp16/bf16 only; presets all and llama-8b) and the decode-skinny
1x12288x4096 and 16x12288x4096, the latter also with b stored [N, K] (nn.Linear's weight:
`gemm(..., trans_b=True)` against `torch.matmul(a, w.t())`, shape key `"b": "[N,K]"`).
Op `gemm_pipeline`: the large-tile kernel with its multi-stage cp.async pipeline vs its
one-stage twin at 4096^3 (the >= 20% claim).
Op `gemm_int8` (dtype int8; the preset picks its shapes as for 16-bit: squares under all / square,
the projection under all / llama-*, the ragged prefill and the 8B decode step under all / llama-8b):
ours on row-major B (the API's layout) and on column-major B
vs `torch._int_mm` on both, at square 2048/4096, the projection and the ragged prefill (on
Hopper ours runs the wgmma family; a row-major B is transposed first, inside the timed call),
and the decode-skinny shapes with b stored [N, K] and, at 1 and 16 x 12288 x 4096, [K, N]
(`_int_mm` on A padded to 17 rows: on the same b, and on a column-major copy of a [K, N] one).
Both ops also run a 16-sequence decode step through Llama-8B's projections with nn.Linear
weights (b [N, K]): QKV 6144x4096 (GQA 32/8), O 4096x4096, gate+up 28672x4096, down 4096x14336
(presets all and llama-8b), and the same projections at 64, 128 and 256 token rows (batched
decode; int8 against `_int_mm` unpadded).
Op `gemm_batched` (group `gemm_batched`; fp16, bf16, int8): every batch size a serving engine's
decode step sees, 1 to 256 token rows (BATCH_SIZES), through each preset model's four projections
with nn.Linear weights (b [N, K]; `projections`: QKV, O, gate+up, down, each (N, K) once; all: the
three Llama presets, 11 projections; shape key `proj`), ours against cuBLAS (int8: `_int_mm`, on A
padded to 17 rows up to 16); `--plot` draws one panel per projection over M. --quick: 3 batch sizes on Llama-8B's O.
Compute-bound: warm L2; the cases up to M = 256 are memory-bound and run with cold L2, timed as
CUDA-graph replays: at 18-45 us a call they are within reach of an eager call's host time (one
eager run at a017555 read both ours and `_int_mm` 1.3-1.5x slower at 4096-6144 rows than the
next), and decode steps run under graphs in serving engines.
"""
from __future__ import annotations

from typing import Any

import torch

from .. import _ops
from ..roofline import compute_kind, gemm_int8_work, gemm_work
from .registry import PRESETS, BenchCase, BenchImpl, register

SQUARE = (1024, 2048, 4096)
SQUARE_SHAPES = tuple((n, n, n) for n in SQUARE)
PROJECTION = ((4096, 12288, 4096),)
RAGGED_PREFILL = ((4352, 4096, 14336),)  # a token count that does not fill whole waves of tiles
SKINNY = ((1, 12288, 4096), (16, 12288, 4096))
DECODE_8B = ((16, 6144, 4096), (16, 4096, 4096), (16, 28672, 4096), (16, 4096, 14336))  # b [N, K] only
# The same projections with 64, 128 and 256 token rows (batched decode, small prefill chunks): b [N, K] only.
BATCHED_8B = tuple((m, n, k) for m in (64, 128, 256) for _, n, k in DECODE_8B)
# Token rows of `gemm_batched`: a decode step's batch sizes (the tiles change at 16, 32, 64 and 128
# rows, and a last token tile mostly empty costs: 72, 144).
BATCH_SIZES = (1, 2, 4, 8, 16, 24, 32, 48, 64, 72, 96, 128, 144, 160, 192, 224, 256)
QUICK_BATCH_SIZES = (1, 64, 144)


def projections(preset: str) -> list[tuple[str, int, int]]:
    """(name, N, K) of the weight GEMMs in one decoder layer of a PRESETS model, nn.Linear's
    [N, K]: QKV (fused, GQA-sized), O, gate+up (fused), down."""
    p = PRESETS[preset]
    hidden, q_width = p["hidden"], p["heads"] * p["head_dim"]
    return [("qkv", q_width + 2 * p["kv_heads"] * p["head_dim"], hidden), ("o", hidden, q_width),
            ("gate_up", 2 * p["intermediate"], hidden), ("down", hidden, p["intermediate"])]


def _has(name: str):
    def unavailable(_inp) -> str | None:
        return None if _ops.has_op(name) else f"op {name} not in this build ({_ops.build_info()})"

    return unavailable


def _make_float(M: int, N: int, K: int, dtype: torch.dtype, b_nk: bool = False):
    def make() -> dict[str, Any]:
        b_shape = (N, K) if b_nk else (K, N)
        return {"a": torch.randn(M, K, device="cuda").to(dtype), "b": torch.randn(*b_shape, device="cuda").to(dtype)}

    return make


def _cublas(b_nk: bool = False) -> BenchImpl:
    def build(inp):
        a, b = inp["a"], inp["b"].t() if b_nk else inp["b"]
        if a.dtype == torch.float32:
            torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 peer on CUDA cores, as ours
        return lambda: torch.matmul(a, b)

    return BenchImpl("cublas", True, build)


def _cublas_fp32_out() -> BenchImpl:
    """cuBLAS writing float32 from 16-bit inputs in the GEMM itself (`torch.mm(..., out_dtype=)`),
    as `tensor_core_gemm` does. Until stop 95 the only peer was `_cublas_cast` (labelled "cublas"
    in the records then, relabelled since): its cast kernel made it 29% (fp16) / 27% (bf16) slower
    at 4096^3 than the 16-bit GEMM alone (h100.json, c4c5d97)."""
    def build(inp):
        a, b = inp["a"], inp["b"]
        return lambda: torch.mm(a, b, out_dtype=torch.float32)

    def unavailable(inp) -> str | None:
        try:
            torch.mm(inp["a"][:1], inp["b"][:, :1], out_dtype=torch.float32)
        except (TypeError, RuntimeError) as exc:
            return f"this torch has no float32-output cuBLAS GEMM (torch.mm out_dtype): {str(exc)[:120]}"
        return None

    return BenchImpl("cublas", True, build, unavailable)


def _cublas_cast() -> BenchImpl:
    """A 16-bit cuBLAS GEMM and a cast of its output to float32: what a torch without
    `out_dtype` offers for fp16 x fp16 -> fp32."""
    def build(inp):
        a, b = inp["a"], inp["b"]
        return lambda: torch.matmul(a, b).float()

    return BenchImpl("cublas+cast", True, build)


def _ours_gemm(b_nk: bool = False) -> BenchImpl:
    def build(inp):
        from ..gemm import gemm
        a, b = inp["a"], inp["b"]
        return lambda: gemm(a, b, trans_b=b_nk)

    return BenchImpl("cuda_llm_ops.gemm", False, build, _has("gemm"))


def _ours_tc() -> BenchImpl:
    def build(inp):
        from ..gemm import tensor_core_gemm
        a, b = inp["a"], inp["b"]
        return lambda: tensor_core_gemm(a, b)

    return BenchImpl("cuda_llm_ops.tensor_core_gemm", False, build, _has("tensor_core_gemm"))


def _variant(variant: str) -> BenchImpl:
    def build(inp):
        from ..gemm import _gemm_variant
        a, b = inp["a"], inp["b"]
        return lambda: _gemm_variant(a, b, variant)

    names = {"alt_a": "large-128x256-pipelined", "alt_b": "large-128x256-unpipelined"}
    return BenchImpl(f"cuda_llm_ops.{names.get(variant, variant)}", variant != "pipelined", build,
                     _has("_gemm_variant"))


def float_case(M: int, N: int, K: int, dtype: torch.dtype, op: str = "gemm", b_nk: bool = False) -> BenchCase:
    eb = torch.empty((), dtype=dtype).element_size()
    w = gemm_work(M, N, K, in_bytes=eb)
    # Up to 256 rows a Llama-sized projection is memory-bound (the weight's bytes dominate) and
    # short: cold L2, CUDA-graph replays.
    short_memory_bound = M <= 256
    if op == "gemm_pipeline":
        impls = [_variant("pipelined"), _variant("unpipelined")]
        if dtype != torch.float32:  # the 128x256 tile and its one-stage twin
            impls += [_variant("alt_a"), _variant("alt_b")]
    else:
        impls = [_cublas(b_nk=b_nk), _ours_gemm(b_nk)]
    tol = {torch.float32: 1e-4, torch.float16: 5e-3, torch.bfloat16: 2e-2}[dtype]
    shape = {"M": M, "N": N, "K": K} | ({"b": "[N,K]"} if b_nk else {})
    return BenchCase(op=op, dtype=dtype, shape=shape, flops=w.flops, bytes=w.bytes,
                     compute=compute_kind(dtype), make_inputs=_make_float(M, N, K, dtype, b_nk), impls=impls,
                     rel_tol=tol, cold_l2=short_memory_bound, cuda_graph=short_memory_bound, label=f"{M}x{N}x{K}" + (" b[N,K]" if b_nk else ""),
                     x_key="M")


def tensor_core_case(M: int, N: int, K: int, dtype: torch.dtype) -> BenchCase:
    w = gemm_work(M, N, K, in_bytes=2, out_bytes=4)
    return BenchCase(op="tensor_core_gemm", dtype=dtype, shape={"M": M, "N": N, "K": K}, flops=w.flops,
                     bytes=w.bytes, compute=compute_kind(dtype), make_inputs=_make_float(M, N, K, dtype),
                     impls=[_cublas_fp32_out(), _cublas_cast(), _ours_tc()], rel_tol=1e-2, cold_l2=M <= 64,
                     label=f"{M}x{N}x{K}", x_key="M")


def int8_case(M: int, N: int, K: int) -> BenchCase:
    w = gemm_int8_work(M, N, K)

    def make() -> dict[str, Any]:
        a = torch.randint(-128, 128, (M, K), dtype=torch.int8, device="cuda")
        b = torch.randint(-128, 128, (K, N), dtype=torch.int8, device="cuda")
        return {"a": a, "b": b, "b_col": b.t().contiguous().t()}

    def ours(key: str) -> BenchImpl:
        def build(inp):
            from ..gemm import tensor_core_gemm_int8
            a, b = inp["a"], inp[key]
            return lambda: tensor_core_gemm_int8(a, b)

        return BenchImpl(f"cuda_llm_ops.int8[{'row' if key == 'b' else 'col'}-major B]", False, build,
                         _has("tensor_core_gemm_int8"))

    def int_mm(key: str) -> BenchImpl:
        def build(inp):
            a, b = inp["a"], inp[key]
            return lambda: torch._int_mm(a, b)

        def unavailable(inp) -> str | None:
            return None if hasattr(torch, "_int_mm") else "torch has no _int_mm"

        return BenchImpl(f"torch._int_mm[{'row' if key == 'b' else 'col'}-major B]", True, build, unavailable)

    def reference(inp):
        from ..reference import int8_gemm_reference
        return int8_gemm_reference(inp["a"], inp["b"])

    return BenchCase(op="gemm_int8", dtype=torch.int8, shape={"M": M, "N": N, "K": K}, flops=w.flops,
                     bytes=w.bytes, compute="int8_tc", make_inputs=make,
                     impls=[int_mm("b"), int_mm("b_col"), ours("b"), ours("b_col")], reference=reference,
                     rel_tol=0.0, label=f"{M}x{N}x{K}", x_key="M")


def int8_skinny_case(M: int, N: int, K: int, b_layout: str = "[N,K]", op: str = "gemm_int8") -> BenchCase:
    """Decode shapes (M <= 16, and batched decode up to 256 rows) with the weight stored [N, K]
    (nn.Linear's layout, b = w.t()) or [K, N] (b itself, row-major). `torch._int_mm` takes only
    M > 16: below that its rows are the call on A padded to 17 rows (the pad inside the timed
    call, as a caller would have to), on the same b and, for b [K, N], also on a column-major
    copy (its fast layout). Memory-bound: cold L2."""
    w = gemm_int8_work(M, N, K)
    nk = b_layout == "[N,K]"
    layout_name = "col-major B" if nk else "row-major B"

    def make() -> dict[str, Any]:
        inp = {"a": torch.randint(-128, 128, (M, K), dtype=torch.int8, device="cuda"),
               "w": torch.randint(-128, 128, (N, K), dtype=torch.int8, device="cuda")}
        inp["b"] = inp["w"].t() if nk else inp["w"].t().contiguous()
        if not nk:
            inp["b_col"] = inp["w"].t()
        return inp

    def ours() -> BenchImpl:
        def build(inp):
            from ..gemm import tensor_core_gemm_int8
            a, b = inp["a"], inp["b"]
            return lambda: tensor_core_gemm_int8(a, b)

        return BenchImpl(f"cuda_llm_ops.int8[{layout_name}]", False, build, _has("tensor_core_gemm_int8"))

    def int_mm_padded(key: str) -> BenchImpl:
        def build(inp):
            a, b = inp["a"], inp[key]
            if M > 16:
                return lambda: torch._int_mm(a, b)
            return lambda: torch._int_mm(torch.nn.functional.pad(a, (0, 0, 0, 17 - M)), b)[:M]

        def unavailable(inp) -> str | None:
            return None if hasattr(torch, "_int_mm") else "torch has no _int_mm"

        name = "col-major B" if key == "b_col" else layout_name
        return BenchImpl(f"torch._int_mm[{name}{', M padded to 17' if M <= 16 else ''}]", True, build, unavailable)

    def reference(inp):
        from ..reference import int8_gemm_reference
        return int8_gemm_reference(inp["a"], inp["b"])

    peers = [int_mm_padded("b")] + ([] if nk else [int_mm_padded("b_col")])
    return BenchCase(op=op, dtype=torch.int8, shape={"M": M, "N": N, "K": K, "b": b_layout},
                     flops=w.flops, bytes=w.bytes, compute="int8_tc", make_inputs=make,
                     impls=peers + [ours()], reference=reference, rel_tol=0.0, cold_l2=True, cuda_graph=True,
                     label=f"{M}x{N}x{K} b{b_layout}", x_key="M")


@register("gemm")
def gemm_cases(dtype: torch.dtype, preset: str, quick: bool) -> list[BenchCase]:
    if preset not in ("all", "square", "llama-7b", "llama-8b"):
        return []
    square = (1024, 4096) if quick else SQUARE
    shapes = [(n, n, n) for n in square] if preset in ("all", "square") else []
    if preset != "square":
        shapes += list(PROJECTION) + ([SKINNY[-1]] if quick else list(SKINNY))
    decode_8b = list(DECODE_8B) if preset in ("all", "llama-8b") and not quick else []
    batched_8b = list(BATCHED_8B) if decode_8b else []
    ragged_8b = list(RAGGED_PREFILL) if preset in ("all", "llama-8b") and not quick else []  # Llama-8B's MLP
    if dtype == torch.int8:  # the preset's shapes as for 16-bit (quick: one square, or the last skinny one)
        squares = [(4096, 4096, 4096)] + ([] if quick else [(2048, 2048, 2048)]) if preset in ("all", "square") else []
        if preset == "square":
            return [int8_case(*s) for s in squares]
        if quick:
            return [int8_case(*s) for s in squares] or [int8_skinny_case(*SKINNY[-1])]
        return ([int8_case(*s) for s in squares + list(PROJECTION) + ragged_8b] +
                [int8_skinny_case(*s) for s in list(SKINNY) + decode_8b + batched_8b] +
                [int8_skinny_case(*s, b_layout="[K,N]") for s in SKINNY])
    if dtype not in (torch.float32, torch.float16, torch.bfloat16):
        return []
    if dtype == torch.float32:  # fp32 on CUDA cores: the projection shape would take ~8 ms a call
        shapes = [s for s in shapes if s[0] * s[1] * s[2] <= 4096 ** 3]
    else:
        shapes += ragged_8b
    cases = [float_case(M, N, K, dtype) for M, N, K in shapes]
    # b [N, K] (nn.Linear's weight) at decode shapes and, for the tensor cores, the prefill ones.
    cases += [float_case(M, N, K, dtype, b_nk=True) for M, N, K in shapes
              if M <= 64 or (dtype != torch.float32 and M >= 4096 and (M, N, K) not in SQUARE_SHAPES)]
    if dtype != torch.float32:
        cases += [float_case(M, N, K, dtype, b_nk=True) for M, N, K in decode_8b + batched_8b]
        cases += [tensor_core_case(M, N, K, dtype) for M, N, K in shapes if M >= 1024]
    cases.append(float_case(4096, 4096, 4096, dtype, op="gemm_pipeline"))
    return cases


@register("gemm_batched")
def gemm_batched_cases(dtype: torch.dtype, preset: str, quick: bool) -> list[BenchCase]:
    if preset == "square" or dtype not in (torch.float16, torch.bfloat16, torch.int8):
        return []
    models = ["llama-8b"] if quick else [preset] if preset != "all" else [m for m in PRESETS if m != "square"]
    weights: dict[tuple[int, int], str] = {}  # (N, K) -> the first projection of that shape
    for model in models:
        for name, N, K in projections(model):
            weights.setdefault((N, K), name)
    if quick:
        weights = {nk: name for nk, name in weights.items() if name == "o"}
    cases = []
    for (N, K), name in weights.items():
        for M in QUICK_BATCH_SIZES if quick else BATCH_SIZES:
            case = (int8_skinny_case(M, N, K, op="gemm_batched") if dtype == torch.int8
                    else float_case(M, N, K, dtype, op="gemm_batched", b_nk=True))
            case.shape["proj"] = name
            case.label += f" {name}"
            cases.append(case)
    return cases
