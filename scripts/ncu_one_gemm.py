"""One gemm call for ncu (`ncu -k regex:gemm_wgmma -c 1 python3 scripts/ncu_one_gemm.py M N K [nk]`)."""
import os
import sys

os.environ.setdefault("CLO_GEMM_SKINNY_WGMMA", "2")
import torch  # noqa: E402

import cuda_llm_ops as llm  # noqa: E402

M, N, K = (int(x) for x in sys.argv[1:4])
nk = len(sys.argv) > 4 and sys.argv[4] == "nk"
a = torch.randn(M, K, device="cuda", dtype=torch.float16)
b = torch.randn((N, K) if nk else (K, N), device="cuda", dtype=torch.float16)
llm.gemm(a, b, trans_b=nk)
torch.cuda.synchronize()
