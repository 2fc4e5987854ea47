"""Prefill attention: naive, tiled and flash, with GQA and causal masking.

All three take q `[B, Hq, Nq, D]`, k and v `[B, Hkv, Nk, D]` (Hq a multiple of
Hkv), float32/float16/bfloat16, D a multiple of 8 up to 256, and return a new
`[B, Hq, Nq, D]` tensor in q's dtype (float32 accumulation inside).
"""
from __future__ import annotations

import torch

from . import _ops
from .validation import call_or_explain, resolve_scale, validate_attention_inputs

# naive_attention keeps a whole score row in shared memory (one float per key).
NAIVE_MAX_SEQ_LEN_K = 32768


def _attention_out_like(q: torch.Tensor) -> torch.Tensor:
    return torch.empty(q.shape, dtype=q.dtype, device=q.device)


def _attention_call(kernel, q, k, v, scale, is_causal, validate=validate_attention_inputs):
    def explain():
        validate(q, k, v)
        resolve_scale(scale, q.shape[-1])

    return call_or_explain(lambda: kernel(q, k, v, resolve_scale(scale, q.shape[-1]), bool(is_causal)), explain)


def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float = 0.0,
                    is_causal: bool = False) -> torch.Tensor:
    """Baseline attention: one thread block per (batch, head, query row).

    The row's scores live in shared memory, so Nk is limited to
    `NAIVE_MAX_SEQ_LEN_K` (32768); longer keys raise a ValueError (use
    `flash_attention`). On GPUs with 99 KB of shared memory per block (sm_86/89/120)
    the limit is (101376 / 4 - 32 - D) keys, 25248 at D = 64: a RuntimeError names it.
    Shapes, dtypes and the causal rule as `flash_attention`.
    """
    kernel = _ops.op("naive_attention")  # first, so a build without kernels says so
    return _attention_call(kernel, q, k, v, scale, is_causal, validate=_validate_naive_inputs)


def _validate_naive_inputs(q, k, v) -> None:
    validate_attention_inputs(q, k, v)
    if k.shape[2] > NAIVE_MAX_SEQ_LEN_K:
        raise ValueError(
            f"naive_attention keeps one score row in shared memory and supports seq_len_k <= "
            f"{NAIVE_MAX_SEQ_LEN_K}, got {k.shape[2]}; use flash_attention for longer sequences"
        )


def tiled_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float = 0.0,
                    is_causal: bool = False) -> torch.Tensor:
    """Attention on shared-memory tiles of Q, K and V (padded against bank conflicts).

    Shapes, dtypes and the causal rule as `flash_attention`; on GPUs with 99 KB of shared
    memory per block (sm_86/89/120) head_dim up to 248 (its fp32 tiles need 102912 bytes at
    256: a RuntimeError says so).
    """
    kernel = _ops.op("tiled_attention")  # first, so a build without kernels says so
    return _attention_call(kernel, q, k, v, scale, is_causal)


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float = 0.0,
                    is_causal: bool = False) -> torch.Tensor:
    """FlashAttention forward: online softmax, O(N) memory, on the tensor cores.

    fp16/bf16 run on the 16-bit tensor cores (on Hopper a TMA + wgmma kernel). float32
    runs as 3xTF32: each product as three TF32 products of split operands, as SDPA's
    mem-efficient kernel does; fp32-accurate, ~5e-7 relative error against float64.
    All accumulate in fp32.

    Args:
        q: `[B, Hq, Nq, D]` float32, float16 or bfloat16, on a CUDA device.
        k: `[B, Hkv, Nk, D]`, same dtype and device; Hq must be a multiple of Hkv
            (query head h reads KV head `h // (Hq // Hkv)`: GQA and MQA without copies).
        v: `[B, Hkv, Nk, D]`.
        scale: softmax scale; 0 (default) means `1/sqrt(D)`.
        is_causal: query i sees key j when `j <= i + Nk - Nq` (bottom-right aligned,
            as FlashAttention 2; SDPA's `is_causal` when Nq == Nk). Rows that see no
            key output zeros.

    D must be a multiple of 8 up to 256; Nq and Nk any value >= 1. Inputs may be
    strided if the last dimension is contiguous (see `validate_attention_inputs`).

    Few query rows (Nq <= 16, fp16/bf16: decode and speculative decoding) run
    `decode_attention`'s split-KV kernel on the same tensors (`use_decode_path`), which
    spreads the keys over all SMs where the prefill kernel's query tiles would leave
    most of them idle; same results to rounding. Call `decode_attention` directly to pass
    `out=`, a workspace (no allocation per call) or a split count.

    Returns:
        `[B, Hq, Nq, D]` in q's dtype, contiguous.
    """
    from .decode import decode_attention, use_decode_path  # local: decode.py is another area's module

    if use_decode_path(q):  # Nq <= 16, fp16/bf16: the split-KV decode kernel (cuda_llm_ops/decode.py)
        return decode_attention(q, k, v, scale, is_causal)
    kernel = _ops.op("flash_attention")  # first, so a build without kernels says so
    return _attention_call(kernel, q, k, v, scale, is_causal)


for _name in ("naive_attention", "tiled_attention", "flash_attention"):
    _ops.register_fake(_name)(lambda q, k, v, scale, is_causal: _attention_out_like(q))
