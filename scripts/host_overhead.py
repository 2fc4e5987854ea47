"""Host (CPU) time per eager call of every public op next to its raw torch op and, for
decode, SDPA: tiny shapes, so the GPU never limits the loop; no synchronisation inside.
What an eager model (no CUDA graph) pays per call before the GPU does anything.

    python3 scripts/host_overhead.py [--calls 300]
    python3 scripts/host_overhead.py --profile "fused_decode_block unfused"   # where one case's time goes
"""
from __future__ import annotations

import argparse
import contextlib
import sys
import time

import torch
import torch.nn.functional as F

import cuda_llm_ops as llm
from cuda_llm_ops.bench import cases_decode as cd
from cuda_llm_ops.bench import sdpa
from cuda_llm_ops.fused import _unfused, validate_fused_decode_block_inputs
from cuda_llm_ops.reference import make_fused_decode_problem


def per_call_us(fn, calls: int) -> float:
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return 1e6 * (t1 - t0) / calls


def fused_raw_ops(fp: dict, out: torch.Tensor, ws: torch.Tensor) -> None:
    """The unfused path below its public wrapper: fused._unfused (the four raw ops, their op
    lookups and the qkv views), given the attention's part of the workspace."""
    off, _ = ws._clo_attention_workspace
    _unfused(fp["x"], fp["w_qkv"], fp["w_o"], fp["k_cache"], fp["v_cache"], fp["block_tables"], fp["seq_lens"],
             fp["cos"], fp["sin"], fp["k_cache"].shape[3] ** -0.5, out, ws[off:].view(torch.float32))


