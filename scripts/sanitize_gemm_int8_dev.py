"""Small int8 GEMM cases for compute-sanitizer (memcheck) on the Hopper wgmma family
(CLO_GEMM_INT8_WGMMA=2: wherever it can run) and on mma.sync (=0): M, N and K tails, B stored
[N, K] with N odd (the register epilogue) and even (TMA stores), B [K, N] through the transpose
into the workspace, the split last wave forced (CLO_GEMM_WGMMA_TAIL_SPLIT=2; a grid of one wave
or less cut along K, every unit in chunks), decode shapes on
the skinny tile (stream-K pieces summed in the workspace; whole units of 64 and 96 rows with a
partial last unit, also for fp16 with b [N, K] against the skinny tile forced; int8 batched
decode on it, 17-128 rows by its rule and up to 200 forced), and the skinny
int8 kernel for B [K, N] (forced at any size; 8, 1 and 4 k-warps, splits, N and K tails). Each int8
result is checked exactly against float64, fp16 within 1e-2 relative.

    compute-sanitizer --tool memcheck python3 scripts/sanitize_gemm_int8_dev.py
"""
import os

for knob in ("CLO_GEMM_INT8_WGMMA", "CLO_GEMM_WGMMA_TAIL_SPLIT", "CLO_GEMM_SKINNY_WGMMA", "CLO_GEMM_INT8_SKINNY",
             "CLO_SKINNY_KWARPS", "CLO_GEMM_WGMMA_SHORT_SPLIT"):
    os.environ[knob] = ""  # set before the first call, so the launchers read them on every call

os.environ.setdefault("PYTORCH_NO_CUDA_MEMORY_CACHING", "1")  # exact bounds: see sanitize_decode_dev.py

import torch  # noqa: E402

import cuda_llm_ops as llm  # noqa: E402
from cuda_llm_ops.reference import int8_gemm_reference  # noqa: E402

cases = [  # (M, N, K, B stored [N, K])
    (17, 33, 144, True), (1, 1, 16, True), (130, 264, 272, True), (257, 48, 1040, False), (5, 16, 16, False),
    (300, 520, 128, True), (7, 300, 1040, True), (16, 1536, 4096, True),  # the last two: the skinny tile
    (3, 8200, 256, True), (16, 12280, 384, True),  # skinny, whole units: 129 of 64 rows, 128 of 96, the last partial
    (64, 1000, 4096, True), (100, 2056, 2064, True),  # a short wave of 256-wide tiles split along K (4 / 3 chunks)
]
failed = []
os.environ["CLO_GEMM_INT8_SKINNY"] = "0"  # B [K, N] at M <= 16 on the modes' kernels, not the skinny one
for mode, split in (("2", ""), ("2", "2"), ("0", "")):
    os.environ["CLO_GEMM_INT8_WGMMA"] = mode
    os.environ["CLO_GEMM_WGMMA_TAIL_SPLIT"] = split
    for m, n, k, nk in cases + ([(2312, 2056, 1024, True), (2312, 2048, 1024, False)] if split else []):
        a = torch.randint(-128, 128, (m, k), dtype=torch.int8, device="cuda")
        b = (torch.randint(-128, 128, (n, k), dtype=torch.int8, device="cuda").t() if nk
             else torch.randint(-128, 128, (k, n), dtype=torch.int8, device="cuda"))
        ok = torch.equal(llm.tensor_core_gemm_int8(a, b), int8_gemm_reference(a, b))
        torch.cuda.synchronize()
        if not ok:
            failed.append((mode, split, m, n, k, nk))
os.environ["CLO_GEMM_INT8_WGMMA"] = os.environ["CLO_GEMM_WGMMA_TAIL_SPLIT"] = ""
os.environ["CLO_GEMM_INT8_SKINNY"] = "2"  # the skinny int8 kernel (B [K, N], M <= 16) at any size
for kwarps in ("", "1", "4"):  # 8 k-warps (default), 1, 4: the partials' padded layouts
    os.environ["CLO_SKINNY_KWARPS"] = kwarps
    for m, n, k in ((9, 1040, 8208), (3, 2064, 48), (16, 1024, 8192), (5, 16, 16), (1, 12288, 1040)):
        a = torch.randint(-128, 128, (m, k), dtype=torch.int8, device="cuda")
        b = torch.randint(-128, 128, (k, n), dtype=torch.int8, device="cuda")
        ok = torch.equal(llm.tensor_core_gemm_int8(a, b), int8_gemm_reference(a, b))
        torch.cuda.synchronize()
        if not ok:
            failed.append(("int8 skinny", kwarps, m, n, k))
os.environ["CLO_SKINNY_KWARPS"] = os.environ["CLO_GEMM_INT8_SKINNY"] = ""
for tile in ("", "2"):  # int8 batched decode (B [N, K]) on the swapped skinny tile: its rule, and forced
    os.environ["CLO_GEMM_SKINNY_WGMMA"] = tile
    for m, n, k in ((17, 4096, 1040), (40, 6144, 1040), (64, 2056, 528), (128, 4096, 272)) + (
            ((200, 4096, 528), (100, 1000, 272)) if tile else ()):
        a = torch.randint(-128, 128, (m, k), dtype=torch.int8, device="cuda")
        b = torch.randint(-128, 128, (n, k), dtype=torch.int8, device="cuda").t()
        ok = torch.equal(llm.tensor_core_gemm_int8(a, b), int8_gemm_reference(a, b))
        torch.cuda.synchronize()
        if not ok:
            failed.append(("int8 skinny tile", tile, m, n, k))
os.environ["CLO_GEMM_SKINNY_WGMMA"] = "2"  # the 16-bit skinny tile wherever it can run
for m, n, k, nk in ((5, 12280, 512, True), (16, 8200, 264, True), (9, 12288, 520, False)):
    a = torch.randn(m, k, dtype=torch.float16, device="cuda")
    b = torch.randn((n, k) if nk else (k, n), dtype=torch.float16, device="cuda")
    ref = a.double() @ (b.double().t() if nk else b.double())
    out = llm.gemm(a, b, trans_b=nk)
    err = ((out.double() - ref).norm() / ref.norm()).item()
    torch.cuda.synchronize()
    if not err < 1e-2:
        failed.append(("fp16 skinny", m, n, k, nk, err))
print("int8 / fp16 skinny sanitize cases:", "all within tolerance" if not failed else f"FAILED {failed}")
