"""Reference GEMMs in plain PyTorch (any device, CPU included)."""
from __future__ import annotations

import torch


def gemm_reference(a: torch.Tensor, b: torch.Tensor, alpha: float = 1.0, beta: float = 0.0, trans_a: bool = False,
                   trans_b: bool = False, c: torch.Tensor | None = None,
                   dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """`alpha * op(a) @ op(b) + beta * c` computed in `dtype` (float32 default, float64 on request).

    a `[M, K]` (`[K, M]` with trans_a), b `[K, N]` (`[N, K]` with trans_b), c `[M, N]`
    or None (then beta is ignored; as with beta 0 as a float32: c is not read, as BLAS).
    Returns `[M, N]` in `dtype`.
    """
    x = a.to(dtype)
    y = b.to(dtype)
    if trans_a:
        x = x.t()
    if trans_b:
        y = y.t()
    out = torch.matmul(x, y) * alpha
    if c is not None and float(torch.tensor(beta, dtype=torch.float32)) != 0.0:
        out = out + beta * c.to(dtype)
    return out


def int8_gemm_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Exact int8 `[M, K]` @ int8 `[K, N]` -> int32 `[M, N]`.

    Computed in float64, exact while K * 128 * 128 < 2**53 (K < 5e8); the result
    fits int32 while K * 16384 < 2**31 (K <= 131071), as it does on the GPU.
    """
    if a.dtype != torch.int8 or b.dtype != torch.int8:
        raise ValueError(f"a and b must be int8, got {a.dtype} and {b.dtype}")
    return torch.matmul(a.to(torch.float64), b.to(torch.float64)).round().to(torch.int32)
