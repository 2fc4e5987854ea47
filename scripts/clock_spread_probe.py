"""Where the run-to-run spread of a long compute-bound call comes from: ours against the peer on one
shape, in alternating blocks of runs, each run timed by CUDA events and stamped with the host time
its block was launched; `nvidia-smi` samples the SM clock, power and throttle reasons meanwhile.
Per implementation: the run times by SM-clock bin. Equal times at equal clocks: the spread is the
clock's; a spread at one clock: the kernel's own.

    python3 scripts/clock_spread_probe.py [--op attention] [--shape B,Hq,Hkv,N,D] [--causal] [--dtype bf16]
    python3 scripts/clock_spread_probe.py --op gemm --shape M,N,K [--nk] [--dtype bf16] [--blocks 60] [--runs 50]

attention: flash_attention against SDPA's cuDNN backend; gemm: `gemm` against cuBLAS (torch.matmul),
b [K, N] or, with --nk, b [N, K] (nn.Linear's weight, `trans_b=True`).
--variant NAME:KNOB=V[,KNOB=V] (repeatable) adds our call under dev knobs (environment variables the
launchers read on every call) as one more implementation in the rotation.
"""
from __future__ import annotations

import argparse
import bisect
import os
import statistics
import subprocess
import tempfile
import time

import torch

import cuda_llm_ops as llm
from cuda_llm_ops.bench import sdpa


def build_cases(args, dtype):
    """Ours and the peer as closures over fresh random inputs, and the peer's output in fp32."""
    g = torch.Generator(device="cuda").manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, device="cuda", dtype=dtype, generator=g)

    if args.op == "gemm":
        m, n, k = (int(x) for x in (args.shape or "4096,12288,4096").split(","))
        a = randn(m, k)
        b = randn(n, k) if args.nk else randn(k, n)
        impls = {
            "ours": lambda: llm.gemm(a, b, trans_b=args.nk),
            "cublas": lambda: torch.matmul(a, b.t() if args.nk else b),
        }
    else:
        bsz, hq, hkv, n, d = (int(x) for x in (args.shape or "8,32,8,2048,128").split(","))
        q, k, v = randn(bsz, hq, n, d), randn(bsz, hkv, n, d), randn(bsz, hkv, n, d)
        impls = {
            "ours": lambda: llm.flash_attention(q, k, v, is_causal=args.causal),
            "cudnn": lambda: sdpa.call("cudnn", q, k, v, hkv != hq, is_causal=args.causal),
        }
    peer = [name for name in impls if name != "ours"][0]
    return impls, impls[peer]().float()


