"""Dev probe for decode attention's small grids (csrc/decode/NOTES.md): how fast can a
plain read of the same bytes go with the same number of thread blocks?

A: a Triton read-and-reduce kernel over a contiguous buffer (67 MB = the B=16/N=1024/GQA
   and B=1/N=16384/GQA K+V, and 268 MB), for several grid sizes: the streaming floor of a
   128-block grid versus a full one;
B: the same read through the paged layout ([blocks, 16, Hkv, D], shuffled blocks), one
   program per (sequence, KV head), as the decode kernel reads it;
C: kernel-only durations (torch.profiler) of ours (each dev variant) and SDPA cuDNN, to
   split a call's time into kernel and launch.
N: one call of each kernel per case, to run under ncu.
Cold L2 (flush) and CUDA events throughout; medians of --iters runs.

    python3 scripts/probe_decode_floor.py [--iters 30]
"""
from __future__ import annotations

import argparse
import os

import torch
import triton
import triton.language as tl

from cuda_llm_ops.timing import benchmark


@triton.jit
def _read_contig(x_ptr, out_ptr, n_per_prog, CHUNK: tl.constexpr):
    pid = tl.program_id(0)
    base = pid.to(tl.int64) * n_per_prog
    acc = tl.zeros([CHUNK], dtype=tl.float32)
    for i in range(0, n_per_prog, CHUNK):
        acc += tl.load(x_ptr + base + i + tl.arange(0, CHUNK)).to(tl.float32)
    tl.store(out_ptr + pid, tl.sum(acc))


