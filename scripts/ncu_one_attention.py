"""One fp16 prefill attention call for ncu, ours or SDPA-cuDNN's:

    ncu -k regex:'flash_attention_fwd_sm90|fprop' -c 1 python3 scripts/ncu_one_attention.py B Hq Hkv N D causal {ours,cudnn}

Dev knobs (CUDA_LLM_OPS_FLASH_SM90_*) come from the environment as set."""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import cuda_llm_ops as llm

b, hq, hkv, n, d = (int(x) for x in sys.argv[1:6])
causal = sys.argv[6] in ("1", "true", "True", "causal")
impl = sys.argv[7]
q = torch.randn(b, hq, n, d, device="cuda", dtype=torch.float16)
k, v = (torch.randn(b, hkv, n, d, device="cuda", dtype=torch.float16) for _ in range(2))
if impl == "ours":
    llm.flash_attention(q, k, v, is_causal=causal)
else:
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=hq != hkv)
torch.cuda.synchronize()
