"""Small attention cases for compute-sanitizer (memcheck): edge tiles, GQA,
strided inputs, causal with Nq > Nk, every kernel family.

    compute-sanitizer --tool memcheck python3 scripts/sanitize_attention_dev.py
"""
import os

os.environ.setdefault("PYTORCH_NO_CUDA_MEMORY_CACHING", "1")  # exact bounds: see sanitize_decode_dev.py

import torch  # noqa: E402

import cuda_llm_ops as llm  # noqa: E402
from cuda_llm_ops.reference import attention_reference  # noqa: E402
from cuda_llm_ops.testing import assert_close  # noqa: E402

ops = {"naive": llm.naive_attention, "tiled": llm.tiled_attention,
       "flash": lambda q, k, v, is_causal: torch.ops.cuda_llm_ops.flash_attention(q, k, v, q.shape[-1] ** -0.5, is_causal)}
n = 0
for dtype in (torch.float16, torch.bfloat16, torch.float32):
    for d in (40, 128, 256):
        for causal in (False, True):
            for nq, nk in ((37, 71), (71, 37), (1, 5)):
                q = torch.randn(2, nq, 4, d, device="cuda").to(dtype).transpose(1, 2)
                k = torch.randn(2, nk, 2, d, device="cuda").to(dtype).transpose(1, 2)
                v = torch.randn(2, nk, 2, d, device="cuda").to(dtype).transpose(1, 2)
                ref = attention_reference(q, k, v, is_causal=causal)
                for name, fn in ops.items():
                    if name != "flash" and (d, nq) != (128, 37):
                        continue
                    assert_close(fn(q, k, v, is_causal=causal), ref, dtype=dtype, what=f"{name} {dtype} {d} {nq} {nk}")
                    n += 1
torch.cuda.synchronize()
print(f"sanitize cases ok: {n}")