@triton.jit
def _read_paged(k_ptr, v_ptr, table_ptr, out_ptr, n_blocks, HKV: tl.constexpr, D: tl.constexpr,
                BS: tl.constexpr, BLOCKS_PER_IT: tl.constexpr):
    b = tl.program_id(0) // HKV
    h = tl.program_id(0) % HKV
    rows = tl.arange(0, BLOCKS_PER_IT * BS)
    cols = tl.arange(0, D)
    acc = tl.zeros([BLOCKS_PER_IT * BS, D], dtype=tl.float32)
    for j in range(0, n_blocks, BLOCKS_PER_IT):
        e = tl.load(table_ptr + b * n_blocks + j + rows // BS).to(tl.int64)
        off = (e * BS + rows % BS) * (HKV * D) + h * D
        ptrs = off[:, None] + cols[None, :]
        acc += tl.load(k_ptr + ptrs).to(tl.float32) + tl.load(v_ptr + ptrs).to(tl.float32)
    tl.store(out_ptr + tl.program_id(0), tl.sum(acc))


def section_a(iters):
    print("A: contiguous read (fp16), flush-cold, events", flush=True)
    for total_mb in (67.1, 268.4):
        n = int(total_mb * 1e6) // 2 // 65536 * 65536
        x = torch.randn(n, device="cuda", dtype=torch.float16)
        for grid in (128, 132, 256, 264, 528, 1056, 2112):
            out = torch.empty(grid, device="cuda", dtype=torch.float32)
            per = n // grid // 4096 * 4096
            res = []
            for chunk, warps, stages in ((4096, 4, 3), (8192, 8, 3), (8192, 8, 4)):
                if per % chunk:
                    continue
                fn = lambda: _read_contig[(grid,)](x, out, per, CHUNK=chunk, num_warps=warps, num_stages=stages)  # noqa: E731
                fn()
                t = benchmark(fn, warmup=3, iterations=iters, cold_l2=True).median_ms
                res.append(f"c{chunk}/w{warps}/s{stages} {t * 1e3:6.1f} us {grid * per * 2 / t / 1e9:5.2f} TB/s")
            print(f"  {total_mb:6.1f} MB grid {grid:5d}: " + " | ".join(res), flush=True)
        del x


def section_b(iters):
    print("B: paged read, one program per (sequence, KV head), flush-cold", flush=True)
    for B, N, Hkv in ((16, 1024, 8), (1, 16384, 8), (16, 4096, 8)):
        D, BS = 128, 16
        nb = N // BS
        k = torch.randn(B * nb, BS, Hkv, D, device="cuda", dtype=torch.float16)
        v = torch.randn_like(k)
        table = torch.randperm(B * nb, device="cuda").view(B, nb).to(torch.int32)
        out = torch.empty(B * Hkv, device="cuda", dtype=torch.float32)
        nbytes = 2 * k.numel() * 2
        res = []
        for bpi, warps, stages in ((4, 4, 3), (4, 8, 3), (8, 8, 3), (4, 4, 4)):
            fn = lambda: _read_paged[(B * Hkv,)](k, v, table, out, nb, HKV=Hkv, D=D, BS=BS,  # noqa: E731
                                                 BLOCKS_PER_IT=bpi, num_warps=warps, num_stages=stages)
            fn()
            t = benchmark(fn, warmup=3, iterations=iters, cold_l2=True).median_ms
            res.append(f"bpi{bpi}/w{warps}/s{stages} {t * 1e3:6.1f} us {nbytes / t / 1e9:5.2f} TB/s")
        print(f"  B={B} N={N} Hkv={Hkv} ({nbytes / 1e6:.1f} MB, {B * Hkv} programs): " + " | ".join(res), flush=True)
        del k, v


def section_c():
    print("C: kernel-only durations (torch.profiler, warm launches, cold L2 by flush)", flush=True)
    from torch.profiler import ProfilerActivity, profile

    from cuda_llm_ops.bench import cases_decode as cd
    from cuda_llm_ops.decode import paged_attention, paged_attention_workspace
    from cuda_llm_ops.timing import flush_l2
    for B, N, Hkv in ((16, 1024, 8), (1, 16384, 8)):
        case = cd.paged_case(B, N, Hkv, torch.float16)
        inp = case.make_inputs()
        q, kc, vc, bt, sl = inp["q"], inp["k_cache"], inp["v_cache"], inp["block_tables"], inp["seq_lens"]
        ws = paged_attention_workspace(q, kc, bt)
        out = torch.empty_like(q)
        fns = {}
        for var in (1, 2):
            def ours(var=var):
                os.environ["CLO_DECODE_VARIANT"] = str(var)
                return paged_attention(q, kc, vc, bt, sl, out=out, workspace=ws, check_indices=False)
            fns[f"ours {'cp.async' if var == 1 else 'tma'}"] = ours
        for impl in case.impls:
            if impl.name == "sdpa-cudnn" and not (impl.unavailable and impl.unavailable(inp)):
                fns["sdpa cudnn"] = impl.build(inp)
        for name, fn in fns.items():
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(20):
                    flush_l2()
                    fn()
                torch.cuda.synchronize()
            ks = {}
            for ev in prof.events():
                if ev.device_type.name == "CUDA" and "reduce" not in ev.name.lower() and "sum" not in ev.name.lower():
                    ks.setdefault(ev.name[:60], []).append(ev.device_time)
            desc = ", ".join(f"{k_}: median {sorted(v_)[len(v_) // 2]:.1f} us x{len(v_)}" for k_, v_ in ks.items())
            print(f"  B={B} N={N} Hkv={Hkv} {name}: {desc}", flush=True)
        os.environ["CLO_DECODE_VARIANT"] = "0"
        del inp


def section_n(cases=((16, 1024, 8), (1, 16384, 8))):
    """One call of each kernel per case, for ncu (-k regex:'decode_attention|fprop'):
    ours as the cp.async then the TMA kernel, then SDPA cuDNN."""
    from cuda_llm_ops.bench import cases_decode as cd
    from cuda_llm_ops.decode import paged_attention, paged_attention_workspace
    for B, N, Hkv in cases:
        case = cd.paged_case(B, N, Hkv, torch.float16)
        inp = case.make_inputs()
        q, kc, vc, bt, sl = inp["q"], inp["k_cache"], inp["v_cache"], inp["block_tables"], inp["seq_lens"]
        ws = paged_attention_workspace(q, kc, bt)
        for var in (1, 2):
            os.environ["CLO_DECODE_VARIANT"] = str(var)
            paged_attention(q, kc, vc, bt, sl, workspace=ws, check_indices=False)
        for impl in case.impls:
            if impl.name == "sdpa-cudnn" and not (impl.unavailable and impl.unavailable(inp)):
                impl.build(inp)()
        torch.cuda.synchronize()
        print(f"n: B={B} N={N} Hkv={Hkv}: cp.async, tma, cudnn", flush=True)
        os.environ["CLO_DECODE_VARIANT"] = "0"
        del inp


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--sections", default="abc")
    args = ap.parse_args()
    os.environ.setdefault("CLO_DECODE_VARIANT", "0")
    if "a" in args.sections:
        section_a(args.iters)
    if "b" in args.sections:
        section_b(args.iters)
    if "c" in args.sections:
        section_c()
    if "n" in args.sections:
        section_n()
    if "m" in args.sections:  # the steady-state case (B=16, N=4096, GQA), for ncu sections
        section_n(((16, 4096, 8),))


if __name__ == "__main__":
    main()
