"""Benchmark cases of prefill attention: our flash (and, at small N, tiled and naive)
attention against `F.scaled_dot_product_attention` with each of its backends.

Shapes: the presets' attention heads (Llama-7B: 32 heads, Llama-8B: 32 query / 8 KV
heads, Llama-70B: 64 / 8; D = 128), N in {512, ..., 8192}, causal and not, with
B = 16384 // N so every case holds 16K tokens (FlashAttention's benchmark convention:
the work per case grows with N only through the N^2 term); with preset "all" (fp16 and
bf16, not --quick) also D in {64, 96, 192, 256} at 32 query / 8 KV heads, N in {1024, 4096}.
Compute-bound: warm L2.
Op `attention_prefill`: flash_attention and the peers. Op `attention_prefill_b1`:
batch 1 at N <= 1024 with naive and tiled attention too (their N^2 traffic would make
the 16K-token cases take minutes), timed as CUDA-graph replays (launch-bound: an eager call's
host time is about the kernel's).

Peers: SDPA pinned to one backend each with `torch.nn.attention.sdpa_kernel`
(flash = FlashAttention-2, cuDNN, memory-efficient, math). GQA goes through
`enable_gqa=True` where the backend takes it; otherwise K/V are expanded to the query
heads once, outside the timing (same FLOPs; the peer then reads Hq/Hkv times the K/V
bytes, a small share of a compute-bound prefill). A backend that cannot run a case reports why and is
listed as unavailable. The math backend materialises the N x N scores, so it runs
only up to N = 2048. Correctness: every implementation against the first peer that
runs (sdpa-flash on fp16/bf16, memory-efficient on fp32).
"""
from __future__ import annotations

from typing import Any

import torch

from .. import _ops
from ..roofline import attention_compute_kind, attention_prefill_work
from . import sdpa
from .registry import PRESETS, BenchCase, BenchImpl, register

SEQ_LENS = (512, 1024, 2048, 4096, 8192)
TOKENS_PER_CASE = 16384
ATTENTION_PRESETS = ("llama-7b", "llama-8b", "llama-70b")
SMALL_N = 1024  # naive and tiled attention only up to here (their N^2 traffic makes longer runs minutes)
MATH_MAX_N = 2048  # the math backend materialises B*H*N*N scores
FP32_MAX_N = 2048  # fp32 (3xTF32, a third of the 16-bit rate or less): 8192 would take ~0.1 s a call per peer
# Head dims besides the presets' 128 (preset "all", fp16/bf16): GQA 32/8 at these lengths.
OTHER_HEAD_DIMS = (64, 96, 192, 256)
OTHER_HEAD_DIMS_SEQ_LENS = (1024, 4096)
OTHER_HEAD_DIMS_HEADS = (32, 8)

def _make_inputs(B: int, Hq: int, Hkv: int, N: int, D: int, dtype: torch.dtype):
    def make() -> dict[str, Any]:
        q = torch.randn(B, Hq, N, D, device="cuda", dtype=dtype)
        k = torch.randn(B, Hkv, N, D, device="cuda", dtype=dtype)
        v = torch.randn(B, Hkv, N, D, device="cuda", dtype=dtype)
        return {"q": q, "k": k, "v": v}

    return make


def _ours(name: str, max_n: int | None = None) -> BenchImpl:
    def unavailable(inp) -> str | None:
        if not _ops.has_op(name):
            return f"op {name} not in this build ({_ops.build_info()})"
        if max_n is not None and inp["q"].shape[2] > max_n:
            return f"benchmarked only up to N={max_n}"
        return None

    def build(inp):
        fn = getattr(__import__("cuda_llm_ops.attention", fromlist=[name]), name)
        q, k, v, causal = inp["q"], inp["k"], inp["v"], inp["causal"]
        return lambda: fn(q, k, v, is_causal=causal)

    return BenchImpl(name, False, build, unavailable)


