"""One paged decode call of a given shape, for profilers (ncu -k regex:decode_attention):
    python3 scripts/probe_decode_once.py --batch 16 --context 16384 --kv-heads 8 [--head-dim 96] [--nq 4] [--fp8]
        [--splits 1] [--peer sdpa-cudnn] [--contiguous]
Warm-up calls first (module load, workspace), then `--calls` profiled ones. `--peer`: instead
of ours, that peer of the bench case (e.g. sdpa-cudnn, sdpa-flash) on the same keys, as the
bench builds it. `--contiguous`: ours through decode_attention on the same keys as [B, Hkv, N, D]
(causal for Nq > 1, as the bench's contiguous case)."""
from __future__ import annotations

import argparse

import torch

from cuda_llm_ops.bench import cases_decode as cd


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--context", type=int, default=16384)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=cd.HEAD_DIM)
    ap.add_argument("--nq", type=int, default=1, help="query rows per sequence (speculative decoding)")
    ap.add_argument("--fp8", action="store_true")
    ap.add_argument("--splits", type=int, default=0)
    ap.add_argument("--calls", type=int, default=1)
    ap.add_argument("--peer", default="", help="a peer impl of the case to run instead of ours")
    ap.add_argument("--contiguous", action="store_true", help="ours on a contiguous copy of the keys (16-bit)")
    args = ap.parse_args()
    if args.contiguous and args.fp8:
        ap.error("--contiguous reads the 16-bit keys: not with --fp8")
    case = (cd.fp8_case if args.fp8 else cd.paged_case)(args.batch, args.context, args.kv_heads, torch.float16,
                                                            D=args.head_dim, **({"Nq": args.nq} if args.nq > 1 else {}))
    inp = case.make_inputs()
    if args.peer:
        impl = next((i for i in case.impls if i.name == args.peer), None)
        if impl is None:
            raise SystemExit(f"--peer: no impl {args.peer!r} in the case (have {[i.name for i in case.impls]})")
        fn = impl.build(inp)
    else:  # the call as the dev sweeps time it (scripts/bench_decode_dev.py; this directory is on sys.path)
        from bench_decode_dev import _split_fns
        scales = {"k_scale": cd.FP8_SCALE, "v_scale": cd.FP8_SCALE} if args.fp8 else {}
        fn = _split_fns([inp], args.splits, "_fp8" if args.fp8 else "", contiguous=args.contiguous, **scales)[0]
    for _ in range(3 + args.calls):
        fn()
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
