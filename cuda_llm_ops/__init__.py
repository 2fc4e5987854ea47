"""LLM-Speed: hand-written CUDA kernels for LLM inference, driven from PyTorch.

Attention prefill (naive, tiled, flash), GEMM (fp32, tensor-core fp16/bf16,
int8), paged decode attention, lightning-attention decode, a roofline profiler
and the `llm-speed` benchmark command.
"""
from ._ops import build_info, kernels_available
from .attention import flash_attention, naive_attention, tiled_attention
from .validation import validate_attention_inputs
from . import reference

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "build_info",
    "kernels_available",
    "flash_attention",
    "naive_attention",
    "tiled_attention",
    "validate_attention_inputs",
    "reference",
]
