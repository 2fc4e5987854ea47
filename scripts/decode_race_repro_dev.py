"""Repro of the TMA decode kernel's last-tile race (csrc/decode/NOTES.md "Stop 80"): identical
calls repeated, each compared bitwise with the first and against the reference, per knob set.
Run it on a CLO_DEV_CHAOS build (delays at every hand-off), where the race shows in a few
calls of 25; a plain build shows it only under compute-sanitizer's timing:

    CUDA_LLM_OPS_DEV_DEFINES=CLO_DEV_CHAOS CUDA_LLM_OPS_AREAS=decode SKIP_TESTS=1 \\
        EXTRA="python3 scripts/decode_race_repro_dev.py 25" bash scripts/gpu_check.sh

Paged fp16 D = 128, GQA 32/8, B = 24 ragged lengths up to 1500 (1 split, even grid)."""
import os
import sys

# every dev knob set before the first call, so each call reads it again
KNOB_DEFAULTS = {"CLO_DECODE_VARIANT": "0", "CLO_DECODE_PACK": "1", "CLO_DECODE_TMA_STAGES": "0",
                 "CLO_DECODE_NARROW": "1", "CLO_DECODE_WIDE_ROWS": "2", "CLO_DECODE_STREAMK": "1",
                 "CLO_DECODE_PDL": "2", "CLO_DECODE_PLANE_BOXES": "1"}
for k, v in KNOB_DEFAULTS.items():
    os.environ[k] = v

import torch  # noqa: E402

import cuda_llm_ops as llm  # noqa: E402
from cuda_llm_ops.reference import paged_attention_reference  # noqa: E402
from cuda_llm_ops.reference.decode import make_paged_problem  # noqa: E402
from cuda_llm_ops.testing import rel_error  # noqa: E402

repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 25
# the sanitizer run's lengths (B = 24, capacity 1500)
LENS = [1500, 1, 8, 97, 1350, 584, 597, 1269, 346, 210, 249, 1439, 295, 1337, 1423, 116, 1065, 714, 1285, 983,
        294, 470, 1251, 126]
gen = torch.Generator().manual_seed(3)
# (name, block size, Nq, lengths, knobs). At 1500 keys Nq 8 has no two-row-tile count: 16-row
# blocks, two per KV head, 1 split, 2 stages. Stop 80's chaos run counted calls not bitwise equal
# to the first (of 25): 1, 0 (cp.async), 3 (PDL off), 24 (plane boxes off), 4, 0, 3, 4, 1, 0
# (whole tiles); block 16 0 of 40. This script counts calls not bitwise equal to the most
# accurate one, so a wrong first call does not count every other.
CASES = (("TMA, automatic", 32, 8, "ragged", {}),
         ("cp.async kernel", 32, 8, "ragged", {"CLO_DECODE_VARIANT": "1"}),
         ("PDL off", 32, 8, "ragged", {"CLO_DECODE_PDL": "0"}),
         ("plane boxes off", 32, 8, "ragged", {"CLO_DECODE_PLANE_BOXES": "0"}),
         ("one token", 32, 1, "ragged", {}),
         ("Nq 4", 32, 4, "ragged", {}),
         ("block 64", 64, 8, "ragged", {}),
         ("block 256", 256, 8, "ragged", {}),
         ("no sequence under 64 keys", 32, 8, "long", {}),
         ("whole tiles (lengths multiples of 64)", 32, 8, "tiles", {}),
         ("block 16", 16, 8, "ragged", {}),
         ("two row tiles forced (1 split: the even grid)", 32, 8, "ragged", {"CLO_DECODE_WIDE_ROWS": "3"}))
failed = 0
for i, (name, bs, nq, kind, knobs) in enumerate(CASES):
    lens = {"ragged": LENS, "long": [max(x, 64) for x in LENS], "tiles": [max(64, x // 64 * 64) for x in LENS]}[kind]
    _, kc, vc, table, sl = make_paged_problem(lens, 8, 4, 128, bs, torch.float16, 900 + i)
    q = torch.randn(len(lens), 32, nq, 128, generator=gen).half().cuda()
    ref = paged_attention_reference(q, kc, vc, table, sl)
    os.environ.update(knobs)
    outs = [llm.paged_attention(q, kc, vc, table, sl, check_indices=False) for _ in range(repeats)]
    errs = [rel_error(o, ref) for o in outs]
    best = outs[min(range(repeats), key=errs.__getitem__)]
    differ, where = 0, ""
    for o in outs:
        if not torch.equal(o, best):
            differ += 1
            dd = (o.double() - ref.double()).abs().amax(dim=-1)  # [B, Hq, Nq]
            seqs = dd.amax(dim=(1, 2)).gt(0.01).nonzero().flatten().tolist()
            where = "; ".join(f"seq {s} len {lens[s]} heads {dd[s].amax(1).gt(0.01).nonzero().flatten().tolist()}"
                              f" rows {dd[s].amax(0).gt(0.01).nonzero().flatten().tolist()}" for s in seqs[:4])
    os.environ.update({k: KNOB_DEFAULTS[k] for k in knobs})
    failed += differ > 0 or max(errs) > 2e-3
    print(f"{name} (block {bs}, Nq {nq}, lengths {kind}): {repeats} calls, {differ} not bitwise equal to the best; "
          f"error vs reference {min(errs):.2e}-{max(errs):.2e} {'| ' + where if where else ''}", flush=True)
print(f"race repro: {failed} of {len(CASES)} knob sets not repeatable or wrong")
sys.exit(1 if failed else 0)