def _sdpa(name: str) -> BenchImpl:
    """SDPA pinned to one backend. The first availability check runs the real call and
    remembers whether the backend takes GQA natively or needs expanded K/V."""
    mode: dict[str, bool] = {}  # "gqa" -> native GQA works

    def _prepare(inp):
        q, k, v = inp["q"], inp["k"], inp["v"]
        if q.shape[1] == k.shape[1]:
            return q, k, v, False
        if mode.get("gqa", True):
            return q, k, v, True
        g = q.shape[1] // k.shape[1]
        return q, k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1), False

    def unavailable(inp) -> str | None:
        if sdpa.backend(name) is None:
            return "torch has no torch.nn.attention.sdpa_kernel or no such backend"
        N = inp["q"].shape[2]
        if name == "math" and N > MATH_MAX_N:
            return f"math backend materialises the N x N scores: run only up to N={MATH_MAX_N}"
        causal = inp["causal"]
        errors = []
        for native in ((True, False) if inp["q"].shape[1] != inp["k"].shape[1] else (False,)):
            mode["gqa"] = native
            q, k, v, gqa = _prepare(inp)
            try:
                sdpa.call(name, q, k, v, gqa, is_causal=causal)
                torch.cuda.synchronize()
                return None
            except (RuntimeError, TypeError, ValueError) as exc:  # TypeError: torch without enable_gqa
                errors.append(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
            finally:
                del q, k, v
        return f"sdpa {name} backend cannot run this case: {errors[-1][:160]}"

    def build(inp):
        q, k, v, gqa = _prepare(inp)
        causal = inp["causal"]
        return lambda: sdpa.call(name, q, k, v, gqa, is_causal=causal)

    return BenchImpl(f"sdpa-{name}", True, build, unavailable, scope=lambda: sdpa.pinned(name))


def attention_case(B: int, Hq: int, Hkv: int, N: int, D: int, causal: bool, dtype: torch.dtype,
                   with_slow: bool = False, op: str = "attention_prefill") -> BenchCase:
    w = attention_prefill_work(B, Hq, Hkv, N, N, D, causal, torch.empty((), dtype=dtype).element_size())
    make = _make_inputs(B, Hq, Hkv, N, D, dtype)

    def make_inputs():
        d = make()
        d["causal"] = causal
        return d

    impls = [_ours("flash_attention")]
    if with_slow:
        impls += [_ours("tiled_attention", SMALL_N), _ours("naive_attention", SMALL_N)]
    peers = ["flash", "cudnn", "efficient", "math"] if dtype != torch.float32 else ["efficient", "math", "cudnn",
                                                                                   "flash"]
    impls = [_sdpa(p) for p in peers] + impls
    tol = {torch.float16: 1e-2, torch.bfloat16: 3e-2, torch.float32: 1e-3}[dtype]
    return BenchCase(
        op=op, dtype=dtype,
        shape={"B": B, "Hq": Hq, "Hkv": Hkv, "N": N, "D": D, "causal": causal},
        flops=w.flops, bytes=w.bytes, compute=attention_compute_kind(dtype), make_inputs=make_inputs, impls=impls,
        # batch 1 at N <= 1024 runs 15-45 us on the GPU, about an eager call's host time: graphs
        reference=None, rel_tol=tol, cold_l2=False, cuda_graph=op == "attention_prefill_b1",
        label=f"N={N}{' causal' if causal else ''}", x_key="N")


@register("attention")
def attention_cases(dtype: torch.dtype, preset: str, quick: bool) -> list[BenchCase]:
    if dtype not in (torch.float16, torch.bfloat16, torch.float32):
        return []
    if preset == "all":
        presets = ("llama-8b",) if quick else ATTENTION_PRESETS
    elif preset in ATTENTION_PRESETS:
        presets = (preset,)
    else:
        return []
    seq_lens = (1024, 4096) if quick else SEQ_LENS
    if dtype == torch.float32:
        seq_lens = tuple(n for n in seq_lens if n <= FP32_MAX_N) or (1024,)
    cases = []
    for p in presets:
        cfg = PRESETS[p]
        for causal in (False, True):
            for N in seq_lens:
                B = max(1, TOKENS_PER_CASE // N)
                cases.append(attention_case(B, cfg["heads"], cfg["kv_heads"], N, cfg["head_dim"], causal, dtype))
    if preset == "all" and not quick and dtype != torch.float32:
        hq, hkv = OTHER_HEAD_DIMS_HEADS
        for D in OTHER_HEAD_DIMS:
            for causal in (False, True):
                for N in OTHER_HEAD_DIMS_SEQ_LENS:
                    cases.append(attention_case(TOKENS_PER_CASE // N, hq, hkv, N, D, causal, dtype))
    # naive and tiled attention: batch 1 at small N, as their own op so plots and tables keep
    # them apart from the 16K-token cases.
    small = (SMALL_N,) if quick else tuple(n for n in SEQ_LENS if n <= SMALL_N)
    for p in presets:
        cfg = PRESETS[p]
        for causal in (False, True):
            for N in small:
                cases.append(attention_case(1, cfg["heads"], cfg["kv_heads"], N, cfg["head_dim"], causal, dtype,
                                            with_slow=True, op="attention_prefill_b1"))
    return cases
