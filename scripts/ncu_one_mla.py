"""One fp16 `paged_mla_attention` call for ncu (block size 64, shuffled blocks, full lengths):

    ncu -k regex:mla_decode -c 1 python3 scripts/ncu_one_mla.py B N Hq num_splits"""
import sys

import torch

from cuda_llm_ops.bench.cases_decode import mla_case
from cuda_llm_ops.mla import paged_mla_attention

b, n, hq, ns = (int(x) for x in sys.argv[1:5])
inp = mla_case(b, n, hq, torch.float16).make_inputs()
paged_mla_attention(inp["q"], inp["kv_cache"], inp["block_tables"], inp["seq_lens"], num_splits=ns,
                    check_indices=False)
torch.cuda.synchronize()