def cases() -> dict:
    ops = torch.ops.cuda_llm_ops
    h16 = dict(device="cuda", dtype=torch.float16)
    # decode (B=1, N=64, GQA 32/8, D=128)
    inp = cd.paged_case(1, 64, 8, torch.float16).make_inputs()
    q, kc, vc, bt, sl = inp["q"], inp["k_cache"], inp["v_cache"], inp["block_tables"], inp["seq_lens"]
    out, ws = torch.empty_like(q), llm.paged_attention_workspace(q, kc, bt)
    k, v = cd.contiguous_kv(inp)
    q4 = q.unsqueeze(2)
    out4, ws4 = torch.empty_like(q4), llm.decode_workspace(1, 32, 8, 128, 64, torch.float16)
    # prefill attention (B=1, H=8, N=64, D=64), GEMM (1 x 256 x 256), lightning (b=1, h=8, d=e=64)
    qa = torch.randn(1, 8, 64, 64, **h16)
    a, b = torch.randn(1, 256, **h16), torch.randn(256, 256, **h16)
    lq = torch.randn(1, 8, 1, 64, **h16)
    lkv = torch.zeros(1, 8, 64, 64, device="cuda")
    slope = torch.rand(8, device="cuda")
    lo = torch.empty_like(lq)
    # GEMMs on the Hopper wgmma family (a wave of tiles: 2048^3), where the GPU takes ~20-30 us
    a2, b2 = torch.randn(2048, 2048, **h16), torch.randn(2048, 2048, **h16)
    ai8 = torch.randint(-128, 128, (2048, 2048), dtype=torch.int8, device="cuda")
    bi8 = torch.randint(-128, 128, (2048, 2048), dtype=torch.int8, device="cuda")
    bi8_nk = bi8.t().contiguous().t()
    # the decode step's glue: one new token per sequence into the paged caches (B=1, Hkv=8)
    kn, vn = torch.randn(1, 8, 128, **h16), torch.randn(1, 8, 128, **h16)
    qn, cos, sin = torch.randn(1, 32, 128, **h16), torch.randn(1, 128, **h16), torch.randn(1, 128, **h16)
    slots = (sl.long() - 1) % (kc.shape[0] * kc.shape[1])
    # a small attention block (hidden 512, 4 heads of 128, GQA 4/2) on the unfused path
    fp = make_fused_decode_problem(1, 512, 4, 2, 128, 64, 16, torch.float16, "cuda")
    fargs = [fp[n] for n in ("x", "w_qkv", "w_o", "k_cache", "v_cache", "block_tables", "seq_lens")]
    fout = torch.empty_like(fp["x"])
    fws = llm.fused_decode_block_workspace(fp["x"], fp["w_o"], fp["k_cache"], fp["block_tables"])
    gout = torch.empty(1, 256, **h16)
    peers = {}
    for name in ("cudnn", "flash"):
        def bare():
            return F.scaled_dot_product_attention(q4, k, v, enable_gqa=True)

        # pinned once around the timing loop (as `llm-speed bench` times it), and pinned
        # on every call (sdpa_kernel, as NOTES v8 measured, plus a warnings filter), for comparison
        peers[f"SDPA {name} (decode, enable_gqa; backend pinned once)"] = (bare, lambda name=name: sdpa.pinned(name))
        peers[f"SDPA {name} (same, sdpa_kernel per call)"] = lambda name=name, bare=bare: sdpa.run(name, bare)
    return {
        "paged_attention(out=, workspace=, check_indices=False)":
            lambda: llm.paged_attention(q, kc, vc, bt, sl, out=out, workspace=ws, check_indices=False),
        "paged_attention() defaults (host index check: syncs)": lambda: llm.paged_attention(q, kc, vc, bt, sl),
        "  raw op paged_attention": lambda: ops.paged_attention(out, q, kc, vc, bt, sl, 128 ** -0.5, 0, ws),
        "decode_attention(out=, workspace=, check_workspace=False)":
            lambda: llm.decode_attention(q4, k, v, out=out4, workspace=ws4, check_workspace=False),
        "decode_attention() (allocates out)": lambda: llm.decode_attention(q4, k, v),
        "flash_attention(q [B,H,1,D]) -> decode": lambda: llm.flash_attention(q4, k, v),
        **peers,
        "flash_attention (prefill)": lambda: llm.flash_attention(qa, qa, qa),
        "  raw op flash_attention": lambda: ops.flash_attention(qa, qa, qa, 0.125, False),
        "paged_kv_append(slot_mapping, check_slots=False)":
            lambda: llm.paged_kv_append(kn, vn, kc, vc, slots, check_slots=False),
        "paged_kv_append(block_tables=, cos=, sin=, q=, check_slots=False)":
            lambda: llm.paged_kv_append(kn, vn, kc, vc, None, check_slots=False, block_tables=bt, seq_lens=sl,
                                        cos=cos, sin=sin, q=qn),
        "  raw op paged_kv_append (same glue)":
            lambda: ops.paged_kv_append(kn, vn, kc, vc, None, 1.0, 1.0, bt, sl, cos, sin, qn),
        "fused_decode_block unfused path (out=, workspace=, check_indices=False)":
            lambda: llm.fused_decode_block(*fargs, cos=fp["cos"], sin=fp["sin"], out=fout, workspace=fws,
                                           check_indices=False),
        "  fused._unfused alone (its four raw ops and their glue)": lambda: fused_raw_ops(fp, fout, fws),
        "  its Python validation alone (what each unfused call ran first before)":
            lambda: validate_fused_decode_block_inputs(*fargs, fp["cos"], fp["sin"], fout, fws),
        "gemm": lambda: llm.gemm(a, b),
        "gemm(out=)": lambda: llm.gemm(a, b, out=gout),
        "  raw op gemm": lambda: ops.gemm(a, b, 1.0, 0.0, False, False, None),
        "gemm 2048^3 fp16 (Hopper: wgmma)": lambda: llm.gemm(a2, b2),
        "tensor_core_gemm_int8 2048^3, b [N,K] (Hopper: wgmma)": lambda: llm.tensor_core_gemm_int8(ai8, bi8_nk),
        "tensor_core_gemm_int8 2048^3, b [K,N] (+ transpose, workspace)": lambda: llm.tensor_core_gemm_int8(ai8, bi8),
        "lightning_attention_decode(new_kv=kv, out=)":
            lambda: llm.lightning_attention_decode(lq, lq, lq, lkv, slope, out=lo, new_kv=lkv),
        "  raw op lightning_attention_decode_inplace":
            lambda: ops.lightning_attention_decode_inplace(lq, lq, lq, lkv, slope, lo),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3, help="the table this many times; the minimum is printed")
    ap.add_argument("--profile", default="",
                    help="cProfile the cases whose name contains this text (--calls calls each) instead of the table")
    args = ap.parse_args()
    if not torch.cuda.is_available() or not llm.kernels_available():
        print("needs a GPU and the built kernels", file=sys.stderr)
        return 1
    print(f"host time per call, us, minimum of {args.rounds} rounds ({torch.cuda.get_device_name()}, "
          f"torch {torch.__version__})")
    fns = cases()
    if args.profile:
        return profile_cases(fns, args.profile, args.calls)
    best: dict[str, float | str] = {}
    for _ in range(args.rounds):  # rounds interleave the entries: CPU clock drift hits all alike
        for name, fn in fns.items():
            fn, scope = fn if isinstance(fn, tuple) else (fn, contextlib.nullcontext)
            try:
                with scope():
                    t = per_call_us(fn, args.calls)
                prev = best.get(name)
                best[name] = min(prev, t) if isinstance(prev, float) else t
            except (RuntimeError, AttributeError) as exc:  # an area not in this build
                best[name] = f"unavailable: {str(exc).splitlines()[0][:80]}"
    for name, t in best.items():
        print(f"host {name:58s} " + (f"{t:6.1f}" if isinstance(t, float) else t), flush=True)
    return 0


def profile_cases(fns: dict, text: str, calls: int) -> int:
    """cProfile's view (by own time, then by cumulative time) of the cases named like `text`."""
    import cProfile
    import pstats

    chosen = {name: fn for name, fn in fns.items() if text in name}
    if not chosen:
        print(f"no case's name contains {text!r}", file=sys.stderr)
        return 1
    for name, fn in chosen.items():
        fn, scope = fn if isinstance(fn, tuple) else (fn, contextlib.nullcontext)
        with scope():
            per_call_us(fn, 20)
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(calls):
                fn()
            prof.disable()
        torch.cuda.synchronize()
        print(f"---- {name}: {calls} calls")
        for key in ("tottime", "cumulative"):
            pstats.Stats(prof, stream=sys.stdout).sort_stats(key).print_stats(28)
    return 0


if __name__ == "__main__":
    sys.exit(main())
