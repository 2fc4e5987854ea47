"""Benchmark cases of lightning attention decode (MiniMax-01 shape: h = 64, d = e = 96).

Memory-bound: one call reads and writes the fp32 state once, 2 * b*h*d*e*4 bytes,
plus q, k, v, o and the slopes. Peers: the seed article's PyTorch eager recurrence
and its Triton kernel (cuda_llm_ops.bench.triton_lightning).
"""
from __future__ import annotations

import torch

from .registry import BenchCase, BenchImpl, register
from .triton_lightning import triton_lightning_decode, triton_unavailable_reason

HEADS = 64
HEAD_DIM = 96  # d = e in MiniMax-01


def lightning_decode_torch_eager(q, k, v, past_kv, slope):
    """The seed article's PyTorch implementation (k^T v in the input dtype, state in fp32)."""
    original_dtype = q.dtype
    ratio = torch.exp(-slope)  # [h, 1, 1]
    kv = past_kv
    n = q.shape[2]
    output = []
    for i in range(n):
        kv = ratio * kv.to(torch.float32) + torch.einsum(
            "... n d, ... n e -> ... d e", k[:, :, i:i + 1], v[:, :, i:i + 1])
        qkv = torch.einsum("... n e, ... e d -> ... n d", q[:, :, i:i + 1].to(torch.float32), kv.to(torch.float32))
        output.append(qkv)
    output = torch.concat(output, dim=-2)
    return output.to(original_dtype), kv


def lightning_decode_bytes(b: int, h: int, n: int, d: int, e: int, dtype: torch.dtype) -> int:
    """Fewest bytes one call moves: the fp32 state in and out, q/k/v/o, the slopes."""
    elem = torch.empty((), dtype=dtype).element_size()
    return 2 * b * h * d * e * 4 + b * h * n * (2 * d + 2 * e) * elem + h * 4


def lightning_decode_flops(b: int, h: int, n: int, d: int, e: int) -> int:
    """Per state element and token: decay, k*v, add (3) and q*kv multiply-add (2)."""
    return 5 * b * h * n * d * e


def make_lightning_inputs(b: int, h: int, n: int, d: int, e: int, dtype: torch.dtype, device="cuda"):
    q = torch.randn(b, h, n, d, device=device).to(dtype)
    k = torch.randn(b, h, n, d, device=device).to(dtype)
    v = torch.randn(b, h, n, e, device=device).to(dtype)
    kv = torch.randn(b, h, d, e, device=device)
    # MiniMax-01's ALiBi-like slopes: 2^(-8 (i + 1) / h), all in (0, 1].
    slope = torch.pow(2.0, -8.0 * torch.arange(1, h + 1, device=device, dtype=torch.float32) / h).reshape(h, 1, 1)
    out = torch.empty(b, h, n, e, device=device, dtype=dtype)
    new_kv = torch.empty_like(kv)
    return {"q": q, "k": k, "v": v, "kv": kv, "slope": slope, "out": out, "new_kv": new_kv}


def _ours(x):
    from ..lightning import lightning_attention_decode

    return lambda: lightning_attention_decode(x["q"], x["k"], x["v"], x["kv"], x["slope"], out=x["out"],
                                              new_kv=x["new_kv"])


def _ours_unavailable(x):
    from .. import _ops

    return None if _ops.has_op("lightning_attention_decode") else "kernel not built"


def _eager(x):
    return lambda: lightning_decode_torch_eager(x["q"], x["k"], x["v"], x["kv"], x["slope"])


def _triton(x):
    out = torch.empty_like(x["out"])
    new_kv = torch.empty_like(x["new_kv"])
    return lambda: triton_lightning_decode(x["q"], x["k"], x["v"], x["kv"], x["slope"], out=out, new_kv=new_kv)


def _reference(x):
    from ..reference.lightning import lightning_decode_reference

    return lightning_decode_reference(x["q"], x["k"], x["v"], x["kv"], x["slope"])


@register("lightning_attention_decode")
def lightning_cases(dtype: torch.dtype, preset: str, quick: bool) -> list[BenchCase]:
    if dtype not in (torch.float16, torch.bfloat16, torch.float32) or preset != "all":
        return []  # the MiniMax-01 shape belongs to no llama preset
    cases = []
    h, d, e, n = HEADS, HEAD_DIM, HEAD_DIM, 1
    for b in ((1, 16) if quick else (1, 16, 64)):
        cases.append(BenchCase(
            op="lightning_attention_decode",
            dtype=dtype,
            shape={"B": b, "H": h, "N": n, "D": d, "E": e},
            flops=lightning_decode_flops(b, h, n, d, e),
            bytes=lightning_decode_bytes(b, h, n, d, e, dtype),
            compute="fp32",
            make_inputs=lambda b=b: make_lightning_inputs(b, h, n, d, e, dtype),
            impls=[
                BenchImpl("cuda_llm_ops", False, _ours, _ours_unavailable),
                BenchImpl("torch-eager", True, _eager),
                BenchImpl("triton", True, _triton, triton_unavailable_reason),
            ],
            reference=_reference,
            rel_tol=2e-2,
            cold_l2=True,
            # Graph replays (cold through rotated inputs) at every b: decode steps run inside
            # CUDA graphs in serving, and timed one eager call at a time a 30 us kernel also
            # measures the host's launch gap (b=16 read 32.4 us eager vs 28.3 us kernel time).
            cuda_graph=True,
            label=f"B={b}",
        ))
    return cases
