"""Where the Hopper skinny tile's time goes: torch.profiler device times of one cold call
(memset of the stream-K counters, the GEMM kernel) against cuBLAS and the skinny kernels.

  python3 scripts/probe_skinny_wgmma.py
  PROBE_K_SWEEP=1 python3 scripts/probe_skinny_wgmma.py   # kernel time against K (the fixed part)
"""
import os

os.environ.setdefault("CLO_GEMM_SKINNY_WGMMA", "")
import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

import cuda_llm_ops as llm  # noqa: E402

flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")


def device_times(fn, reps=10):
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            flush.zero_()
            fn()
        torch.cuda.synchronize()
    out = {}
    for e in prof.key_averages():
        if "zero_" in e.key or "fill" in e.key.lower() and "Memset" not in e.key:
            continue
        out[e.key[:60]] = e.device_time_total / reps if hasattr(e, "device_time_total") else e.cuda_time_total / reps
    return out


SHAPES = ((1, 4096, 4096), (16, 12288, 4096))
if os.environ.get("PROBE_K_SWEEP") == "1":  # the fixed time: kernel time against K at N = 12288, M = 16
    SHAPES = tuple((16, 12288, k) for k in (64, 256, 1024, 2048, 4096, 8192))
for M, N, K in SHAPES:
    for b_nk in (True, False):
        a = torch.randn(M, K, device="cuda", dtype=torch.float16)
        b = torch.randn((N, K) if b_nk else (K, N), device="cuda", dtype=torch.float16)
        bb = b.t() if b_nk else b
        for name, env in (("wgmma skinny", "2"), ("skinny kernels", "0")):
            os.environ["CLO_GEMM_SKINNY_WGMMA"] = env
            t = device_times(lambda: llm.gemm(a, b, trans_b=b_nk))
            print(f"{M}x{N}x{K} {'nk' if b_nk else 'kn'} {name}: " + ", ".join(f"{k} {v:.1f} us" for k, v in t.items()))
        t = device_times(lambda: torch.matmul(a, bb))
        print(f"{M}x{N}x{K} {'nk' if b_nk else 'kn'} cublas: " + ", ".join(f"{k} {v:.1f} us" for k, v in t.items()))
