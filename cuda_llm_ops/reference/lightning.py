"""Reference lightning (linear) attention decode: the plain recurrence of the seed article."""
from __future__ import annotations

import torch


def lightning_decode_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kv: torch.Tensor,
                               slope: torch.Tensor, dtype: torch.dtype = torch.float32
                               ) -> tuple[torch.Tensor, torch.Tensor]:
    """n steps of `kv = exp(-slope) * kv + k_t^T v_t; o_t = q_t kv`, all in `dtype`.

    q, k `[b, h, n, d]`, v `[b, h, n, e]`, kv `[b, h, d, e]`, slope `[h, 1, 1]` or `[h]`;
    any device. Returns `(o [b, h, n, e], new_kv [b, h, d, e])`, both in `dtype`
    (float32 default, float64 on request); the inputs are not modified.
    """
    h = q.shape[1]
    ratio = torch.exp(-slope.to(dtype).reshape(h, 1, 1))
    state = kv.to(dtype)
    qf, kf, vf = q.to(dtype), k.to(dtype), v.to(dtype)
    outs = []
    for t in range(q.shape[2]):
        state = ratio * state + kf[:, :, t, :, None] * vf[:, :, t, None, :]
        outs.append(torch.einsum("bhd,bhde->bhe", qf[:, :, t], state))
    return torch.stack(outs, dim=2), state
