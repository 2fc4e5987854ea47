"""Dev benchmark of lightning attention decode (h=64, d=e=96, n=1, bf16 q/k/v, fp32 state).

Prints, per batch: time (cold L2), TB/s, % of a device-to-device copy of the same
state measured here (cold L2), ratios to the PyTorch eager recurrence and the
Triton peer; then b=1 latency with CUDA graphs (warm, and cold via rotated inputs),
and a few other shapes (n > 1, odd dims, in-place).
Usage: python3 scripts/bench_lightning_dev.py [--quick]
"""
from __future__ import annotations

import inspect
import sys

import torch

from cuda_llm_ops import lightning_attention_decode
from cuda_llm_ops.bench.cases_lightning import (lightning_decode_bytes, lightning_decode_torch_eager,
                                                make_lightning_inputs)
from cuda_llm_ops.bench.triton_lightning import triton_lightning_decode, triton_unavailable_reason
from cuda_llm_ops.reference import lightning_decode_reference
from cuda_llm_ops.testing import rel_error
from cuda_llm_ops.timing import benchmark, l2_cache_bytes, rotation_count

H, D, E = 64, 96, 96
HAS_ROTATION = "fn_sets" in inspect.signature(benchmark).parameters
TRITON_WHY = triton_unavailable_reason()


def us(fn, **kw) -> float:
    return benchmark(fn, warmup=10, iterations=kw.pop("iterations", 100), **kw).median_ms * 1e3


def impls(x):
    fns = {
        "ours": lambda: lightning_attention_decode(x["q"], x["k"], x["v"], x["kv"], x["slope"], out=x["out"],
                                                   new_kv=x["new_kv"]),
        "eager": lambda: lightning_decode_torch_eager(x["q"], x["k"], x["v"], x["kv"], x["slope"]),
    }
    if TRITON_WHY is None:
        t_out, t_kv = torch.empty_like(x["out"]), torch.empty_like(x["new_kv"])
        fns["triton"] = lambda: triton_lightning_decode(x["q"], x["k"], x["v"], x["kv"], x["slope"], out=t_out,
                                                        new_kv=t_kv)
    return fns


def check(x, fns):
    o_ref, kv_ref = lightning_decode_reference(x["q"], x["k"], x["v"], x["kv"], x["slope"])
    errs = []
    for name, fn in fns.items():
        o, kv = fn()
        errs.append(f"{name} o {rel_error(o, o_ref):.1e} kv {rel_error(kv, kv_ref):.1e}")
    return "; ".join(errs)


def main(quick: bool) -> None:
    torch.manual_seed(0)
    props = torch.cuda.get_device_properties(0)
    print(f"device: {props.name}, {props.multi_processor_count} SMs, L2 {l2_cache_bytes() / 2**20:.0f} MB; "
          f"triton: {TRITON_WHY or 'yes'}; rotation timer: {HAS_ROTATION}")
    dtype = torch.bfloat16
    rows = []
    for b in ((1, 16) if quick else (1, 16, 64)):
        x = make_lightning_inputs(b, H, 1, D, E, dtype)
        fns = impls(x)
        print(f"b={b}: rel errors vs fp32 reference: {check(x, fns)}")
        src = x["kv"]
        dst = torch.empty_like(src)
        t_copy = us(lambda: dst.copy_(src), cold_l2=True)
        copy_tbps = 2 * src.numel() * 4 / (t_copy * 1e-6) / 1e12
        nbytes = lightning_decode_bytes(b, H, 1, D, E, dtype)
        t = {name: us(fn, cold_l2=True) for name, fn in fns.items()}
        # the decode loop's form: state updated in place
        t["ours_inplace"] = us(lambda: lightning_attention_decode(x["q"], x["k"], x["v"], x["kv"], x["slope"],
                                                                  out=x["out"], new_kv=x["kv"]), cold_l2=True)
        tbps = nbytes / (t["ours"] * 1e-6) / 1e12
        line = (f"b={b:3d} bytes={nbytes / 1e6:7.2f} MB | ours {t['ours']:7.2f} us {tbps:5.2f} TB/s "
                f"= {100 * tbps / copy_tbps:5.1f}% of copy ({t_copy:.2f} us, {copy_tbps:.2f} TB/s) | "
                f"in-place {t['ours_inplace']:7.2f} us | eager {t['eager']:7.2f} us (x{t['eager'] / t['ours']:.1f})")
        if "triton" in t:
            line += f" | triton {t['triton']:7.2f} us (x{t['triton'] / t['ours']:.2f})"
        print(line, flush=True)
        rows.append((b, t, tbps, copy_tbps))

    # b = 1 is launch-bound: CUDA-graph timing (warm L2, and cold via rotated input copies).
    b = 1
    x = make_lightning_inputs(b, H, 1, D, E, dtype)
    fns = impls(x)
    line = "b=1 CUDA graph, warm L2:"
    for name, fn in fns.items():
        line += f" {name} {us(fn, cuda_graph=True):.2f} us;"
    print(line, flush=True)
    if HAS_ROTATION:
        nbytes = lightning_decode_bytes(b, H, 1, D, E, dtype)
        sets = rotation_count(nbytes)
        xs = [make_lightning_inputs(b, H, 1, D, E, dtype) for _ in range(sets)]
        line = f"b=1 CUDA graph, cold L2 (rotate over {sets} input sets):"
        for name in fns:
            set_fns = [impls(xi)[name] for xi in xs]
            t_ = benchmark(None, warmup=3, iterations=50, cold_l2=True, cuda_graph=True, fn_sets=set_fns)
            line += f" {name} {t_.median_ms * 1e3:.2f} us;"
        print(line, flush=True)
        del xs

    # Other shapes: correctness at a glance and cost of n > 1 and odd dims (ours only, cold L2).
    for (bb, n, d, e) in [(16, 4, 96, 96), (16, 1, 128, 128), (16, 1, 80, 80), (16, 1, 33, 33), (64, 1, 64, 64)]:
        x = make_lightning_inputs(bb, H, n, d, e, dtype)
        fn = impls(x)["ours"]
        o_ref, kv_ref = lightning_decode_reference(x["q"], x["k"], x["v"], x["kv"], x["slope"])
        o, kv = fn()
        err = max(rel_error(o, o_ref), rel_error(kv, kv_ref))
        t_ = us(fn, cold_l2=True)
        nbytes = lightning_decode_bytes(bb, H, n, d, e, dtype)
        print(f"b={bb} n={n} d={d} e={e}: {t_:7.2f} us, {nbytes / (t_ * 1e-6) / 1e12:.2f} TB/s, rel err {err:.1e}")


if __name__ == "__main__":
    main("--quick" in sys.argv)
