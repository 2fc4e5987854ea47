"""Small decode cases for compute-sanitizer (memcheck): every kernel family (cp.async and
TMA at each head dim, head pairs at D = 64 and 96, FP8 caches), paged and contiguous
caches, ragged lengths (0, 1, past a block, past a tile), block sizes 8 and 256, split
merges, sliding windows, a bad block index (the NaN path, no host check).

    compute-sanitizer --tool memcheck python3 scripts/sanitize_decode_dev.py

The dev knobs (CLO_DECODE_VARIANT / CLO_DECODE_PACK / CLO_DECODE_TMA_STAGES, and empty
CLO_DECODE_PLANE_BOXES / CLO_DECODE_WIDE_ROWS, set by the D = 96 tail-span cases) are set
before the first decode call, so they are read again on every call. SANITIZE_ONLY,
SANITIZE_REPEAT, SANITIZE_SOFT and SANITIZE_ONEHOT (onehot_triage) narrow it for triage
(csrc/decode/NOTES.md v26); SANITIZE_NARROW=0 keeps the 16-row math tile at <= 8 rows.
SANITIZE_AUTO: after those small forced-count cases, automatic calls (num_splits=0, every knob
at its default) at the shapes where each split-count and kernel rule of the heuristic applies
on this GPU (auto_rule_cases); 0 skips them, "only" runs them alone. SANITIZE_AUTO_MATCH="a,b"
keeps the automatic cases whose name holds one of those strings, SANITIZE_AUTO_SLICE="a:b" those
of index a to b - 1 (Python's slice; memcheck's and synccheck's device memory runs out at the
49th case in one process: "0:45" and "45:" cover them in two). Each automatic case prints the
device's free memory after it.

PyTorch's caching allocator is off here (PYTORCH_NO_CUDA_MEMORY_CACHING=1 unless set): each
tensor, the op's own workspace included, is then its own cudaMalloc, whose exact bounds
memcheck checks. Pooled, an overrun into a neighbour in the same segment goes unseen.
"""
import os
import time

os.environ.setdefault("PYTORCH_NO_CUDA_MEMORY_CACHING", "1")

for knob in ("CLO_DECODE_VARIANT", "CLO_DECODE_PACK", "CLO_DECODE_TMA_STAGES"):
    os.environ[knob] = "0"
for knob in ("CLO_DECODE_PLANE_BOXES", "CLO_DECODE_WIDE_ROWS"):  # automatic, read on every call (tail spans set them)
    os.environ[knob] = ""
# SANITIZE_NARROW=0: units of at most 8 rows on the 16-row math tile too (CLO_DECODE_NARROW=0)
os.environ["CLO_DECODE_NARROW"] = os.environ.get("SANITIZE_NARROW", "1")

import torch  # noqa: E402

import cuda_llm_ops as llm  # noqa: E402
from cuda_llm_ops.reference import attention_reference, paged_attention_reference, quantize_fp8_e4m3  # noqa: E402
from cuda_llm_ops.reference.decode import make_paged_problem  # noqa: E402
from cuda_llm_ops.testing import assert_close  # noqa: E402

sm90 = torch.cuda.get_device_capability()[0] >= 9
# SANITIZE_ONLY="D,block_size" runs those paged cases only (a repro under racecheck)
only = tuple(int(x) for x in os.environ["SANITIZE_ONLY"].split(",")) if os.environ.get("SANITIZE_ONLY") else None
# SANITIZE_REPEAT=n: each paged call n times, every result bitwise equal to the first (a race
# that timing alone exposes, without a sanitizer)
repeat = int(os.environ.get("SANITIZE_REPEAT", "1"))
soft = os.environ.get("SANITIZE_SOFT") == "1"  # print mismatches and go on (triage)
auto = os.environ.get("SANITIZE_AUTO", "1")
small = auto != "only"  # the forced-count cases below
failed = []


def check(out, ref, what, dtype=torch.float16):
    try:
        assert_close(out, ref, dtype=dtype, what=what)
    except AssertionError as e:
        if not soft:
            raise
        failed.append(what)
        print("MISMATCH", e, flush=True)

# (variant, pack) knob pairs: automatic; cp.async; TMA (sm_90); forced head pairs
KNOBS = [("0", "1"), ("1", "0")] + ([("2", "0"), ("2", "2")] if sm90 else [("0", "2")])
n = 0
onehot = os.environ.get("SANITIZE_ONEHOT") == "1"


