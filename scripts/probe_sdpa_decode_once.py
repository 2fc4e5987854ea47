"""One SDPA decode call on contiguous keys (one query per sequence), for profilers
(ncu -k regex:...): the peer's kernel next to ours (probe_decode_once.py).
    python3 scripts/probe_sdpa_decode_once.py --batch 64 --context 4096 --kv-heads 32 [--backend cudnn]
Warm-up calls first, then `--calls` profiled ones."""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--context", type=int, default=4096)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=32)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--backend", choices=("cudnn", "flash"), default="cudnn")
    ap.add_argument("--calls", type=int, default=1)
    args = ap.parse_args()
    B, H, Hkv, N, D = args.batch, args.heads, args.kv_heads, args.context, args.head_dim
    q = torch.randn(B, H, 1, D, device="cuda", dtype=torch.float16)
    k = torch.randn(B, Hkv, N, D, device="cuda", dtype=torch.float16)
    v = torch.randn(B, Hkv, N, D, device="cuda", dtype=torch.float16)
    backend = SDPBackend.CUDNN_ATTENTION if args.backend == "cudnn" else SDPBackend.FLASH_ATTENTION
    with sdpa_kernel(backend):
        for _ in range(3 + args.calls):
            F.scaled_dot_product_attention(q, k, v, enable_gqa=H != Hkv)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
