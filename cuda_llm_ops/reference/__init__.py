"""Plain-PyTorch references for every op, computed in float32 (float64 on request).

They run on any device, CPU included, and are what the GPU tests and the
benchmark's correctness checks compare against.
"""
from .attention import attention_reference, causal_mask

__all__ = ["attention_reference", "causal_mask"]
