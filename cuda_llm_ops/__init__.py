"""LLM-Speed: hand-written CUDA kernels for LLM inference, driven from PyTorch.

Attention prefill (naive, tiled, flash), GEMM (fp32, tensor-core fp16/bf16,
int8), paged decode attention (MHA/GQA and MLA), a fused decode attention block (one Hopper kernel from
QKV projection to output projection), lightning-attention decode, a roofline profiler
and the `llm-speed` benchmark command.
"""
from ._ops import build_info, kernels_available
from .attention import flash_attention, naive_attention, tiled_attention
from .validation import validate_attention_inputs
from .decode import (decode_attention, decode_head_dim_fits, decode_num_splits, decode_workspace,
                     merge_attention_states, paged_attention, paged_attention_workspace, paged_kv_append,
                     validate_paged_attention_inputs)
from .mla import mla_num_splits, mla_workspace, paged_mla_append, paged_mla_attention, validate_paged_mla_inputs
from .graphs import CUDAGraphRunner
from .fused import (fused_decode_block, fused_decode_block_path, fused_decode_block_workspace,
                    validate_fused_decode_block_inputs)
from .lightning import lightning_attention_decode, validate_lightning_decode_inputs
from .gemm import gemm, tensor_core_gemm, tensor_core_gemm_int8, validate_gemm_inputs
from .profiler import Bottleneck, CUDAProfiler, KernelMetrics
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
    "lightning_attention_decode",
    "validate_lightning_decode_inputs",
    "gemm",
    "tensor_core_gemm",
    "tensor_core_gemm_int8",
    "validate_gemm_inputs",
    "decode_attention",
    "decode_head_dim_fits",
    "decode_num_splits",
    "decode_workspace",
    "merge_attention_states",
    "paged_attention",
    "paged_attention_workspace",
    "paged_kv_append",
    "validate_paged_attention_inputs",
    "mla_num_splits",
    "mla_workspace",
    "paged_mla_append",
    "paged_mla_attention",
    "validate_paged_mla_inputs",
    "CUDAGraphRunner",
    "fused_decode_block",
    "fused_decode_block_path",
    "fused_decode_block_workspace",
    "validate_fused_decode_block_inputs",
    "Bottleneck",
    "CUDAProfiler",
    "KernelMetrics",
    "reference",
]