def onehot_triage():
    """Triage of notes v26's racecheck mismatch: K = 0 makes the softmax uniform over a
    sequence's keys, and V row `key` is one-hot on its 8-key box (column key // 8), so
    out * seq_len counts each box's keys (8, the last box fewer). A wrong count names the
    box and where its bytes came from: box i short and i - 24 long (three 64-key tiles
    back: a stale read), i + 24 long (an overwrite), else a misdirected copy. Each one-hot
    call follows a call on the v26 repro's random data of the same shape (D = 96, block 8,
    lens [65, 300], 4 KV heads, group 1), checked too: state left by a different problem
    (shared memory of the previous block on the SM) shows up here, not between identical calls."""
    global n
    from cuda_llm_ops.reference.decode import make_paged_cache
    lens, hkv, d, bs = [65, 300], 4, 96, 8
    nmax = max(lens)
    k = torch.zeros(len(lens), nmax, hkv, d, dtype=torch.float16, device="cuda")
    v = torch.zeros_like(k)
    keys = torch.arange(nmax, device="cuda")
    v[:, keys, :, keys // 8] = 1.0
    kc, vc, table = make_paged_cache(k, v, bs, extra_blocks=3, generator=torch.Generator().manual_seed(5))
    sl = torch.tensor(lens, dtype=torch.int32, device="cuda")
    q = torch.randn(len(lens), hkv, d, device="cuda").half()
    rq, rkc, rvc, rtable, rsl = make_paged_problem(lens, hkv, 1, d, bs, torch.float16, 100 + d + bs)
    rref = paged_attention_reference(rq, rkc, rvc, rtable, rsl)
    for variant, pack in KNOBS:
        os.environ["CLO_DECODE_VARIANT"], os.environ["CLO_DECODE_PACK"] = variant, pack
        for rep in range(max(repeat, 1)):
            check(llm.paged_attention(rq, rkc, rvc, rtable, rsl, num_splits=1, check_indices=False), rref,
                  f"random D={d} bs={bs} {lens} knobs {variant}/{pack} rep {rep}")
            out = llm.paged_attention(q, kc, vc, table, sl, num_splits=1, check_indices=False).float()
            for b, nb in enumerate(lens):
                want = torch.zeros(d, device="cuda")
                want[: (nb + 7) // 8] = 8.0
                want[(nb - 1) // 8] = nb - 8 * ((nb - 1) // 8)
                for h in range(hkv):
                    got = out[b, h] * nb
                    bad = ((got - want).abs() > 0.25).nonzero().flatten().tolist()
                    if bad:
                        failed.append(f"knobs {variant}/{pack} rep {rep} seq {b} head {h}")
                        print(f"ONEHOT knobs {variant}/{pack} rep {rep} seq {b} (len {nb}) head {h}: boxes "
                              + ", ".join(f"{i}: {got[i]:.2f} (want {want[i]:.0f})" for i in bad), flush=True)
            n += 2


for d in (64, 96, 80, 128, 256) if small and (not onehot or only is not None) else ():
    for bs in (8, 256):
        for lens, hkv, group in (([0, 1, 17, 130], 2, 4), ([65, 300], 4, 1)):
            if only is not None and (d, bs) != only:
                continue
            q, kc, vc, table, sl = make_paged_problem(lens, hkv, group, d, bs, torch.float16, 100 + d + bs)
            ref = paged_attention_reference(q, kc, vc, table, sl)
            for variant, pack in KNOBS:
                os.environ["CLO_DECODE_VARIANT"], os.environ["CLO_DECODE_PACK"] = variant, pack
                for ns in (1, 3):
                    out = llm.paged_attention(q, kc, vc, table, sl, num_splits=ns, check_indices=False)
                    what = f"D={d} bs={bs} {lens} knobs {variant}/{pack} s{ns}"
                    check(out, ref, what)
                    for _ in range(repeat - 1):
                        again = llm.paged_attention(q, kc, vc, table, sl, num_splits=ns, check_indices=False)
                        if not torch.equal(again, out):
                            diff = (again.float() - out.float()).abs()
                            msg = f"{what}: not bitwise repeatable (max diff {diff.max().item():.3g})"
                            if not soft:
                                raise AssertionError(msg)
                            failed.append(msg)
                            print("MISMATCH", msg, flush=True)
                    n += 1
            if d in (64, 128) and bs == 8:
                k8, v8 = quantize_fp8_e4m3(kc, 0.05), quantize_fp8_e4m3(vc, 0.05)
                ref8 = paged_attention_reference(q, k8, v8, table, sl, k_scale=0.05, v_scale=0.05)
                for variant, pack in KNOBS:
                    os.environ["CLO_DECODE_VARIANT"], os.environ["CLO_DECODE_PACK"] = variant, pack
                    out = llm.paged_attention(q, k8, v8, table, sl, num_splits=2, k_scale=0.05, v_scale=0.05,
                                              check_indices=False)
                    check(out, ref8, f"fp8 D={d} {lens} knobs {variant}/{pack}")
                    n += 1
            # sliding window over the same cache
            os.environ["CLO_DECODE_VARIANT"], os.environ["CLO_DECODE_PACK"] = "0", "1"
            out = llm.paged_attention(q, kc, vc, table, sl, num_splits=2, window_left=40, check_indices=False)
            check(out, paged_attention_reference(q, kc, vc, table, sl, window_left=40), f"window D={d} bs={bs} {lens}")
            n += 1
    # contiguous caches (decode_attention), 1 and 3 query rows, both kernels
    if only is not None:
        continue
    g = torch.Generator(device="cuda").manual_seed(d)
    for nq, nk in ((1, 77), (3, 200)):
        q = torch.randn(2, 8, nq, d, device="cuda", generator=g).half()
        k = torch.randn(2, 2, nk, d, device="cuda", generator=g).half()
        v = torch.randn(2, 2, nk, d, device="cuda", generator=g).half()
        ref = attention_reference(q, k, v, is_causal=True)
        for variant, pack in KNOBS:
            os.environ["CLO_DECODE_VARIANT"], os.environ["CLO_DECODE_PACK"] = variant, pack
            for ns in (1, 4):
                check(llm.decode_attention(q, k, v, is_causal=True, num_splits=ns), ref,
                      f"contiguous D={d} nq={nq} knobs {variant}/{pack} s{ns}")
                n += 1
# a block index past the cache: that sequence's output is NaN, the others exact, nothing read out of bounds
os.environ["CLO_DECODE_VARIANT"], os.environ["CLO_DECODE_PACK"] = "0", "1"
for d in (64, 96, 128) if small and only is None and not onehot else ():
    q, kc, vc, table, sl = make_paged_problem([40, 90], 2, 4, d, 16, torch.float16, 7)
    ref = paged_attention_reference(q, kc, vc, table, sl)
    table[0, 1] = kc.shape[0] + 5
    for variant in ("1", "2") if sm90 else ("1",):
        os.environ["CLO_DECODE_VARIANT"] = variant
        out = llm.paged_attention(q, kc, vc, table, sl, num_splits=2, check_indices=False)
        assert torch.isnan(out[0]).all() and not torch.isnan(out[1]).any(), f"bad index D={d} variant {variant}"
        check(out[1:], ref[1:], f"bad index D={d}: the other sequence")
        n += 1
if onehot:  # SANITIZE_ONLY as well: its cases first, in the same process
    onehot_triage()


def auto_rule_cases(sms):
    """(what, head_dim, batch, Hkv, group, Nq, table capacity, block size, cache dtype, paged)
    where a rule of the split-count heuristic or the kernel choice applies on an H200 (132 SMs,
    HBM3e; elsewhere the same calls take other rules, still checked): the shapes of the tests
    that assert each rule (tests/test_decode.py), B scaled by the SM count as they are."""
    f16, b16, f8 = torch.float16, torch.bfloat16, torch.float8_e4m3fn
    return [
        # small grids at two blocks per SM (stops 77-79): one token 3 / 2 / 4 stages, Nq 2 / 4,
        # the count cut to the splits holding keys (B=1/40K: 32, not 33)
        ("small grid D=64", 64, 16, 8, 4, 1, 4096, 16, f16, True),
        ("small grid D=96 2 stages", 96, 6, 8, 4, 1, 8192, 16, b16, True),
        ("small grid D=96 4 stages", 96, sms // 8 - 1, 8, 4, 1, 1024, 16, f16, True),
        ("small grid Nq 2", 96, 5, 8, 4, 2, 4096, 16, f16, True),
        ("small grid Nq 4 (16-row units)", 64, 10, 8, 4, 4, 4096, 32, b16, True),
        ("small grid, count cut", 64, 1, 8, 4, 1, 40960, 16, f16, True),
        ("small grid block 256", 64, 3, 8, 4, 1, 8192, 256, f16, True),
        ("contiguous small grid", 64, 5, 8, 4, 1, 4096, 0, f16, False),
        # head pairs of D = 72-80 (D = 160 kernel) on small grids and MHA D = 64 pairs
        ("D=80 pairs, one sequence", 80, 1, 8, 4, 1, 16384, 16, f16, True),
        ("D=80 pairs B=7", 80, 7, 8, 4, 1, 4096, 16, b16, True),
        ("D=64 MHA pairs", 64, 8, 32, 1, 1, 2048, 16, f16, True),
        # head_dim 128: the split merge apart (B=1/16K), wave top (2.6 units per SM: 2 splits,
        # Nq 4 3, Nq 8 two row tiles), spread tail (1.3), tail splits at D = 64 (2.3)
        ("merge apart", 128, 1, 8, 4, 1, 16384, 16, f16, True),
        ("merge apart Nq 4", 128, 1, 8, 4, 4, 16384, 16, f16, True),
        ("merge apart contiguous Nq 4", 128, 1, 8, 4, 4, 16384, 0, f16, False),
        ("wave top", 128, int(2.6 * sms) // 8 + 1, 8, 4, 1, 4096, 16, f16, True),
        ("wave top Nq 4", 128, int(2.6 * sms) // 8 + 1, 8, 4, 4, 8192, 16, b16, True),
        ("wave top Nq 8 (two row tiles)", 128, int(2.6 * sms) // 16 + 1, 8, 4, 8, 4096, 16, f16, True),
        ("spread tail", 128, int(1.3 * sms) // 8 + 1, 8, 4, 1, 4096, 16, f16, True),
        ("spread tail contiguous", 128, int(1.3 * sms) // 8 + 1, 8, 4, 1, 4096, 0, f16, False),
        ("D=64 tail splits", 64, int(2.3 * sms) // 8 + 1, 8, 4, 1, 2048, 16, f16, True),
        # HBM3e bands off the balanced 2 splits (stop 86): D = 64 pairs at 1.15 pairs per SM from
        # 8192 keys (3 splits; below, the case above, the spread tail's pieces since stop 88),
        # paged D = 112 at 1.2 units per SM (1)
        ("D=64 pairs from 8192 keys", 64, int(2.3 * sms) // 8 + 1, 8, 4, 1, 8192, 16, b16, True),
        ("D=112 one-tail band", 112, int(1.2 * sms) // 8 + 1, 8, 4, 1, 4096, 16, f16, True),
        # units that read common lines (stop 87): D = 224 paged at 1.2 units per SM (HBM3e 3
        # splits, else an even 2), at 1.03 and 2048 keys (the balanced 2)
        ("D=224 shared lines", 224, int(1.2 * sms) // 8 + 1, 8, 4, 1, 4096, 16, b16, True),
        ("D=224 shared lines, balanced", 224, int(1.03 * sms) // 8 + 1, 8, 4, 1, 2048, 16, f16, True),
        # the balanced schedule (two row tiles at 2 splits, 1-1.35 32-row units per SM, 2048
        # keys or more): Hq 32 / Hkv 1 and Nq 8 GQA at 1.2 per SM
        ("balanced 32-row units", 128, int(1.2 * sms), 1, 32, 1, 2048, 16, b16, True),
        ("balanced Nq 8", 128, int(1.2 * sms) // 8, 8, 4, 8, 4096, 32, f16, True),
        # Nq 8 at 1.45 32-row units per SM and 1500 keys: no two-row-tile count, so 16-row
        # blocks (two per KV head), 1 split, 2 stages, block 32: where stop 80's race showed
        # (a warp past the end arrived on "empty" unwaited; wrong tiles under memcheck's timing)
        ("Nq 8 16-row even grid block 32", 128, int(1.5 * sms) // 8, 8, 4, 8, 1500, 32, f16, True),
        # two row tiles per block at D = 64 / 96 (stop 88: 17-32 rows per KV head from 0.45 units
        # per SM), and D = 64 head pairs' spread tail below 8192 keys ("D=64 tail splits" above)
        ("two row tiles D=64 paged Nq 5", 64, int(0.48 * sms) // 8 + 1, 8, 4, 5, 4096, 16, f16, True),
        ("two row tiles D=64 contiguous Nq 5", 64, int(0.73 * sms) // 8 + 1, 8, 4, 5, 4096, 0, b16, False),
        ("two row tiles D=96 paged Nq 8", 96, int(1.21 * sms) // 8 + 1, 8, 4, 8, 4096, 16, f16, True),
        ("two row tiles D=96 MQA contiguous", 96, int(0.95 * sms), 1, 32, 1, 2048, 0, f16, False),
        ("D=256", 256, 4, 8, 4, 1, 4096, 16, f16, True),
        # FP8 caches: D = 64 (its own small-grid rule) and 128
        ("fp8 D=64", 64, 4, 8, 4, 1, 16384, 16, f8, True),
        ("fp8 D=128", 128, 16, 8, 4, 1, 1024, 16, f8, True),
        # FP8 one token at Hq 32 / Hkv 1 (32 rows on 16-row blocks, the last split block's fold
        # of a thread's 4 items together at few splits, stop 105) and at D = 256
        ("fp8 MQA D=128", 128, 16, 1, 32, 1, 4096, 16, f8, True),
        ("fp8 MQA D=256", 256, 8, 1, 32, 1, 2048, 16, f8, True),
        # two row tiles per block at D = 64 / 96 below 0.45 units per SM (stop 89: SMs // units
        # splits of 256 keys or more, D = 64 twice; paged only past 1024 keys a one-wave split,
        # stop 90: B=1/16K one wave, B=2/16K two), and D = 64 at 1.2 (3 splits)
        ("two row tiles D=64 paged Nq 5 small grid", 64, 1, 8, 4, 5, 16384, 16, f16, True),
        ("two row tiles D=64 paged Nq 5 small grid, two waves", 64, 2, 8, 4, 5, 16384, 16, b16, True),
        ("two row tiles D=64 contiguous Nq 8 small grid", 64, 2, 8, 4, 8, 4096, 0, b16, False),
        ("two row tiles D=96 MQA paged small grid", 96, 8, 1, 32, 1, 4096, 16, f16, True),
        ("two row tiles D=64 contiguous Nq 5 past one unit per SM", 64, int(1.21 * sms) // 8 + 1, 8, 4, 5, 4096, 0,
         f16, False),
        ("two row tiles D=64 paged Nq 5 past one unit per SM", 64, int(1.21 * sms) // 8 + 1, 8, 4, 5, 4096, 16, f16,
         True),
        # off HBM3e (stop 101): D = 64 at 1.45 units per SM (1 split), paged D = 96's tail spans
        # beyond one wave (2 splits at 1.1 units per SM, 2048 keys)
        ("two row tiles D=64 paged Nq 5 at 1.45 units per SM", 64, int(1.45 * sms) // 8 + 1, 8, 4, 5, 8192, 16, f16,
         True),
        ("two row tiles D=96 paged Nq 5 beyond one wave", 96, int(1.09 * sms) // 8 + 1, 8, 4, 5, 2048, 16, b16, True),
        # off HBM3e (stop 104): above half a 32-row unit per SM the balanced 2 on paged tables of
        # 4096 keys at 0.58 units per SM (a unit in up to three pieces), contiguous 1 split
        ("two row tiles low band MQA", 128, int(0.58 * sms), 1, 32, 1, 4096, 16, f16, True),
        ("two row tiles low band Nq 8 block 32", 128, int(0.58 * sms) // 8, 8, 4, 8, 4096, 32, b16, True),
        ("two row tiles 1 split at 0.55 units per SM contiguous Nq 8", 128, int(0.58 * sms) // 8, 8, 4, 8, 4096, 0, f16,
         False),
        # and contiguous head_dim 64 where one wave holds 2 splits: 4 from 2048 keys
        ("two row tiles D=64 contiguous Nq 8 at 0.42 units per SM", 64, round(0.42 * sms / 8), 8, 4, 8, 4096, 0, b16,
         False),
        # split clusters (stop 106: a unit's 2-4 splits as one cluster merging through distributed
        # shared memory): MQA at 0.48 and 0.18 units per SM (2 and 4 splits)
        ("split clusters MQA 2 splits", 128, round(0.485 * sms), 1, 32, 1, 4096, 16, f16, True),
        ("split clusters MQA 4 splits", 128, round(0.18 * sms), 1, 32, 1, 4096, 16, b16, True),
        # off HBM3e (stops 108-109): contiguous head_dim 128 small grids (TMA 3; 1 split past 0.4
        # units per SM, 3 from 8192 keys below), paged head_dim 128's half wave (2 splits)
        ("contiguous D=128 small grid 1 split", 128, round(0.42 * sms / 8), 8, 4, 1, 2048, 0, f16, False),
        ("contiguous D=128 small grid 3 splits", 128, round(0.36 * sms / 8), 8, 4, 1, 16384, 0, f16, False),
        ("paged D=128 half wave", 128, round(0.55 * sms / 8), 8, 4, 1, 16384, 16, f16, True),
        # off HBM3e (stops 110-111): paged rows that share lines on the D = 256 kernel, with head
        # clusters (KV heads 2k, 2k + 1 as one cluster): the band's 2048 keys a split, past it 2,
        # a small grid's 8, and 1 split from 4096 keys
        ("D=224 shared lines band, head clusters", 224, int(1.2 * sms) // 8, 8, 4, 1, 8192, 16, f16, True),
        ("D=224 shared lines past the band, head clusters", 224, round(2.4 * sms / 8), 8, 4, 1, 4096, 16, b16, True),
        ("D=224 shared lines small grid, head clusters", 224, round(0.36 * sms / 8), 8, 4, 1, 16384, 16, f16, True),
        ("D=224 shared lines 1 split, head clusters", 224, round(0.6 * sms / 8), 8, 4, 1, 4096, 16, f16, True),
    ]


def run_auto_rule_cases():
    """Each case once, automatically: ragged lengths (the capacity, 1, 0 or Nq, a block and a
    tile past a boundary, the rest random; a generator per case, so adding one moves no other),
    against the reference; the count it took printed."""
    global n
    for knob, default in (("CLO_DECODE_VARIANT", "0"), ("CLO_DECODE_PACK", "1"), ("CLO_DECODE_TMA_STAGES", "0"),
                          ("CLO_DECODE_NARROW", "1")):
        os.environ[knob] = default
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    match = [m for m in os.environ.get("SANITIZE_AUTO_MATCH", "").split(",") if m]
    lo, _, hi = os.environ.get("SANITIZE_AUTO_SLICE", ":").partition(":")
    cases = auto_rule_cases(sms)
    picked = range(len(cases))[slice(int(lo) if lo else None, int(hi) if hi else None)]
    for i, (what, d, b, hkv, group, nq, cap, bs, dt, paged) in enumerate(cases):
        if i not in picked or (match and not any(m in what for m in match)):
            continue
        t0 = time.time()
        gen = torch.Generator().manual_seed(80 + i)
        fp8 = dt == torch.float8_e4m3fn
        dt16 = torch.float16 if fp8 else dt
        if paged:
            lens = [int(x) for x in torch.randint(1, cap + 1, (b,), generator=gen)]
            lens[:4] = [cap, 1, 0 if nq == 1 else nq, min(cap, bs + 65)][:b]
            q, kc, vc, table, sl = make_paged_problem(lens, hkv, group, d, bs, dt16, 800 + i)
            if nq > 1:
                q = torch.randn(b, hkv * group, nq, d, generator=gen).to(dt16).cuda()
            scales = {}
            if fp8:
                scales = {"k_scale": 0.05, "v_scale": 0.05}
                kc, vc = quantize_fp8_e4m3(kc, 0.05), quantize_fp8_e4m3(vc, 0.05)
            splits = llm.decode_num_splits(b, hkv, group * nq, table.shape[1] * bs, d, dt, seq_len_q=nq)
            out = llm.paged_attention(q, kc, vc, table, sl, check_indices=False, **scales)
            ref = paged_attention_reference(q, kc, vc, table, sl, **scales)
        else:
            g = torch.Generator(device="cuda").manual_seed(800 + i)
            q = torch.randn(b, hkv * group, nq, d, device="cuda", generator=g).to(dt)
            k, v = (torch.randn(b, hkv, cap, d, device="cuda", generator=g).to(dt) for _ in range(2))
            splits = llm.decode_num_splits(b, hkv, group * nq, cap, d, dt, paged=False, seq_len_q=nq)
            out = llm.decode_attention(q, k, v, is_causal=True)
            ref = attention_reference(q, k, v, is_causal=True)
        case = (f"auto {what}: D={d} B={b} Hkv={hkv} G={group} Nq={nq} cap={cap} "
                f"{'paged bs ' + str(bs) if paged else 'contiguous'} {str(dt)[6:]}")
        check(out, ref, case, dtype=dt16)
        torch.cuda.synchronize()
        del q, out, ref
        free = torch.cuda.mem_get_info()[0] / 2**30
        print(f"{case}: {splits} splits, {time.time() - t0:.1f} s, {free:.1f} GiB free", flush=True)
        n += 1


def run_tail_span_cases():
    """16-bit D = 96 paged block 16 under CLO_DECODE_PLANE_BOXES=2 (sm_90): three 32-column planes,
    one box a page (the kernel's tail spans, stop 91): ragged lengths (1, past a page, past a
    tile), one row tile (2 and 8 rows: the narrow tile; 16 rows) and two (Nq 5 at group 4), split
    and not."""
    global n
    os.environ["CLO_DECODE_PLANE_BOXES"] = "2"
    for i, (lens, hkv, group, nq, ns) in enumerate((([1, 17, 130, 700], 2, 2, 1, 1), ([65, 300], 4, 8, 1, 3),
                                                    ([5, 17, 300, 1000], 2, 4, 5, 1), ([700, 64], 1, 4, 5, 3),
                                                    ([33, 400, 1], 2, 16, 1, 2))):
        q, kc, vc, table, sl = make_paged_problem(lens, hkv, group, 96, 16, torch.bfloat16 if i % 2 else torch.float16,
                                                  900 + i)
        if nq > 1:
            q = torch.randn(len(lens), hkv * group, nq, 96, device="cuda").to(q.dtype)
        os.environ["CLO_DECODE_WIDE_ROWS"] = "1" if nq > 1 else ""
        out = llm.paged_attention(q, kc, vc, table, sl, num_splits=ns, check_indices=False)
        check(out, paged_attention_reference(q, kc, vc, table, sl), f"tail spans D=96 {lens} G={group} Nq={nq} s{ns}",
              dtype=q.dtype)
        n += 1
    os.environ["CLO_DECODE_PLANE_BOXES"] = os.environ["CLO_DECODE_WIDE_ROWS"] = ""


def run_wide_low_band_cases():
    """Two-row-tile blocks as the balanced schedule below one 32-row unit per SM under
    CLO_DECODE_WIDE_ROWS=3 (sm_90, stop 102: one block per SM, a unit in up to three pieces):
    one token at Hq 32 / Hkv 1 at 0.5 and 0.83 units per SM, Nq 8 at GQA 32/8 at 0.7; ragged
    lengths (0 and 1 key among them), short tables (a few 64-key slots a unit)."""
    global n
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    os.environ["CLO_DECODE_WIDE_ROWS"] = "3"
    gen = torch.Generator().manual_seed(102)
    for i, (per_sm, hkv, group, nq, bs, cap) in enumerate(((0.5, 1, 32, 1, 16, 256), (0.83, 1, 32, 1, 8, 300),
                                                            (0.7, 8, 4, 8, 64, 200))):
        b = int(per_sm * sms) // hkv + 1
        lens = [int(x) for x in torch.randint(1, cap + 1, (b,), generator=gen)]
        lens[:3] = [cap, nq, 0 if nq == 1 else cap - 1]
        q, kc, vc, table, sl = make_paged_problem(lens, hkv, group, 128, bs, torch.float16, 1020 + i)
        if nq > 1:
            q = torch.randn(b, nq, hkv * group, 128, device="cuda").half().transpose(1, 2)
        out = llm.paged_attention(q, kc, vc, table, sl, num_splits=2, check_indices=False)
        check(out, paged_attention_reference(q, kc, vc, table, sl),
              f"wide low band {per_sm} units/SM B={b} Hkv={hkv} Nq={nq} bs={bs} cap={cap}", dtype=torch.float16)
        n += 1
    os.environ["CLO_DECODE_WIDE_ROWS"] = ""


if small and sm90 and only is None and not onehot:
    run_tail_span_cases()
    run_wide_low_band_cases()
if auto != "0" and only is None and not onehot:
    run_auto_rule_cases()
torch.cuda.synchronize()
print(f"sanitize cases: {n}, mismatches: {len(failed)}")
assert not failed, failed