def with_knobs(fn, knobs: dict):
    for k, v in knobs.items():
        os.environ[k] = v
    try:
        return fn()
    finally:
        for k in knobs:
            os.environ[k] = ""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--op", default="attention", choices=["attention", "gemm"])
    ap.add_argument("--shape", default=None, help="B,Hq,Hkv,N,D (attention, default 8,32,8,2048,128) or M,N,K (gemm)")
    ap.add_argument("--nk", action="store_true", help="gemm: b stored [N, K]")
    ap.add_argument("--dtype", default="bf16", choices=["fp16", "bf16"])
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--blocks", type=int, default=60, help="blocks of runs per implementation, alternating")
    ap.add_argument("--runs", type=int, default=50, help="runs per block")
    ap.add_argument("--sample-ms", type=int, default=20)
    ap.add_argument("--variant", action="append", default=[], metavar="NAME:KNOB=V[,KNOB=V]")
    args = ap.parse_args()
    variants = {}  # name -> {knob: value}
    for spec in args.variant:
        name, _, knobs = spec.partition(":")
        variants[name] = dict(kv.split("=", 1) for kv in knobs.split(",") if kv)
    knob_names = {k for kv in variants.values() for k in kv}
    for k in knob_names:  # present (empty: the default) before the first call, as the launchers require
        os.environ[k] = ""
    dtype = torch.float16 if args.dtype == "fp16" else torch.bfloat16
    impls, ref = build_cases(args, dtype)
    for name, knobs in variants.items():
        impls[name] = (lambda fn, knobs: lambda: with_knobs(fn, knobs))(impls["ours"], knobs)
    for name, fn in impls.items():
        err = ((fn().float() - ref).norm() / ref.norm()).item()
        print(f"{args.op} {args.shape} {args.dtype} {name}: rel err to the peer {err:.1e}")
    for fn in impls.values():
        for _ in range(10):
            fn()
    torch.cuda.synchronize()

    log = tempfile.NamedTemporaryFile("w+", suffix=".csv", delete=False)
    # clocks_event_reasons is the newer drivers' name of clocks_throttle_reasons
    reasons = "clocks_event_reasons.active"
    if subprocess.run(["nvidia-smi", f"--query-gpu={reasons}", "--format=csv"], capture_output=True).returncode:
        reasons = "clocks_throttle_reasons.active"
    smi = subprocess.Popen(["nvidia-smi", f"--query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,{reasons}",
                            "--format=csv,noheader,nounits", f"-lms={args.sample_ms}"],
                           stdout=log, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    runs = {name: [] for name in impls}  # (host start of the run, ms)
    try:
        for blk in range(args.blocks):
            for name in (list(impls) if blk % 2 == 0 else list(impls)[::-1]):
                if name in variants:  # the knobs for the whole block, outside the timed calls
                    os.environ.update(variants[name])
                fn = impls[name] if name not in variants else impls["ours"]
                ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                      for _ in range(args.runs)]
                torch.cuda.synchronize()
                t0 = time.time()
                for s, e in ev:
                    s.record()
                    fn()
                    e.record()
                torch.cuda.synchronize()
                for k in variants.get(name, {}):
                    os.environ[k] = ""
                times = [s.elapsed_time(e) for s, e in ev]
                # the runs are back to back: run i started about t0 + sum of the earlier ones
                acc = 0.0
                for ms in times:
                    runs[name].append((t0 + acc / 1e3, ms))
                    acc += ms
    finally:
        time.sleep(0.2)
        smi.terminate()
        smi.wait()
    log.seek(0)
    samples = []  # (unix time, sm MHz, W, C, reasons)
    for line in log.read().splitlines():
        parts = [x.strip() for x in line.split(",")]
        if len(parts) < 5:
            continue
        try:
            ts = time.mktime(time.strptime(parts[0].split(".")[0], "%Y/%m/%d %H:%M:%S")) + \
                float("0." + parts[0].split(".")[1]) if "." in parts[0] else 0.0
            samples.append((ts, int(parts[1]), float(parts[2]), int(parts[3]), parts[4]))
        except ValueError:
            continue
    os.unlink(log.name)
    print(f"{len(samples)} nvidia-smi samples; SM clock {min(s[1] for s in samples) if samples else '-'}-"
          f"{max(s[1] for s in samples) if samples else '-'} MHz; power "
          f"{min(s[2] for s in samples) if samples else '-'}-{max(s[2] for s in samples) if samples else '-'} W; "
          f"reasons {sorted({s[4] for s in samples})}")
    stamps = [s[0] for s in samples]

    def clock_at(t: float) -> int | None:
        if not samples:
            return None
        i = min(max(bisect.bisect_left(stamps, t), 0), len(samples) - 1)
        return samples[i][1]

    for name, rs in runs.items():
        ts = [ms for _, ms in rs]
        q20 = sorted(ts)[len(ts) // 5]
        q80 = sorted(ts)[4 * len(ts) // 5]
        print(f"{name}: {len(ts)} runs, median {statistics.median(ts) * 1e3:.1f} us, p20 {q20 * 1e3:.1f}, "
              f"p80 {q80 * 1e3:.1f}")
        bins: dict[int, list[float]] = {}
        for t, ms in rs:
            c = clock_at(t)
            if c is not None:
                bins.setdefault(c // 30 * 30, []).append(ms)
        for c in sorted(bins):
            xs = bins[c]
            print(f"  SM {c:4d}-{c + 29} MHz: {len(xs):4d} runs, median {statistics.median(xs) * 1e3:7.1f} us, "
                  f"min {min(xs) * 1e3:7.1f}, max {max(xs) * 1e3:7.1f}")
        # by block: does a block's time drift within itself?
        per_block = [ts[i:i + args.runs] for i in range(0, len(ts), args.runs)]
        print("  block medians, us: " + " ".join(f"{statistics.median(x) * 1e3:.0f}" for x in per_block))
    peer = next(n for n in runs if n != "ours" and n not in variants)
    peer_median = statistics.median(ms for _, ms in runs[peer])
    print("x " + peer + " (median over all runs): " +
          ", ".join(f"{n} {peer_median / statistics.median(ms for _, ms in rs):.3f}" for n, rs in runs.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
