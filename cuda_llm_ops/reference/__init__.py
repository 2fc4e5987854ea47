"""Plain-PyTorch references for every op, computed in float32 (float64 on request).

They run on any device, CPU included, and are what the GPU tests and the
benchmark's correctness checks compare against.
"""
from .attention import attention_reference, causal_mask
from .decode import (decode_append_slots, gather_paged_kv, paged_attention_reference, paged_kv_append_reference,
                     paged_mla_append_reference, paged_mla_attention_reference,
                     quantize_fp8_e4m3)
from .fused import fused_decode_block_reference, make_fused_decode_problem
from .gemm import gemm_reference, int8_gemm_reference
from .lightning import lightning_decode_reference

__all__ = ["gemm_reference", "int8_gemm_reference", "attention_reference", "causal_mask", "lightning_decode_reference",
           "decode_append_slots", "gather_paged_kv", "paged_attention_reference", "paged_kv_append_reference", "paged_mla_append_reference", "paged_mla_attention_reference",
           "quantize_fp8_e4m3",
           "fused_decode_block_reference", "make_fused_decode_problem"]
