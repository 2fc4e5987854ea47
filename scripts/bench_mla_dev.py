"""Dev sweep of MLA decode (`paged_mla_attention`): forced split counts against the
heuristic's, per shape, as CUDA-graph replays over rotated input copies (cold L2), with
the copy floor and the torch-absorbed peer beside them. One GPU call:

    python3 scripts/bench_mla_dev.py [--iters 30] [--splits 1 2 4 8 16 32 64 128] [--stages 0 2 3]
                                     [--kernels auto mma wgmma] [--combine-groups 0 1 4]

Lines: shape, kernel (auto: the launcher's choice; mma / wgmma forced with CLO_MLA_SM90),
pipeline stages of the mma kernel (0: the launcher's choice; CLO_MLA_STAGES), the combine
kernel's groups per row (cg, 0: the launcher's choice), splits ("*" the
heuristic's), us, TB/s (rows read once + q + out), TFLOP/s. With no --splits, only the
heuristic's count.
"""
from __future__ import annotations

import argparse
import os

# Set before the first call: the knobs are then read on every call.
os.environ.setdefault("CLO_MLA_STAGES", "0")
os.environ.setdefault("CLO_MLA_SM90", "-1")
os.environ.setdefault("CLO_MLA_COMBINE_GROUPS", "0")
KERNEL_KNOB = {"auto": "-1", "mma": "0", "wgmma": "1"}

import torch

from cuda_llm_ops.bench import cases_decode as cd
from cuda_llm_ops.mla import mla_num_splits, mla_workspace, paged_mla_attention
from cuda_llm_ops.testing import rel_error
from cuda_llm_ops.timing import benchmark, rotation_count

SHAPES = ((1, 4096, 16), (1, 16384, 16), (16, 4096, 16), (64, 4096, 16), (1, 16384, 128), (16, 4096, 128),
          (64, 4096, 128), (128, 2048, 16), (4, 4096, 128), (8, 4096, 128))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--splits", type=int, nargs="*", default=[])
    ap.add_argument("--stages", type=int, nargs="*", default=[0])
    ap.add_argument("--kernels", nargs="*", default=["auto"], choices=sorted(KERNEL_KNOB))
    ap.add_argument("--combine-groups", type=int, nargs="*", default=[0],
                    help="groups per row of the combine kernel (0: the launcher's choice; CLO_MLA_COMBINE_GROUPS)")
    ap.add_argument("--shapes", nargs="*", default=[], help="B,N,Hq triples (default: SHAPES)")
    args = ap.parse_args()
    shapes = [tuple(int(x) for x in t.split(",")) for t in args.shapes] or SHAPES
    for B, N, Hq in shapes:
        case = cd.mla_case(B, N, Hq, torch.float16)
        sets = [case.make_inputs() for _ in range(rotation_count(case.bytes))]
        ref = cd._mla_absorbed(sets[0]["q"], sets[0]["kv_cache"][sets[0]["block_tables"].long()].flatten(1, 2)[:, :N],
                               576 ** -0.5)
        peer = [(lambda s=s, r=s["kv_cache"][s["block_tables"].long()].flatten(1, 2)[:, :N].contiguous():
                 cd._mla_absorbed(s["q"], r, 576 ** -0.5)) for s in sets]
        t_peer = benchmark(None, fn_sets=peer, cold_l2=True, cuda_graph=True, iterations=args.iters, warmup=3)
        print(f"B={B} N={N} Hq={Hq}: torch-absorbed {t_peer.median_ms * 1e3:.1f} us", flush=True)
        runs = []
        for kernel in args.kernels:
            os.environ["CLO_MLA_SM90"] = KERNEL_KNOB[kernel]
            heur = mla_num_splits(B, Hq, sets[0]["block_tables"].shape[1] * cd.MLA_BLOCK_SIZE)
            runs += [(kernel, st, ns, heur, cg) for st in args.stages for ns in sorted(set(args.splits) | {heur})
                     for cg in args.combine_groups]
        for kernel, stages, ns, heur, cg in runs:
            os.environ["CLO_MLA_SM90"] = KERNEL_KNOB[kernel]
            os.environ["CLO_MLA_STAGES"] = str(stages)
            os.environ["CLO_MLA_COMBINE_GROUPS"] = str(cg)
            fns = []
            for s in sets:
                out = s["q"].new_empty(B, Hq, 512)
                ws = mla_workspace(B, Hq, s["block_tables"].shape[1] * cd.MLA_BLOCK_SIZE, ns)
                fns.append(lambda s=s, out=out, ws=ws: paged_mla_attention(
                    s["q"], s["kv_cache"], s["block_tables"], s["seq_lens"], out=out, num_splits=ns, workspace=ws,
                    check_indices=False))
            err = rel_error(fns[0]().float(), ref.float())
            t = benchmark(None, fn_sets=fns, cold_l2=True, cuda_graph=True, iterations=args.iters, warmup=3)
            us = t.median_ms * 1e3
            print(f"  {kernel:5s} stages {stages} cg {cg} splits {ns:3d}{'*' if ns == heur else ' '} {us:9.1f} us  {case.bytes / us / 1e6:6.2f} TB/s  "
                  f"{case.flops / us / 1e6:6.1f} TFLOP/s  x peer {t_peer.median_ms * 1e3 / us:5.2f}  err {err:.1e}",
                  flush=True)


if __name__ == "__main__":
    main()
