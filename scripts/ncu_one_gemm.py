"""One fp16 gemm call for ncu, ours or cuBLAS's (torch.matmul):

    ncu -k regex:gemm_wgmma -c 1 python3 scripts/ncu_one_gemm.py M N K [nk] [ours|cublas]
    NCU_CALLS=2 ncu -k regex:gemm_wgmma --launch-skip 1 -c 1 python3 scripts/ncu_one_gemm.py ...   # a warm call

nk: b stored [N, K] (`trans_b=True`)."""
import os
import sys

os.environ.setdefault("CLO_GEMM_SKINNY_WGMMA", "2")
import torch  # noqa: E402

import cuda_llm_ops as llm  # noqa: E402

M, N, K = (int(x) for x in sys.argv[1:4])
nk = "nk" in sys.argv[4:]
cublas = "cublas" in sys.argv[4:]
a = torch.randn(M, K, device="cuda", dtype=torch.float16)
b = torch.randn((N, K) if nk else (K, N), device="cuda", dtype=torch.float16)
# NCU_CALLS (default 1): calls in a row, so `NCU_SKIP=1 scripts/ncu_compare.sh` profiles a warm one.
for _ in range(int(os.environ.get("NCU_CALLS", "1"))):
    if cublas:
        torch.matmul(a, b.t() if nk else b)
    else:
        llm.gemm(a, b, trans_b=nk)
torch.cuda.synchronize()
