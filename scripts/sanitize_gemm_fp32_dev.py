"""Small fp32 GEMM cases for compute-sanitizer (memcheck): every tile of the SIMT family
(`_gemm_variant`: large 128x128, long (NN 256x128 with 16x8 a thread, else 128x256), medium,
small, the one-stage twin) in every layout, with M, N and K tails (partial blocks, partial
k-tiles of BK 16 and 32; the 128x256 tile's k-major copy passes of 4 rows), alpha, beta and c;
and `gemm`'s own pick on a shape that gives NN and TT the long tile. Each result within 1e-5 relative of float64.

    compute-sanitizer --tool memcheck python3 scripts/sanitize_gemm_fp32_dev.py
"""
import os
import sys

os.environ.setdefault("PYTORCH_NO_CUDA_MEMORY_CACHING", "1")  # exact bounds: see sanitize_decode_dev.py

import torch  # noqa: E402

from cuda_llm_ops.gemm import _gemm_variant, gemm  # noqa: E402
from cuda_llm_ops.reference import gemm_reference  # noqa: E402

failed = []


def check(out, a, b, ta, tb, alpha, beta, c, what):
    ref = gemm_reference(a, b, alpha, beta, ta, tb, c, dtype=torch.float64)
    err = ((out.double() - ref).norm() / ref.norm()).item()
    if not err < 1e-5:
        failed.append((what, err))


for ta in (False, True):
    for tb in (False, True):
        for m, n, k in ((300, 520, 180), (132, 260, 36), (4, 4, 4)):
            a = torch.randn((k, m) if ta else (m, k), device="cuda")
            b = torch.randn((n, k) if tb else (k, n), device="cuda")
            c = torch.randn(m, n, device="cuda")
            for variant in ("pipelined", "alt_b", "alt_a", "small_tile", "unpipelined"):
                out = _gemm_variant(a, b, variant, False, ta, tb, 0.5, -1.0, c)
                check(out, a, b, ta, tb, 0.5, -1.0, c, (variant, ta, tb, m, n, k))
        m, n, k = 256, 256 * torch.cuda.get_device_properties(0).multi_processor_count - 40, 72  # NN / TT on Hopper: long
        a = torch.randn((k, m) if ta else (m, k), device="cuda")
        b = torch.randn((n, k) if tb else (k, n), device="cuda")
        check(gemm(a, b, trans_a=ta, trans_b=tb), a, b, ta, tb, 1.0, 0.0, None, ("auto", ta, tb, m, n, k))
print("fp32 sanitize cases:", "all within tolerance" if not failed else f"FAILED {failed}")
sys.exit(1 if failed else 0)
