"""Small fp16/bf16 prefill cases for compute-sanitizer (memcheck) on the Hopper flash kernel:
every head-dim tile (64 with two and three consumers, 128, 192, 256), both schedules, causal
with Nq > Nk (rows that see no key, written as zeros), GQA, tails on both sides, and more work
tiles than SMs (the persistent CTAs' barrier phases across tiles). Each result is checked
against the fp32 reference.

    compute-sanitizer --tool memcheck python3 scripts/sanitize_attention_sm90_dev.py
"""
import os

os.environ["CUDA_LLM_OPS_FLASH_SM90_SCHED"] = ""  # set before the first call: read on every call

os.environ.setdefault("PYTORCH_NO_CUDA_MEMORY_CACHING", "1")  # exact bounds: see sanitize_decode_dev.py

import torch  # noqa: E402

import cuda_llm_ops as llm  # noqa: E402
from cuda_llm_ops.reference import attention_reference  # noqa: E402
from cuda_llm_ops.testing import rel_error  # noqa: E402

cases = [  # (b, hq, hkv, nq, nk, d, causal)
    (1, 2, 1, 131, 77, 128, True), (1, 2, 2, 200, 333, 64, False), (1, 2, 1, 300, 300, 64, True),
    (1, 2, 2, 129, 200, 192, True), (1, 2, 1, 77, 300, 256, False), (2, 80, 8, 256, 256, 128, False),
    (1, 4, 2, 17, 1000, 96, True),
    # D = 192 and 256: one O staging slot the consumer warpgroups take in turn, across work tiles.
    (1, 160, 8, 200, 300, 192, False), (2, 80, 8, 256, 256, 256, True),
]
failed = []
for sched in ("", "1", "2", "3"):
    os.environ["CUDA_LLM_OPS_FLASH_SM90_SCHED"] = sched
    for b, hq, hkv, nq, nk, d, causal in cases:
        if sched == "3" and d > 64:
            continue
        for dtype in (torch.float16, torch.bfloat16):
            g = torch.Generator(device="cuda").manual_seed(nq + nk + d)
            q = torch.randn(b, hq, nq, d, device="cuda", generator=g).to(dtype)
            k, v = (torch.randn(b, hkv, nk, d, device="cuda", generator=g).to(dtype) for _ in range(2))
            out = llm.flash_attention(q, k, v, is_causal=causal)
            err = rel_error(out.float(), attention_reference(q, k, v, is_causal=causal, dtype=torch.float32).float())
            ok = err < 1e-2 and not torch.isnan(out).any()
            print(f"sched={sched or 'rule'} {(b, hq, hkv, nq, nk, d, causal)} {dtype}: rel err {err:.1e}"
                  f"{'' if ok else '  FAILED'}", flush=True)
            if not ok:
                failed.append((sched, b, hq, hkv, nq, nk, d, causal, dtype))
print("FAILED:", failed if failed else "none")
