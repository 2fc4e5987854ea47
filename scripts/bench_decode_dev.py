"""Dev benchmark of decode attention (issue 5 targets), one GPU call:
time, TB/s, % of a cold device-to-device copy measured here, ratio to SDPA's best
backend (flash / cuDNN / efficient) on the same keys in contiguous layout, and to a
plain-PyTorch paged implementation. Cold L2 (flush between runs) everywhere.

    python3 scripts/bench_decode_dev.py [--iters 30] [--full] [--variants | --variants-only]
                                        [--shape-sweep] [--anchor]

--variants: each kernel choice of the CLO_DECODE_VARIANT dev knob (csrc/decode/NOTES.md),
"var" lines: time, % of copy and x SDPA-best per setting (labels: BENCH_VARIANTS), forced split counts ("*": the
heuristic's), SDPA flash / cuDNN times in us. --shape-sweep: the same lines over head
dims, block sizes, grid sizes and GQA 64/8 (`shape_sweep_cases`). --anchor: SDPA and ours
timed the way the shared anchor figures were (eager, warm L2) and in graph replays.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import re
import sys

import torch

import cuda_llm_ops as llm
from cuda_llm_ops.bench import cases_decode as cd
from cuda_llm_ops.testing import decode_tma_stages_fit, kernel_grid_blocks, kernel_names, rel_error
from cuda_llm_ops.timing import benchmark


def copy_tbps(iters: int) -> float:
    n = 1 << 30
    src = torch.randint(0, 255, (n,), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    t = benchmark(lambda: dst.copy_(src), warmup=3, iterations=iters, cold_l2=True)
    del src, dst
    return 2 * n / (t.median_ms * 1e-3) / 1e12


def run_case(B, N, Hkv, dtype, iters, copy_bw, contiguous=False,
             keep_impls=("sdpa-flash", "sdpa-cudnn", "cuda_llm_ops")):
    case = cd.paged_case(B, N, Hkv, dtype, op="decode_attention" if contiguous else "paged_attention")
    inp = case.make_inputs()
    rows = {}
    ref = None
    for impl in case.impls:
        if impl.name not in keep_impls:
            continue
        why = impl.unavailable(inp) if impl.unavailable else None
        if why:
            rows[impl.name] = (None, why)
            continue
        fn = impl.build(inp)
        out = fn()
        if ref is None and impl.is_peer:
            ref = out.float()
        err = rel_error(out.float(), ref) if ref is not None else float("nan")
        t = benchmark(fn, warmup=3, iterations=iters, cold_l2=True)
        rows[impl.name] = (t.median_ms, err)
        del out
    splits = llm.decode_num_splits(B, Hkv, HQ_ // Hkv, N, 128, dtype, paged=not contiguous)
    ours = rows.get("cuda_llm_ops", (None, ""))[0]
    sdpa = {k: v[0] for k, v in rows.items() if k.startswith("sdpa") and v[0] is not None}
    best_name, best = min(sdpa.items(), key=lambda kv: kv[1]) if sdpa else ("-", None)
    tp = rows.get("torch-paged", (None, ""))[0]
    tag = "contig" if contiguous else "paged"
    kind = "MHA" if Hkv == HQ_ else f"GQA{HQ_}/{Hkv}"
    if ours is None:
        print(f"{tag:6s} B={B:3d} N={N:6d} {kind:8s} ours unavailable: {rows.get('cuda_llm_ops')}")
        return
    tbps = case.bytes / (ours * 1e-3) / 1e12
    line = (f"{tag:6s} B={B:3d} N={N:6d} {kind:8s} splits={splits:3d} ours {ours * 1e3:8.1f} us "
            f"{tbps:5.2f} TB/s {100 * tbps / copy_bw:5.1f}% copy | err {rows['cuda_llm_ops'][1]:.1e}")
    if best is not None:
        line += f" | sdpa best {best_name} {best * 1e3:8.1f} us -> x{best / ours:4.2f}"
        line += " (" + ", ".join(f"{k[5:]} {v * 1e3:.1f}" for k, v in sorted(sdpa.items())) + ")"
    if tp is not None:
        line += f" | torch-paged {tp * 1e3:8.1f} us x{tp / ours:4.2f}"
    print(line, flush=True)
    del inp


HQ_ = cd.HQ


def profile_kernels(B, N, Hkv, dtype=torch.float16):
    """GPU time per kernel (CUPTI): the one decode kernel (attention + fused split merge)."""
    try:
        from torch.profiler import ProfilerActivity, profile
        inp = cd.make_paged_inputs(B, HQ_, Hkv, N, 128, cd.BLOCK_SIZE, dtype)
        q, kc, vc, bt, sl = inp["q"], inp["k_cache"], inp["v_cache"], inp["block_tables"], inp["seq_lens"]
        ws = llm.paged_attention_workspace(q, kc, bt)
        out = torch.empty_like(q)
        from cuda_llm_ops.timing import flush_l2
        for _ in range(3):
            llm.paged_attention(q, kc, vc, bt, sl, out=out, workspace=ws, check_indices=False)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(10):
                flush_l2()
                llm.paged_attention(q, kc, vc, bt, sl, out=out, workspace=ws, check_indices=False)
            torch.cuda.synchronize()
        rows = []
        for e in prof.key_averages():
            if "decode" in e.key:
                dt = getattr(e, "device_time", None) or getattr(e, "cuda_time", 0.0)
                rows.append(f"{e.key[:200]}... x{e.count} avg {dt:.1f} us")
        print(f"profile B={B} N={N} Hkv={Hkv}: " + " | ".join(rows), flush=True)
        del inp
    except Exception as exc:  # noqa: BLE001 - diagnostics only
        print(f"profile failed: {exc!r}", flush=True)


def sweep_splits(B, N, Hkv, splits, iters, copy_bw, dtype=torch.float16):
    """Forced num_splits: what the heuristic should pick (same kernels, same inputs)."""
    inp = cd.make_paged_inputs(B, HQ_, Hkv, N, 128, cd.BLOCK_SIZE, dtype)
    q, kc, vc, bt, sl = inp["q"], inp["k_cache"], inp["v_cache"], inp["block_tables"], inp["seq_lens"]
    out = torch.empty_like(q)
    nbytes = cd.paged_case(B, N, Hkv, dtype).bytes
    parts = []
    for s in splits:
        ws = llm.paged_attention_workspace(q, kc, bt, num_splits=s)
        t = benchmark(lambda: llm.paged_attention(q, kc, vc, bt, sl, out=out, num_splits=s, workspace=ws,
                                                  check_indices=False), warmup=3, iterations=iters, cold_l2=True)
        parts.append(f"{s}:{t.median_ms * 1e3:.1f}us/{100 * nbytes / (t.median_ms * 1e-3) / 1e12 / copy_bw:.0f}%")
    h = llm.decode_num_splits(B, Hkv, HQ_ // Hkv, N, 128, dtype)
    print(f"sweep  B={B:3d} N={N:6d} Hkv={Hkv:2d} heuristic={h:3d} | " + " ".join(parts), flush=True)
    del inp


# Kernel choices compared by --variants (CLO_DECODE_VARIANT, csrc/decode/NOTES.md): label ->
# environment. auto = the library's choice; cp = the cp.async kernel; tma = the TMA kernel.
BENCH_VARIANTS = {
    "auto": {"CLO_DECODE_VARIANT": "0"},
    "cp": {"CLO_DECODE_VARIANT": "1"},
    "tma": {"CLO_DECODE_VARIANT": "2"},
}
_KNOBS = ("CLO_DECODE_VARIANT", "CLO_DECODE_TMA_STAGES", "CLO_DECODE_PACK", "CLO_SMEM_LIMIT",
          "CLO_DECODE_STREAMK", "CLO_DECODE_PDL", "CLO_TMA_L2_PROMOTION", "CLO_DECODE_SPREAD",
          "CLO_DECODE_PLANE_BOXES", "CLO_DECODE_WIDE_ROWS", "CLO_DECODE_MERGE_APART", "CLO_DECODE_PAIR_KERNEL",
          "CLO_DECODE_NARROW", "CLO_DECODE_SPLIT_CLUSTER", "CLO_DECODE_HEAD_CLUSTER")
# --shape-sweep: the cp.async kernel and the TMA kernel at each pipeline depth
# (CLO_DECODE_TMA_STAGES; depths that do not fit in shared memory are skipped).
SWEEP_VARIANTS = {
    "auto": {"CLO_DECODE_VARIANT": "0"},
    "cp": {"CLO_DECODE_VARIANT": "1"},
    "tma2": {"CLO_DECODE_VARIANT": "2", "CLO_DECODE_TMA_STAGES": "2"},
    "tma3": {"CLO_DECODE_VARIANT": "2", "CLO_DECODE_TMA_STAGES": "3"},
    "tma4": {"CLO_DECODE_VARIANT": "2", "CLO_DECODE_TMA_STAGES": "4"},
}
# The automatic choice, and the spread tail (CLO_DECODE_SPREAD=1: a split call of the 16-bit
# D = 128 kernel at one to two units per SM runs as the spread tail in its num_splits pieces)
AUTO_SPREAD_VARIANTS = {"auto": {}, "spread": {"CLO_DECODE_SPREAD": "1"}}


def spread_from(pieces):
    """An `only` filter over AUTO_SPREAD_VARIANTS: the automatic choice below `pieces` splits,
    the spread tail from there."""
    return lambda ns, label: ns < pieces if label == "auto" else ns >= pieces


def set_knobs(env: dict[str, str]) -> None:
    """One variant's dev knobs (unset knobs: automatic)."""
    for knob in _KNOBS:
        os.environ[knob] = env.get(knob, "")


# (B, N, Hq, Hkv, D, block_size, contiguous, split counts: 0 = heuristic)
ISSUE_VARIANT_CASES = [(16, 1024, 32, 8, 128, 16, False, (0,)), (1, 16384, 32, 8, 128, 16, False, (0, 32)),
                       (64, 4096, 32, 32, 128, 16, False, (0,)), (16, 4096, 32, 8, 128, 16, False, (0,)),
                       (16, 1024, 32, 32, 128, 16, False, (0,)), (1, 16384, 32, 8, 128, 16, True, (0,)),
                       (16, 1024, 32, 8, 128, 16, True, (0,)), (16, 4096, 32, 8, 128, 16, True, (0,)),
                       (64, 4096, 32, 32, 128, 16, True, (0,))]


def shape_sweep_cases() -> list[tuple]:
    """Head dims other than the issue's 128 on a medium grid (B=64 GQA 32/8: 3.9 blocks
    per SM) and a large one (B=64 MHA: 15.5 blocks per SM), paged and contiguous, with 1
    and 2 splits on the large grids; D=64 also on one block per SM (B=16 GQA 32/8)."""
    cases = [(16, 8192, 32, 8, 64, 16, False, (0,))]
    for D in (64, 96, 256, 128):
        for contiguous in (False, True):
            cases += [(64, 2048, 32, 8, D, 16, contiguous, (0,)), (64, 2048, 32, 32, D, 16, contiguous, (1, 2))]
    return cases


# --pack-sweep: head pairs (CLO_DECODE_PACK: 0 never, 2 wherever legal; auto = the rule)
# on paged D=64 MHA grids from 1.9 to 15.5 blocks per SM and a split one.
PACK_VARIANTS = {"auto": {}, "single": {"CLO_DECODE_PACK": "0"}, "pairs": {"CLO_DECODE_PACK": "2"}}
PACK_SWEEP_CASES = [(B, N, 32, 32, 64, 16, False, (0,)) for B, N in
                    ((8, 2048), (16, 2048), (32, 2048), (64, 2048), (16, 8192), (2, 16384))]
# --pack-confirm: the large grids only, three rounds (run-to-run noise is ~2% per case)
PACK_CONFIRM_CASES = [(B, N, 32, 32, 64, 16, False, (0,)) for B, N in ((64, 2048), (64, 4096), (128, 2048))] * 3


def compare_variants(iters, copy_bw, variants=BENCH_VARIANTS, cases=ISSUE_VARIANT_CASES, dtype=torch.float16):
    """Each kernel variant (dev knob CLO_DECODE_VARIANT, switched between calls in this
    process) on the given cases, with forced split counts next to the heuristic's, and
    SDPA flash / cuDNN on the same keys (contiguous)."""
    from cuda_llm_ops.decode import decode_attention, decode_workspace, paged_attention, paged_attention_workspace
    if os.environ.get("CLO_DECODE_VARIANT") is None:
        print("variants: CLO_DECODE_VARIANT was not set at start-up: only the default kernel runs", flush=True)
    for B, N, Hq, Hkv, D, bs, contiguous, split_list in cases:
        case = cd.paged_case(B, N, Hkv, dtype, Hq=Hq, D=D, block_size=bs,
                             op="decode_attention" if contiguous else "paged_attention")
        inp = case.make_inputs()
        q, kc, vc, bt, sl = inp["q"], inp["k_cache"], inp["v_cache"], inp["block_tables"], inp["seq_lens"]
        sdpa, ref = {}, None
        for impl in case.impls:
            if not impl.name.startswith("sdpa-") or impl.name == "sdpa-efficient":
                continue
            if impl.unavailable and impl.unavailable(inp):
                continue
            fn = impl.build(inp)
            out = fn()
            if ref is None:
                ref = out.float()
            sdpa[impl.name[5:]] = benchmark(fn, warmup=3, iterations=iters, cold_l2=True).median_ms
            del out
        if contiguous:
            k, v = cd.contiguous_kv(inp)
            q4 = q.unsqueeze(2)
        h = llm.decode_num_splits(B, Hkv, Hq // Hkv, N, D, dtype, paged=not contiguous)
        kind = "MHA" if Hkv == Hq else f"GQA{Hq}/{Hkv}"
        head = f"{'contig' if contiguous else 'paged':6s} B={B:3d} N={N:6d} {kind:8s} D={D:3d} bs={bs:3d}"
        sd = " ".join(f"{k_} {t * 1e3:.1f}" for k_, t in sorted(sdpa.items()))
        best = min(sdpa.values()) if sdpa else None
        for ns in split_list:
            splits = ns or h
            if contiguous:
                ws = decode_workspace(B, Hq, Hkv, D, N, dtype, num_splits=splits)
                out = torch.empty_like(q4)
                fn = lambda: decode_attention(q4, k, v, out=out, num_splits=splits, workspace=ws,  # noqa: E731
                                              check_workspace=False)
            else:
                ws = paged_attention_workspace(q, kc, bt, num_splits=splits)
                out = torch.empty_like(q)
                fn = lambda: paged_attention(q, kc, vc, bt, sl, out=out, num_splits=splits,  # noqa: E731
                                             workspace=ws, check_indices=False)
            parts = []
            for label, env in variants.items():
                st = env.get("CLO_DECODE_TMA_STAGES")
                if st and not decode_tma_stages_fit(D, int(st)):
                    continue
                set_knobs(env)
                out.fill_(float("nan"))
                fn()
                err = rel_error(out.float().reshape(ref.shape), ref) if ref is not None else float("nan")
                t = benchmark(fn, warmup=3, iterations=iters, cold_l2=True).median_ms
                pct = 100 * case.bytes / (t * 1e-3) / 1e12 / copy_bw
                xs = f" x{best / t:4.2f}" if best else ""
                bad = " ERR" if not err < 3e-2 else ""
                parts.append(f"{label} {t * 1e3:7.1f} us {pct:5.1f}%{xs}{bad}")
            set_knobs({})
            tag = f"splits={splits:3d}{'*' if ns == 0 else ' '}"
            print(f"var {head} {tag} | " + " | ".join(parts) + f" | sdpa {sd}", flush=True)
            del ws, out
        del inp
        torch.cuda.empty_cache()


def _split_fns(sets, ns, cache_suffix="", contiguous=False, **kwargs):
    """One call per input of the rotated `sets`: paged_attention with `ns` splits (caches
    `k_cache{cache_suffix}` / `v_cache{cache_suffix}`; `contiguous`: decode_attention on
    the same keys in [B, Hkv, N, D], causal for Nq > 1 as the paged op's speculative rows;
    "token-major": the same [B, Hkv, N, D] view over [B, N, Hkv, D] storage, the paged
    cache's key-row stride without its pages), outputs and workspaces preallocated."""
    from cuda_llm_ops.decode import decode_attention, decode_workspace, paged_attention, paged_attention_workspace
    fns = []
    for inp in sets:
        q, kc, vc = inp["q"], inp["k_cache" + cache_suffix], inp["v_cache" + cache_suffix]
        bt, sl = inp["block_tables"], inp["seq_lens"]
        if contiguous:  # the same keys as [B, Hkv, N, D] through decode_attention
            k, v = cd.contiguous_kv(inp)
            if contiguous == "token-major":  # a [B, Hkv, N, D] view of [B, N, Hkv, D] storage
                if "_token_major" not in inp:
                    inp["_token_major"] = tuple(t.transpose(1, 2).contiguous().transpose(1, 2) for t in (k, v))
                k, v = inp["_token_major"]
            q4, (B, Hkv, N, D) = (q if q.dim() == 4 else q.unsqueeze(2)), k.shape
            out = torch.empty_like(q4)
            ws = decode_workspace(B, q.shape[1], Hkv, D, N, q.dtype, seq_len_q=q4.shape[2], num_splits=ns,
                                  paged=False)
            fns.append(lambda q4=q4, k=k, v=v, out=out, ws=ws: decode_attention(
                q4, k, v, out=out, num_splits=ns, workspace=ws, is_causal=q4.shape[2] > 1, **kwargs))
            continue
        out, ws = torch.empty_like(q), paged_attention_workspace(q, kc, bt, num_splits=ns)
        fns.append(lambda q=q, kc=kc, vc=vc, bt=bt, sl=sl, out=out, ws=ws: paged_attention(
            q, kc, vc, bt, sl, out=out, num_splits=ns, workspace=ws, check_indices=False, **kwargs))
    return fns


def _graph_split_ms(sets, ns, iters, cache_suffix="", contiguous=False, **kwargs):
    """Median ms of `_split_fns`' calls, timed as llm-speed bench times them: CUDA-graph
    replays, cold L2."""
    fns = _split_fns(sets, ns, cache_suffix, contiguous, **kwargs)
    return benchmark(None, warmup=3, iterations=iters, cold_l2=True, cuda_graph=True, fn_sets=fns).median_ms


def _split_sweep_row(case, splits, variants, iters, copy_bw, title, cache_suffix="", peer=None, contiguous=False,
                     only=None, **kwargs):
    """One printed row: `case` at each split count under each variant's dev knobs
    (`_graph_split_ms`; `only(splits, label)` false: that pair skipped), us and % of the
    copy rate; first the impl named `peer` (say "sdpa-cudnn", on its own contiguous copy
    of the same keys) timed the same way."""
    from cuda_llm_ops.timing import rotation_count
    if contiguous and cache_suffix:
        raise ValueError(f"contiguous rows read the 16-bit cache only (cache_suffix={cache_suffix!r})")
    sets = [case.make_inputs() for _ in range(rotation_count(case.bytes))]
    parts = []
    impl = next((i for i in case.impls if i.name == peer), None) if peer is not None else None
    why = impl.unavailable(sets[0]) if impl is not None and impl.unavailable else None
    if peer is not None and (impl is None or why):
        parts.append(f"{peer} unavailable ({why or 'no such impl'})")
    elif impl is not None:
        fns = [impl.build(inp) for inp in sets]
        t = benchmark(None, warmup=3, iterations=iters, cold_l2=True, cuda_graph=True, fn_sets=fns).median_ms
        parts.append(f"{peer} {t * 1e3:.1f}us {100 * case.bytes / (t * 1e-3) / 1e12 / copy_bw:.1f}%")
        if not contiguous:
            for inp in sets:
                inp.pop("_contig", None)
        del fns
    for ns in splits:
        for label, env in variants.items():
            if only is not None and not only(ns, label):
                continue
            set_knobs(env)
            t = _graph_split_ms(sets, ns, iters, cache_suffix, contiguous, **kwargs)
            pct = 100 * case.bytes / (t * 1e-3) / 1e12 / copy_bw
            parts.append(f"s{ns}/{label} {t * 1e3:.1f}us {pct:.1f}%")
    set_knobs({})
    print(f"{title} (sets {len(sets)}) | " + " | ".join(parts), flush=True)
    del sets
    torch.cuda.empty_cache()


def _fp8_sweep_row(B, N, Hkv, D, splits, variants, iters, copy_bw, dtype=torch.float16, title=None):
    """`_split_sweep_row` over an FP8 cache (`cd.fp8_case`, scales FP8_SCALE); splits None:
    the heuristic's count."""
    if splits is None:
        splits = (llm.decode_num_splits(B, Hkv, HQ_ // Hkv, N, D, torch.float8_e4m3fn),)
    _split_sweep_row(cd.fp8_case(B, N, Hkv, dtype, D=D), splits, variants, iters, copy_bw,
                     title or f"fp8 D={D} B={B} N={N} Hkv={Hkv}", "_fp8", k_scale=cd.FP8_SCALE,
                     v_scale=cd.FP8_SCALE)


def graph_knob_sweep(iters, copy_bw, dtype=torch.float16):
    """The llm-speed bench method (CUDA-graph replays over rotated input copies, cold L2)
    for forced split counts and TMA pipeline depths on the small-grid targets."""
    for B, N, Hkv, splits in [(16, 1024, 8, (1, 2, 3, 4)), (1, 16384, 8, (8, 16, 32))]:
        case = cd.paged_case(B, N, Hkv, dtype)
        variants = {label: env for label, env in SWEEP_VARIANTS.items() if label != "cp"}
        _split_sweep_row(case, splits, variants, iters, copy_bw, f"graph B={B} N={N} Hkv={Hkv}")


# --mid-grids, the rows of NOTES.md v23 in three groups (paged unless marked contiguous):
# (B, N, Hkv, D, dtype, contiguous, split counts, variant labels)
_ALL5, _ONE4, _SEAM = ("auto", "cp", "tma2", "tma3", "tma4"), ("auto", "cp", "tma2", "tma3"), ("auto", "tma3", "cp")
MID_GRID_ROWS = (
    [(64, 1024, 8, 128, torch.float16, False, (1, 2, 3), _ALL5), (16, 1024, 32, 128, torch.float16, False, (1, 2, 3), _ALL5),
     (32, 2048, 8, 128, torch.float16, False, (1, 2), _ALL5), (64, 4096, 8, 128, torch.float16, False, (1, 2), _ALL5),
     (16, 4096, 32, 128, torch.float16, False, (1, 2), _ALL5)]
    + [(B, N, Hkv, 128, torch.float16, False, (1,), _ONE4) for B, N, Hkv in ((48, 1024, 8), (8, 2048, 32))]
    + [(64, 2048, 8, 96, torch.float16, False, (1,), _ONE4), (16, 2048, 32, 96, torch.float16, False, (1,), _ONE4),
       (64, 1024, 8, 128, torch.bfloat16, False, (1,), _ONE4)]
    + [(B, N, Hkv, 128, torch.float16, True, (1,), _ONE4) for B, N, Hkv in ((64, 1024, 8), (16, 1024, 32), (32, 2048, 8))]
    + [(B, N, 8, 128, torch.float16, False, (1, 2, 3), _SEAM) for B, N in ((17, 1024), (20, 1024), (24, 2048), (28, 1024))])


def mid_grid_sweep(iters, copy_bw):
    """16-bit grids beyond one block per SM (graph replays, cold L2, cuDNN on contiguous
    keys first in each row): MID_GRID_ROWS at forced split counts under the automatic kernel,
    the cp.async kernel and the TMA kernel at each depth; then paged D=64 MHA head pairs
    (the D=128 kernels) on the automatic kernel, on cp.async, and unpaired."""
    for B, N, Hkv, D, dt, contiguous, splits, labels in MID_GRID_ROWS:
        _split_sweep_row(cd.paged_case(B, N, Hkv, dt, D=D), splits, {lb: SWEEP_VARIANTS[lb] for lb in labels}, iters,
                         copy_bw, f"mid {'contig' if contiguous else 'paged'} {str(dt)[6:]} D={D} B={B} N={N} Hkv={Hkv}",
                         peer="sdpa-cudnn", contiguous=contiguous)
    pack = {"auto": {}, "pairs-cp": {"CLO_DECODE_VARIANT": "1"}, "single": {"CLO_DECODE_PACK": "0"}}
    for B in (32, 64, 128):
        _split_sweep_row(cd.paged_case(B, 2048, 32, torch.float16, D=64), (1,), pack, iters, copy_bw,
                         f"mid paged D=64 MHA B={B} N=2048", peer="sdpa-cudnn")


def long_context_split_sweep(iters, copy_bw):
    """16-bit D=128 paged GQA 32/8 grids of about one block per SM at long contexts
    (B=16: 128 blocks unsplit): forced split counts under the automatic kernel and TMA 2 /
    3 stages, cuDNN first (graph replays, cold L2)."""
    variants = {label: SWEEP_VARIANTS[label] for label in ("auto", "tma2", "tma3")}
    for B, N, splits in ((16, 16384, (1, 2, 3, 4)), (16, 8192, (1, 2, 4)), (16, 4096, (1, 2)), (8, 16384, (2, 4))):
        _split_sweep_row(cd.paged_case(B, N, 8, torch.float16), splits, variants, iters, copy_bw,
                         f"long paged D=128 B={B} N={N} Hkv=8", peer="sdpa-cudnn")


def short_context_split_sweep(iters, copy_bw):
    """B=1 at short contexts (the heuristic: no split under 128 keys since 70fe045, 256
    before): forced split
    counts, automatic kernel, cuDNN first (graph replays, cold L2)."""
    auto = {"auto": SWEEP_VARIANTS["auto"]}
    for N, Hkv, splits in ((512, 8, (1, 2, 4, 8)), (1024, 8, (2, 4, 8, 16)), (2048, 8, (4, 8, 16, 32)),
                           (1024, 32, (1, 2, 4, 8))):
        _split_sweep_row(cd.paged_case(1, N, Hkv, torch.float16), splits, auto, iters, copy_bw,
                         f"short paged D=128 B=1 N={N} Hkv={Hkv}", peer="sdpa-cudnn")
    for N, D, splits in ((512, 128, (2, 4, 8)), (1024, 128, (4, 8, 16)), (1024, 64, (8, 16, 32))):
        _fp8_sweep_row(1, N, 8, D, splits, auto, iters, copy_bw)
        _fp8_sweep_row(1, N, 8, D, None, auto, iters, copy_bw, title=f"fp8 D={D} B=1 N={N} Hkv=8 heuristic")


def d64_gqa_pairs_sweep(iters, copy_bw):
    """16-bit paged D=64 GQA 32/8 beyond one block per SM: unpaired (the D=64 TMA kernel)
    against head pairs on the D=128 kernels (TMA 2 / 3 stages, cp.async), cuDNN first
    (graph replays, cold L2)."""
    pairs = {"auto": {}, "single": {"CLO_DECODE_PACK": "0"},
             "pairs-tma2": {"CLO_DECODE_PACK": "2", "CLO_DECODE_VARIANT": "2", "CLO_DECODE_TMA_STAGES": "2"},
             "pairs-tma3": {"CLO_DECODE_PACK": "2", "CLO_DECODE_VARIANT": "2", "CLO_DECODE_TMA_STAGES": "3"},
             "pairs-cp": {"CLO_DECODE_PACK": "2", "CLO_DECODE_VARIANT": "1"},
             "single-cp": {"CLO_DECODE_PACK": "0", "CLO_DECODE_VARIANT": "1"}}
    for B, N in ((24, 2048), (32, 2048), (64, 2048), (128, 2048), (64, 4096)):
        _split_sweep_row(cd.paged_case(B, N, 8, torch.float16, D=64), (1,), pairs, iters, copy_bw,
                         f"d64 paged GQA 32/8 B={B} N={N}", peer="sdpa-cudnn")


def d64_pairs_boundary_sweep(iters, copy_bw):
    """16-bit paged D=64 from one to eight blocks per SM (GQA 32/8 and MHA): unpaired
    against head pairs, each on the automatic kernel for its grid and on the TMA kernel
    at 3 / 4 stages (v25), at 1 and 2 splits, cuDNN first (graph replays, cold L2); then
    contiguous caches at the seam on the automatic kernel, TMA 2 / 4 and cp.async."""
    tma = SWEEP_VARIANTS
    pairs = {"single": {"CLO_DECODE_PACK": "0"}, "single-tma3": {"CLO_DECODE_PACK": "0", **tma["tma3"]},
             "single-tma4": {"CLO_DECODE_PACK": "0", **tma["tma4"]}, "pairs": {"CLO_DECODE_PACK": "2"},
             "pairs-tma3": {"CLO_DECODE_PACK": "2", **tma["tma3"]}}
    for B, Hkv in ((16, 8), (17, 8), (20, 8), (24, 8), (28, 8), (32, 8), (48, 8), (64, 8), (5, 32), (6, 32), (8, 32),
                   (16, 32)):
        _split_sweep_row(cd.paged_case(B, 2048, Hkv, torch.float16, D=64), (1, 2), pairs, iters, copy_bw,
                         f"d64 paged Hkv={Hkv} B={B} N=2048", peer="sdpa-cudnn")
    contiguous = {lb: tma[lb] for lb in ("auto", "tma2", "tma4", "cp")}
    for B, Hkv in ((17, 8), (20, 8), (24, 8), (5, 32)):
        _split_sweep_row(cd.paged_case(B, 2048, Hkv, torch.float16, D=64), (1,), contiguous, iters, copy_bw,
                         f"d64 contig Hkv={Hkv} B={B} N=2048", peer="sdpa-cudnn", contiguous=True)


# --d96: (B, N, Hkv, D, contiguous, split counts) rows
D96_ROWS = ([(B, 2048, 8, 96, False, (1,)) for B in (16, 17, 20, 24, 28, 32, 48, 64, 128)]
            + [(B, 2048, 32, 96, False, (1,)) for B in (5, 8, 16, 32)]
            + [(64, 8192, 8, 96, False, (1,)), (64, 4096, 32, 96, False, (1, 2)), (1, 16384, 8, 96, False, (16,)),
               (64, 2048, 8, 96, True, (1,)), (16, 2048, 32, 96, True, (1,)), (64, 4096, 32, 96, True, (1, 2)),
               (64, 2048, 8, 80, False, (1,))])


# Each kernel and depth unpaired (CLO_DECODE_PACK=0, SWEEP_VARIANTS' labels) and in head
# pairs ("pairs-" + label); "auto": the library's choice.
PACK_KERNEL_VARIANTS = {"auto": {},
                        **{lb: {"CLO_DECODE_PACK": "0", **env} for lb, env in SWEEP_VARIANTS.items() if lb != "auto"},
                        **{f"pairs-{lb}": {"CLO_DECODE_PACK": "2", **SWEEP_VARIANTS[lb]} for lb in ("cp", "tma2", "tma3")}}
# --seam-gaps: the grids where cuDNN still leads (notes v25/v27): (B, N, Hkv, D, block_size,
# contiguous, split counts, variant labels)
_SEAM_ALL = ("auto", "cp", "tma2", "tma3", "tma4", "pairs-tma2", "pairs-tma3", "pairs-cp")
SEAM_GAP_ROWS = ([(48, 2048, 8, 64, bs, False, (1, 2), _SEAM_ALL) for bs in (16, 64, 256)]
                 + [(48, 2048, 8, 64, 16, True, (1, 2), ("auto", "cp", "tma2", "tma3", "tma4"))]
                 + [(24, 2048, 8, 128, bs, False, (1, 2), ("auto", "cp", "tma2", "tma3")) for bs in (16, 256)]
                 + [(24, 2048, 8, 128, 16, True, (1, 2), ("auto", "cp", "tma2", "tma3"))]
                 + [(64, 2048, 8, 96, bs, False, (1,), ("auto", "cp", "tma2", "tma3", "pairs-tma2", "pairs-tma3"))
                    for bs in (16, 256)]
                 + [(64, 2048, 8, 96, 16, True, (1,), ("auto", "cp", "tma2", "tma3"))])


def seam_gap_sweep(iters, copy_bw):
    """The grids where cuDNN still leads: D=64 GQA B=48/2K, D=128 GQA B=24/2K, D=96 GQA
    B=64/2K, at block sizes 16 / 64 / 256 and contiguous, unpaired on each kernel and depth
    and in head pairs, 1 and 2 splits, cuDNN first (graph replays, cold L2). Tells the
    paged gather (box size) apart from the kernel."""
    variants = PACK_KERNEL_VARIANTS
    for B, N, Hkv, D, bs, contiguous, splits, labels in SEAM_GAP_ROWS:
        _split_sweep_row(cd.paged_case(B, N, Hkv, torch.float16, D=D, block_size=bs), splits,
                         {lb: variants[lb] for lb in labels}, iters, copy_bw,
                         f"{'contig' if contiguous else f'paged bs={bs}'} D={D} B={B} N={N} Hkv={Hkv}",
                         peer="sdpa-cudnn", contiguous=contiguous)


# --depth-seam: (B, N, Hkv, D, block sizes (0 = contiguous), split counts, variant labels)
DEPTH_SEAM_ROWS = ([(B, 2048, 8, 64, (16, 256, 0), (1,), ("auto", "cp", "tma2", "tma3", "tma4", "pairs-tma2"))
                    for B in (24, 32, 40, 44, 52, 64)]
                   + [(B, 2048, 8, 128, (16, 256, 0), (1, 2), ("auto", "tma2", "tma3"))
                      for B in (20, 28, 32, 40)])


def depth_seam_sweep(iters, copy_bw):
    """The TMA kernel's depth and the split count between one and four blocks per SM
    (D=64 GQA 32/8 B=24-64, D=128 B=20-40, N=2048), paged at block sizes 16 and 256
    and contiguous, cuDNN first (graph replays, cold L2)."""
    variants = PACK_KERNEL_VARIANTS
    for B, N, Hkv, D, sizes, splits, labels in DEPTH_SEAM_ROWS:
        for bs in sizes:
            lbs = [lb for lb in labels if bs or not lb.startswith("pairs")]
            _split_sweep_row(cd.paged_case(B, N, Hkv, torch.float16, D=D, block_size=bs or 16), splits,
                             {lb: variants[lb] for lb in lbs}, iters, copy_bw,
                             f"{f'paged bs={bs}' if bs else 'contig'} D={D} B={B} N={N} Hkv={Hkv}",
                             peer="sdpa-cudnn", contiguous=not bs)


# --split-balance: (B, N, Hkv, D) at 1.2-3.5 blocks per SM unsplit, each at block sizes
# 16 / 256 and contiguous (0), 1-4 splits on the automatic kernel
SPLIT_BALANCE_ROWS = ([(B, 2048, 8, 64) for B in (20, 28, 36, 40, 44, 56)]
                      + [(B, 2048, 8, 128) for B in (20, 24, 36, 40, 44, 56)])


def split_balance_sweep(iters, copy_bw):
    """Forced split counts 1-4 on the automatic kernel where the unsplit grid leaves the
    SMs unevenly loaded (1.2-3.5 blocks per SM), paged at block sizes 16 and 256 and
    contiguous, cuDNN first (graph replays, cold L2)."""
    for B, N, Hkv, D in SPLIT_BALANCE_ROWS:
        for bs in (16, 256, 0):
            _split_sweep_row(cd.paged_case(B, N, Hkv, torch.float16, D=D, block_size=bs or 16), (1, 2, 3, 4),
                             {"auto": {}}, iters, copy_bw,
                             f"{f'paged bs={bs}' if bs else 'contig'} D={D} B={B} N={N} Hkv={Hkv}",
                             peer="sdpa-cudnn", contiguous=not bs)


# --d64-contig-band: contiguous D=64 (B, N, Hkv) in and around 2.25-3 blocks per SM
D64_CONTIG_BAND_ROWS = [(36, 2048, 8), (38, 2048, 8), (40, 1024, 8), (44, 4096, 8), (48, 8192, 8), (10, 2048, 32),
                        (11, 4096, 32), (12, 1024, 32), (13, 2048, 32)]


def d64_contig_band_sweep(iters, copy_bw):
    """Contiguous D=64 caches in and around 2.25-3 blocks per SM (v27's 4-stage band) at
    other lengths and MHA: the automatic choice against the TMA kernel at 2 and 4
    stages, cuDNN first (graph replays, cold L2)."""
    variants = {lb: SWEEP_VARIANTS[lb] for lb in ("auto", "tma2", "tma4")}
    for B, N, Hkv in D64_CONTIG_BAND_ROWS:
        _split_sweep_row(cd.paged_case(B, N, Hkv, torch.float16, D=64), (1,), variants, iters, copy_bw,
                         f"contig D=64 B={B} N={N} Hkv={Hkv} ({B * Hkv} blocks)", peer="sdpa-cudnn",
                         contiguous=True)


# --balanced: (B, N, Hkv) of 16-bit D=128 grids between one and three units per SM
BALANCED_ROWS = ([(B, 2048, 8) for B in (17, 20, 24, 28, 32, 36, 40, 44, 48)]
                 + [(B, 1024, 8) for B in (20, 36)] + [(B, 4096, 8) for B in (20, 36)]
                 + [(B, 2048, 32) for B in (5, 7, 9, 11)])


def balanced_sweep(iters, copy_bw):
    """The balanced schedule (v28) against the even grids it replaces: the heuristic's
    count (s0: 2 splits where decode_tail_splits, balanced below 2 units per SM, else 1), 1 split, and 2
    splits balanced and even (CLO_DECODE_STREAMK=0), paged at block sizes 16 and 256 and
    contiguous, cuDNN first (graph replays, cold L2)."""
    variants = {"sk": {}, "even": {"CLO_DECODE_STREAMK": "0"}}
    for B, N, Hkv in BALANCED_ROWS:
        for bs in (16, 256, 0):
            _split_sweep_row(cd.paged_case(B, N, Hkv, torch.float16, block_size=bs or 16), (0, 1, 2), variants,
                             iters, copy_bw, f"{f'paged bs={bs}' if bs else 'contig'} D=128 B={B} N={N} Hkv={Hkv}",
                             peer="sdpa-cudnn", contiguous=not bs)


# --balanced-dims: (D, B, N, Hkv) of the other 16-bit head dims around 1.2 and 2.2 units per SM
BALANCED_DIMS_ROWS = ([(D, B, N, 8) for D in (64, 96, 256) for B, N in ((20, 2048), (36, 2048), (20, 4096))]
                      + [(D, 5, 2048, 32) for D in (64, 96, 256)]
                      + [(256, B, 2048, 8) for B in (17, 18, 22, 24)] + [(256, 20, 1024, 8)]
                      + [(96, B, 2048, 8) for B in (34, 40, 44, 46, 48)] + [(96, 36, 1024, 8), (80, 36, 4096, 8)])


def balanced_dims_sweep(iters, copy_bw):
    """The balanced schedule and the tail rule at D = 64, 96 and 256 (v29): the heuristic's
    count (s0), 1 split, 2 splits balanced and even (CLO_DECODE_STREAMK=0), paged at block
    sizes 16 and 256 and contiguous, cuDNN first (graph replays, cold L2)."""
    variants = {"sk": {}, "even": {"CLO_DECODE_STREAMK": "0"}}
    for D, B, N, Hkv in BALANCED_DIMS_ROWS:
        for bs in (16, 256, 0):
            _split_sweep_row(cd.paged_case(B, N, Hkv, torch.float16, block_size=bs or 16, D=D), (0, 1, 2), variants,
                             iters, copy_bw, f"{f'paged bs={bs}' if bs else 'contig'} D={D} B={B} N={N} Hkv={Hkv}",
                             peer="sdpa-cudnn", contiguous=not bs)


# --d80: 16-bit D=80 (the D=96 kernels over 80 columns) at 1.3-4.8 units per SM, 1 and 2 splits
D80_ROWS = [(B, 4096, 8, 80, contiguous, (1, 2)) for B in (17, 24, 36, 48, 64) for contiguous in (False, True)]


# --d80-wide: more D=80 grids beyond 1.5 blocks per SM (v30 left the kernel choice there open)
D80_WIDE_ROWS = ([(B, 4096, 8, 80, contiguous, (1, 2)) for B in (28, 32, 40, 44, 56) for contiguous in (False, True)]
                 + [(B, 2048, 8, 80, contiguous, (1, 2)) for B in (36, 48) for contiguous in (False, True)])


# --d80-paged-seam: paged D=80 at 2.7-3.1 blocks per SM, where v31 left B=48/4K at 0.88x
# cuDNN (2 splits on cp.async ran 1.05x there)
D80_PAGED_SEAM_ROWS = ([(B, 4096, 8, 80, False, (1, 2)) for B in (44, 46, 48, 50)]
                       + [(48, 2048, 8, 80, False, (1, 2)), (48, 8192, 8, 80, False, (1, 2))]
                       + [(B, 4096, 32, 80, False, (1, 2)) for B in (11, 12)] + [(12, 2048, 32, 80, False, (1, 2))])


# --d80-long: paged D=80 at 8192 keys, 1.5-3.4 blocks per SM (v34: at B=48 the cp.async
# kernel led TMA 3 by 12-19%)
D80_LONG_ROWS = [(B, 8192, 8, 80, False, (1, 2)) for B in (24, 32, 40, 44, 48, 56)] + [(12, 8192, 32, 80, False, (1, 2))]

# --long-contig: contiguous D=80 and D=96 at 8192 keys, 1.5-3 blocks per SM (unmeasured
# after v34, which measured the paged layout there)
LONG_CONTIG_ROWS = [(B, 8192, 8, D, True, (1, 2)) for D in (80, 96) for B in (24, 40, 48)]


def _unpaired_variants(labels) -> dict[str, dict[str, str]]:
    """The automatic choice, then each SWEEP_VARIANTS kernel in `labels` without head pairs."""
    return {"auto": {}, **{lb: {"CLO_DECODE_PACK": "0", **SWEEP_VARIANTS[lb]} for lb in labels}}


def d80_wide_sweep(iters, copy_bw, rows=D80_WIDE_ROWS, labels=("cp", "tma2", "tma3")):
    """16-bit D=80 (the D=96 kernels over 80 columns) at 1.7-3.4 blocks per SM: the
    automatic choice against the cp.async kernel and the TMA kernel at 2 / 3 stages
    (`labels`), 1 and 2 splits, cuDNN first (graph replays, cold L2)."""
    variants = _unpaired_variants(labels)
    for B, N, Hkv, D, contiguous, splits in rows:
        _split_sweep_row(cd.paged_case(B, N, Hkv, torch.float16, D=D), splits, variants, iters,
                         copy_bw, f"{'contig' if contiguous else 'paged'} D={D} B={B} N={N} Hkv={Hkv}",
                         peer="sdpa-cudnn", contiguous=contiguous)


def _layout_rows(rows, variants, iters, copy_bw):
    """`_split_sweep_row` over 16-bit rows (B, N, Hkv, D, contiguous, splits, block_size),
    cuDNN first; `variants`: a dict, or a function of D giving one."""
    for B, N, Hkv, D, contiguous, splits, bs in rows:
        _split_sweep_row(cd.paged_case(B, N, Hkv, torch.float16, D=D, block_size=bs), splits,
                         variants(D) if callable(variants) else variants, iters, copy_bw,
                         f"{'contig' if contiguous else 'paged'} D={D} B={B} N={N} Hkv={Hkv} bs={bs}",
                         peer="sdpa-cudnn", contiguous=contiguous)


# --large-grids: the bandwidth-bound grids where the H200 (4.8 TB/s) showed cuDNN ahead by
# 5-9% (and D=80 by 27-29%) while the H100 had them level: (B, N, Hkv, D, contiguous, splits,
# block_size)
LARGE_GRID_ROWS = [(64, 4096, 32, 128, False, (0,), 16), (64, 4096, 32, 128, True, (0,), 16),
                   (64, 4096, 32, 128, False, (0,), 256), (64, 1024, 8, 128, False, (0,), 16),
                   (16, 4096, 8, 128, False, (0,), 16), (17, 1024, 8, 128, False, (0,), 16),
                   (64, 2048, 32, 80, False, (0,), 16), (64, 2048, 8, 80, False, (0,), 16),
                   (64, 2048, 32, 64, False, (0,), 16), (64, 2048, 32, 96, False, (0,), 16)]


def large_grid_sweep(iters, copy_bw, rows=LARGE_GRID_ROWS, labels=("cp", "tma2", "tma3", "tma4")):
    """Bandwidth-bound grids: the automatic choice against the cp.async kernel and the TMA
    kernel at each depth that fits (`labels`), cuDNN first (graph replays, cold L2)."""
    def variants(D):
        fits = [lb for lb in labels if "CLO_DECODE_TMA_STAGES" not in SWEEP_VARIANTS[lb]
                or decode_tma_stages_fit(D, int(SWEEP_VARIANTS[lb]["CLO_DECODE_TMA_STAGES"]))]
        return {"auto": {}, **{lb: SWEEP_VARIANTS[lb] for lb in fits}}
    _layout_rows(rows, variants, iters, copy_bw)


# --l2-promotion: the tensor maps' L2 promotion (CLO_TMA_L2_PROMOTION: 3 = 256 B, 2 = 128 B,
# 0 = none; auto = tma::stream_l2_promotion's rule) and the cp.async kernel, on the issue's
# grids and the large ones: (B, N, Hkv, D, contiguous, splits, block_size)
L2_PROMOTION_ROWS = [(64, 4096, 32, 128, False, (0,), 16), (64, 4096, 32, 128, True, (0,), 16),
                     (16, 4096, 8, 128, False, (0,), 16), (16, 1024, 8, 128, False, (0,), 16),
                     (1, 16384, 8, 128, False, (0,), 16), (1, 16384, 8, 128, True, (0,), 16),
                     (64, 1024, 8, 128, False, (0,), 16), (17, 1024, 8, 128, False, (0,), 16),
                     (64, 2048, 32, 64, False, (0,), 16), (64, 2048, 32, 80, False, (0,), 16),
                     (64, 2048, 8, 96, False, (0,), 16), (64, 2048, 8, 256, False, (0,), 16)]
L2_PROMOTION_VARIANTS = {"auto": {}, "p256": {"CLO_TMA_L2_PROMOTION": "3"}, "p128": {"CLO_TMA_L2_PROMOTION": "2"},
                         "p0": {"CLO_TMA_L2_PROMOTION": "0"}, "cp": {"CLO_DECODE_VARIANT": "1"},
                         "tma/p128": {"CLO_DECODE_VARIANT": "2", "CLO_TMA_L2_PROMOTION": "2"}}


def l2_promotion_sweep(iters, copy_bw):
    """The L2 promotion of the decode tensor maps and the cp.async kernel (whose L2 hint is a
    build choice: CLO_DEV_CP_ASYNC_L2_128), cuDNN first (graph replays, cold L2)."""
    _layout_rows(L2_PROMOTION_ROWS, L2_PROMOTION_VARIANTS, iters, copy_bw)


# --wide-pairs: paged 16-bit head dims 72-96 in head pairs (the D = 256 kernels over 144-192-
# column rows: a token's two heads are one 64-byte-aligned run, where one 160-byte D = 80 row
# shares a 64-byte DRAM atom with its neighbour head's; since stop 74 72-80 run the D = 160
# kernel unless CLO_DECODE_PAIR_KERNEL=256): (B, N, Hkv, D, contiguous, splits, block_size)
WIDE_PAIR_ROWS = [(B, N, Hkv, D, False, (0,), 16) for D in (80, 96, 72)
                  for B, N, Hkv in ((64, 2048, 32), (64, 2048, 8), (32, 4096, 8), (16, 2048, 32), (24, 2048, 8))]
WIDE_PAIR_VARIANTS = {"auto": {}, "single": {"CLO_DECODE_PACK": "0"}, "pairs": {"CLO_DECODE_PACK": "2"},
                      "pairs/cp": {"CLO_DECODE_PACK": "2", "CLO_DECODE_VARIANT": "1"},
                      "pairs/tma2": {"CLO_DECODE_PACK": "2", "CLO_DECODE_VARIANT": "2", "CLO_DECODE_TMA_STAGES": "2"},
                      "pairs/tma3": {"CLO_DECODE_PACK": "2", "CLO_DECODE_VARIANT": "2", "CLO_DECODE_TMA_STAGES": "3"},
                      "single/tma3": {"CLO_DECODE_PACK": "0", "CLO_DECODE_VARIANT": "2", "CLO_DECODE_TMA_STAGES": "3"}}


def wide_pair_sweep(iters, copy_bw):
    """Paged 16-bit D=72-96 with and without head pairs, per kernel, cuDNN first (graph
    replays, cold L2)."""
    _layout_rows(WIDE_PAIR_ROWS, WIDE_PAIR_VARIANTS, iters, copy_bw)


# --wide-pairs-bands: paged 16-bit D=80 (and 72 / 88) GQA 32/8 and MHA across 1-3.5 unpaired
# units per SM, 2K-8K keys: pairs against unpaired at forced split counts, and the pairs'
# L2 promotion (stop 59, the D = 256 kernel; 72-80 pairs now run the D = 160 one); then
# B=17/1K/GQA D=128 (1.03 units per SM) at 1-4 splits per kernel
WIDE_PAIR_BAND_ROWS = ([(B, N, 8, 80, False, (0, 1, 2), 16) for N in (2048, 4096) for B in (20, 34, 40, 44, 50, 56)]
                       + [(B, 8192, 8, 80, False, (0, 1, 2), 16) for B in (24, 40, 48)]
                       + [(B, 2048, 32, 80, False, (0, 1, 2), 16) for B in (5, 9, 12)]
                       + [(B, 4096, 8, D, False, (0, 1, 2), 16) for D in (72, 88) for B in (24, 44)])
WIDE_PAIR_BAND_VARIANTS = {"auto": {}, "single": {"CLO_DECODE_PACK": "0"}, "pairs": {"CLO_DECODE_PACK": "2"},
                           "pairs/p0": {"CLO_DECODE_PACK": "2", "CLO_TMA_L2_PROMOTION": "0"},
                           "pairs/p256": {"CLO_DECODE_PACK": "2", "CLO_TMA_L2_PROMOTION": "3"}}
SEAM_1K_VARIANTS = {"auto": {}, "even": {"CLO_DECODE_STREAMK": "0"}, "cp": SWEEP_VARIANTS["cp"],
                    "tma2": SWEEP_VARIANTS["tma2"], "tma3": SWEEP_VARIANTS["tma3"], "tma4": SWEEP_VARIANTS["tma4"]}


def wide_pair_band_sweep(iters, copy_bw):
    """WIDE_PAIR_BAND_ROWS with and without head pairs at forced split counts, cuDNN first;
    then B=17/1K/GQA at 1-4 splits per kernel (graph replays, cold L2)."""
    _layout_rows(WIDE_PAIR_BAND_ROWS, WIDE_PAIR_BAND_VARIANTS, iters, copy_bw)
    _layout_rows([(17, 1024, 8, 128, False, (0, 1, 2, 3, 4), 16), (17, 1024, 8, 128, True, (0, 1, 2, 3, 4), 16)],
                 SEAM_1K_VARIANTS, iters, copy_bw)


# --depth-bands: 16-bit D=128 GQA 32/8 (and MHA) from one block per SM to large grids and
# the small grids (B=1-16), paged block 16 and contiguous: the automatic kernel against
# cp.async and TMA 2-4 stages (the H100's depths, measured again on HBM3e)
DEPTH_BAND_ROWS = ([(B, N, 8, 128, False, (0,), 16) for B, N in ((17, 1024), (20, 1024), (20, 2048), (24, 2048),
                                                                  (28, 1024), (32, 2048), (40, 2048), (48, 1024),
                                                                  (64, 1024), (64, 4096))]
                   + [(B, N, 32, 128, False, (0,), 16) for B, N in ((8, 2048), (16, 1024))]
                   + [(B, N, 8, 128, True, (0,), 16) for B, N in ((17, 1024), (20, 1024), (32, 2048), (64, 1024))]
                   + [(B, N, 8, 128, c, (0,), 16) for B, N in ((1, 4096), (4, 4096), (8, 2048), (16, 1024), (16, 4096))
                      for c in (False, True)]
                   + [(1, 16384, 8, 128, c, (0, 24, 32), 16) for c in (False, True)])


def depth_band_sweep(iters, copy_bw):
    """DEPTH_BAND_ROWS: auto / cp.async / TMA 2-4 stages, cuDNN first (graph replays, cold L2)."""
    _layout_rows(DEPTH_BAND_ROWS, {lb: SWEEP_VARIANTS[lb] for lb in ("auto", "cp", "tma2", "tma3", "tma4")},
                 iters, copy_bw)


# --d128-tail-splits: 16-bit D=128 GQA 32/8 where the H200 bench trails cuDNN (1.03-1.4
# units per SM, and B=16/16K): forced split counts under the automatic kernel, the even
# 2-split grid and TMA 3 / 4 stages
D128_TAIL_SPLIT_ROWS = [(B, N, 8, 128, False, (0, 1, 2, 3, 4, 6), 16)
                        for B, N in ((17, 1024), (20, 2048), (20, 4096), (22, 4096), (16, 16384))] + \
                       [(20, 4096, 8, 128, True, (0, 1, 2, 3, 4, 6), 16)]


# --d128-tail-confirm: the HBM3e rule that came of it (decode_tail_splits, hbm3e_d128) across
# the band (B=19-22: 1.15-1.33 units per SM) and its edges (B=18, 23), 2K-8K keys
D128_TAIL_CONFIRM_ROWS = [(B, N, 8, 128, False, (0, 1, 2, 3), 16) for N in (2048, 4096, 8192) for B in (19, 20, 21, 22)] \
    + [(B, 4096, 8, 128, False, (0, 1, 2, 3), 16) for B in (18, 23)] \
    + [(B, N, 8, 128, True, (0, 1, 2, 3), 16) for N in (2048, 4096) for B in (19, 21)]

# --d128-wave-confirm: the second-wave band at D=128 (2.1-2.5 units per SM: 2 even splits
# by the H100's rule) on HBM3e, B=34-40 (2.06-2.42), 2K / 4K keys, paged and contiguous
D128_WAVE_CONFIRM_ROWS = [(B, N, 8, 128, False, (0, 1, 2, 3), 16) for N in (2048, 4096) for B in (34, 36, 38, 40)] \
    + [(B, N, 8, 128, True, (0, 1, 2, 3), 16) for N in (2048, 4096) for B in (36, 40)]

# --band-check-wide: the H100 split bands at head dims 256 and 96 (decode_tail_splits),
# not yet measured on HBM3e: D=256 at 1.05-1.5 units per SM, D=96 paged in its second wave
# (2-3.05) and contiguous in its one-tail band, 2K / 4K keys, 1-3 splits
BAND_CHECK_WIDE_ROWS = [(B, N, 8, 256, False, (0, 1, 2, 3), 16) for N in (2048, 4096) for B in (17, 20, 24)] \
    + [(B, 4096, 8, 96, False, (0, 1, 2, 3), 16) for B in (34, 40, 48)] \
    + [(B, N, 8, 96, True, (0, 1, 2, 3), 16) for N in (2048, 4096) for B in (18, 22)]

# --hbm3e-band-edges: where the bands found by --band-check-wide end on HBM3e (the H200:
# D=256 2 splits beat 1 by 12-14% at 1.45 units per SM, past the H100's 1.35 edge; D=96
# paged 4K took 3 splits over 2 at 2.06-2.42; contiguous D=96 2K 1 split over 2 at 1.33)
HBM3E_BAND_EDGE_ROWS = [(B, N, 8, 256, False, (0, 1, 2, 3), 16) for N in (2048, 4096) for B in (24, 26, 28, 30, 33)] \
    + [(B, 4096, 8, 256, True, (0, 1, 2, 3), 16) for B in (20, 24, 28)] \
    + [(B, N, 8, 96, False, (0, 2, 3), 16) for N in (2048, 4096, 8192) for B in (34, 37, 40, 43, 46)] \
    + [(B, 2048, 8, 96, True, (0, 1, 2), 16) for B in (19, 20, 21, 22, 24)] \
    + [(B, N, 8, 128, False, (0, 1, 2, 3), 16) for N in (2048, 4096) for B in (24, 28)]

# --hbm3e-band-confirm: the rules that came of --hbm3e-band-edges (decode_tail_splits, hbm3e)
# at lengths and layouts the edges sweep did not run, and at the new bands' edges
HBM3E_BAND_CONFIRM_ROWS = [(B, 8192, 8, 256, False, (0, 1, 2), 16) for B in (24, 26)] \
    + [(B, N, 8, 256, True, (0, 1, 2), 16) for N in (2048, 8192) for B in (24, 26)] \
    + [(B, 2048, 8, 256, False, (0, 1, 2), 16) for B in (23, 27)] \
    + [(B, 2048, 8, 96, False, (0, 1, 2), 16) for B in (44, 45, 47)] \
    + [(B, 4096, 8, 96, False, (0, 2, 3), 16) for B in (35, 42, 44)] \
    + [(B, 8192, 8, 96, False, (0, 2, 3, 4), 16) for B in (34, 40)] \
    + [(B, 3072, 8, 96, True, (0, 1, 2), 16) for B in (19, 21)]

# --hbm3e-band-edges2: the edges the confirmation moved (D=256 paged to 1.7, contiguous
# 1.5; paged D=96 to 2.9 below 4096 keys, 4 splits from 8192)
HBM3E_BAND_EDGE2_ROWS = [(B, 2048, 8, 256, False, (0, 1, 2), 16) for B in (28, 29)] \
    + [(B, 4096, 8, 256, True, (0, 1, 2), 16) for B in (25, 26)] \
    + [(48, 2048, 8, 96, False, (0, 1, 2), 16)] \
    + [(B, N, 8, 96, False, (0, 3, 4, 5), 16) for N in (8192, 16384) for B in (34, 37, 40, 43)] \
    + [(44, 8192, 8, 96, False, (0, 2, 4), 16)]

# --hbm3e-band-final: the final HBM3e D=256 / D=96 counts (automatic) against the H100's
# count at points of each changed band, some not swept before
HBM3E_BAND_FINAL_ROWS = [(B, 8192, 8, 96, False, (0, 2, 3, 4), 16) for B in (36, 41)] \
    + [(37, 16384, 8, 96, False, (0, 2, 4), 16), (48, 2048, 8, 96, False, (0, 1), 16),
       (25, 4096, 8, 256, True, (0, 1), 16), (27, 4096, 8, 256, False, (0, 1), 16),
       (21, 2048, 8, 96, True, (0, 2), 16), (25, 8192, 8, 256, False, (0, 1), 16)]

# --hbm3e-narrow-bands: the HBM3e one-tail edges at the other head dims of the same kernels
# (D=160 / 192 on the D=256 kernel, contiguous D=80 / 88 on the D=96 one)
HBM3E_NARROW_BAND_ROWS = [(B, N, 8, D, False, (0, 1, 2), 16) for D in (192, 160) for N in (2048, 4096)
                          for B in (20, 24, 27)] \
    + [(B, 4096, 8, 192, True, (0, 1, 2), 16) for B in (20, 24, 26)] \
    + [(B, 2048, 8, D, True, (0, 1, 2), 16) for D in (80, 88) for B in (19, 20, 22)]
# --hbm3e-contig-192: contiguous D=192, where --hbm3e-narrow-bands found 2 splits 11-14% ahead
# at 1.2-1.6 units per SM: the band's top
HBM3E_CONTIG_192_ROWS = [(B, N, 8, 192, True, (0, 1, 2), 16) for N in (2048, 4096) for B in (25, 26, 28)]
# --hbm3e-band-tops: the two band tops left open at stop 61: contiguous D=192 past 1.7 units
# per SM (2 splits still 4-8% ahead at B=28), to the first whole wave and past it; paged D=96
# from 8192 keys, 4 splits against 3 around the 2.45 edge (B=41: 2.48, B=42: 2.55)
HBM3E_BAND_TOP_ROWS = [(B, N, 8, 192, True, (0, 1, 2), 16) for N in (2048, 4096) for B in (28, 30, 32)] \
    + [(B, N, 8, 192, True, (0, 1, 2, 3), 16) for N in (2048, 4096) for B in (33, 34, 36)] \
    + [(B, 8192, 8, 192, True, (0, 1, 2), 16) for B in (28, 31)] \
    + [(B, N, 8, 96, False, (0, 3, 4), 16) for N in (8192, 16384) for B in (41, 42)]
# --hbm3e-band-tops-confirm: the tops moved by it (contiguous D=192 to 1.83, paged D=96 4 splits
# to 2.5 from 8192 keys) at their edges, and contiguous D=192 past two units per SM, where 2-3
# splits led at 4096 keys (B=34, 36) and lost at 2048
HBM3E_BAND_TOP_CONFIRM_ROWS = [(B, N, 8, 192, True, (0, 1, 2), 16) for N in (3072, 4096) for B in (29, 30, 31)] \
    + [(B, N, 8, 96, False, (0, 3, 4), 16) for N in (8192, 12288) for B in (40, 41, 42)] \
    + [(B, N, 8, 192, True, (0, 1, 2, 3), 16) for N in (4096, 8192) for B in (34, 36, 38, 40, 42)]
# --hbm3e-contig-192-wave: the band that came of it (contiguous D=192 from 4096 keys past two
# units per SM to 2.45: 2 splits), automatic against 1-2 splits, and its edges
HBM3E_CONTIG_192_WAVE_ROWS = [(B, N, 8, 192, True, (0, 1, 2), 16) for N in (4096, 8192) for B in (34, 40)] \
    + [(42, 4096, 8, 192, True, (0, 1, 2), 16), (36, 2048, 8, 192, True, (0, 1, 2), 16)]

# --hbm3e-contig-192-fill: the same band's every batch (2.0-3.3 units per SM) at 1-4 splits, for
# a count by how full the last wave of blocks is
HBM3E_CONTIG_192_FILL_ROWS = [(B, N, 8, 192, True, (0, 1, 2, 3, 4), 16) for N in (4096, 8192)
                              for B in range(33, 45)]

# --spread-tail: D=128 GQA 32/8 grids of one to 1.4 units per SM (B=17-22), the automatic
# count (and 1 split) against the spread tail (CLO_DECODE_SPREAD=1) in 4, 8 and 16 pieces
SPREAD_TAIL_ROWS = [(B, N, contiguous) for N in (1024, 2048, 4096) for B in (17, 18, 20, 22)
                    for contiguous in (False, True)]


def _spread_rows(rows, splits, variants, iters, copy_bw, only=None):
    """`_nq_rows` over one-token rows (B, N, contiguous)."""
    _nq_rows([(B, N, 1, contiguous) for B, N, contiguous in rows], splits, iters, copy_bw, variants, only)


def spread_tail_sweep(iters, copy_bw, rows=SPREAD_TAIL_ROWS):
    """`rows` (B, N, contiguous): s0 / s1 automatic, s4 / s8 / s16 as the spread tail."""
    _spread_rows(rows, (0, 1, 4, 8, 16), AUTO_SPREAD_VARIANTS, iters, copy_bw, only=spread_from(2))


# --h100-spread-low: the H100's spread-tail band (stop 119, decode_spread_tail_pieces off HBM3e:
# one token, 1.0-1.1 units per SM, 8 pieces) at GQA 32/8 B=17-19 over 1K-16K keys: automatic
# (s0: the rule), 1 split (the count before) and the spread tail in 4, 6 and 8 pieces; then the
# issue's B=17/1K and B=18/1K rows at s0 / s1 / s8 in three more rounds, for the noise
H100_SPREAD_LOW_ROWS = [(B, N, contiguous) for N in (1024, 2048, 4096, 8192, 16384) for B in (17, 18, 19)
                        for contiguous in (False, True)]
H100_SPREAD_LOW_ROUND_ROWS = [(B, 1024, contiguous) for B in (17, 18) for contiguous in (False, True)]


# --h100-spread-low-confirm: the rule's contiguous edge (1.05 below 2048 keys) and the issue's
# B=17/1K, automatic against 1 split and 8 pieces in three rounds
H100_SPREAD_LOW_CONFIRM_ROWS = [(17, 1024, False), (17, 1024, True), (18, 1024, False), (18, 1024, True),
                                (18, 2048, True)]


def h100_spread_rounds(iters, copy_bw, rows, rounds=3):
    """`rows` (B, N, contiguous) at s0 / s1 automatic and s8 (the spread tail), `rounds` times."""
    for _ in range(rounds):
        _spread_rows(rows, (0, 1, 8), AUTO_SPREAD_VARIANTS, iters, copy_bw, only=spread_from(2))


def h100_spread_low_sweep(iters, copy_bw, rows=H100_SPREAD_LOW_ROWS):
    """`rows` (B, N, contiguous): s0 / s1 automatic, s4 / s6 / s8 as the spread tail; then
    H100_SPREAD_LOW_ROUND_ROWS in three rounds (h100_spread_rounds)."""
    _spread_rows(rows, (0, 1, 4, 6, 8), AUTO_SPREAD_VARIANTS, iters, copy_bw, only=spread_from(2))
    h100_spread_rounds(iters, copy_bw, H100_SPREAD_LOW_ROUND_ROWS)


# --spread-tail-confirm: the rule (decode_spread_tail_pieces), its PDL off, and the spread tail
# off (CLO_DECODE_SPREAD=0: the rule's count as an even grid), its band and both edges
SPREAD_TAIL_CONFIRM_ROWS = [(B, N, contiguous) for N in (1024, 2048, 4096) for B in (16, 17, 18, 19, 20, 21)
                            for contiguous in (False, True)]


def spread_tail_confirm_sweep(iters, copy_bw, rows=SPREAD_TAIL_CONFIRM_ROWS):
    """`rows` (B, N, contiguous): the automatic count with the spread tail on (PDL on, its
    default, and off) and off."""
    _spread_rows(rows, (0,), {"auto": {}, "nopdl": {"CLO_DECODE_PDL": "0"}, "off": {"CLO_DECODE_SPREAD": "0"}},
                 iters, copy_bw)

# --hbm3e-contig-192-top: that band's top at 2.5 (stop 63), automatic against 1-2 splits
HBM3E_CONTIG_192_TOP_ROWS = [(41, 4096, 8, 192, True, (0, 1, 2), 16), (41, 8192, 8, 192, True, (0, 1, 2), 16),
                             (42, 4096, 8, 192, True, (0, 1, 2), 16)]

# --spread-tail-wide: past the spread tail's band (1.27-1.45 units per SM, B=21-24): the
# automatic count, 1 split and 2 (the balanced schedule) against the spread tail in 2-4 pieces
# (at B=21-22 3 pieces leave every SM at most one piece; stop 63 tried only 4-16)
SPREAD_TAIL_WIDE_ROWS = [(B, N, contiguous) for N in (1024, 2048, 4096) for B in (21, 22, 23, 24)
                         for contiguous in (False, True)]


def spread_tail_wide_sweep(iters, copy_bw, rows=SPREAD_TAIL_WIDE_ROWS):
    """`rows` (B, N, contiguous): s0-s2 automatic, s2-s4 as the spread tail."""
    _spread_rows(rows, (0, 1, 2, 3, 4), AUTO_SPREAD_VARIANTS, iters, copy_bw,
                 only=lambda ns, label: ns >= 2 if label == "spread" else ns <= 2)


# --spread-tail-top: the paged band's new top (1.34 units per SM: B=21-22 at 3 pieces),
# automatic against the spread off (the count as an even grid) and 1 split, and its edge (B=23)
SPREAD_TAIL_TOP_ROWS = [(B, N, False) for N in (1024, 2048, 4096) for B in (21, 22, 23)]


def spread_tail_top_sweep(iters, copy_bw, rows=SPREAD_TAIL_TOP_ROWS):
    """`rows` (B, N, contiguous): s0 automatic and with the spread off, s1."""
    _spread_rows(rows, (0, 1), {"auto": {}, "off": {"CLO_DECODE_SPREAD": "0"}}, iters, copy_bw,
                 only=lambda ns, label: ns == 0 or label == "auto")


# --paged-box-rows: paged D=128 grids that trail their contiguous copy on the H200 (B=46/8K
# GQA 402 against 371 us, stop 64) at block sizes 8, 16, 32, 64 and 256 (8- to 64-row boxes:
# 32, 16, 8, 4 and 4 boxes per 64-key tile), and contiguous
PAGED_BOX_ROW_ROWS = [(B, N, Hkv, 128, contiguous, (0,), bs) for B, N, Hkv in ((46, 8192, 8), (16, 16384, 8), (64, 1024, 32))
                      for contiguous, bs in ((False, 16), (False, 64), (False, 256), (True, 16))]
PAGED_BOX_ROW_MORE_ROWS = [(B, N, Hkv, 128, False, (0,), bs) for B, N, Hkv in ((46, 8192, 8), (64, 1024, 32))
                           for bs in (8, 16, 32, 64)]


# --plane-boxes: one TMA box over every 64-column plane of its rows (CLO_DECODE_PLANE_BOXES=2)
# against a box per plane (0, into the plain planes layout), and the automatic choice
# (decode_row_boxes_pay): (B, N, Hkv, D, contiguous, splits, block_size)
PLANE_BOX_ROWS = ([(B, N, Hkv, 128, False, (0,), bs) for B, N, Hkv in ((46, 8192, 8), (64, 1024, 32))
                   for bs in (8, 16, 32, 64)]
                  + [(1, 16384, 8, 128, True, (0,), 16), (16, 16384, 8, 128, False, (0,), 16),
                     (4, 4096, 8, 128, True, (0,), 16)]
                  + [(16, 1024, 8, 128, False, (0,), 16), (1, 16384, 8, 128, False, (0,), 16),
                     (16, 4096, 32, 128, False, (0,), 16), (64, 4096, 8, 128, False, (0,), 16),
                     (17, 1024, 8, 128, False, (0,), 16), (64, 4096, 32, 128, True, (0,), 16),
                     (16, 1024, 8, 128, True, (0,), 16), (64, 2048, 8, 256, False, (0,), 16),
                     (64, 2048, 32, 64, False, (0,), 16), (64, 2048, 8, 192, False, (0,), 16)])


# --plane-boxes-confirm: the rule's edges (one block per SM and just past it) and two large grids
PLANE_BOX_CONFIRM_ROWS = [(16, 1024, 8, 128, False, (0,), 16), (1, 16384, 8, 128, False, (0,), 16),
                          (16, 1024, 8, 128, True, (0,), 16), (1, 16384, 8, 128, True, (0,), 16),
                          (16, 16384, 8, 128, False, (0,), 16), (17, 1024, 8, 128, False, (0,), 16),
                          (24, 2048, 8, 128, False, (0,), 16), (46, 8192, 8, 128, False, (0,), 16),
                          (64, 1024, 32, 128, False, (0,), 8)]


# --spread-tail-other: the spread tail's rule off the sweeps' GQA 32/8 block 16: MHA B=5 (160
# units; stop 62's counts 1 / 1 / 3) and GQA B=17 on block sizes 8 and 256
SPREAD_TAIL_OTHER_ROWS = [(5, N, 32, 128, False, (0, 1, 3), 16) for N in (1024, 2048, 4096)] \
    + [(17, 2048, 8, 128, False, (0, 1), bs) for bs in (8, 256)]


def split_band_sweep(iters, copy_bw, rows=D128_TAIL_SPLIT_ROWS, variants=None):
    """`rows`: auto / even 2 splits / TMA 3-4 stages (or `variants`) at each split count,
    cuDNN first (graph replays, cold L2)."""
    _layout_rows(rows, variants or {"auto": {}, "even": {"CLO_DECODE_STREAMK": "0"},
                                    "tma3": SWEEP_VARIANTS["tma3"], "tma4": SWEEP_VARIANTS["tma4"]},
                 iters, copy_bw)


def auto_split_sweep(rows):
    """A `SWEEPS` entry: `split_band_sweep` over `rows`, the automatic kernel at each count."""
    return lambda iters, copy_bw: split_band_sweep(iters, copy_bw, rows, {"auto": {}})


def plane_box_sweep(rows):
    """A `SWEEPS` entry: `split_band_sweep` over `rows`, automatic against a box per plane
    (CLO_DECODE_PLANE_BOXES=0) and one box over every plane (2)."""
    variants = {"auto": {}, "perplane": {"CLO_DECODE_PLANE_BOXES": "0"}, "span": {"CLO_DECODE_PLANE_BOXES": "2"}}
    return lambda iters, copy_bw: split_band_sweep(iters, copy_bw, rows, variants)


# --l2-promotion-check: the rule's exceptions and the FP8 caches, automatic against 256 B
L2_PROMOTION_CHECK_ROWS = [(64, 2048, 32, 192, False, (0,), 16), (64, 2048, 8, 192, False, (0,), 16),
                           (1, 16384, 8, 192, False, (0,), 16), (64, 4096, 32, 128, False, (0,), 16)]
L2_PROMOTION_FP8_ROWS = [(1, 16384, 8, 128), (16, 1024, 8, 128), (16, 4096, 8, 128), (64, 4096, 32, 128),
                         (64, 2048, 8, 64), (64, 2048, 8, 256)]


def l2_promotion_check_sweep(iters, copy_bw):
    """The automatic L2 promotion against 256 B (CLO_TMA_L2_PROMOTION=3) on 16-bit D=192
    rows and FP8 caches (and one 16-bit D=128 grid), cuDNN first on the 16-bit rows."""
    variants = {"auto": {}, "p256": {"CLO_TMA_L2_PROMOTION": "3"}}
    _layout_rows(L2_PROMOTION_CHECK_ROWS, variants, iters, copy_bw)
    for B, N, Hkv, D in L2_PROMOTION_FP8_ROWS:
        _fp8_sweep_row(B, N, Hkv, D, None, variants, iters, copy_bw)


# --d64-pair-tail: paged 16-bit D=64 at 2-3 blocks per SM, whose head pairs (the D=128
# kernel) hold 1-1.5 units per SM: (B, N, Hkv)
D64_PAIR_TAIL_ROWS = ([(B, 2048, 8) for B in (34, 36, 40, 44, 48)] + [(B, 4096, 8) for B in (36, 44)]
                      + [(B, 2048, 32) for B in (9, 10, 11)])


# --window-long: paged 16-bit D=80 / 96 GQA 32/8 at 2.8-3.05 units per SM reading 4096 keys:
# through a sliding window over tables of 16384 / 8192 keys, and a 4096-key table without
# one (the kernel choice read the table capacity, the split count the window): (D, B, N, window)
WINDOW_LONG_ROWS = [(D, B, N, w) for D in (80, 96) for B in (46, 48, 50)
                    for N, w in ((16384, 4096), (8192, 4096), (4096, 0))]


def window_long_sweep(iters, copy_bw):
    """Paged (block 16) 16-bit D=80 / 96 reading 4096 keys, windowed on long tables or not:
    the automatic choice (s0) and 1-2 splits, auto / cp.async / TMA 3 (unpaired), cuDNN on
    the window's keys first (graph replays, cold L2)."""
    variants = _unpaired_variants(("cp", "tma3"))
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for D, B, N, w in WINDOW_LONG_ROWS:
        case = cd.paged_case(B, N, 8, torch.float16, D=D, window=w)
        title = f"paged D={D} B={B} N={N} window={w} ({B * 8 / sms:.2f} units/SM)"
        _split_sweep_row(case, (0, 1, 2), variants, iters, copy_bw, title, peer="sdpa-cudnn",
                         **({"window_left": w - 1} if w else {}))


# --balanced-short: the balanced schedule (2 splits, 1.1-1.35 units per SM) where the keys
# read are fewer than the table's capacity: paged tables 4x the sequences' length (serving
# engines size them for the longest context), and sliding windows on contiguous caches;
# the same grids at full length first: (D, B, N, capacity, window, contiguous)
BALANCED_SHORT_ROWS = ([(D, B, N, c, 0, False) for D, B in ((128, 20), (128, 22), (256, 18))
                        for N in (2048, 4096) for c in (N, 4 * N)]
                       + [(128, B, 16384, 16384, w, True) for B in (20, 22) for w in (0, 4096)])


def balanced_short_sweep(iters, copy_bw):
    """16-bit GQA 32/8 at 1.1-1.35 units per SM reading fewer keys than the capacity (padded
    paged tables, windows): the heuristic's count (s0, the balanced schedule), 1 split, 2
    even splits (CLO_DECODE_STREAMK=0), cuDNN on the keys read first (graph replays, cold L2)."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for D, B, N, cap, w, contiguous in BALANCED_SHORT_ROWS:
        case = cd.paged_case(B, N, 8, torch.float16, D=D, window=w, capacity=cap)
        title = (f"{'contig' if contiguous else 'paged'} D={D} B={B} N={N} capacity={cap} window={w} "
                 f"({B * 8 / sms:.2f} units/SM)")
        kw = {"window_left": w - 1} if w else {}
        _split_sweep_row(case, (0, 1, 2), {"auto": {}}, iters, copy_bw, title, peer="sdpa-cudnn",
                         contiguous=contiguous, **kw)
        _split_sweep_row(case, (2,), {"even": {"CLO_DECODE_STREAMK": "0"}}, iters, copy_bw, title,
                         contiguous=contiguous, **kw)


# --bench-gap: grids where llm-speed bench read ours 5-10% slower than these sweeps did on
# the same keys (paged GQA B=16/16K, MHA B=64/1K; block 16)
BENCH_GAP_CASES = [(16, 16384, 8), (64, 1024, 32)]


def bench_gap_sweep(iters, copy_bw):
    """Ours and SDPA's backends on one input set each, timed as llm-speed bench times them
    (warm-up 10 replays, graph, cold L2, 100 replays), in an order that puts ours after each
    peer, with wall-clock stamps to line up against a clock/power log and the medians of
    the first and last quarter of the runs (a clock that falls during the timing): does
    the bench's order, its run count or its fresh allocation move ours?"""
    import datetime
    import time

    from cuda_llm_ops.timing import rotation_count
    order = ["ours", "sdpa-cudnn", "ours", "sdpa-efficient", "ours", "idle", "ours", "sdpa-cudnn", "fresh", "ours"]
    for B, N, Hkv in BENCH_GAP_CASES:
        case = cd.paged_case(B, N, Hkv, torch.float16)
        impls = {i.name: i for i in case.impls}
        impls["ours"] = impls.pop("cuda_llm_ops")
        sets = [case.make_inputs() for _ in range(rotation_count(case.bytes))]
        print(f"gap B={B} N={N} Hkv={Hkv} (sets {len(sets)})", flush=True)
        for step in order:
            stamp = datetime.datetime.now().strftime("%H:%M:%S.%f")[:-3]
            if step == "idle":
                torch.cuda.synchronize()
                time.sleep(2.0)
                print(f"  [{stamp}] idle 2 s", flush=True)
                continue
            if step == "fresh":  # new input sets, allocated after every peer's contiguous copy
                del sets
                sets = [case.make_inputs() for _ in range(rotation_count(case.bytes))]
                print(f"  [{stamp}] fresh inputs", flush=True)
                continue
            impl = impls[step]
            why = impl.unavailable(sets[0]) if impl.unavailable else None  # also picks SDPA's GQA mode
            if why:
                print(f"  [{stamp}] {step} unavailable: {why}", flush=True)
                continue
            with (impl.scope() if impl.scope is not None else contextlib.nullcontext()):
                fns = [impl.build(inp) for inp in sets]
                fns[0]()
                t = benchmark(None, warmup=10, iterations=max(iters, 100), cold_l2=True, cuda_graph=True,
                              fn_sets=fns)
            del fns
            if step.startswith("sdpa"):
                for inp in sets:
                    inp.pop("_contig", None)
                torch.cuda.empty_cache()
            q = max(1, len(t.times) // 4)
            first, last = sorted(t.times[:q])[q // 2], sorted(t.times[-q:])[q // 2]
            print(f"  [{stamp}] {step} {t.median_ms * 1e3:.1f}us "
                  f"{100 * case.bytes / (t.median_ms * 1e-3) / 1e12 / copy_bw:.1f}% "
                  f"(first / last quarter {first * 1e3:.1f} / {last * 1e3:.1f})", flush=True)
        del sets
        torch.cuda.empty_cache()


# --partial-wave: 16-bit D=128 at 0.5-0.97 units per SM (decode_partial_wave_splits), GQA
# 32/8 and MHA, paged and contiguous, automatic against 1-3 splits
PARTIAL_WAVE_ROWS = ([(b, n, 8, 128, False, (0, 1, 2, 3), 16) for b, n in
                      ((9, 4096), (10, 16384), (11, 2048), (12, 2048), (12, 4096), (14, 4096), (14, 16384),
                       (15, 8192), (12, 1024))]
                     + [(b, n, 8, 128, True, (0, 1, 2, 3), 16) for b, n in ((10, 16384), (12, 4096), (14, 4096))]
                     + [(3, 4096, 32, 128, False, (0, 1, 2, 3), 16)])
# --sustained: (B, N, Hkv, block size) at the power cap
SUSTAINED_ROWS = [(16, 16384, 8, 16), (64, 1024, 32, 16), (46, 8192, 8, 16)]
# ours' variants there: (label, split count, dev knobs)
SUSTAINED_VARIANTS = [("s0", 0, {}), ("s2", 2, {}), ("tma4", 0, SWEEP_VARIANTS["tma4"]),
                      ("tma2", 0, SWEEP_VARIANTS["tma2"])]
# --sustained-splits: one unit per SM or less (1 split, 4 stages) and 2.8 (B=46/8K), cool
# and at the cap
SUSTAINED_SPLIT_ROWS = [(16, 1024, 8, 16), (12, 4096, 8, 16), (16, 4096, 8, 16), (16, 16384, 8, 16),
                        (10, 16384, 8, 16), (46, 8192, 8, 16)]
SUSTAINED_SPLIT_VARIANTS = [("s0", 0, {}), ("s2", 2, {}), ("s3", 3, {}), ("tma4", 0, SWEEP_VARIANTS["tma4"])]


def sustained_sweep(iters, copy_bw, rows=SUSTAINED_ROWS, variants=SUSTAINED_VARIANTS, warm_ms=1000.0, rounds=2,
                    cool_s=0.0):
    """cuDNN and ours' variants, each timed after `warm_ms` of its own back-to-back calls
    (graph replays, cold L2): at an H200's 700 W cap a long decode stream drops the SM
    clock (1.1-1.9 GHz), so each is read at the clock it sustains; `rounds` interleaved
    rounds, stamped to line up against a clock/power log. `cool_s` > 0: instead, each
    timing after that long idle (the power's average falls, the clock is back at its top)
    and 3 warm-up replays only: the cool GPU the other sweeps read."""
    import datetime
    import time

    from cuda_llm_ops.timing import rotation_count
    mode = f"{cool_s:.1f} s idle" if cool_s > 0 else f"{warm_ms:.0f} ms warm"

    def timed(fns):
        if cool_s > 0:
            torch.cuda.synchronize()
            time.sleep(cool_s)
        return benchmark(None, warmup=3, iterations=max(iters, 30), cold_l2=True, cuda_graph=True, fn_sets=fns,
                         warmup_ms=0.0 if cool_s > 0 else warm_ms)

    for B, N, Hkv, bs, *extra in rows:
        contiguous = bool(extra and extra[0])  # a fifth field True: decode_attention on the same keys
        nq = extra[1] if len(extra) > 1 else 1  # a sixth: new tokens (causal on both layouts)
        case = cd.paged_case(B, N, Hkv, torch.float16, block_size=bs, Nq=nq)
        peer = next(i for i in case.impls if i.name == "sdpa-cudnn")
        sets = [case.make_inputs() for _ in range(rotation_count(case.bytes))]
        why = peer.unavailable(sets[0]) if peer.unavailable else None  # also picks SDPA's GQA mode
        results: dict[str, list[str]] = {}
        for r in range(rounds):
            for label, ns, env in [("cudnn", None, None)] + variants:
                stamp = datetime.datetime.now().strftime("%H:%M:%S")
                if ns is None:
                    if why:
                        results.setdefault(label, []).append("unavailable")
                        continue
                    with peer.scope():
                        fns = [peer.build(inp) for inp in sets]
                        t = timed(fns)
                else:
                    set_knobs(env)
                    fns = _split_fns(sets, ns, contiguous=contiguous)
                    t = timed(fns)
                    set_knobs({})
                del fns
                results.setdefault(label, []).append(f"{t.median_ms * 1e3:.1f}@{stamp}")
        print(f"sustained {'contig' if contiguous else 'paged'} B={B} N={N} Hkv={Hkv} bs={bs} Nq={nq} "
              f"(sets {len(sets)}, {mode}) | "
              + " | ".join(f"{k} {' / '.join(v)}" for k, v in results.items()), flush=True)
        del sets
        torch.cuda.empty_cache()


# --wave-top: paged D=128 GQA past the second-wave band's top (2.5 units per SM), where the
# cool GPU read B=46/8K (2.79) at 1 split 371.0 us, 2 splits 348.7, TMA 4 stages 348.1 (cuDNN
# 361.5; stop 65): 1-2 splits at the automatic depth and at 4 stages, cool, then at the cap
WAVE_TOP_ROWS = [(b, n, 8, 128, False, (1, 2), 16) for n in (4096, 16384) for b in (42, 46, 50, 56, 64)]
WAVE_TOP_VARIANTS = {"auto": {}, "tma4": SWEEP_VARIANTS["tma4"]}
# --contig-partial-wave: contiguous D=128 at 0.5-0.9 units per SM (the paged rule's band;
# contiguous B=10/16K gained 173.8 -> 157.2 us at 2 splits, B=12/4K lost 48.9 -> 51.8)
CONTIG_PARTIAL_WAVE_ROWS = [(b, n, 8, 128, True, (1, 2, 3), 16)
                            for b, n in ((9, 4096), (9, 16384), (10, 4096), (10, 16384), (11, 8192), (12, 16384),
                                         (14, 16384))]

# --wave-top-confirm: stop 66's rules at their edges, the automatic count (0) against 1-3
# splits: paged 2.67-2.91 units per SM at 2048 and 8192 keys (2 splits to 2.85), contiguous
# past 2.5 (not a rule: measured here first), contiguous partial waves at 2048 keys and 0.73
WAVE_TOP_CONFIRM_ROWS = ([(b, n, 8, 128, False, (0, 1, 2, 3), 16) for n in (2048, 8192) for b in (44, 47, 48)]
                         + [(b, n, 8, 128, True, (0, 1, 2, 3), 16) for n in (4096, 16384) for b in (42, 46, 50)]
                         + [(9, 2048, 8, 128, True, (0, 1, 2, 3), 16), (11, 2048, 8, 128, True, (0, 1, 2, 3), 16),
                            (12, 4096, 8, 128, True, (0, 1, 2), 16), (9, 4096, 8, 128, True, (0, 1, 3), 16),
                            (11, 8192, 8, 128, True, (0, 1, 3), 16)])

# --one-wave-long: paged D=128 GQA at 0.91-0.97 units per SM (B=15-16), where 2 splits read
# level cool and kept ours with cuDNN at the cap at 16K keys (stop 65: B=16/16K cool 245.2 /
# 242.5, at the cap 265.6 / 248.1) but lost at 1K-4K cool: 1 and 2 splits, cool then at the cap
ONE_WAVE_LONG_ROWS = [(b, n, 8, 16) for b in (15, 16) for n in (4096, 8192, 16384)]
SPLITS_1_2_VARIANTS = [("s1", 1, {}), ("s2", 2, {})]

# --wave-top-edge: past the wave top's 2.85 (B=48 2.91, B=49 2.97: paged B=48/8K read 2 splits
# 370.0 against 1 split's 383.6 twice) on both layouts at 4K and 16K, and contiguous B=15-16 at
# 8K-16K (the paged 0.9-1.0 band's rows), cool then at the cap
WAVE_TOP_EDGE_ROWS = [(b, n, 8, 128, contiguous, (0, 1, 2), 16) for contiguous in (False, True)
                      for b, n in ((48, 4096), (48, 16384), (49, 4096), (49, 16384))]
ONE_WAVE_LONG_CONTIG_ROWS = [(b, n, 8, 128, True, (0, 1, 2), 16) for b in (15, 16) for n in (8192, 16384)]
# --bands-next: stop 66's open questions. Contiguous at the wave top and at 0.91-0.97 under the
# cap (the rules were swept cool there: 1 / 2 splits), then Nq 2 and 4 (speculative rows, one
# row tile at GQA 32/8) in the three new bands, where the rules keep 1 split unmeasured:
# (B, N, Nq, contiguous)
BANDS_NEXT_CAP_ROWS = [(42, 16384, 8, 16, True), (48, 4096, 8, 16, True), (16, 16384, 8, 16, True),
                       (15, 8192, 8, 16, True)]
BANDS_NEXT_NQ_ROWS = [(b, n, nq, contiguous) for nq in (2, 4) for contiguous in (False, True)
                      for b, n in ((10, 16384), (16, 16384), (42, 16384), (48, 4096))]


def _nq_rows(rows, splits, iters, copy_bw, variants=None, only=None, hkv=8):
    """`_split_sweep_row` over D=128 Hq 32 / `hkv` block-16 rows (B, N, Nq, contiguous) at
    `splits`, cuDNN first (with its causal mask where SDPA runs it, for Nq > 1)."""
    for B, N, Nq, contiguous in rows:
        _split_sweep_row(cd.paged_case(B, N, hkv, torch.float16, D=128, block_size=16, Nq=Nq), splits,
                         variants or {"auto": {}}, iters, copy_bw,
                         f"{'contig' if contiguous else 'paged'} D=128 B={B} N={N} Hkv={hkv} Nq={Nq}",
                         peer="sdpa-cudnn", contiguous=contiguous, only=only)


def _nq_rows_each(rows, iters, copy_bw):
    """`_nq_rows` over (row, splits) pairs, each row at its own splits."""
    for row, splits in rows:
        _nq_rows([row], splits, iters, copy_bw)


def bands_next_sweep(iters, copy_bw):
    """BANDS_NEXT_CAP_ROWS at the cap (two rounds, 600 ms warm: 1 and 2 splits), then
    BANDS_NEXT_NQ_ROWS at 0-3 splits (graph replays, cold L2)."""
    sustained_sweep(iters, copy_bw, BANDS_NEXT_CAP_ROWS, SPLITS_1_2_VARIANTS, warm_ms=600.0, rounds=2)
    _nq_rows(BANDS_NEXT_NQ_ROWS, (0, 1, 2, 3), iters, copy_bw)


# --nq-rules: `--bands-next` (stop 67) read Nq 2 and 4 (8 and 16 rows: one row tile) like one
# token in the partial wave (B=10/16K paged Nq 2 1 / 2 / 3 splits 243.7 / 165.5 / 164.3) and the
# wave top at 16K (B=42 722.6 / 642.3 / 628.8), but Nq 4 at B=48/4K (2.91) 196.5 / 198.9: the
# edges of those bands and the one-tail band (1.1-1.35 units per SM: the balanced 2 splits for
# Nq > 1, 1 split or the spread tail for one token) at Nq 2 and 4; one token at 3 splits on the
# paged wave top's low end (contiguous B=42/16K read 3 splits ahead of 2: 628.2 / 637.7)
NQ_PARTIAL_WAVE_ROWS = [(b, n, nq, contiguous) for nq in (2, 4) for b, n, contiguous in
                        ((9, 2048, False), (12, 4096, False), (15, 4096, False), (16, 8192, False),
                         (12, 16384, False), (9, 4096, True), (11, 8192, True), (12, 16384, True))]
NQ_WAVE_TOP_ROWS = [(b, n, nq, contiguous) for nq in (2, 4) for b, n, contiguous in
                    ((42, 4096, False), (46, 4096, False), (49, 4096, False), (44, 8192, False), (48, 8192, False),
                     (46, 16384, False), (48, 16384, False), (50, 16384, False), (42, 4096, True),
                     (46, 16384, True), (48, 16384, True))]
NQ_ONE_TAIL_ROWS = [(b, n, nq, contiguous) for nq in (2, 4) for contiguous in (False, True)
                    for b, n in ((17, 2048), (17, 4096), (20, 4096), (22, 4096))]
ONE_TOKEN_WAVE_TOP_LOW_ROWS = [(42, 4096, 1, False), (42, 8192, 1, False), (42, 16384, 1, False),
                               (44, 16384, 1, False), (46, 16384, 1, False), (44, 4096, 1, True)]


def nq_rules_sweep(iters, copy_bw):
    """NQ_PARTIAL_WAVE_ROWS and NQ_WAVE_TOP_ROWS at 0-3 splits, NQ_ONE_TAIL_ROWS at 0-3 splits
    and as the spread tail in 3-8 pieces (CLO_DECODE_SPREAD=1), ONE_TOKEN_WAVE_TOP_LOW_ROWS at
    0, 2 and 3 splits (graph replays, cold L2, cuDNN first)."""
    _nq_rows(NQ_PARTIAL_WAVE_ROWS + NQ_WAVE_TOP_ROWS, (0, 1, 2, 3), iters, copy_bw)
    _nq_rows(NQ_ONE_TAIL_ROWS, (0, 1, 3, 4, 8), iters, copy_bw,
             AUTO_SPREAD_VARIANTS, only=lambda ns, label: ns <= 3 if label == "auto" else ns >= 3)
    _nq_rows(ONE_TOKEN_WAVE_TOP_LOW_ROWS, (0, 2, 3), iters, copy_bw)


# --nq-confirm: stop 67's changes. Contiguous Nq 2 and 4 on at most one block per SM now run
# TMA 3 stages (the cp.async kernel before; 4 stages the other candidate), at 0 (automatic) and
# 1 split; the rules' new edges at Nq 2 and 4 and one token, automatic against the neighbours;
# at the cap the wave top's 3 splits (one token) and the paged partial wave's 8192-key top
# at Nq 4 (cool: B=16/8K 127.3 at 1 split, 130.3 at 2)
NQ_CONTIG_SMALL_ROWS = [(b, n, nq, True) for nq in (2, 4)
                        for b, n in ((1, 16384), (4, 4096), (8, 8192), (16, 1024), (16, 4096), (16, 16384),
                                     (12, 16384))]
NQ_CONFIRM_ROWS = [((45, 4096, 4, False), (0, 1, 2)), ((46, 4096, 4, False), (0, 1, 2)),
                   ((49, 4096, 2, False), (0, 1, 2)), ((43, 8192, 1, False), (0, 2, 3)),
                   ((44, 16384, 1, True), (0, 2, 3)), ((44, 8192, 2, True), (0, 2, 3)),
                   ((20, 4096, 2, False), (0, 1, 2)), ((17, 4096, 4, True), (0, 1, 2)),
                   ((22, 4096, 4, False), (0, 1, 2)), ((12, 16384, 2, True), (0, 1, 2))]
NQ_CONFIRM_CAP_ROWS = [(42, 16384, 8, 16), (44, 16384, 8, 16)]
NQ_CONFIRM_CAP_NQ_ROWS = [(16, 8192, 8, 16, False, 4), (16, 16384, 8, 16, False, 4)]


def nq_confirm_sweep(iters, copy_bw):
    """NQ_CONTIG_SMALL_ROWS automatic / cp.async / TMA 4 stages; NQ_CONFIRM_ROWS at their
    splits; then at the cap (two rounds, 600 ms warm) NQ_CONFIRM_CAP_ROWS at 2 and 3 splits,
    NQ_CONFIRM_CAP_NQ_ROWS at 1 and 2."""
    _nq_rows(NQ_CONTIG_SMALL_ROWS, (0, 1), iters, copy_bw,
             {"auto": {}, "cp": SWEEP_VARIANTS["cp"], "tma4": SWEEP_VARIANTS["tma4"]})
    _nq_rows_each(NQ_CONFIRM_ROWS, iters, copy_bw)
    sustained_sweep(iters, copy_bw, NQ_CONFIRM_CAP_ROWS, [("s2", 2, {}), ("s3", 3, {})], warm_ms=600.0, rounds=2)
    sustained_sweep(iters, copy_bw, NQ_CONFIRM_CAP_NQ_ROWS, SPLITS_1_2_VARIANTS, warm_ms=600.0, rounds=2)


# --nq-next: stop 67's open questions. Paged Nq 2 and 4 on small grids at TMA 4 stages (lost
# at v25, B=16/4K Nq 4 67.2 -> 74.2 us; the kernel changed since) against the automatic 3; Nq 8
# (32 rows at GQA 32/8: two row tiles, the HBM3e rules off) at the partial wave's and the wave
# top's unit counts (B=5: 0.61 units per SM, B=21: 2.55; B=8: 0.97)
NQ_PAGED_SMALL_ROWS = [(b, n, nq, False) for nq in (2, 4) for b, n in ((1, 16384), (16, 4096), (8, 8192),
                                                                       (16, 16384))]
NQ8_ROWS = [(b, n, 8, contiguous) for contiguous in (False, True) for b, n in ((5, 16384), (8, 16384), (21, 16384))]


def nq_next_sweep(iters, copy_bw):
    """NQ_PAGED_SMALL_ROWS automatic / TMA 4 at 0 and 1 split; NQ8_ROWS at 0-3 splits."""
    _nq_rows(NQ_PAGED_SMALL_ROWS, (0, 1), iters, copy_bw, {"auto": {}, "tma4": SWEEP_VARIANTS["tma4"]})
    _nq_rows(NQ8_ROWS, (0, 1, 2, 3), iters, copy_bw)


# --nq-tiles: stop 68 (run at 1fb4c8e, before its rules; "auto" is that tree's count). Units of
# more than one row tile (Nq 8: 32 rows at GQA 32/8, two tiles; Nq 16: four), where the HBM3e
# D = 128 rules were off (`--nq-next`: B=5/16K paged 1 / 3 splits 246.7 / 103.8, B=8/16K 245.1 /
# 156.8 at 2, B=21/16K 507.5 / 466.7 at 2), across the bands: the partial wave (Nq 8 B=5-8:
# 0.61-0.97 units per SM), the one-tail band (B=9-11: 1.09-1.33; 0 there ran the H100's balanced
# 2 splits), the second wave (B=13 1.58, B=17 2.06, B=19 2.3) and the wave top (B=21-24:
# 2.55-2.91); then paged Nq 2, 4 and 8 small grids at TMA 3 (that tree's automatic) and 4, twice
NQ_TILES_PARTIAL_ROWS = [(b, n, 8, False) for b, n in ((5, 4096), (7, 4096), (8, 4096), (6, 2048), (7, 16384),
                                                       (8, 8192))] + \
                        [(b, n, 8, True) for b, n in ((5, 4096), (6, 16384), (7, 16384), (8, 4096))] + \
                        [(3, 16384, 16, False), (3, 16384, 16, True), (4, 8192, 16, False)]
NQ_TILES_ONE_TAIL_ROWS = [(b, n, 8, False) for b, n in ((9, 4096), (10, 4096), (11, 4096), (10, 2048), (10, 16384))] + \
                         [(10, 4096, 8, True), (9, 16384, 8, True)]
NQ_TILES_WAVE_ROWS = [(b, n, 8, False) for b, n in ((13, 4096), (17, 16384), (19, 4096), (21, 4096), (22, 8192),
                                                    (23, 4096), (23, 16384), (24, 4096), (24, 16384))] + \
                     [(22, 16384, 8, True), (24, 4096, 8, True), (10, 4096, 16, False)]
NQ_TILES_SMALL_ROWS = [(b, n, nq, False) for nq, b, n in ((2, 16, 4096), (4, 16, 4096), (4, 1, 16384), (4, 8, 8192),
                                                          (8, 1, 16384), (8, 4, 4096), (8, 2, 16384))]


def nq_tiles_sweep(iters, copy_bw):
    """NQ_TILES_PARTIAL_ROWS and NQ_TILES_WAVE_ROWS at 0-3 splits, NQ_TILES_ONE_TAIL_ROWS at
    0, 1, 3 and as the spread tail in 4 and 8 pieces (CLO_DECODE_SPREAD=1); NQ_TILES_SMALL_ROWS
    automatic / TMA 4 stages at 0 splits, two rounds (graph replays, cold L2, cuDNN first)."""
    _nq_rows(NQ_TILES_PARTIAL_ROWS + NQ_TILES_WAVE_ROWS, (0, 1, 2, 3), iters, copy_bw)
    _nq_rows(NQ_TILES_ONE_TAIL_ROWS, (0, 1, 3, 4, 8), iters, copy_bw,
             AUTO_SPREAD_VARIANTS, only=spread_from(4))
    for _ in range(2):
        _nq_rows(NQ_TILES_SMALL_ROWS, (0,), iters, copy_bw, {"auto": {}, "tma4": SWEEP_VARIANTS["tma4"]})


# --nq-tiles-confirm: stop 68's rules for units of more than one row tile (decode_rule_multi_tile)
# at their edges, automatic (0) against the neighbours (1-3 even splits; spread: the spread tail
# in that many pieces); Nq 16 (four tiles) in the one-tail band and the wave top, measured only
# in the partial wave by `--nq-tiles`; paged Nq 4 small grids, now at 4 TMA stages, against 3
NQ_TILES_CONFIRM_ROWS = [((8, 4096, 8, False), (0, 1), None), ((8, 4096, 8, True), (0, 1), None),
                         ((11, 4096, 8, False), (0, 1, 3, 4), AUTO_SPREAD_VARIANTS),
                         ((9, 2048, 8, False), (0, 1, 8), AUTO_SPREAD_VARIANTS),
                         ((10, 16384, 8, True), (0, 1, 3), None),
                         ((24, 8192, 8, False), (0, 2), None), ((23, 8192, 8, False), (0, 1, 3), None),
                         ((23, 4096, 8, True), (0, 1), None),
                         ((5, 4096, 16, False), (0, 1, 2, 3), None), ((5, 4096, 16, True), (0, 1, 2), None),
                         ((11, 4096, 16, False), (0, 1, 3), None), ((11, 16384, 16, False), (0, 1, 3), None),
                         ((4, 4096, 16, False), (0, 1), None)]
NQ_SMALL_CONFIRM_ROWS = [(16, 4096, 4, False), (1, 16384, 4, False), (2, 16384, 8, False)]


def nq_tiles_confirm_sweep(iters, copy_bw):
    """NQ_TILES_CONFIRM_ROWS at their splits (the spread tail only at 4+ pieces); then
    NQ_SMALL_CONFIRM_ROWS automatic / TMA 3 stages (graph replays, cold L2, cuDNN first)."""
    for row, splits, variants in NQ_TILES_CONFIRM_ROWS:
        only = spread_from(4) if variants else None
        _nq_rows([row], splits, iters, copy_bw, variants, only=only)
    _nq_rows(NQ_SMALL_CONFIRM_ROWS, (0,), iters, copy_bw, {"auto": {}, "tma3": SWEEP_VARIANTS["tma3"]})


# --nq-small-splits: units of more than one row tile on small grids (at most half the SMs' units),
# where the count is SMs / units (one block per SM; bench B=1/16K Nq 8 paged 40.5 us, 34.6% of
# the roofline, contiguous 32.3): 1.5 and 2 blocks per SM against it
NQ_SMALL_SPLIT_ROWS = [((b, n, nq, contiguous), splits) for contiguous in (False, True)
                       for b, n, nq, splits in ((1, 16384, 8, (0, 12, 16)), (2, 16384, 8, (0, 6, 8)),
                                                (4, 4096, 8, (0, 3, 4)), (1, 16384, 16, (0, 6, 8)),
                                                (2, 8192, 16, (0, 3, 4)))]


# --mqa-tiles: one new token whose group spans two row tiles (Hq 32 / Hkv 1: 32 rows, units =
# 2 B), which ran one tile's rules until e80064e (decode_rule_spec_rows read one token as 0),
# against the counts stop 68 gave Nq 8's two-tile units: (B, N, contiguous, splits)
MQA_TILES_ROWS = [(8, 16384, False, (0, 16)), (8, 16384, True, (0, 16)), (40, 4096, False, (0, 1, 2, 3)),
                  (64, 4096, False, (0, 2)), (48, 16384, True, (0, 2)), (80, 4096, False, (0, 1, 3, 4)),
                  (80, 4096, True, (0, 4))]


def mqa_tiles_sweep(iters, copy_bw):
    """MQA_TILES_ROWS (`_nq_rows` at Hkv 1, one token; 4 splits as the spread tail:
    CLO_DECODE_SPREAD=1) (graph replays, cold L2, cuDNN first)."""
    for B, N, contiguous, splits in MQA_TILES_ROWS:
        _nq_rows([(B, N, 1, contiguous)], splits, iters, copy_bw, AUTO_SPREAD_VARIANTS,
                 only=lambda ns, label: label == "auto" if ns != 4 else label == "spread", hkv=1)


# --wide-rows: two 16-row tiles per block (CLO_DECODE_WIDE_ROWS=1, stop 69) against the 16-row
# blocks at their automatic count: Nq 8 at GQA 32/8 and one token at Hq 32 / Hkv 1 (32 rows
# per KV head, units of 32 rows = B x Hkv), (B, N, Nq, contiguous, Hkv, wide split counts)
WIDE_ROWS_ROWS = [(1, 16384, 8, False, 8, (8, 16)), (1, 16384, 8, True, 8, (8, 16)), (2, 16384, 8, False, 8, (4, 8)),
                  (4, 16384, 8, False, 8, (2, 4)), (8, 16384, 8, False, 8, (1, 2)), (8, 16384, 8, True, 8, (1, 2)),
                  (10, 4096, 8, False, 8, (1, 2)), (16, 4096, 8, False, 8, (1, 2)), (21, 16384, 8, False, 8, (1, 2)),
                  (21, 16384, 8, True, 8, (1, 2)), (33, 4096, 8, False, 8, (1, 2)),
                  (8, 16384, 1, False, 1, (8, 16)), (48, 16384, 1, True, 1, (2, 3)), (64, 4096, 1, False, 1, (1, 2)),
                  (80, 4096, 1, False, 1, (1, 2))]
WIDE_ROWS_VARIANTS = {"narrow": {"CLO_DECODE_WIDE_ROWS": "0"}, "wide": {"CLO_DECODE_WIDE_ROWS": "1"},
                      "wide3": {"CLO_DECODE_WIDE_ROWS": "1", "CLO_DECODE_TMA_STAGES": "3"}}


def _wide_rows_rows(rows, variants, at_auto, iters, copy_bw):
    """`_nq_rows` over (B, N, Nq, contiguous, Hkv, split counts) rows (graph replays, cold L2,
    cuDNN first): the `variants` labelled in `at_auto` at the automatic count, the others at
    the row's counts."""
    for B, N, nq, contiguous, hkv, splits in rows:
        _nq_rows([(B, N, nq, contiguous)], (0,) + splits, iters, copy_bw, variants,
                 only=lambda ns, label: (label in at_auto) == (ns == 0), hkv=hkv)


def wide_rows_sweep(iters, copy_bw):
    """WIDE_ROWS_ROWS: the 16-row blocks at the automatic count, two row tiles per block at
    each row's counts (the automatic depth, and 3 stages)."""
    _wide_rows_rows(WIDE_ROWS_ROWS, WIDE_ROWS_VARIANTS, ("narrow",), iters, copy_bw)


# --wide-rows-confirm: the automatic choice (decode_wide_rows_splits) against the 16-row blocks
# (CLO_DECODE_WIDE_ROWS=0, their count) at the rule's edges and at rows `--wide-rows` did not
# read: 0.73 of the SMs (Nq 8 B=6/16K, B=12/4K), 1.52 and 1.82 units per SM (rule off: the
# 16-row blocks), 1.27 at 4K, 1.82 at 1 split, Nq 16 (64 rows: two 32-row units per KV head),
# 1024-2048 keys, MQA at 0.76 and 0.5, contiguous 1 and 2 units per SM: (B, N, Nq, contiguous,
# Hkv, other wide split counts)
WIDE_ROWS_CONFIRM_ROWS = [(6, 16384, 8, False, 8, (3,)), (12, 4096, 8, False, 8, (2,)),
                          (25, 8192, 8, False, 8, (1, 2, 3)), (21, 4096, 8, False, 8, (1,)),
                          (30, 4096, 8, False, 8, (2,)), (4, 16384, 16, False, 8, ()), (8, 4096, 16, False, 8, ()),
                          (16, 1024, 8, False, 8, ()), (1, 2048, 8, False, 8, ()),
                          (100, 4096, 1, False, 1, (2,)), (66, 8192, 1, False, 1, ()),
                          (16, 4096, 8, True, 8, ()), (33, 4096, 8, True, 8, ())]
WIDE_ROWS_CONFIRM_VARIANTS = {"auto": {}, "narrow": {"CLO_DECODE_WIDE_ROWS": "0"},
                              "wide": {"CLO_DECODE_WIDE_ROWS": "1"}}


def auto_narrow_rows_sweep(rows, variants=WIDE_ROWS_CONFIRM_VARIANTS):
    """A `SWEEPS` entry: `_wide_rows_rows` over `rows`, the automatic call and the 16-row blocks
    at their counts, the other `variants` (two row tiles per block, by default) at each row's."""
    def sweep(iters, copy_bw):
        _wide_rows_rows(rows, variants, ("auto", "narrow"), iters, copy_bw)
    return sweep


# --wide-rows-partial: units of 20-28 rows (Nq 5-7 at GQA 32/8: the second tile part empty),
# which decode_wide_rows_splits takes as 32-row units without a measurement of their own:
# (B, N, Nq, contiguous)
WIDE_ROWS_PARTIAL_ROWS = [(8, 16384, nq, False) for nq in (5, 6, 7)] + [(21, 16384, 6, False), (16, 4096, 7, True)]


def wide_rows_partial_sweep(iters, copy_bw):
    """WIDE_ROWS_PARTIAL_ROWS (`_nq_rows`, cuDNN first): the automatic choice against the
    16-row blocks at their count."""
    _nq_rows(WIDE_ROWS_PARTIAL_ROWS, (0,), iters, copy_bw,
             {"auto": {}, "narrow": {"CLO_DECODE_WIDE_ROWS": "0"}})


# --wide-rows-h100 (stop 99): the two-row-tile rule at head_dim 128 on a non-HBM3e sm_90 part
# (the H100: the HBM3e counts, the band's 2 splits as an even grid, 3 stages) against the 16-row
# blocks (CLO_DECODE_WIDE_ROWS=0, their own count), and in the 1-1.35 band the balanced 2 splits
# (CLO_DECODE_WIDE_ROWS=3; the H100's rule since stop 100); rows of `--wide-rows` and `--wide-rows-confirm`
# and the balanced band's (B, N, Nq, contiguous, Hkv, counts for "bal")
WIDE_ROWS_H100_ROWS = ([(b, 16384, 8, c, 8, ()) for b in (1, 2, 4, 8) for c in (False, True)]
                       + [(b, n, 8, False, 8, (2,) if 8 * b > 132 and 100 * 8 * b <= 135 * 132 else ())
                          for b, n in ((16, 4096), (17, 4096), (21, 4096), (21, 16384), (22, 4096), (25, 8192),
                                       (33, 4096))]
                       + [(21, 16384, 8, True, 8, (2,)), (16, 4096, 5, False, 8, ()), (17, 4096, 5, False, 8, (2,))]
                       + [(b, n, 1, c, 1, (2,) if 132 < b <= 178 and n >= 2048 else ())
                          for b, n, c in ((8, 16384, False), (64, 4096, False), (66, 8192, False), (136, 2048, False),
                                          (150, 4096, False), (170, 4096, False), (200, 4096, False),
                                          (150, 4096, True))])
WIDE_ROWS_H100_VARIANTS = {"auto": {}, "narrow": {"CLO_DECODE_WIDE_ROWS": "0"}, "bal": {"CLO_DECODE_WIDE_ROWS": "3"}}


# --wide-rows-h100-fill (stop 100): on a non-HBM3e sm_90 part, two row tiles per block (even
# grid) at other counts where the rule leaves a wave under 90% full (the 16-row rules run) and
# where one token at Hq 32 / Hkv 1 trails cuDNN (B=64/4K 2 splits, B=66/8K 2, B=200/4K 1,
# B=8/16K 16): (B, N, Nq, contiguous, Hkv, wide counts)
WIDE_ROWS_H100_FILL_ROWS = [(6, 16384, 8, False, 8, (2, 3)), (10, 4096, 8, False, 8, (1, 2)),
                            (12, 4096, 8, False, 8, (1, 2)), (10, 16384, 8, False, 8, (1, 2)),
                            (48, 16384, 1, True, 1, (2, 3)), (48, 16384, 1, False, 1, (2, 3)),
                            (80, 4096, 1, False, 1, (1, 2)), (100, 4096, 1, False, 1, (1, 2)),
                            (64, 4096, 1, False, 1, (3, 4)), (66, 8192, 1, False, 1, (3, 4)),
                            (200, 4096, 1, False, 1, (2, 3)), (8, 16384, 1, False, 1, (8, 24, 32))]


# --wide-rows-h100-fill-confirm (stop 100): the 70% fill (non-HBM3e sm_90) at fills and lengths
# --wide-rows-h100-fill did not read: Nq 8 B=7/16K (85% at 2), B=14/4K (85% at 1), B=12/1K (73%
# at 1, 1024 keys), B=12/16K (73% at 1); one token at Hq 32 / Hkv 1 B=35/16K (80% at 3),
# B=110/4K (83% at 1), B=23/16K (87% at 5), B=100/2K (76% at 1); 61% stays 16-row (B=10/8K)
WIDE_ROWS_H100_FILL_CONFIRM_ROWS = [(7, 16384, 8, False, 8, ()), (14, 4096, 8, False, 8, ()),
                                    (12, 1024, 8, False, 8, ()), (12, 16384, 8, False, 8, ()),
                                    (12, 16384, 8, True, 8, ()), (35, 16384, 1, False, 1, ()),
                                    (110, 4096, 1, False, 1, ()), (23, 16384, 1, False, 1, ()),
                                    (100, 2048, 1, False, 1, ()), (10, 8192, 8, False, 8, (1,))]


# --h100-mqa-rate (stop 100, for the next H100 run): one token at Hq 32 / Hkv 1 (32-row units)
# at 0.5-1.5 units per SM, where two row tiles per block run at their count but trail cuDNN
# by 1-9% and other counts do not help (`--wide-rows-h100-fill`): the automatic call against
# each knob that moves the per-block rate or the fixed cost, at the automatic count: the merge
# as its own kernel, PDL off, 2 and 4 stages, L2 promotion off / 128 B (256 B off HBM3e):
# (B, N, Nq, contiguous)
H100_MQA_RATE_ROWS = [(64, 4096, 1, False), (64, 4096, 1, True), (100, 2048, 1, False), (110, 4096, 1, False),
                      (200, 4096, 1, False), (66, 8192, 1, False)]
H100_MQA_RATE_VARIANTS = {"auto": {}, "apart": {"CLO_DECODE_MERGE_APART": "1"}, "nopdl": {"CLO_DECODE_PDL": "0"},
                          "st2": {"CLO_DECODE_TMA_STAGES": "2"}, "st4": {"CLO_DECODE_TMA_STAGES": "4"},
                          "l2p0": {"CLO_TMA_L2_PROMOTION": "0"}, "l2p2": {"CLO_TMA_L2_PROMOTION": "2"}}

# --h100-mqa-narrow (stop 102): the same one-token MQA rows on 16-row blocks (the two tiles of a
# unit as two blocks reading the keys twice, the second from L2) at 2-4 stages, 0-2 splits: can
# two 160-thread blocks per SM (2 stages) take the tail that cuDNN's two 128-thread blocks per SM
# take (stop 101's ncu read), where the one-per-SM two-tile block cannot
H100_MQA_NARROW_ROWS = [(b, n, nq, c, 1) for b, n, nq, c in H100_MQA_RATE_ROWS]
H100_MQA_NARROW_VARIANTS = {"auto": {}, "old": {"CLO_DECODE_WIDE_ROWS": "0"},
                            **{f"old{k}": {"CLO_DECODE_WIDE_ROWS": "0", "CLO_DECODE_TMA_STAGES": str(k)}
                               for k in (2, 3, 4)}}

def h100_mqa_rate_sweep(iters, copy_bw):
    """H100_MQA_RATE_ROWS at the automatic count (`_nq_rows`, cuDNN first), each knob of
    H100_MQA_RATE_VARIANTS."""
    _nq_rows(H100_MQA_RATE_ROWS, (0,), iters, copy_bw, H100_MQA_RATE_VARIANTS, hkv=1)


def wave_top_sweep(iters, copy_bw):
    """WAVE_TOP_ROWS cool (`split_band_sweep`: graph replays, cold L2, cuDNN first), then
    each row's 1 and 2 splits and 4 stages at the cap (`sustained_sweep`, 600 ms warm)."""
    split_band_sweep(iters, copy_bw, WAVE_TOP_ROWS, WAVE_TOP_VARIANTS)
    sustained_sweep(iters, copy_bw, [(b, n, hkv, bs) for b, n, hkv, _, _, _, bs in WAVE_TOP_ROWS],
                    SPLITS_1_2_VARIANTS + [("tma4", 1, SWEEP_VARIANTS["tma4"])], warm_ms=600.0, rounds=2)


def cool_then_cap_sweep(rows, variants):
    """A `SWEEPS` entry: `sustained_sweep` over `rows` cool (one round, 1.2 s idle before each
    timing), then at the cap (two rounds, 600 ms warm)."""
    def sweep(iters, copy_bw):
        sustained_sweep(iters, copy_bw, rows, variants, rounds=1, cool_s=1.2)
        sustained_sweep(iters, copy_bw, rows, variants, warm_ms=600.0, rounds=2)
    return sweep


def _edited_case(case, edit, **fields):
    """`case` whose every input set passes through `edit(inputs) -> inputs`, with `fields`
    (say `bytes`) replaced."""
    make = case.make_inputs
    return dataclasses.replace(case, make_inputs=lambda: edit(make()), **fields)


def _ragged_case(case, lens: torch.Tensor, B: int, N: int):
    """Paged `case` (B sequences of N keys) with `seq_lens` = `lens` (int32, CPU), its bytes
    counting the keys read."""
    return _edited_case(case, lambda inp: {**inp, "seq_lens": lens.to("cuda")},
                        bytes=case.bytes * float(lens.sum()) / (B * N))


def _ordered_case(case, order: str):
    """Paged `case` with its block table renumbered in `order` (`_reorder_table`)."""
    return _edited_case(case, lambda inp: {**inp, "block_tables": _reorder_table(inp["block_tables"], order)})


# --balanced-ragged: the balanced schedule's grids (2 splits, 1.1-1.35 units per SM) with
# ragged lengths, uniform in [N/4, N] (seeded), table capacity N: (D, B, N)
BALANCED_RAGGED_ROWS = [(128, B, N) for B in (20, 22) for N in (4096, 8192)] + [(256, 18, 4096)]
# ... and at uniform lengths (lo = N): where both plans cut the same pieces
BALANCED_UNIFORM_ROWS = [(128, 20, 4096), (128, 22, 2048), (256, 18, 2048)]


def balanced_ragged_sweep(iters, copy_bw):
    """Paged 16-bit GQA 32/8 with ragged lengths at 1.1-1.35 units per SM: the heuristic's
    count (s0, the balanced schedule by length), 1 split, 2 even splits (CLO_DECODE_STREAMK=0)
    and the balanced schedule by capacity (=2); no peer (SDPA reads one length). % of copy
    counts the keys read."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for D, B, N, lo in [(*r, r[2] // 4) for r in BALANCED_RAGGED_ROWS] + [(*r, r[2]) for r in BALANCED_UNIFORM_ROWS]:
        lens = torch.randint(lo, N + 1, (B,), generator=torch.Generator().manual_seed(B * N + D), dtype=torch.int32)
        case = _ragged_case(cd.paged_case(B, N, 8, torch.float16, D=D), lens, B, N)
        title = f"paged D={D} B={B} N={N} ragged [{lo}, {N}] mean {float(lens.float().mean()):.0f} ({B * 8 / sms:.2f} units/SM)"
        _split_sweep_row(case, (0, 1, 2), {"auto": {}}, iters, copy_bw, title)
        _split_sweep_row(case, (2,), {"even": {"CLO_DECODE_STREAMK": "0"}, "bycap": {"CLO_DECODE_STREAMK": "2"}},
                         iters, copy_bw, title)


# --paged-order: why the TMA kernel trails cp.async on long paged D = 96 tables (v34, v36):
# the same rows with the block table's order changed. random: the bench's (any block
# anywhere in a 1.2-GB pool); local: shuffled within runs of 64 consecutive blocks (1.5 MB
# at D = 96: near in address space, so address translation stays local, but out of order
# in DRAM); sequential: each sequence's blocks consecutive. (D, B, N, splits)
PAGED_ORDER_ROWS = [(96, 26, 8192, 1), (96, 46, 8192, 2), (128, 26, 8192, 1), (128, 46, 8192, 1)]


def _reorder_table(table: torch.Tensor, order: str) -> torch.Tensor:
    """`table` (a permutation of its blocks) with its entries renumbered in `order`."""
    if order == "random":
        return table
    n = table.numel()
    seq = torch.arange(n, device=table.device, dtype=table.dtype)
    if order == "local":
        run = 64
        keys = torch.rand(n, device=table.device) + (seq // run).float()
        seq = torch.argsort(keys).to(table.dtype)
    return seq.view_as(table)


def paged_order_sweep(iters, copy_bw):
    """Paged 16-bit GQA 32/8, block 16, long tables: cp.async against TMA 3 (unpaired) with
    the block table in random, locally shuffled and sequential order, then the same keys
    contiguous (graph replays, cold L2), each kernel also without programmatic dependent
    launch (-nopdl: CLO_DECODE_PDL=0); cuDNN on the contiguous keys first."""
    variants = _unpaired_variants(("cp", "tma3"))
    variants.update({f"{lb}-nopdl": {**variants[lb], "CLO_DECODE_PDL": "0"} for lb in ("cp", "tma3")})
    for D, B, N, splits in PAGED_ORDER_ROWS:
        for order in ("random", "local", "sequential"):
            case = _ordered_case(cd.paged_case(B, N, 8, torch.float16, D=D), order)
            _split_sweep_row(case, (splits,), variants, iters, copy_bw, f"paged D={D} B={B} N={N} table {order}",
                             peer="sdpa-cudnn" if order == "random" else None)
        _split_sweep_row(cd.paged_case(B, N, 8, torch.float16, D=D), (splits,), variants, iters, copy_bw,
                         f"contig D={D} B={B} N={N}", contiguous=True)


# --pdl-map: where programmatic dependent launch (on by default on sm_90) pays in graph
# replays of back-to-back calls: 16-bit GQA 32/8, the heuristic's split count, PDL on and
# off, over grids of 1 to 2.4 units per SM: (D, B, N, contiguous)
PDL_MAP_ROWS = [(D, B, 4096, c) for D in (128, 96) for c in (False, True)
                for B in ((16, 20, 24, 26, 28, 32, 40) if D == 128 else (16, 26, 32))]
PDL_VARIANTS = {"auto": {}, "pdl": {"CLO_DECODE_PDL": "1"}, "nopdl": {"CLO_DECODE_PDL": "0"}}


def pdl_map_sweep(iters, copy_bw):
    """16-bit GQA 32/8 at N=4096, paged (block 16) and contiguous, the heuristic's split
    count with PDL where it pays (auto, decode_pdl_pays), on every grid (CLO_DECODE_PDL=1)
    and off (=0), graph replays, cold L2."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for D, B, N, contiguous in PDL_MAP_ROWS:
        _split_sweep_row(cd.paged_case(B, N, 8, torch.float16, D=D), (0,), PDL_VARIANTS, iters, copy_bw,
                         f"{'contig' if contiguous else 'paged'} D={D} B={B} N={N} ({B * 8 / sms:.2f} units/SM)",
                         contiguous=contiguous)


# --pdl-map-more: decode_pdl_pays beyond --pdl-map's grids: FP8 D = 128 and 64, 16-bit D = 64, 96
# and 256, 1-split D = 128 at 1-1.35 units per SM (1024 keys: no tail splits there) and
# forced 2-split grids at D = 128; GQA 32/8: (cache, D, B, N, contiguous, splits)
PDL_MAP_MORE_ROWS = ([("fp8", 128, B, 4096, False, 0) for B in (8, 16, 20, 24, 28, 32, 48, 56, 64)]
                     + [("fp8", 64, B, 2048, False, 0) for B in (16, 20, 24)]
                     + [("16", 64, B, 4096, c, 0) for c in (False, True) for B in (24, 32, 40, 48, 56)]
                     + [("16", 96, B, 4096, c, 0) for c in (False, True) for B in (20, 24, 28)]
                     + [("16", 256, B, 2048, c, 0) for c in (False, True) for B in (20, 24, 28, 32)]
                     + [("16", 128, B, 1024, c, 0) for c in (False, True) for B in (17, 18, 20, 22)]
                     + [("16", 128, B, 8192, c, 2) for c in (False, True) for B in (9, 10, 12, 14)])
# --pdl-map-edges: the rule's edges again (1.03 / 1.09 blocks per SM at 16 bits, FP8 D = 128
# at 0.5-3.9, FP8 D = 64's small grids and head pairs): the rows of PDL_MAP_MORE_ROWS there
PDL_MAP_EDGE_ROWS = ([r for r in PDL_MAP_MORE_ROWS if r[0] == "fp8"]
                     + [r for r in PDL_MAP_MORE_ROWS if r[1] == 128 and r[3] == 1024 and r[2] in (17, 18)])


def pdl_map_more_sweep(iters, copy_bw, rows=PDL_MAP_MORE_ROWS):
    """`rows` (PDL_MAP_MORE_ROWS) with PDL where it pays (auto), everywhere and nowhere, graph
    replays, cold L2; each title carries the attention kernel's blocks per SM under the
    automatic choice (decode_pdl_pays' input)."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for cache, D, B, N, contiguous, splits in rows:
        fp8 = cache == "fp8"
        case = cd.fp8_case(B, N, 8, torch.float16, D=D) if fp8 else cd.paged_case(B, N, 8, torch.float16, D=D)
        scales = {"k_scale": cd.FP8_SCALE, "v_scale": cd.FP8_SCALE} if fp8 else {}
        suffix = "_fp8" if fp8 else ""
        set_knobs({})
        blocks = kernel_grid_blocks(_split_fns([case.make_inputs()], splits, suffix, contiguous, **scales)[0],
                                    "decode_attention")
        layout = "contig" if contiguous else "paged"
        title = f"{layout} {cache} D={D} B={B} N={N} ({B * 8 / sms:.2f} units/SM, {blocks / sms:.2f} blocks/SM)"
        _split_sweep_row(case, (splits,), PDL_VARIANTS, iters, copy_bw, title, suffix, contiguous=contiguous,
                         **scales)


def d80_layout_sweep(iters, copy_bw):
    """16-bit D=80 at B=64/2K (MHA and GQA 32/8), where cuDNN on contiguous keys leads the
    paged bench rows: paged at block 16 and 256 and contiguous, the heuristic's count,
    cuDNN first (graph replays, cold L2): how much of the gap is the paged layout's
    160-byte rows."""
    for Hkv in (32, 8):
        for bs in (16, 256):
            _split_sweep_row(cd.paged_case(64, 2048, Hkv, torch.float16, D=80, block_size=bs), (0,), {"auto": {}},
                             iters, copy_bw, f"paged bs={bs} D=80 B=64 N=2048 Hkv={Hkv}", peer="sdpa-cudnn")
        _split_sweep_row(cd.paged_case(64, 2048, Hkv, torch.float16, D=80), (0,), {"auto": {}}, iters, copy_bw,
                         f"contig D=80 B=64 N=2048 Hkv={Hkv}", peer="sdpa-cudnn", contiguous=True)


def d64_pair_tail_sweep(iters, copy_bw):
    """Paged 16-bit D=64 GQA 32/8 and MHA at 2-3 blocks per SM (head pairs at 1-1.5 units
    per SM): the heuristic's count (s0), 1-3 splits, 2 splits balanced (sk) and even
    (CLO_DECODE_STREAMK=0), unpaired (CLO_DECODE_PACK=0) 1 and 3 splits, at block sizes 16
    and 256, cuDNN first (graph replays, cold L2)."""
    for B, N, Hkv in D64_PAIR_TAIL_ROWS:
        for bs in (16, 256):
            case = cd.paged_case(B, N, Hkv, torch.float16, D=64, block_size=bs)
            title = f"paged bs={bs} D=64 B={B} N={N} Hkv={Hkv}"
            _split_sweep_row(case, (0, 1, 2, 3), {"sk": {}}, iters, copy_bw, title, peer="sdpa-cudnn")
            _split_sweep_row(case, (2,), {"even": {"CLO_DECODE_STREAMK": "0"}}, iters, copy_bw, title)
            _split_sweep_row(case, (1, 3), {"unpaired": {"CLO_DECODE_PACK": "0"}}, iters, copy_bw, title)


def d64_contig_splits_sweep(iters, copy_bw):
    """Contiguous 16-bit D=64 at 2-3 blocks per SM (--d64-pair-tail's grids): the
    heuristic's count (s0) and 1-4 splits, cuDNN first (graph replays, cold L2)."""
    for B, N, Hkv in D64_PAIR_TAIL_ROWS:
        _split_sweep_row(cd.paged_case(B, N, Hkv, torch.float16, D=64), (0, 1, 2, 3, 4), {"auto": {}}, iters, copy_bw,
                         f"contig D=64 B={B} N={N} Hkv={Hkv}", peer="sdpa-cudnn", contiguous=True)


# --d96-contig-balanced: contiguous 16-bit D=96 (and 80 on its kernel) at 1-1.5 units per
# SM, where the balanced schedule is instantiated for contiguous caches (v32): (B, N, Hkv, D)
D96_CONTIG_BALANCED_ROWS = ([(B, 2048, 8, 96) for B in (17, 18, 20, 22, 24)] + [(B, 4096, 8, 96) for B in (18, 20, 22)]
                            + [(20, 1024, 8, 96), (5, 2048, 32, 96), (5, 4096, 32, 96)]
                            + [(B, 4096, 8, 80) for B in (18, 20, 22)])


def d96_contig_balanced_sweep(iters, copy_bw):
    """Contiguous 16-bit D=96 / 80 at 1-1.5 units per SM: the heuristic's count (s0), 1
    split, 2 splits balanced (the automatic 2-split kernel there) and even
    (CLO_DECODE_STREAMK=0), cuDNN first (graph replays, cold L2)."""
    for B, N, Hkv, D in D96_CONTIG_BALANCED_ROWS:
        case = cd.paged_case(B, N, Hkv, torch.float16, D=D)
        title = f"contig D={D} B={B} N={N} Hkv={Hkv} ({B * Hkv} units)"
        _split_sweep_row(case, (0, 1, 2), {"auto": {}}, iters, copy_bw, title, peer="sdpa-cudnn", contiguous=True)
        _split_sweep_row(case, (2,), {"even": {"CLO_DECODE_STREAMK": "0"}}, iters, copy_bw, title, contiguous=True)


# --contig-band-long: contiguous D=96 / 80 between the tail bands (1.2-1.8 units per SM)
# and past 2.7 (2.8-3.15) at 4096-16384 keys (--long-contig found 2 splits 7-9% ahead at
# 8192 keys, B=24 and B=48): (B, N, D)
CONTIG_BAND_LONG_ROWS = ([(B, N, D) for D in (96, 80) for N in (4096, 8192) for B in (20, 22, 24, 26, 28, 30, 32, 33, 46, 48, 50, 52)]
                         + [(B, 16384, D) for D in (96, 80) for B in (24, 48)])

# --d96-paged-long: paged D=96 where --paged-band-long found it at 0.84-0.93x cuDNN (1.58 and
# 2.8-3.15 units per SM, unpaired TMA 3 there) at 4096 / 8192 keys: (B, N, Hkv, D, contiguous, splits)
D96_PAGED_LONG_ROWS = [(B, N, 8, 96, False, (1, 2)) for N in (4096, 8192) for B in (26, 46, 48, 52)]


def contig_band_long_sweep(iters, copy_bw, contiguous=True):
    """16-bit D=96 / 80, GQA 32/8, contiguous (or paged block 16): the heuristic's count
    (s0), 1 and 2 splits, cuDNN first (graph replays, cold L2)."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for B, N, D in CONTIG_BAND_LONG_ROWS:
        case = cd.paged_case(B, N, 8, torch.float16, D=D)
        title = f"{'contig' if contiguous else 'paged'} D={D} B={B} N={N} Hkv=8 ({B * 8 / sms:.2f} units/SM)"
        _split_sweep_row(case, (0, 1, 2), {"auto": {}}, iters, copy_bw, title, peer="sdpa-cudnn",
                         contiguous=contiguous)


# --d64-unpaired-tail: paged 16-bit D=64 without head pairs (Nq 2, odd KV heads) at 2-3
# blocks per SM: (B, N, Hq, Hkv, Nq)
D64_UNPAIRED_TAIL_ROWS = ([(B, 2048, 32, 8, 2) for B in (34, 36, 40, 44, 48)] + [(B, 4096, 32, 8, 2) for B in (36, 44)]
                          + [(B, 2048, 28, 7, 1) for B in (39, 41, 45, 49)] + [(41, 4096, 28, 7, 1)])


def d64_unpaired_tail_sweep(iters, copy_bw):
    """Paged 16-bit D=64 block 16 that runs no head pairs (Nq 2 speculative rows, odd KV
    head counts) at 2-3 blocks per SM: the heuristic's count (s0), 1-3 splits, cuDNN first
    (graph replays, cold L2)."""
    for B, N, Hq, Hkv, Nq in D64_UNPAIRED_TAIL_ROWS:
        case = cd.paged_case(B, N, Hkv, torch.float16, Hq=Hq, D=64, Nq=Nq)
        _split_sweep_row(case, (0, 1, 2, 3), {"auto": {}}, iters, copy_bw,
                         f"paged D=64 B={B} N={N} Hq={Hq} Hkv={Hkv} Nq={Nq} ({B * Hkv} blocks)", peer="sdpa-cudnn")


# --d64-balanced2: 16-bit D=64 without head pairs at 2-3 blocks per SM, the balanced schedule
# at two blocks per SM (v33): (B, N, Hq, Hkv, Nq, contiguous)
D64_BALANCED2_ROWS = ([(B, 2048, 32, 8, 1, True) for B in (34, 36, 40, 44, 48)]
                      + [(B, 4096, 32, 8, 1, True) for B in (36, 44)] + [(B, 2048, 32, 32, 1, True) for B in (9, 10)]
                      + [(B, 2048, 28, 7, 1, False) for B in (41, 45, 49)] + [(41, 4096, 28, 7, 1, False)]
                      + [(36, 2048, 32, 8, 2, False), (36, 4096, 32, 8, 2, False)])


def d64_balanced2_sweep(iters, copy_bw):
    """16-bit D=64 that runs no head pairs (contiguous; paged odd KV heads or Nq 2) at 2-3
    blocks per SM: the heuristic's count (s0), 1 and 3 splits against 2 splits (contiguous:
    balanced at two blocks per SM, 2 stages; NOTES.md v33's first runs also had 3) and even
    (CLO_DECODE_STREAMK=0); cuDNN first (graph replays, cold L2)."""
    for B, N, Hq, Hkv, Nq, contiguous in D64_BALANCED2_ROWS:
        case = cd.paged_case(B, N, Hkv, torch.float16, Hq=Hq, D=64, Nq=Nq)
        title = f"{'contig' if contiguous else 'paged'} D=64 B={B} N={N} Hq={Hq} Hkv={Hkv} Nq={Nq} ({B * Hkv} blocks)"
        _split_sweep_row(case, (0, 1, 2, 3), {"auto": {}}, iters, copy_bw, title,
                         peer="sdpa-cudnn" if Nq == 1 else None, contiguous=contiguous)
        _split_sweep_row(case, (2,), {"even": {"CLO_DECODE_STREAMK": "0"}}, iters, copy_bw, title,
                         contiguous=contiguous)


def d96_sweep(iters, copy_bw, rows=D96_ROWS):
    """16-bit D=96 (and D=80 on its kernels) from one block per SM to large grids (v24):
    the automatic choice; unpaired on the cp.async kernel and the TMA kernel at 2 / 3
    stages; head pairs (the D=256 kernels over 192-column rows, paged only) on TMA 2 / 3;
    cuDNN first (graph replays, cold L2)."""
    single = {"CLO_DECODE_PACK": "0"}
    variants = {"auto": {}, "cp": {**single, **SWEEP_VARIANTS["cp"]}, "tma2": {**single, **SWEEP_VARIANTS["tma2"]},
                "tma3": {**single, **SWEEP_VARIANTS["tma3"]},
                "pairs-tma2": {"CLO_DECODE_PACK": "2", **SWEEP_VARIANTS["tma2"]},
                "pairs-tma3": {"CLO_DECODE_PACK": "2", **SWEEP_VARIANTS["tma3"]}}
    for B, N, Hkv, D, contiguous, splits in rows:
        _split_sweep_row(cd.paged_case(B, N, Hkv, torch.float16, D=D), splits, variants, iters,
                         copy_bw, f"{'contig' if contiguous else 'paged'} D={D} B={B} N={N} Hkv={Hkv}",
                         peer="sdpa-cudnn", contiguous=contiguous)


def fp8_split_sweep(iters, copy_bw):
    """FP8 caches: forced split counts on small and medium grids (graph replays over
    rotated inputs, cold L2, as llm-speed bench times them); % of the copy rate on the
    FP8 bytes; the cp.async kernel (6 stages) and the TMA kernel at 3 and 4 stages
    (CLO_DECODE_VARIANT / CLO_DECODE_TMA_STAGES). bf16 q on one shape."""
    shapes = [(16, 1024, 8, (1, 2), torch.float16), (16, 16384, 8, (1, 2), torch.float16),
              (16, 16384, 8, (1, 2), torch.bfloat16), (64, 1024, 8, (1,), torch.float16),
              (1, 16384, 8, (16, 32), torch.float16), (16, 4096, 8, (1, 2), torch.float16),
              (64, 4096, 32, (1,), torch.float16)]
    variants = {"cp": {"CLO_DECODE_VARIANT": "1"},
                "tma3": {"CLO_DECODE_VARIANT": "2", "CLO_DECODE_TMA_STAGES": "3"},
                "tma4": {"CLO_DECODE_VARIANT": "2", "CLO_DECODE_TMA_STAGES": "4"}}
    for B, N, Hkv, splits, dt in shapes:
        _fp8_sweep_row(B, N, Hkv, cd.HEAD_DIM, splits, variants, iters, copy_bw, dt,
                       f"fp8 {str(dt)[6:]} B={B} N={N} Hkv={Hkv}")


def fp8_pack_split_sweep(iters, copy_bw):
    """FP8 small and medium grids: forced split counts with and without head pairs (D=64;
    other head dims unpaired), and 16-bit D=64 for comparison (graph replays, cold L2)."""
    both = {"single": {"CLO_DECODE_PACK": "0"}, "pairs": {"CLO_DECODE_PACK": "2"}}
    single = {"single": {"CLO_DECODE_PACK": "0"}}
    for B, N, Hkv, D, splits, variants in [
            (16, 2048, 8, 64, (1, 2, 4), both), (32, 2048, 8, 64, (1, 2), both), (64, 2048, 8, 64, (1, 2), both),
            (16, 8192, 8, 64, (2, 4), both), (1, 16384, 8, 64, (16, 32, 64), both), (8, 2048, 8, 64, (4, 8), both),
            (4, 2048, 32, 64, (2, 4), both), (8, 2048, 32, 64, (1, 2), both), (16, 2048, 8, 96, (1, 2), single),
            (16, 1024, 8, 128, (1, 2), single), (16, 2048, 8, 32, (1, 2), single)]:
        _fp8_sweep_row(B, N, Hkv, D, splits, variants, iters, copy_bw)
    for B, N, Hkv, D, splits in [(16, 2048, 8, 64, (1, 2)), (1, 16384, 8, 64, (16, 32))]:
        _split_sweep_row(cd.paged_case(B, N, Hkv, torch.float16, D=D), splits, single, iters, copy_bw,
                         f"16-bit D={D} B={B} N={N} Hkv={Hkv}")


def fp8_boundary_sweep(iters, copy_bw):
    """FP8 D=64 grids of one to two blocks per SM (where the split rule and head pairs
    meet): 1 and 2 splits with and without pairs, then the library's choice."""
    variants = {"single": {"CLO_DECODE_PACK": "0"}, "pairs": {"CLO_DECODE_PACK": "2"}}
    for B, Hkv in [(17, 8), (20, 8), (24, 8), (28, 8), (32, 8), (5, 32), (6, 32), (7, 32)]:
        _fp8_sweep_row(B, 2048, Hkv, 64, (1, 2), variants, iters, copy_bw)
        _fp8_sweep_row(B, 2048, Hkv, 64, None, {"auto": {"CLO_DECODE_PACK": "1"}}, iters, copy_bw)


def fp8_narrow_kernel_sweep(iters, copy_bw):
    """FP8 caches at head_dim <= 64: the cp.async kernel against the TMA kernel (whose
    boxes are 128 bytes wide, half out of bounds here), unpaired, forced split counts
    (graph replays, cold L2)."""
    variants = {"tma": {"CLO_DECODE_VARIANT": "2", "CLO_DECODE_PACK": "0"},
                "cp": {"CLO_DECODE_VARIANT": "1", "CLO_DECODE_PACK": "0"}}
    for B, N, Hkv, D, splits in [(16, 2048, 8, 64, (1, 2)), (1, 16384, 8, 64, (16, 32)), (16, 8192, 8, 64, (1, 2)),
                                 (64, 2048, 8, 64, (1,)), (16, 2048, 8, 32, (1, 2)), (4, 2048, 32, 64, (1, 2))]:
        _fp8_sweep_row(B, N, Hkv, D, splits, variants, iters, copy_bw)


def fp8_pack_sweep(iters, copy_bw):
    """Head pairs (CLO_DECODE_PACK: the rule / 0 / 2) on FP8 D=64 caches, GQA 32/8 and MHA, and on
    16-bit D=64 GQA 32/8, at the heuristic's split count (graph replays, cold L2)."""
    variants = {"auto": {"CLO_DECODE_PACK": "1"}, "single": {"CLO_DECODE_PACK": "0"},
                "pairs": {"CLO_DECODE_PACK": "2"}}
    shapes = [(B, 2048, 8) for B in (8, 16, 32, 64, 128)] + [(16, 8192, 8), (1, 16384, 8)]
    shapes += [(B, 2048, 32) for B in (4, 8, 16, 32)]
    for B, N, Hkv in shapes:
        _fp8_sweep_row(B, N, Hkv, 64, None, variants, iters, copy_bw)
    for B in (16, 64):
        h = llm.decode_num_splits(B, 8, HQ_ // 8, 2048, 64, torch.float16)
        _split_sweep_row(cd.paged_case(B, 2048, 8, torch.float16, D=64), (h,), variants, iters, copy_bw,
                         f"16-bit D=64 B={B} N=2048 Hkv=8")


def anchor_method(iters, dtype=torch.float16):
    """The shared anchors' method (warm L2, eager calls, one CUDA-event pair per call, no
    graph) next to this repo's bench method (cold L2 by rotation, graph replays), on
    contiguous B=1/16K/GQA 32/8: how much of SDPA's anchor time is host work per call."""
    case = cd.paged_case(1, 16384, 8, dtype, op="decode_attention")
    inp = case.make_inputs()
    impls = {i.name: i for i in case.impls}
    for name in ("sdpa-cudnn", "sdpa-flash", "cuda_llm_ops"):
        impl = impls[name]
        if impl.unavailable and impl.unavailable(inp):
            continue
        fn = impl.build(inp)
        eager_warm = benchmark(fn, warmup=10, iterations=iters).median_ms
        graph_warm = benchmark(fn, warmup=10, iterations=iters, cuda_graph=True).median_ms
        print(f"anchor-method {name:12s} eager warm-L2 {eager_warm * 1e3:6.1f} us | graph warm-L2 "
              f"{graph_warm * 1e3:6.1f} us", flush=True)
    del inp


# --mqa-paged: one-token MQA (Hq 32 / Hkv 1, 32 rows: the two-row-tile kernel) paged against
# the same keys contiguous, where the bench read paged 0.90-0.92x SDPA flash and contiguous
# level (stop 69): the table in random and sequential order, boxes spanning both planes
# (CLO_DECODE_PLANE_BOXES=2; a box per plane is the automatic choice at one block per SM),
# 3 stages; then Nq 4 B=16/4K at GQA 32/8 (stop 69's bench read 71.1 us against 66.5): (B, N)
MQA_PAGED_ROWS = [(8, 16384), (64, 4096), (66, 8192)]
MQA_PAGED_VARIANTS = {"auto": {}, "boxes": {"CLO_DECODE_PLANE_BOXES": "2"}, "tma3": {"CLO_DECODE_TMA_STAGES": "3"}}


def mqa_paged_sweep(iters, copy_bw):
    """MQA_PAGED_ROWS (graph replays, cold L2, SDPA flash first on a contiguous copy):
    MQA_PAGED_VARIANTS at the automatic count on random and sequential tables, the
    automatic choice contiguous; then paged Nq 4 B=16/4K at 3 and 4 stages (cuDNN first)."""
    for B, N in MQA_PAGED_ROWS:
        for order in ("random", "sequential"):
            case = _ordered_case(cd.paged_case(B, N, 1, torch.float16, D=128, block_size=16), order)
            _split_sweep_row(case, (0,), MQA_PAGED_VARIANTS, iters, copy_bw,
                             f"paged MQA B={B} N={N} table {order}", peer="sdpa-flash" if order == "random" else None)
        _split_sweep_row(cd.paged_case(B, N, 1, torch.float16, D=128, block_size=16), (0,), {"auto": {}}, iters,
                         copy_bw, f"contig MQA B={B} N={N}", peer="sdpa-flash", contiguous=True)
    _nq_rows([(16, 4096, 4, False)], (0,), iters, copy_bw,
             {"auto": {}, "tma3": {"CLO_DECODE_TMA_STAGES": "3"}, "tma4": {"CLO_DECODE_TMA_STAGES": "4"}})


# --mqa-block-sizes: where paged one-token MQA (Hq 32 / Hkv 1, D = 128) trails its contiguous
# copy (stop 82: B=150/4K 103.5 against 91.9 us). A block-16 tile of 64 keys takes four boxes
# of 4 KB each for K and for V, a contiguous one a single 16-KB box each; larger blocks
# (min(block_size, 64) keys a box) take that count down with the same bytes, a sequential
# table keeps the DRAM order of the contiguous copy with the block-16 boxes. (B, N)
MQA_BLOCK_SIZE_ROWS = [(150, 4096), (66, 8192), (136, 2048)]


def mqa_block_sizes_sweep(iters, copy_bw):
    """MQA_BLOCK_SIZE_ROWS at the automatic count and kernel (graph replays, cold L2): paged
    block 16 on a random table (SDPA flash first, on its contiguous copy) and on a sequential
    one, blocks of 32, 64 and 128 keys on random tables, then the contiguous layout."""
    for B, N in MQA_BLOCK_SIZE_ROWS:
        for bs, order in ((16, "random"), (16, "sequential"), (32, "random"), (64, "random"), (128, "random")):
            case = _ordered_case(cd.paged_case(B, N, 1, torch.float16, D=128, block_size=bs), order)
            _split_sweep_row(case, (0,), {"auto": {}}, iters, copy_bw, f"paged MQA B={B} N={N} block {bs} {order}",
                             peer="sdpa-flash" if (bs, order) == (16, "random") else None)
        _split_sweep_row(cd.paged_case(B, N, 1, torch.float16, D=128, block_size=16), (0,), {"auto": {}}, iters,
                         copy_bw, f"contig MQA B={B} N={N}", contiguous=True)


# --balanced-plan: the balanced schedule's plan on paged caches (p.streamk_by_len) reads every
# seq_len on each block's start-up path and again in its merge kernel (a loop of one load per 32
# sequences). Automatic (by length until stop 83) against the capacity plan (CLO_DECODE_STREAMK=2:
# no seq_lens scan) and automatic again, on the MQA band (B=136-170: 5-6 loads a lane), Nq 8 B=17/4K and GQA
# 32/8 B=20/4K (one load a lane); then the contiguous copies (no scan), and ragged MQA lengths
# (where the plan by length ran until stop 84). Stop 83 (NOTES.md): loading them 256 at a time did not move the
# gap to the capacity plan (reverted); the two-row-tile blocks now plan by capacity ("auto"),
# and since stop 84 their kernel holds no other plan: "bylen" (CLO_DECODE_STREAMK=1) moves
# only the 16-row rows (GQA B=20/4K).
BALANCED_PLAN_ROWS = [(136, 2048, 1, False, 1), (140, 4096, 1, False, 1), (150, 4096, 1, False, 1),
                      (170, 4096, 1, False, 1), (17, 4096, 8, False, 8), (20, 4096, 1, False, 8),
                      (136, 2048, 1, True, 1), (150, 4096, 1, True, 1)]
BALANCED_PLAN_VARIANTS = {"auto": {}, "bylen": {"CLO_DECODE_STREAMK": "1"}, "bycap": {"CLO_DECODE_STREAMK": "2"},
                          "auto2": {}}


# --build-ab: the automatic choice only, twice, on a row of each D = 128 kernel family: the even
# grid's two-tile blocks (MQA and Nq 8, paged and contiguous), the balanced two-tile blocks (MQA
# B=136 / 150) and the 16-row blocks (GQA one token; MHA). For comparing two builds of the
# extension (scripts/gpu_ab.sh swaps them between runs): (B, N, Nq, contiguous, Hkv)
BUILD_AB_ROWS = [(8, 16384, 1, False, 1), (64, 4096, 1, False, 1), (66, 8192, 1, False, 1), (66, 8192, 1, True, 1),
                 (8, 16384, 8, False, 8), (8, 16384, 8, True, 8), (21, 16384, 8, False, 8), (16, 4096, 8, False, 8),
                 (136, 2048, 1, False, 1), (150, 4096, 1, False, 1), (16, 1024, 1, False, 8),
                 (1, 16384, 1, False, 8), (64, 4096, 1, False, 8), (16, 1024, 1, False, 32)]
BUILD_AB_VARIANTS = {"auto": {}, "auto2": {}}
# --build-ab-ragged (stop 114): lengths 4 keys short of a 64-key tile, so every split's last tile
# masks V rows past the end (stops 114-115 zeroed them in smem; since stop 116 the TMA kernel
# masks them in registers); the same families.
BUILD_AB_RAGGED_ROWS = [(8, 16380, 1, False, 1), (64, 4092, 1, False, 1), (66, 8188, 1, True, 1),
                        (8, 16380, 8, False, 8), (21, 16380, 8, False, 8), (16, 4092, 8, True, 8),
                        (136, 2044, 1, False, 1), (150, 4092, 1, False, 1), (1, 16380, 1, False, 8),
                        (64, 4092, 1, False, 8)]


# --pair-band (stop 86): paged 16-bit rows whose automatic call ran the balanced 16-row D = 128
# kernel on HBM3e parts until stop 86 (D = 64 head pairs at 1.06-1.35 pairs per SM, D = 112 at
# 1.1-1.35 units per SM; still the H100's choice) and their neighbours, against 1 and 3 splits,
# even 2 splits, unpaired blocks and the cp.async kernel. (B, N, Hkv, D, Nq, contiguous)
PAIR_BAND_ROWS = [(b, n, h, d, 1, False) for b, n, h, d in (
    (32, 2048, 8, 64), (34, 2048, 8, 64), (36, 2048, 8, 64), (40, 2048, 8, 64), (44, 2048, 8, 64), (48, 2048, 8, 64),
    (36, 4096, 8, 64), (44, 4096, 8, 64), (40, 8192, 8, 64), (9, 2048, 32, 64), (9, 8192, 32, 64),
    (18, 2048, 8, 112), (20, 2048, 8, 112), (22, 2048, 8, 112), (20, 4096, 8, 112), (22, 8192, 8, 112),
    (20, 2048, 8, 128))]
PAIR_BAND_VARIANTS = {"auto": {}, "pairs": {"CLO_DECODE_PACK": "2"}, "single": {"CLO_DECODE_PACK": "0"},
                      "even": {"CLO_DECODE_PACK": "2", "CLO_DECODE_STREAMK": "0"},
                      "cp": {"CLO_DECODE_VARIANT": "1"}, "tma3": {"CLO_DECODE_VARIANT": "2", "CLO_DECODE_TMA_STAGES": "3"},
                      "auto.2": {}}
# (splits, variant) pairs timed on every row
PAIR_BAND_RUNS = {(0, "auto"), (1, "pairs"), (1, "single"), (2, "pairs"), (2, "even"), (2, "single"), (3, "pairs"),
                  (3, "single"), (1, "cp"), (1, "tma3"), (0, "auto.2")}


# --pair-band-confirm (stop 86): the automatic count against forced 1-3 splits (2: the balanced
# schedule below two units per SM) where stop 86 moved HBM3e parts off 2 splits (D = 64 head
# pairs at 1.06-1.35 pairs per SM: 1, from 8192 keys 3; paged D = 104-120 at 1.1-1.35 units per
# SM: 1, Nq 2 too), contiguous D = 112 there (kept at 2), and D = 112 past two units per SM (2
# even splits). (B, N, Hkv, D, Nq, contiguous)
PAIR_BAND_CONFIRM_ROWS = [(36, 2048, 8, 64, 1, False), (40, 2048, 8, 64, 1, False), (44, 4096, 8, 64, 1, False),
                          (40, 8192, 8, 64, 1, False), (40, 16384, 8, 64, 1, False), (9, 2048, 32, 64, 1, False),
                          (9, 16384, 32, 64, 1, False), (20, 2048, 8, 112, 1, False), (22, 8192, 8, 112, 1, False),
                          (20, 2048, 8, 112, 1, True), (20, 4096, 8, 112, 1, True), (22, 16384, 8, 112, 1, True),
                          (20, 4096, 8, 112, 2, False), (20, 2048, 8, 104, 1, False), (36, 2048, 8, 112, 1, False),
                          (40, 4096, 8, 112, 1, False)]


# --pair-band-edges (stop 86): the length edges of those bands: contiguous D = 104-120 at 4-16K
# keys (and paged D = 120 at 4K), head pairs at 4-16K keys (1 or 3 splits)
PAIR_BAND_EDGE_ROWS = [(20, 6144, 8, 112, 1, True), (20, 8192, 8, 112, 1, True), (22, 8192, 8, 112, 1, True),
                       (20, 12288, 8, 112, 1, True), (20, 4096, 8, 120, 1, True), (20, 16384, 8, 120, 1, True),
                       (20, 4096, 8, 120, 1, False), (20, 4096, 8, 104, 1, True), (36, 8192, 8, 64, 1, False),
                       (44, 8192, 8, 64, 1, False), (36, 16384, 8, 64, 1, False), (9, 4096, 32, 64, 1, False),
                       (10, 8192, 32, 64, 1, False), (11, 8192, 32, 64, 1, False), (40, 6144, 8, 64, 1, False)]


# --misaligned-rows (stop 87): paged rows whose heads are not a whole number of 128-byte lines
# (D = 104-120 on the D = 128 kernel, 176-240 on the D = 256 one; a line holds two KV heads'
# columns) under the balanced 2 splits, whose pieces start each unit at its own key offset, against
# 1 split and even 2 splits (every unit's split at the same keys at the same time), each at the
# maps' L2 promotion (128 B on HBM3e) and without (p0) or at 256 B (p3); D = 128 / 256 controls.
# (B, N, Hkv, D, Nq, contiguous)
MISALIGNED_ROWS = [(b, n, 8, d, 1, False) for b, n, d in (
    (20, 2048, 112), (22, 8192, 112), (20, 4096, 120), (20, 2048, 104), (20, 8192, 128),
    (20, 4096, 224), (20, 4096, 240), (20, 4096, 176), (20, 4096, 256))]
# (bal: the balanced schedule, the automatic 2 splits when this ran at 9c75737; since 79c4475 forced
# by CLO_DECODE_STREAMK=3)
MISALIGNED_VARIANTS = {"auto": {}, "one": {}, "one.p0": {"CLO_TMA_L2_PROMOTION": "0"}, "bal": {"CLO_DECODE_STREAMK": "3"},
                       "bal.p0": {"CLO_TMA_L2_PROMOTION": "0", "CLO_DECODE_STREAMK": "3"},
                       "bal.p3": {"CLO_TMA_L2_PROMOTION": "3", "CLO_DECODE_STREAMK": "3"},
                       "even": {"CLO_DECODE_STREAMK": "0"}}
MISALIGNED_RUNS = {(0, "auto"), (1, "one"), (1, "one.p0"), (2, "bal"), (2, "bal.p0"), (2, "bal.p3"), (2, "even")}


# --misaligned-band (stop 87): after decode_units_share_lines (those calls' 2 splits even, not
# balanced), the D = 256 kernel's one-tail band over paged heads of 144-240 columns: the automatic
# count against 1 and 3 splits and the balanced 2 it replaced (CLO_DECODE_STREAMK=3).
MISALIGNED_BAND_ROWS = ([(b, n, 8, 224, 1, False) for b in (17, 20, 22) for n in (2048, 4096, 16384)]
                        + [(20, n, 8, 176, 1, False) for n in (2048, 16384)]
                        + [(20, 4096, 8, d, 1, False) for d in (144, 160)] + [(20, 4096, 8, 112, 1, False)]
                        + [(17, 8192, 8, 224, 1, False), (18, 2048, 8, 224, 1, False), (18, 16384, 8, 224, 1, False)])
# --shared-tiles (stop 87): units of two row tiles of one KV head (every line in common) in the
# balanced band: GQA 32/8 Nq 5 (two 16-row tiles) at D = 128 and 256, paged and contiguous, and
# MQA Nq 2 (64 rows: two 32-row tiles); auto, 1 and 3 splits, even 2 and balanced 2
SHARED_TILES_ROWS = [(10, 2048, 8, 128, 5, False), (10, 8192, 8, 128, 5, False), (10, 8192, 8, 128, 5, True),
                     (10, 4096, 8, 256, 5, False), (80, 4096, 1, 128, 2, False), (80, 16384, 1, 128, 2, False)]
SHARED_TILES_RUNS = {(0, "auto"), (1, "forced"), (2, "forced"), (3, "forced"), (2, "bal")}
# --shared-tiles-contig: the contiguous balanced bands of D = 64 (two blocks per SM, 2-2.7 units
# per SM) and 96 (1.06-1.35) with units of two row tiles (Nq 5 at GQA 32/8)
SHARED_TILES_CONTIG_ROWS = [(20, 4096, 8, 64, 5, True), (20, 2048, 8, 64, 5, True), (10, 4096, 8, 96, 5, True),
                            (10, 2048, 8, 96, 5, True)]
MISALIGNED_BAND_VARIANTS = {"auto": {}, "forced": {}, "bal": {"CLO_DECODE_STREAMK": "3"}}
# ... with 16-row blocks at every forced count (since stop 88 a count equal to the two-row-tile
# rule's at D = 64 / 96 runs two-tile blocks): the sweeps of two-tile rows measured on 16-row blocks
SIXTEEN_ROW_VARIANTS = {"auto": {}, "forced": {"CLO_DECODE_WIDE_ROWS": "0"},
                        "bal": {"CLO_DECODE_STREAMK": "3", "CLO_DECODE_WIDE_ROWS": "0"}}
# --pair-vs-d128 (stop 88): paged D = 64 head pairs (the D = 128 kernel over two KV heads' 128
# bytes each) against D = 128 at the same grid (GQA 32/8: B=40 pairs and B=20 heads are 160 units,
# the same bytes), where stop 86's pairs trailed cuDNN by 7%: auto and 1-3 splits
PAIR_VS_D128_ROWS = [(2 * b, n, 8, 64, 1, False) for b, n in ((20, 2048), (20, 16384), (16, 4096))] + \
                    [(b, n, 8, 128, 1, False) for b, n in ((20, 2048), (20, 16384), (16, 4096))]
# --spec-contig (stop 88): contiguous D = 64 / 96 with two row tiles per KV head (GQA 32/8 Nq 5,
# and Nq 8) across their one-token bands (units per SM, row tiles counted): auto, 1, 3, even and
# balanced 2
SPEC_CONTIG_ROWS = ([(b, n, 8, 64, 5, True) for b in (12, 16, 20, 24) for n in (2048, 4096, 16384)]
                    + [(b, n, 8, 96, 5, True) for b in (9, 10, 16, 20) for n in (2048, 4096, 16384)]
                    + [(20, 4096, 8, 64, 8, True), (10, 4096, 8, 96, 8, True)])
MISALIGNED_BAND_RUNS = {(0, "auto"), (1, "forced"), (3, "forced"), (2, "bal")}  # (2, "forced"): even 2

# --h100-tails (stop 99): the one-tail band (1.1-1.35 units per SM) on a non-HBM3e sm_90 part,
# where stop 99's H100 sweeps (`--spread-tail`, `--misaligned-band`, `--shared-tiles`) read 1
# split (or 3) ahead of the 2 splits its rule took since v28: one token at D = 128 (GQA 32/8 and
# MHA), spec rows (Nq 5: two row tiles; Nq 2), paged D = 104-120 on the D = 128 kernel, and
# paged D = 224 / 176 rows (not whole lines) on the D = 256 kernel; auto, 1-3 splits (2 as the
# rule's balanced or even grid, and as an even grid forced), the spread tail in 4 pieces
H100_TAIL_D128_ROWS = ([(b, n, 8, 128, 1, c) for c in (False, True) for b in (20, 22) for n in (2048, 4096, 8192, 16384)]
                       + [(5, n, 32, 128, 1, c) for c in (False, True) for n in (4096, 16384)])
H100_TAIL_SPEC_ROWS = ([(b, n, 8, 128, 5, c) for c in (False, True) for b in (10, 11) for n in (2048, 4096, 16384)]
                       + [(20, n, 8, 128, 2, c) for c in (False, True) for n in (4096, 16384)])
H100_TAIL_NARROW_ROWS = [(b, n, 8, d, 1, False) for d in (104, 112, 120) for b, n in ((20, 2048), (22, 4096), (20, 16384))]
H100_TAIL_SHARED_ROWS = ([(b, n, 8, 224, 1, False) for b, n in ((18, 4096), (18, 8192), (20, 8192), (22, 8192), (19, 2048),
                                                               (21, 2048), (22, 4096))]
                         + [(b, 4096, 8, 176, 1, False) for b in (17, 22)])
H100_TAIL_VARIANTS = {"auto": {}, "forced": {}, "even": {"CLO_DECODE_STREAMK": "0"}, "spread": {"CLO_DECODE_SPREAD": "1"}}
H100_TAIL_RUNS = {(0, "auto"), (1, "forced"), (2, "forced"), (2, "even"), (3, "forced")}


def h100_tails_sweep(iters, copy_bw):
    """H100_TAIL_*_ROWS (`forced_splits_sweep`, cuDNN first): D = 128 one token with the
    spread tail in 4 pieces too."""
    forced_splits_sweep(H100_TAIL_D128_ROWS, H100_TAIL_VARIANTS, H100_TAIL_RUNS | {(4, "spread")})(iters, copy_bw)
    forced_splits_sweep(H100_TAIL_SPEC_ROWS + H100_TAIL_NARROW_ROWS + H100_TAIL_SHARED_ROWS, H100_TAIL_VARIANTS,
                        H100_TAIL_RUNS)(iters, copy_bw)



FORCED_SPLITS_VARIANTS = {"auto": {}, "auto.2": {}, "forced": {}}


# --wide-d64-d96 (stop 88): two 16-row tiles per block (decode_runs_wide_rows, D = 128 only until
# then; CLO_DECODE_WIDE_ROWS=1 forces it at any count) at D = 64 and 96, GQA 32/8 Nq 5 (20 rows:
# two tiles per KV head), where the 16-row blocks of one KV head read its keys once per tile
# (`--spec-contig`): the automatic count (16-row blocks) against wide blocks at 1-4 splits; no peer
WIDE_D64_D96_ROWS = ([(b, n, 8, d, 5, c) for d in (64, 96) for c in (True, False) for b in (8, 12, 16, 20, 24)
                      for n in (4096, 16384)]
                     + [(b, 2048, 8, d, 5, c) for d in (64, 96) for c in (True, False) for b in (12, 20)]
                     + [(b, 4096, 8, d, 8, True) for d in (64, 96) for b in (12, 20)])
WIDE_D64_D96_VARIANTS = {"auto": {}, "wide": {"CLO_DECODE_WIDE_ROWS": "1"}}
WIDE_D64_D96_RUNS = {(0, "auto")} | {(s, "wide") for s in (1, 2, 3, 4)}
# --wide-d64-d96-confirm (stop 88): the rule (decode_wide_rows_d64_d96_splits, two row tiles per
# block at D = 64 / 96) against the 16-row rules it replaced (CLO_DECODE_WIDE_ROWS=0: the wide
# rule off, in the count too), between and around the measured points; one-token MQA (32 rows)
WIDE_CONFIRM_ROWS = ([(b, n, 8, d, 5, c) for d in (64, 96) for c in (True, False) for b in (8, 10, 14, 16)
                      for n in (2048, 4096, 16384)]
                     + [(b, n, 8, 96, 5, c) for c in (True, False) for b in (18, 22) for n in (2048, 8192)]
                     + [(b, 4096, 1, d, 1, c) for d in (64, 96) for c in (True, False) for b in (64, 96, 128)]
                     + [(b, 8192, 8, d, 8, c) for d in (64, 96) for c in (True, False) for b in (9, 15)])
WIDE_CONFIRM_VARIANTS = {"auto": {}, "old": {"CLO_DECODE_WIDE_ROWS": "0"}}
WIDE_CONFIRM_RUNS = {(0, "auto"), (0, "old")}
# --pair-spread-confirm (stop 88): paged D = 64 head pairs' automatic spread tail below 8192 keys
# (decode_pairs_spread_pieces) against 1 split (the count before) and 4 pieces; GQA and MHA
PAIR_SPREAD_ROWS = ([(b, n, 8, 64, 1, False) for b in (36, 38, 40, 42, 44) for n in (2048, 4096, 6144)]
                    + [(b, n, 32, 64, 1, False) for b in (9, 10) for n in (2048, 4096)] + [(40, 8192, 8, 64, 1, False)])
PAIR_SPREAD_RUNS = {(0, "auto"), (1, "forced"), (4, "spread")}
# --h100-pairs (stop 107): paged D = 64 head pairs in their band (1.06-1.35 pairs per SM) on a
# non-HBM3e sm_90 part, where v31's balanced 2 splits still run (paged GQA 32/8 B=40/2K 67.9 us
# against cuDNN's 59.3 at 773c8c4) while stop 99 read D = 128's 1 split ahead of its balanced 2
# at the same units (B=20/2K 60.4 / 66.4): auto, 1 and 3 splits, and the spread tail in 4 pieces
H100_PAIR_ROWS = ([(b, n, 8, 64, 1, False) for b in (34, 36, 40, 42, 44) for n in (2048, 4096, 8192)]
                  + [(b, n, 32, 64, 1, False) for b in (9, 10) for n in (2048, 4096)]
                  + [(b, 16384, 8, 64, 1, False) for b in (36, 40, 44)] + [(10, 16384, 32, 64, 1, False)])
H100_PAIR_RUNS = {(0, "auto"), (1, "forced"), (3, "forced"), (4, "spread")}
# --h100-bands (stop 107): the split bands the H100 still takes from v28-v33 (before the row boxes
# and stop 92's changes moved the 1-split kernel 11-12%: stop 99's D = 128 one-tail band, stop
# 107's D = 64 pairs), auto against 1 split, even 2 and 3: D = 128 at 2.1-2.5 units per SM
# (one token, Nq 2, MHA), D = 256 at 1-1.35, D = 96 paged 2-3.05 and contiguous 1.06-2.95,
# contiguous D = 64 at 2-2.7 (balanced at two blocks per SM), paged D = 64 without head pairs
# (Nq 2) 3 at 2.1-2.45; and one row of the pairs' new 1 split
H100_BAND_ROWS = ([(b, n, 8, 128, 1, c) for c in (False, True) for b in (35, 38, 41) for n in (2048, 8192)]
                  + [(38, n, 8, 128, 2, False) for n in (2048, 8192)] + [(9, 2048, 32, 128, 1, False),
                                                                         (9, 8192, 32, 128, 1, False),
                                                                         (10, 8192, 32, 128, 1, True)]
                  + [(b, n, 8, 256, 1, c) for c in (False, True) for b in (17, 20, 22) for n in (2048, 8192)]
                  + [(b, n, 8, 96, 1, False) for b in (34, 40, 44) for n in (2048, 8192)] + [(48, 8192, 8, 96, 1, False)]
                  + [(b, n, 8, 96, 1, True) for b, n in ((20, 8192), (30, 8192), (36, 2048), (36, 8192), (44, 2048),
                                                         (44, 8192))]
                  + [(10, 2048, 32, 96, 1, False), (10, 8192, 32, 96, 1, False), (6, 8192, 32, 96, 1, True)]
                  + [(b, n, 8, 64, 1, True) for b in (35, 40, 44) for n in (2048, 8192)]
                  + [(b, n, 8, 64, 2, False) for b in (36, 40) for n in (2048, 8192)] + [(40, 2048, 8, 64, 1, False)])
# --h100-bands-next (stop 107): where --h100-bands read 3 splits ahead of the automatic 2 on the
# H100: paged D = 96 at 2-2.9 units per SM (4-16K keys) and contiguous D = 64 at 2-2.7 (2-16K)
H100_BAND_NEXT_ROWS = ([(b, n, 8, 96, 1, False) for b in (34, 37, 40, 42, 44) for n in (4096, 8192, 16384)]
                       + [(10, n, 32, 96, 1, False) for n in (4096, 16384)] + [(36, 2048, 8, 96, 1, False)]
                       + [(b, n, 8, 64, 1, True) for b in (34, 37, 40, 42, 44) for n in (2048, 4096, 16384)]
                       + [(9, n, 32, 64, 1, True) for n in (2048, 4096)])
# --h100-small-grids (stop 107): paged head_dim 64 / 96 small grids (one token, up to 8 rows a KV
# head, at most one unit per SM) on a non-HBM3e sm_90 part, which keeps the generic SMs // units
# splits: auto against the HBM3e rule's count (about two blocks per SM, stops 77-78)
H100_SMALL_GRID_ROWS = ([(b, n, 8, d, 1, False) for d in (64, 96) for b, n in ((16, 4096), (13, 4096), (12, 4096),
                                                                             (9, 8192), (5, 4096), (4, 16384),
                                                                             (3, 16384), (16, 16384))]
                        + [(4, 4096, 32, d, 1, False) for d in (64, 96)])


def h100_small_grid_runs(row, sms: int) -> set:
    """auto, the generic count (`_generic_small_grid_count`) and the HBM3e small-grid count
    (decode_small_grid_two_blocks_splits before its cut: 2 SMs // units splits of 512 keys or
    more up to 16, else of 1024 keys or more)."""
    B, N, hkv = row[:3]
    units = B * hkv
    two = 2 * sms // units
    two = two if two <= 16 and N // 512 >= two else min(two, N // 1024)
    return {(0, "auto"), (two, "forced"), (_generic_small_grid_count(units, N, sms), "forced")}


# --h100-half-wave (stop 107): paged head_dim 64 / 96 one-token units past half a unit per SM to
# 2/3 on a non-HBM3e sm_90 part (decode_small_grid_half_wave_splits: 3 splits), auto against the
# generic 1 split and 2; out of the band (B=12) and contiguous (1 split) beside
H100_HALF_WAVE_ROWS = ([(b, n, 8, d, 1, False) for d in (64, 96) for b in (9, 10, 11) for n in (2048, 4096, 16384)]
                       + [(12, 8192, 8, d, 1, False) for d in (64, 96)] + [(10, 8192, 8, d, 1, True) for d in (64, 96)])
H100_HALF_WAVE_RUNS = {(0, "auto"), (1, "forced"), (2, "forced"), (3, "forced")}
# --h100-half-wave-next (stop 107, for the next stop): the same half-wave band (0.5-0.67 units per
# SM, one token, GQA 32/8) where the H100 ran 1 split before stop 108: contiguous D = 64 / 96 (stop 107's
# contiguous B=10/8K read 3 splits 4-6% ahead) and D = 128 on both layouts; auto against 2 and 3
H100_HALF_WAVE_NEXT_ROWS = ([(b, n, 8, d, 1, True) for d in (64, 96) for b in (9, 10, 11) for n in (2048, 4096, 16384)]
                            + [(b, n, 8, 128, 1, c) for c in (False, True) for b in (9, 11) for n in (4096, 16384)])
H100_BAND_VARIANTS = {"auto": {}, "forced": {}, "even": {"CLO_DECODE_STREAMK": "0"}}
# --h100-d128-band (stop 108): D = 128 at 2.1-2.5 units per SM (even 2 splits) from 4096 keys,
# where stop 107's --h100-bands read 3 splits 1-3% ahead on GQA rows from 8192 keys and 3% behind
# on MHA paged B=9/8K: more GQA batches, 16K keys, MHA on both layouts; auto against 3
H100_D128_BAND_ROWS = ([(b, n, 8, 128, 1, c) for c in (False, True) for b in (35, 37, 39, 41) for n in (8192, 16384)]
                       + [(b, n, 32, 128, 1, c) for c in (False, True) for b in (9, 10) for n in (8192, 16384)]
                       + [(38, 4096, 8, 128, 1, c) for c in (False, True)] + [(38, 16384, 8, 128, 2, False)])
H100_D128_BAND_RUNS = {(0, "auto"), (3, "forced")}
# --h100-d128-next (stop 108): one-token GQA 32/8 rows around stop 108's H100 rules: the half-wave
# band (0.5-0.67 units per SM) at the lengths --h100-half-wave-next did not read (contiguous
# D = 128 at 2048 / 8192 keys, paged D = 128 at 8192, B=10); 0.7-1.0 units per SM, where the
# contiguous D = 128 block's 1 split is bound by its bytes in flight (B=12-14; D = 64 / 96 beside);
# below half a unit per SM (B=6, 8: the generic SMs // units against 2 SMs // units); D = 128 at
# 2.0-2.1 units per SM (1 split; HBM3e parts take 3 from 2.0) and 2.5-3 (1; HBM3e 2): auto against
# 1, 2, 3 (and two blocks per SM below half)
H100_D128_NEXT_ROWS = ([(10, n, 8, 128, 1, True) for n in (2048, 4096, 8192, 16384)]
                       + [(b, n, 8, 128, 1, True) for b in (9, 11) for n in (2048, 8192)]
                       + [(10, n, 8, 128, 1, False) for n in (4096, 8192, 16384)]
                       + [(b, 8192, 8, 128, 1, False) for b in (9, 11)]
                       + [(b, n, 8, 128, 1, True) for b in (12, 13, 14) for n in (4096, 16384)]
                       + [(b, 16384, 8, 128, 1, False) for b in (12, 14)]
                       + [(b, 16384, 8, d, 1, True) for d in (64, 96) for b in (12, 14)]
                       + [(b, 16384, 8, 128, 1, True) for b in (6, 8)]
                       + [(b, n, 8, 128, 1, c) for c in (False, True) for b in (33, 34) for n in (8192, 16384)]
                       + [(b, 16384, 8, 128, 1, c) for c in (False, True) for b in (42, 44, 46)])


# --h100-contig-small (stop 108): contiguous D = 128 one-token small grids on the H100, where
# decode_tma_stages_for gives grids of at most one block per SM the cp.async kernel (HBM3e parts:
# TMA 3): the kernel at the generic count (SMs // units, 1 past half the SMs) and at 2 SMs // units,
# against the TMA kernel at 3 and 4 stages; GQA 32/8 B=1-16 and MHA B=1-2 at 16K keys, a few
# shorter; no peer but cuDNN
H100_CONTIG_SMALL_ROWS = ([(b, 16384, 8, 128, 1, True) for b in (1, 2, 4, 5, 6, 8, 9, 12, 14, 16)]
                          + [(b, 4096, 8, 128, 1, True) for b in (6, 12, 16)] + [(b, 2048, 8, 128, 1, True) for b in (12, 13)]
                          + [(b, 16384, 32, 128, 1, True) for b in (1, 2)])
H100_CONTIG_SMALL_VARIANTS = {"auto": {}, "forced": {}, "tma3": {"CLO_DECODE_VARIANT": "2", "CLO_DECODE_TMA_STAGES": "3"},
                              "tma4": {"CLO_DECODE_VARIANT": "2", "CLO_DECODE_TMA_STAGES": "4"}}


def h100_contig_small_runs(row, sms: int) -> set:
    """auto; the generic count on the automatic kernel and on TMA 3 / 4; 2 SMs // units on both."""
    B, N, hkv = row[:3]
    units = B * hkv
    generic = _generic_small_grid_count(units, N, sms)
    two = min(2 * sms // units, N // 128, 128)
    return {(0, "auto"), (generic, "forced"), (generic, "tma3"), (generic, "tma4"), (two, "forced"), (two, "tma3")}


# --h100-d128-confirm (stop 108): the D = 128 second-wave rules' new edges at the lengths the
# sweeps before did not read: 2.06 units per SM at 4096 keys, 2.5-2.8 at 8192 (and 4096, outside),
# 2.91 at 16K (outside); auto against 1, 2, 3
H100_D128_CONFIRM_ROWS = ([(34, 4096, 8, 128, 1, c) for c in (False, True)]
                          + [(b, 8192, 8, 128, 1, c) for c in (False, True) for b in (42, 44, 46)]
                          + [(44, 4096, 8, 128, 1, c) for c in (False, True)]
                          + [(48, 16384, 8, 128, 1, c) for c in (False, True)])


# --h100-contig-tma (stop 108): contiguous D = 128 small grids on TMA 3 (the H100 since stop 108;
# the cp.async kernel before): one token, GQA 32/8, B=6-14 at the automatic count against 1, 2, 3
# and 2 SMs // units; then Nq 2 / 4 (8 / 16 rows), MHA and the issue's B=1/16K at the automatic
# count on TMA 3 against the cp.async kernel (CLO_DECODE_VARIANT=1)
H100_CONTIG_TMA_ROWS = ([(b, n, 8, 128, 1, True) for b in (6, 8, 9, 11, 12, 13) for n in (2048, 16384)]
                        + [(b, 4096, 8, 128, 1, True) for b in (7, 10, 14)])
H100_CONTIG_KERNEL_ROWS = ([(b, 16384, 8, 128, nq, True) for nq in (2, 4) for b in (4, 9, 12)]
                           + [(b, 16384, 32, 128, 1, True) for b in (1, 2, 3)] + [(1, 16384, 8, 128, 1, True)])
H100_CONTIG_KERNEL_VARIANTS = {"auto": {}, "cp": {"CLO_DECODE_VARIANT": "1"}}


def h100_contig_tma_sweep(iters, copy_bw):
    """H100_CONTIG_TMA_ROWS at auto, 1, 2, 3 (and 2 SMs // units below half a unit per SM);
    H100_CONTIG_KERNEL_ROWS auto
    against the cp.async kernel at the automatic count."""
    forced_splits_sweep(H100_CONTIG_TMA_ROWS, H100_BAND_VARIANTS, h100_d128_next_runs)(iters, copy_bw)
    forced_splits_sweep(H100_CONTIG_KERNEL_ROWS, H100_CONTIG_KERNEL_VARIANTS, {(0, "auto"), (0, "cp")})(iters, copy_bw)


# --h100-wave-top (stop 108): D = 128 past 2.8 units per SM to just under 3 (B=47, 49) from 8192
# keys, where stop 108 gives 2 splits (1 before); auto against 1, 2, 3
H100_WAVE_TOP_ROWS = [(b, n, 8, 128, 1, c) for c in (False, True) for b in (47, 49) for n in (8192, 16384)]


# --h100-d128-left (stop 108, for the next stop): what stop 108 left on the H100. Contiguous
# D = 128 one-token small grids below half a unit per SM on TMA 3, where the generic count
# (SMs // units) was best at neither end (B=6: 1 split led at 2K, 3 at 16K): B=3-8 at 2K, 8K and
# 16K, auto against 1, 2, 3 and 2 SMs // units; paged D = 128 in the half-wave band from 8192 keys
# (3 splits; 2 read ahead at B=9/16K): B=9-11 at 8K and 16K, auto against 2
H100_D128_LEFT_ROWS = ([(b, n, 8, 128, 1, True) for b in (3, 4, 5, 6, 7, 8) for n in (2048, 8192, 16384)]
                       + [(b, n, 8, 128, 1, False) for b in (9, 10, 11) for n in (8192, 16384)])

# --h100-d128-left-confirm (stop 109): around stop 109's two H100 rules (contiguous D = 128 3
# splits at 0.33-0.4 units per SM from 8192 keys, 1 at 0.4-0.5; paged D = 128 2 splits at
# 0.5-0.62): contiguous GQA 32/4 (8-row units) B=13 (0.39), B=15 (0.45), B=6 GQA 32/8 at 4K
# (below the 3-split band's 8192 keys), MHA B=2 (0.48, one-row units: not the rule's); paged
# B=7 / 8 (0.42 / 0.48, the generic 2: 1 not measured there) and B=10/4K (below 8192 keys)
H100_D128_LEFT_CONFIRM_ROWS = ([(b, n, 4, 128, 1, True) for b in (13, 15) for n in (2048, 16384)]
                               + [(6, 4096, 8, 128, 1, True)] + [(2, n, 32, 128, 1, True) for n in (2048, 16384)]
                               + [(b, n, 8, 128, 1, False) for b in (7, 8) for n in (2048, 16384)]
                               + [(10, 4096, 8, 128, 1, False)])

# --h100-paged-depth (stop 109): paged D = 128 one-token GQA 32/8 grids just past half a unit per
# SM on the H100 (2 splits since stop 109 to 5/8, 3 to 2/3: 1.09-1.5 blocks per SM, where the TMA
# kernel runs 2 stages), still 0.97x cuDNN at B=9/16K: the depths and the cp.async kernel at 2 and
# 3 splits; B=7/16K (the generic 2: 0.85 blocks per SM, small-grid depth) beside
H100_PAGED_DEPTH_ROWS = [(b, n, 8, 128, 1, False) for b, n in ((9, 8192), (9, 16384), (10, 16384), (11, 16384),
                                                              (7, 16384))]
H100_PAGED_DEPTH_VARIANTS = {"auto": {}, "cp": {"CLO_DECODE_VARIANT": "1"},
                             **{f"tma{st}": {"CLO_DECODE_VARIANT": "2", "CLO_DECODE_TMA_STAGES": str(st)}
                                for st in (2, 3, 4)}}
H100_PAGED_DEPTH_RUNS = {(0, "auto"), (2, "tma2"), (2, "tma3"), (2, "tma4"), (2, "cp"), (3, "tma2"), (3, "tma3"),
                         (3, "cp")}


# --h100-d224-splits (stop 110): paged rows that are not whole lines on the D = 256 kernel (one
# block per SM) in the one-tail band, where the H100 runs 3 even splits from 4096 keys (stop 99)
# and paged D = 224 B=20/16K read 0.92x flash: at 160 units 3 splits are 3.6 waves (the last 64%
# full), 4 are 4.85; B=17 at 3 is 3.09 waves. Auto (3) against 2-8 even splits, flash first
# (cuDNN trails at these head dims); contiguous D = 224 and paged D = 256 (whole lines, balanced
# 2) beside
H100_D224_SPLITS_ROWS = ([(b, n, 8, 224, 1, False) for b in (17, 20, 22) for n in (4096, 16384)]
                         + [(18, 16384, 8, 224, 1, False), (20, 8192, 8, 224, 1, False)]
                         + [(20, n, 8, d, 1, False) for d in (176, 240) for n in (4096, 16384)]
                         + [(20, 16384, 8, 224, 1, True), (20, 16384, 8, 256, 1, False)])
H100_D224_SPLITS_RUNS = {(0, "auto")} | {(s, "forced") for s in (2, 3, 4, 5, 6, 8)}
# (the forced counts without head clusters, automatic there since 937b13f: as measured at bf8c7d1 /
# 48ac79d; "auto" was then 3 splits, then the 2048-key splits to 8, no clusters)
H100_D224_SPLITS_VARIANTS = {"auto": {}, "forced": {"CLO_DECODE_HEAD_CLUSTER": "0"}}
# --h100-d224-long (stop 110): --h100-d224-splits read 8 even splits fastest at 16384 keys at every
# point of the band (D = 224 B=20 880.5 -> 824.1 us, 4 and 5 ahead at 8192 keys): how the best
# count grows with the length (8192-32768 keys, 3-16 splits), at D = 144-240, and outside the
# band (B=10, 0.6 units per SM; B=40, 2.4) for the record. hc: KV heads 2k, 2k + 1 (the pair
# that shares a line per token row) as clusters of 2 (CLO_DECODE_HEAD_CLUSTER=2), so the pair
# always starts together; p0-p2: the maps' L2 promotion none / 64 / 128 B (the H100's is 256 B:
# a 448-byte row at offset 192 of 256 fetches 768 bytes when its neighbours' parts are not read
# from L2). Then the automatic count at each promotion on other paged rows that are not whole
# 256-byte segments and trail cuDNN: D = 96 B=64/2K (192-byte rows), D = 64 B=16/4K (head pairs),
# D = 112 B=20/16K (224-byte rows on the D = 128 kernel)
H100_D224_LONG_ROWS = ([(b, n, 8, 224, 1, False) for b in (17, 20, 22) for n in (8192, 16384, 32768)]
                       + [(20, 12288, 8, 224, 1, False)]
                       + [(20, n, 8, 176, 1, False) for n in (8192, 16384, 32768)]
                       + [(20, n, 8, 240, 1, False) for n in (8192, 32768)]
                       + [(20, 16384, 8, d, 1, False) for d in (144, 160)]
                       + [(b, 16384, 8, 224, 1, False) for b in (10, 40)]
                       + [(64, 2048, 8, 96, 1, False), (16, 4096, 8, 64, 1, False), (20, 16384, 8, 112, 1, False),
                          (20, 4096, 8, 224, 1, False)])
H100_D224_LONG_VARIANTS = {**H100_D224_SPLITS_VARIANTS, "hc": {"CLO_DECODE_HEAD_CLUSTER": "2"},
                           **{f"p{v}": {"CLO_TMA_L2_PROMOTION": str(v), "CLO_DECODE_HEAD_CLUSTER": "0"}
                              for v in (0, 1, 2)}}


def h100_d224_long_runs(row, sms: int) -> set:
    """D = 144-240 on the D = 256 kernel: auto, 3-16 splits, clusters and promotions at 3 and 8;
    the others: the automatic count at each promotion."""
    promos = {(0, "auto")} | {(0, f"p{v}") for v in (0, 1, 2)}
    if row[3] <= 128:
        return promos
    return (promos | {(s, "forced") for s in (3, 4, 6, 8, 12, 16)}
            | {(s, v) for s in (3, 8) for v in ("hc", "p1")} | {(3, "p0"), (3, "p2")})
# --h100-d224-confirm (stop 110): the rule (decode_tail_splits' shared lines: 2048 keys a split
# to 16, and decode_head_clusters_pay) against the same count without head clusters and the
# counts before it (3, and stop 110's first 8 at most), under SHARED_LINES_VARIANTS' auto and nohc
H100_D224_CONFIRM_ROWS = ([(b, 32768, 8, 224, 1, False) for b in (20, 22)]
                          + [(20, 16384, 8, 224, 1, False), (22, 8192, 8, 224, 1, False),
                             (20, 32768, 8, 240, 1, False), (20, 8192, 8, 176, 1, False)])
H100_D224_CONFIRM_RUNS = {(0, "auto"), (0, "nohc"), (3, "nohc"), (8, "nohc")}
# --h100-shared-lines-bands (prepared in stop 110, not yet run): paged rows that share lines on
# the D = 256 kernel outside the one-tail band, where the H100 runs 1 split (from 1.35 units per
# SM: B=24-64 at GQA 32/8 are 1.45-3.9 waves of one block per SM) or the generic small-grid
# count (B=4-8), and `--h100-d224-long` read 8 splits with head clusters 10-18% ahead at B=10
# and 40 (16K 457.4 -> 411.4, 1999.7 -> 1629.5): auto against 2, 3, 4, 8 and 16 splits (head
# clusters automatic from 3), flash first
H100_SHARED_LINES_BANDS_ROWS = ([(b, n, 8, 224, 1, False) for b in (6, 10, 14, 24, 32, 40, 48, 64)
                                 for n in (4096, 8192, 16384)]
                                + [(40, 16384, 8, d, 1, False) for d in (176, 240)])
H100_SHARED_LINES_BANDS_RUNS = {(0, "auto")} | {(s, "forced") for s in (2, 3, 4, 8, 16)}

# --h100-shared-lines-confirm (stop 111): the rule that came of the bands sweep (decode_tail_splits:
# past the band 2048 keys a split from 4096 keys, below one unit per SM from 16384 keys where that
# passes a wave) against the count before (1 past the band, SMs // units below), without head
# clusters, and with head clusters at that count (and at 2 splits past the band): where the
# splits' gain comes from. Also grids the bands sweep did not reach (B=96-128, 5.8-7.8 units per
# SM; B=2-4; MHA).
H100_SHARED_LINES_CONFIRM_ROWS = ([(b, n, 8, 224, 1, False) for b, n in ((24, 4096), (24, 8192), (32, 12288),
                                                                         (40, 16384), (64, 8192), (96, 8192),
                                                                         (96, 16384), (128, 16384))]
                                  + [(10, 16384, 32, 224, 1, False), (64, 6144, 8, 176, 1, False)]
                                  + [(b, n, 8, 224, 1, False) for b, n in ((2, 32768), (4, 16384), (4, 32768),
                                                                           (6, 16384), (12, 16384), (16, 16384))])
SHARED_LINES_VARIANTS = {"auto": {}, "nohc": {"CLO_DECODE_HEAD_CLUSTER": "0"},
                         "hc": {"CLO_DECODE_HEAD_CLUSTER": "2"}, "forced": {}}


def shared_lines_sweep(rows, runs):
    """A `SWEEPS` entry of stop 111's: `rows` under SHARED_LINES_VARIANTS (head clusters as the
    rule has them, off, forced), flash first."""
    return forced_splits_sweep(rows, SHARED_LINES_VARIANTS, runs, peer="sdpa-flash")


def h100_shared_lines_confirm_runs(row, sms: int) -> set:
    """auto with and without head clusters, the count before (1 past one unit per SM, else
    SMs // units) with and without, and past the SMs 2 splits with head clusters."""
    units = row[0] * row[2]
    before = 1 if units > sms else min(16, sms // units)
    runs = {(0, "auto"), (0, "nohc"), (before, "forced"), (before, "hc")}
    return runs | {(2, "hc")} if units > sms else runs


# --hbm3e-shared-lines (stop 111): the same paged D = 224 rows on an HBM3e part (the H200), whose
# rules (decode_tail_splits: 3 in the band from 8192 keys or past 1.1 units per SM, else 2; 1 past
# it; no head clusters) were set at stop 87, before the H100's 2048-key splits and head clusters:
# auto, auto with head clusters, 2 and 3 splits, and 2048 keys a split, with and without
HBM3E_SHARED_LINES_ROWS = [(b, n, 8, 224, 1, False) for b in (6, 10, 20, 24, 40, 64) for n in (4096, 8192, 16384)]


def hbm3e_shared_lines_runs(row, sms: int) -> set:
    """auto (with and without head clusters), 2, 3 (both ways) and N / 2048 splits (both ways)."""
    by_keys = max(2, min(16, row[1] // 2048))
    return {(0, "auto"), (0, "hc"), (2, "forced"), (3, "forced"), (3, "hc"), (by_keys, "forced"), (by_keys, "hc")}


# --h100-shared-lines-final (stop 111): head clusters at 1-2 splits from 4096 keys
# (decode_head_clusters_pay) and the small grids that keep SMs // units, auto against the same
# count without and with head clusters forced (at 2048 keys: left out by the rule)
H100_SHARED_LINES_FINAL_ROWS = ([(b, n, 8, 224, 1, False) for b, n in ((10, 4096), (10, 8192), (14, 8192), (24, 4096),
                                                                       (40, 4096), (64, 4096), (40, 2048), (10, 2048),
                                                                       (4, 16384), (2, 32768))]
                                + [(64, 6144, 8, 176, 1, False)])
H100_SHARED_LINES_FINAL_RUNS = {(0, "auto"), (0, "nohc"), (0, "hc")}


# --h100-shared-lines-short (stop 111): below 4096 keys, where `--h100-shared-lines-final` read head
# clusters 1-2% ahead at 2K, none (auto: decode_head_clusters_pay leaves them off there) against
# forced; run at 58e8dd0 as auto (its decode_head_clusters_pay took them at every length) against
# "nohc", level: not taken
H100_SHARED_LINES_SHORT_ROWS = ([(b, n, 8, 224, 1, False) for b, n in ((6, 2048), (10, 1024), (10, 2048), (20, 2048),
                                                                       (24, 2048), (40, 1024), (40, 2048), (64, 2048),
                                                                       (64, 512))]
                                + [(40, 2048, 8, 176, 1, False), (20, 2048, 8, 240, 1, False), (10, 2048, 32, 224, 1, False)])
H100_SHARED_LINES_SHORT_RUNS = {(0, "auto"), (0, "hc")}


def h100_d128_next_runs(row, sms: int) -> set:
    """auto, 1, 2 and 3 splits, and below half a unit per SM 2 SMs // units."""
    units = row[0] * row[2]
    runs = {(0, "auto"), (1, "forced"), (2, "forced"), (3, "forced")}
    return runs | {(2 * sms // units, "forced")} if 2 * units <= sms else runs
H100_BAND_RUNS = {(0, "auto"), (1, "forced"), (2, "even"), (3, "forced")}
# --pair-depth (stop 88): paged D = 64 head pairs on the D = 128 kernel at the depths and schedule
# D = 128 rows get on HBM3e parts (4 stages on small grids, 3 to 1.35 units per SM, the spread
# tail: CLO_DECODE_SPREAD=1 lets head pairs run it) against their own (3 / 2 stages, even grid)
PAIR_DEPTH_ROWS = [(b, n, 8, 64, 1, False) for b, n in ((40, 2048), (40, 4096), (40, 16384), (44, 2048), (36, 4096),
                                                       (32, 4096), (24, 4096), (32, 16384))]
PAIR_DEPTH_VARIANTS = {"auto": {}, "st3": {"CLO_DECODE_TMA_STAGES": "3"}, "st4": {"CLO_DECODE_TMA_STAGES": "4"},
                       "spread": {"CLO_DECODE_SPREAD": "1"}, "forced": {"CLO_DECODE_SPREAD": "0"}}
PAIR_DEPTH_RUNS = {(0, "auto"), (0, "st3"), (0, "st4"), (1, "forced"), (3, "forced"), (3, "spread"), (4, "spread")}

# --wide-small (stop 89): two row tiles per block at D = 64 / 96 below the rule's 0.45 KV heads
# per SM (GQA 32/8 Nq 5, B = 1-6: 0.06-0.36), both layouts: the automatic call (16-row blocks)
# against wide blocks at the counts that fill one wave (SMs // units), two blocks per SM (twice
# that) and half a wave; no peer. Each row's counts are its own (`wide_small_runs`).
WIDE_SMALL_ROWS = [(b, n, 8, d, 5, c) for d in (64, 96) for c in (True, False) for b in (1, 2, 4, 6)
                   for n in (4096, 16384)]
# --wide-mid (stop 89): D = 64 at 1.03-1.38 KV heads per SM (B = 17-22), where the rule leaves
# 16-row blocks (contiguous: even 2 splits, paged: 1): auto, wide at 1-3, 16-row at 1-2
WIDE_MID_ROWS = ([(b, n, 8, 64, 5, True) for b in (17, 18, 20, 22) for n in (2048, 4096, 8192, 16384)]
                 + [(b, n, 8, 64, 5, False) for b in (18, 20, 22) for n in (4096, 16384)])
WIDE_MID_VARIANTS = {"auto": {}, "wide": {"CLO_DECODE_WIDE_ROWS": "1"}, "forced": {"CLO_DECODE_WIDE_ROWS": "0"}}
WIDE_MID_RUNS = {(0, "auto")} | {(s, "wide") for s in (1, 2, 3)} | {(s, "forced") for s in (1, 2)}

# --wide-small-confirm (stop 89): the two-row-tile rule below 0.45 units per SM and contiguous
# D = 64 past one (decode_wide_rows_d64_d96_splits) against the 16-row rules
# (CLO_DECODE_WIDE_ROWS=0; it does not undo stop 89's 1 split for contiguous D = 64 two-tile units
# in the two-blocks band, hence "s2/old"), between and around the measured points: odd
# batches, 2048 and 8192 keys, Nq 8, one-token MQA (32 rows); contiguous D = 64 at 2048 keys past
# one unit per SM (16-row 1 split since stop 89) also against the even 2 splits it took before
WIDE_SMALL_CONFIRM_ROWS = ([(b, n, 8, d, 5, c) for d in (64, 96) for c in (True, False) for b in (1, 3, 5, 7)
                            for n in (2048, 8192)]
                           + [(b, 4096, 1, d, 1, c) for d in (64, 96) for c in (True, False) for b in (8, 24, 48)]
                           + [(2, 16384, 8, d, 8, c) for d in (64, 96) for c in (True, False)]
                           + [(b, n, 8, 64, 5, True) for b in (17, 19, 21) for n in (3072, 4096, 6144)]
                           + [(20, n, 8, 64, 8, True) for n in (2048, 4096)] + [(19, 2048, 8, 64, 5, True)])
WIDE_SMALL_CONFIRM_RUNS = {(0, "auto"), (0, "old"), (2, "old")}

# --wide-d64-d96-h100 (stop 101): decode_wide_rows_d64_d96_splits on other sm_90 parts (two row
# tiles at D = 64 / 96 off HBM3e; head_dim 64's own counts there) against the 16-row rules (old),
# over stop 88-89's confirm rows, head_dim 64 past one unit per SM (1 split off HBM3e) and around
# 0.73 units per SM; paged D = 96 also with boxes spanning its planes (the tail spans: HBM3e only
# before c1011db, which takes them on every sm_90 part)
WIDE_H100_ROWS = (WIDE_CONFIRM_ROWS + WIDE_SMALL_CONFIRM_ROWS
                  + [(b, n, 8, 64, 5, c) for c in (True, False) for b in (18, 22, 23, 26) for n in (2048, 8192)]
                  + [(b, 4096, 8, 64, 5, c) for c in (True, False) for b in (11, 13)])
WIDE_H100_VARIANTS = {**WIDE_CONFIRM_VARIANTS, "span": {"CLO_DECODE_PLANE_BOXES": "2"}}


# --wide-paged-depth (stop 89): paged D = 64 two-row-tile blocks trail contiguous ones where the
# contiguous gain from a second block per SM (B=4/16K at 8 splits: 56.6 against 41.0) or run past
# one unit per SM (B=20/4K): wide blocks at 2, 3 (the launcher's beyond one wave) and 4 stages,
# both layouts, 3 / 4 / 8 splits
WIDE_PAGED_DEPTH_ROWS = [(b, n, 8, 64, 5, c) for c in (False, True) for b, n in ((4, 16384), (8, 16384), (20, 4096))]
WIDE_PAGED_DEPTH_VARIANTS = {"wide": {"CLO_DECODE_WIDE_ROWS": "1"},
                             "wide.st2": {"CLO_DECODE_WIDE_ROWS": "1", "CLO_DECODE_TMA_STAGES": "2"},
                             "wide.st4": {"CLO_DECODE_WIDE_ROWS": "1", "CLO_DECODE_TMA_STAGES": "4"}}
WIDE_PAGED_DEPTH_RUNS = {(s, v) for s in (3, 4, 8) for v in WIDE_PAGED_DEPTH_VARIANTS}

# --wide-paged-d64 (stop 89, after the two-tile D = 64 kernel's launch bounds ask two blocks per
# SM): paged D = 64 Nq 5 across the two-tile bands, the 16-row rules (old) and the automatic call
# against wide blocks at 2 and 3 stages (w2 / w3) at the paged rule's count and at the contiguous
# rule's (twice it; 3 past one unit per SM; `wide_paged_d64_runs`)
WIDE_PAGED_D64_ROWS = [(b, n, 8, 64, 5, False) for b, n in (
    (2, 16384), (4, 16384), (6, 8192), (8, 16384), (12, 4096), (16, 16384), (18, 4096), (20, 4096), (20, 16384),
    (22, 8192), (12, 2048), (20, 2048))]
WIDE_PAGED_D64_VARIANTS = {"auto": {}, "old": {"CLO_DECODE_WIDE_ROWS": "0"},
                           "w2": {"CLO_DECODE_WIDE_ROWS": "1", "CLO_DECODE_TMA_STAGES": "2"},
                           "w3": {"CLO_DECODE_WIDE_ROWS": "1", "CLO_DECODE_TMA_STAGES": "3"}}

# --wide-paged-d64-confirm (stop 89): paged D = 64 on the contiguous rule's counts (two-tile
# blocks two per SM) against the 16-row rules, between the measured points; MQA, Nq 8
WIDE_PAGED_D64_CONFIRM_ROWS = ([(b, n, 8, 64, 5, False) for b, n in (
    (1, 16384), (1, 4096), (3, 8192), (5, 2048), (8, 4096), (10, 16384), (14, 8192), (17, 4096), (21, 16384),
    (19, 2048))] + [(24, 4096, 1, 64, 1, False), (2, 16384, 8, 64, 8, False)])


# --wide-short (stop 90): the small band's shortest tables (2-4K keys, where its splits of 256 keys
# leave part of the SMs idle: B=1/2K at D = 64 runs 8 splits, 64 blocks): the automatic call and
# the 16-row rules (old) against wide blocks at splits of 256 and 512 keys, both layouts
WIDE_SHORT_ROWS = ([(b, n, 8, 64, 5, c) for c in (True, False) for b in (1, 2, 3) for n in (2048, 2560, 3072, 4096)]
                   + [(b, n, 8, 96, 5, c) for c in (True, False) for b in (1, 2) for n in (2048, 3072)])
WIDE_SHORT_VARIANTS = {**WIDE_CONFIRM_VARIANTS, **WIDE_D64_D96_VARIANTS}  # auto, old, wide


def wide_short_runs(row, sms: int) -> set:
    """auto, old, and wide blocks at splits of 256 and 512 keys."""
    return {(0, "auto"), (0, "old")} | {(row[1] // k, "wide") for k in (256, 512)}

# --wide-short-confirm (stop 90): paged D = 64's small band at one wave (SMs // units) against two
# (the contiguous rule's count) across lengths; the 16-row rules where the wide grid fills at most
# half the SMs (B=1/2K, MQA B=8/2K)
WIDE_SHORT_CONFIRM_ROWS = ([(b, n, 8, 64, 5, False) for b, n in (
    (1, 2048), (1, 8192), (1, 16384), (2, 2560), (2, 3072), (2, 8192), (2, 16384), (3, 2048), (3, 3072), (3, 4096),
    (3, 8192), (4, 2048), (4, 4096), (4, 8192), (5, 2048), (5, 4096), (6, 4096))]
    + [(b, n, 1, 64, 1, c) for b, n in ((24, 4096), (8, 2048), (16, 2048)) for c in (False, True)]
    + [(2, 4096, 8, 64, 8, False), (1, 2048, 8, 64, 5, True), (1, 2560, 8, 64, 5, True)])


# --wide-1k (stop 94): D = 64 / 96 Nq 5 (20 rows, two tiles) under 2048 keys, where
# decode_wide_rows_d64_d96_splits leaves 16-row blocks that read each KV head's keys twice (paged
# D = 96 B=16/1K: 30.0 us against 23.1 contiguous, stop 93's --tail-spans-confirm): the automatic
# call against two-tile blocks at 1, 2 and 4 splits and one wave's count, and (paged D = 96) those
# with the tail spans
WIDE_1K_ROWS = ([(b, 1024, 8, d, 5, c) for d in (96, 64) for c in (False, True) for b in (2, 4, 8, 12, 16, 20, 24)]
                + [(16, 1536, 8, d, 5, c) for d in (96, 64) for c in (False, True)]
                + [(16, 1024, 8, 96, 8, False), (16, 1024, 8, 128, 5, False), (16, 1024, 8, 128, 5, True)])
WIDE_1K_VARIANTS = {"auto": {}, "wide": {"CLO_DECODE_WIDE_ROWS": "1", "CLO_DECODE_PLANE_BOXES": "0"},
                    "wspan": {"CLO_DECODE_WIDE_ROWS": "1", "CLO_DECODE_PLANE_BOXES": "2"}}


def wide_1k_runs(row, sms: int) -> set:
    """auto, and wide blocks (and, paged D = 96, wide with tail spans) at 1, 2, 4 and one wave's splits."""
    counts = {1, 2, 4, min(row[1] // 256, _one_wave_splits(row, sms))}
    labels = ("wide", "wspan") if row[3] == 96 and not row[5] else ("wide",)
    return {(0, "auto")} | {(k, v) for k in counts for v in labels}

# --wide-1k-confirm (stop 94): decode_wide_rows_d64_d96_splits from 1024 keys (auto) against the
# 16-row rules (old) across batches and lengths of the band, Nq 8 and one-token MQA, and (paged
# D = 96) the tail spans from 512 keys a block against a box per plane (plane), also at one wave
# from 2048 keys where blocks of 512-2047 keys took a box per plane before
WIDE_1K_CONFIRM_ROWS = ([(b, 1024, 8, d, 5, c) for d in (96, 64) for c in (False, True)
                         for b in (3, 4, 5, 6, 8, 10, 12, 16, 20, 24)]
                        + [(b, n, 8, d, 5, c) for d in (96, 64) for c in (False, True) for b in (8, 16)
                           for n in (1280, 1900)]
                        + [(b, 1024, 8, 96, 8, False) for b in (6, 8, 12)]
                        + [(b, 1024, 1, d, 1, False) for d in (96, 64) for b in (48, 64, 100, 128, 180)]
                        + [(b, n, 8, 96, 5, False) for b, n in ((1, 16384), (2, 8192), (4, 4096), (8, 2048),
                                                                (1, 8192), (3, 4096))])
WIDE_1K_CONFIRM_VARIANTS = {"auto": {}, "old": {"CLO_DECODE_WIDE_ROWS": "0"}, "plane": {"CLO_DECODE_PLANE_BOXES": "0"}}

# --wide-1k-d64-contig (stops 96, 98): contiguous D = 64 two-tile rows in 1024-2047 keys where one
# wave holds 2 splits (45-66 units at 132 SMs), which decode_wide_rows_d64_d96_splits gives 4 splits
# since stop 98 (auto), against the 16-row blocks (old) and two-tile blocks at 2 and 4 splits:
# 20 rows (Nq 5 at GQA 4) and 32 rows (Nq 8 at GQA 4, one token at Hq 32 / Hkv 1)
WIDE_1K_D64_CONTIG_ROWS = ([(b, n, 8, 64, nq, True) for nq in (5, 8) for n in (1024, 1152, 1280, 1536, 2047)
                            for b in (6, 7, 8)]
                           + [(b, n, 1, 64, 1, True) for n in (1024, 1152, 1280, 1536, 2047) for b in (48, 56, 64)])
WIDE_1K_D64_CONTIG_VARIANTS = {"auto": {}, "old": {"CLO_DECODE_WIDE_ROWS": "0"}, "wide": {"CLO_DECODE_WIDE_ROWS": "1"}}
WIDE_1K_D64_CONTIG_RUNS = {(0, "auto"), (0, "old"), (2, "wide"), (4, "wide")}


def auto_old_runs(d96_paged_label: str):
    """`runs` for forced_splits_sweep: auto and old at the automatic count; paged D = 96 rows also
    `d96_paged_label` (their box-layout variant)."""
    def runs(row, sms: int) -> set:
        return {(0, "auto"), (0, "old")} | ({(0, d96_paged_label)} if row[3] == 96 and not row[5] else set())
    return runs

# --wide-d64-2k-h100 (stop 102): head_dim 64 two-tile rows from 2048 keys on the H100, where the
# fill loop's 1024-key cap leaves 2 splits at 2048 keys (contiguous Nq 5 B=8: 22.5 us against the
# 16-row blocks' 20.9, while 2047 keys ran 4 splits in 16.8 on the H200, stop 98) and the small
# band's 256-key splits (B=1/2K: 8 splits, 8.4 against 7.7): the automatic call and the 16-row
# rules (old) against two-tile blocks at 1-16 splits of at least 256 keys
WIDE_D64_2K_ROWS = ([(b, n, 8, 64, 5, c) for c in (True, False) for b in (1, 2, 6, 7, 8) for n in (2048, 3072, 4096)]
                    + [(b, n, 8, 64, 8, c) for c in (True, False) for b in (7, 8) for n in (2048, 4096)]
                    + [(b, n, 1, 64, 1, c) for c in (True, False) for b in (48, 56, 64) for n in (2048, 4096)]
                    + [(8, 2048, 8, 96, 5, c) for c in (True, False)])
WIDE_D64_2K_VARIANTS = {**WIDE_CONFIRM_VARIANTS, **WIDE_D64_D96_VARIANTS}  # auto, old, wide


# --h100-d64-two-waves (stop 104): contiguous head_dim 64 where one wave of one block per SM holds
# 2 splits (45-66 two-tile units at 132 SMs) now takes 4 from 2048 keys off HBM3e, after
# `--wide-d64-2k-h100` read 4 ahead at 2-4K; here 2K-16K: auto against wide 2 and 4. (B, N, Hkv, D,
# Nq, contiguous)
H100_D64_TWO_WAVES_ROWS = ([(b, n, 8, 64, 5, True) for b in (6, 7, 8) for n in (2048, 4096, 8192, 16384)]
                           + [(7, n, 8, 64, 8, True) for n in (2048, 8192, 16384)]
                           + [(b, n, 1, 64, 1, True) for b in (48, 56, 64) for n in (2048, 8192, 16384)])
H100_D64_TWO_WAVES_RUNS = {(0, "auto"), (2, "wide"), (4, "wide")}


def wide_d64_2k_runs(row, sms: int) -> set:
    """auto, old, and wide blocks at 1, 2, 4, 8 and one and two waves' splits of at least 256 keys."""
    counts = {1, 2, 4, 8} | {k * _one_wave_splits(row, sms) for k in (1, 2)}
    return {(0, "auto"), (0, "old")} | {(k, "wide") for k in counts if k <= min(128, row[1] // 256)}

# --paged-layouts (stop 91): where paged two-row-tile rows lose to the same keys contiguous, one
# layout change at a time: paged (random table) -> paged with its table in order -> contiguous
# token-major ([B, N, Hkv, D] storage: the paged key-row stride in boxes of 64 rows, no table) ->
# contiguous head-major; D = 64 / 96 Nq 5, D = 128 Nq 8 (spanning boxes closed its gap, stop 71)
# and one-token D = 96 at one wave and at 2.8 blocks per SM (where D = 128 took spanning boxes,
# stop 64) as controls; the automatic count at the automatic / 3 / 4 stages, and (paged only)
# without L2 promotion and under boxes spanning every plane (at D = 96 block 16: three 32-column
# planes, the kernel's tail spans; 3 stages at one wave, or 4). --paged-layouts-deep: the two-tile
# rows at 4-6 stages (a dev build with
# CUDA_LLM_OPS_DEV_DEFINES=CLO_DEV_DEEP_STAGES; elsewhere 5 and 6 stages are refused).
PAGED_LAYOUT_ROWS = [(16, 4096, 8, 96, 5), (8, 16384, 8, 96, 5), (16, 4096, 8, 64, 5), (8, 16384, 8, 64, 5),
                     (8, 16384, 8, 128, 8), (16, 4096, 8, 96, 1), (46, 8192, 8, 96, 1)]
PAGED_LAYOUTS = (("paged", False, None), ("paged seq", False, "sequential"),  # (name, contiguous, table order)
                 ("contig token-major", "token-major", None), ("contig", True, None))
PAGED_LAYOUT_VARIANTS = {"auto": {}, "st3": {"CLO_DECODE_TMA_STAGES": "3"}, "st4": {"CLO_DECODE_TMA_STAGES": "4"},
                         "p0": {"CLO_TMA_L2_PROMOTION": "0"}, "span": {"CLO_DECODE_PLANE_BOXES": "2"},
                         "span.st4": {"CLO_DECODE_PLANE_BOXES": "2", "CLO_DECODE_TMA_STAGES": "4"}}
PAGED_ONLY_VARIANTS = ("p0", "span", "span.st4")  # not run on the contiguous layouts
PAGED_LAYOUT_DEEP_VARIANTS = {f"st{k}": {"CLO_DECODE_TMA_STAGES": str(k)} for k in (4, 5, 6)}
# --tail-spans-confirm: the automatic tail spans (paged D = 96 two-row-tile blocks where
# decode_wide_row_boxes_pay) against a box per plane, on random and in-order tables, at and around
# the rule's edges (GQA 32/8 Nq 5 and 8; beyond one wave B=12/8K, B=24/4K; B=16/1K on 16-row blocks)
TAIL_SPANS_CONFIRM_ROWS = [(B, N, 8, 96, nq) for B, N, nq in (
    (16, 4096, 5), (8, 16384, 5), (4, 16384, 5), (16, 2048, 5), (8, 4096, 5), (12, 8192, 5), (2, 16384, 5),
    (8, 16384, 8), (16, 4096, 8), (24, 4096, 5), (16, 1024, 5))]
TAIL_SPANS_CONFIRM_VARIANTS = {"auto": {}, "plane": {"CLO_DECODE_PLANE_BOXES": "0"}}


def paged_layouts_sweep(variants, rows=PAGED_LAYOUT_ROWS, layouts=PAGED_LAYOUTS):
    """A `SWEEPS` entry: each of `rows` (B, N, Hkv, D, Nq) in each of `layouts` at the
    automatic split count under `variants` (graph replays, cold L2, no peer)."""
    def sweep(iters, copy_bw):
        for B, N, hkv, d, nq in rows:
            case = cd.paged_case(B, N, hkv, torch.float16, D=d, block_size=16, Nq=nq)
            for name, contiguous, order in layouts:
                row_case = _ordered_case(case, order) if order else case
                _split_sweep_row(row_case, (0,), variants, iters, copy_bw,
                                 f"{name} D={d} B={B} N={N} Hkv={hkv} Nq={nq}", contiguous=contiguous,
                                 only=lambda ns, label, c=contiguous: not c or label not in PAGED_ONLY_VARIANTS)
    return sweep


def _one_wave_splits(row, sms: int) -> int:
    """SMs // units of a row (B x Hkv two-tile units): the splits that fill one wave, at least 1."""
    return max(1, sms // (row[0] * row[2]))


def _small_band_wave_counts(row, sms: int) -> set:
    """The two-tile small band's candidate counts (B x Hkv units): one and two waves, at most n // 256."""
    return {min(128, row[1] // 256, k * _one_wave_splits(row, sms)) for k in (1, 2)}


def wide_short_confirm_runs(row, sms: int) -> set:
    """auto, old, and wide blocks at one and two waves' counts (`_small_band_wave_counts`)."""
    return {(0, "auto"), (0, "old")} | {(k, "wide") for k in _small_band_wave_counts(row, sms)}


def wide_paged_d64_runs(row, sms: int) -> set:
    """auto, old, and w2 / w3 at the paged and the contiguous rule's counts (stop 89's mirror)."""
    units = row[0] * row[2]
    if 100 * units < 45 * sms:
        counts = _small_band_wave_counts(row, sms)
    elif units <= sms:
        counts = {1, 2, 3, 4}
    else:
        counts = {2, 3}
    return {(0, "auto"), (0, "old")} | {(k, v) for k in counts for v in ("w2", "w3")}


def wide_small_runs(row, sms: int) -> set:
    """The automatic call and wide blocks at SMs // units splits, twice and half that (at most kMaxSplits 128)."""
    one_wave = _one_wave_splits(row, sms)
    return {(0, "auto")} | {(min(128, k), "wide") for k in {max(1, one_wave // 2), one_wave, 2 * one_wave}}


def forced_splits_sweep(rows, variants=FORCED_SPLITS_VARIANTS, runs=None, show_kernels=False, peer="sdpa-cudnn"):
    """A `SWEEPS` entry over `rows` (B, N, Hkv, D, Nq, contiguous), paged block 16 (or its
    contiguous copy), the peer first, at 0-3 splits or the counts `runs` names (graph replays, cold
    L2): the (splits, label)
    pairs of `runs`, or else the automatic count under the "auto" labels and 1, 2 and 3 splits
    under the others; `runs` may also be a function of (row, SMs) giving each row its own pairs;
    `show_kernels`: first the decode kernels of each row's automatic call; `peer` None: no peer
    timed."""
    def sweep(iters, copy_bw):
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        for row in rows:
            B, N, hkv, d, nq, contiguous = row
            row_runs = runs(row, sms) if callable(runs) else runs
            counts = sorted({ns for ns, _ in row_runs}) if row_runs is not None else (0, 1, 2, 3)

            def only(ns, label, row_runs=row_runs):
                return (ns, label) in row_runs if row_runs is not None else label.startswith("auto") == (ns == 0)

            case = cd.paged_case(B, N, hkv, torch.float16, D=d, block_size=16, Nq=nq)
            title = f"{'contig' if contiguous else 'paged'} D={d} B={B} N={N} Hkv={hkv} Nq={nq}"
            if show_kernels:
                fn = _split_fns([case.make_inputs()], 0, contiguous=contiguous)[0]
                names = re.findall(r"(\w+_kernel(?:<[^<>]*>)?)", kernel_names(fn).replace("cuda_llm_ops::decode::", ""))
                print(f"kernels {title}: {sorted(set(n for n in names if 'decode' in n))}", flush=True)
                del fn
            _split_sweep_row(case, counts, variants, iters, copy_bw, title, peer=peer,
                             contiguous=contiguous, only=only)
    return sweep


def balanced_plan_sweep(iters, copy_bw):
    """BALANCED_PLAN_ROWS (cuDNN first), then MQA B=150/4K and B=136/2K with lengths uniform in
    [N/2, N] (seeded; no peer: SDPA reads one length; % of copy counts the keys read)."""
    hkv_rows_sweep(BALANCED_PLAN_ROWS, BALANCED_PLAN_VARIANTS)(iters, copy_bw)
    for B, N in ((150, 4096), (136, 2048)):
        lens = torch.randint(N // 2, N + 1, (B,), generator=torch.Generator().manual_seed(B + N), dtype=torch.int32)
        case = _ragged_case(cd.paged_case(B, N, 1, torch.float16, D=128), lens, B, N)
        _split_sweep_row(case, (0,), BALANCED_PLAN_VARIANTS, iters, copy_bw,
                         f"paged MQA B={B} N={N} ragged [{N // 2}, {N}]")


# --merge-apart: the split merge as its own kernel (decode_split_merge_kernel, stop 70) against
# the last split block of each unit merging (CLO_DECODE_MERGE_APART=0), at the automatic count
# and kernel: where that block's fold sits on the call's tail (16-32 rows per KV head, 8-16
# splits), rows the rule leaves fused (4-8 rows), other head dims, and grids beyond one wave
# that split too. (B, N, Hkv, Nq, D, contiguous)
MERGE_APART_ROWS = [(1, 16384, 8, 1, 128, False), (1, 16384, 8, 2, 128, False), (1, 16384, 8, 4, 128, False),
                    (1, 16384, 8, 4, 128, True), (1, 16384, 8, 8, 128, False), (8, 16384, 1, 1, 128, False),
                    (8, 16384, 1, 1, 128, True), (4, 16384, 8, 8, 128, False), (8, 16384, 8, 8, 128, False),
                    (21, 16384, 8, 8, 128, False), (10, 16384, 8, 4, 128, False), (42, 16384, 8, 4, 128, False),
                    (46, 8192, 8, 1, 128, False), (1, 16384, 8, 1, 64, False), (1, 16384, 8, 4, 64, False),
                    (1, 16384, 8, 1, 256, False), (1, 16384, 8, 4, 256, False), (1, 4096, 8, 4, 128, False),
                    (64, 4096, 1, 1, 128, False), (66, 8192, 1, 1, 128, False)]
MERGE_APART_VARIANTS = {"auto": {}, "apart": {"CLO_DECODE_MERGE_APART": "1"}, "fused": {"CLO_DECODE_MERGE_APART": "0"}}


def merge_apart_sweep(iters, copy_bw):
    """MERGE_APART_ROWS (graph replays, cold L2, cuDNN first): automatic, apart, fused."""
    for B, N, hkv, nq, D, contiguous in MERGE_APART_ROWS:
        _split_sweep_row(cd.paged_case(B, N, hkv, torch.float16, D=D, block_size=16, Nq=nq), (0,),
                         MERGE_APART_VARIANTS, iters, copy_bw,
                         f"{'contig' if contiguous else 'paged'} D={D} B={B} N={N} Hkv={hkv} Nq={nq}",
                         peer="sdpa-cudnn", contiguous=contiguous)


# --wide-boxes: the two-row-tile kernel at one wave or less with one TMA box over both planes of
# its rows (CLO_DECODE_PLANE_BOXES=2) against the automatic choice (a box per plane there up to
# stop 70; since stop 71, decode_wide_row_boxes_pay, spanning on paged blocks of 2048 keys or
# more, so those rows compare a launch with itself), where `--mqa-paged` (stop 70) read spanning
# boxes ahead at MQA B=64-66 paged and behind at B=8/16K. (B, N, Nq, contiguous, Hkv)
WIDE_BOXES_ROWS = [(8, 16384, 1, False, 1), (48, 16384, 1, False, 1), (64, 4096, 1, False, 1),
                   (66, 8192, 1, False, 1), (66, 8192, 1, True, 1), (2, 16384, 8, False, 8),
                   (8, 16384, 8, False, 8), (8, 16384, 8, True, 8)]


# --one-wave-boxes: `--wide-boxes` (stop 71) read spanning boxes 12-17% ahead on paged GQA
# Nq 8 B=8/16K (132.8 / 132.4 us against 149.9 / 159.2), level to 2% behind on MQA: the same
# choice over one-wave paged grids of one and two row tiles, GQA 32/8 and MQA, 1-16 splits.
ONE_WAVE_BOXES_ROWS = [(16, 4096, 2, False, 8), (16, 4096, 4, False, 8), (8, 16384, 4, False, 8),
                       (10, 16384, 4, False, 8), (1, 16384, 4, False, 8), (16, 16384, 1, False, 8),
                       (8, 16384, 1, False, 8), (16, 4096, 1, False, 8), (4, 16384, 8, False, 8),
                       (8, 8192, 8, False, 8), (8, 4096, 8, False, 8), (16, 4096, 8, False, 8),
                       (10, 4096, 8, False, 8), (16, 16384, 1, False, 1), (32, 16384, 1, False, 1),
                       (4, 16384, 1, False, 1), (16, 4096, 4, True, 8), (8, 16384, 8, True, 8)]


# spanning boxes against the automatic choice, each twice in alternation
WIDE_BOXES_VARIANTS = {"auto": {}, "boxes": {"CLO_DECODE_PLANE_BOXES": "2"}, "auto.2": {},
                       "boxes.2": {"CLO_DECODE_PLANE_BOXES": "2"}}


def hkv_rows_sweep(rows, variants, splits=(0,), only=None):
    """A `SWEEPS` entry: `_nq_rows` over `rows` (B, N, Nq, contiguous, Hkv) at `splits` (the
    automatic count unless given), cuDNN first (graph replays, cold L2), `variants` in their
    order (`only(splits, label)` false: that pair skipped)."""
    def sweep(iters, copy_bw):
        for B, N, nq, contiguous, hkv in rows:
            _nq_rows([(B, N, nq, contiguous)], splits, iters, copy_bw, variants, only=only, hkv=hkv)
    return sweep


def _auto_at_s0(ns, label):
    """`only` for sweeps whose "auto" variant runs at the automatic count alone, the others at
    the given counts."""
    return (label == "auto") == (ns == 0)


# --wide-boxes-depth: after `--one-wave-boxes` (the spanning boxes for paged two-tile blocks of
# 2048 keys or more at one wave), the 4 stages chosen with a box per plane (decode_wide_rows_stages)
# against 3 under spanning boxes, and a box per plane, on the paged two-tile rows
WIDE_BOXES_DEPTH_ROWS = [(b, n, 8, False, 8) for b, n in ((8, 16384), (4, 16384), (8, 8192), (16, 4096), (8, 4096),
                                                          (2, 16384), (1, 16384))] + \
                        [(b, 16384, 1, False, 1) for b in (8, 16, 32)]
WIDE_BOXES_DEPTH_VARIANTS = {"auto": {}, "plane": {"CLO_DECODE_PLANE_BOXES": "0"},
                             "tma3": {"CLO_DECODE_TMA_STAGES": "3"}, "auto.2": {}}


# --wide-boxes-confirm: the bench's MQA rows that the rule moved (B=64/4K, B=66/8K: 2048 and 4096
# keys a block at one wave, now spanning boxes at 3 stages; the bench read B=66/8K 87.4 -> 75.0 us
# across nodes), Nq 8 B=8/16K, and controls (MQA B=8/16K, contiguous): automatic, a box per
# plane (4 stages), spanning at 4 stages, automatic again
WIDE_BOXES_CONFIRM_ROWS = [(64, 4096, 1, False, 1), (66, 8192, 1, False, 1), (8, 16384, 1, False, 1),
                           (66, 8192, 1, True, 1), (8, 16384, 8, False, 8), (8, 16384, 8, True, 8)]
WIDE_BOXES_CONFIRM_VARIANTS = {"auto": {}, "plane": {"CLO_DECODE_PLANE_BOXES": "0"},
                               "span4": {"CLO_DECODE_PLANE_BOXES": "2", "CLO_DECODE_TMA_STAGES": "4"}, "auto.2": {}}


# --wide-sustained: stop 71's spanning boxes at 3 stages for paged two-tile blocks at one wave,
# read cool and at the power cap (stop 65: ours slows with the SM clock there; a contiguous Nq 8
# B=8/16K row drifted 130.8 -> 193.5 us within one sweep): automatic, a box per plane (4
# stages), spanning at 4 stages. (B, N, Hkv, block size, contiguous, Nq)
WIDE_SUSTAINED_ROWS = [(8, 16384, 8, 16, False, 8), (8, 16384, 8, 16, True, 8), (4, 16384, 8, 16, False, 8),
                       (66, 8192, 1, 16, False, 1), (64, 4096, 1, 16, False, 1)]
WIDE_SUSTAINED_VARIANTS = [("s0", 0, {}), ("plane", 0, {"CLO_DECODE_PLANE_BOXES": "0"}),
                           ("span4", 0, {"CLO_DECODE_PLANE_BOXES": "2", "CLO_DECODE_TMA_STAGES": "4"})]


# --wide-beyond: the two-row-tile kernel beyond one wave, where its PDL and boxes followed the
# 16-row rules' until stop 72 (decode_pdl_pays: off at 1.05-1.8 blocks per SM;
# decode_row_boxes_pay: spanning beyond one block per SM), unmeasured for this kernel, which holds
# one block per SM (288 threads at ~160 registers: a waiting block of the next call cannot sit
# beside a running one, as on the 256 kernel). 1 split at 1.5-1.8 units per SM (PDL off there), 2 splits at 2.5-3 blocks and 1 at
# 1.82 (PDL on), both layouts: automatic, PDL on, PDL off, a box per plane, automatic again.
# (B, N, Nq, contiguous, Hkv)
WIDE_BEYOND_ROWS = [(25, 8192, 8, False, 8), (28, 4096, 8, False, 8), (25, 8192, 8, True, 8), (28, 4096, 8, True, 8),
                    (200, 4096, 1, False, 1), (200, 4096, 1, True, 1), (30, 4096, 8, False, 8),
                    (21, 16384, 8, False, 8), (21, 4096, 8, True, 8)]
WIDE_BEYOND_VARIANTS = {**PDL_VARIANTS, "plane": {"CLO_DECODE_PLANE_BOXES": "0"}, "auto.2": {}}

# --mqa-beyond: one token at Hq 32 / Hkv 1 (32 rows a KV head) beyond one wave, where `--wide-beyond`
# read the two-tile kernel's 1 split at B=200/4K (1.52 units per SM) 0.94x cuDNN paged (128.4
# against 121.3 us) and 0.97x contiguous: the automatic count, and 1-3 splits on 16-row blocks
# (CLO_DECODE_WIDE_ROWS=0: their rules' spread tail and balanced schedule where those run) and on
# two-tile blocks (=1). (B, N, Nq, contiguous, Hkv)
MQA_BEYOND_ROWS = [(b, 4096, 1, False, 1) for b in (150, 180, 200, 230, 264)] + \
                  [(200, 4096, 1, True, 1), (200, 8192, 1, False, 1)]
MQA_BEYOND_VARIANTS = {"auto": {}, "w0": {"CLO_DECODE_WIDE_ROWS": "0"}, "w1": {"CLO_DECODE_WIDE_ROWS": "1"}}


# --wide-three (90b0a94's rule; ddbb300 widened it to 1-1.26 after this sweep): after
# `--mqa-beyond` (one token at Hq 32 / Hkv 1, B=150/4K, 1.14 units per SM: the 16-row rules'
# count 119.7 us, two-tile blocks at 2 / 3 splits 114.8 / 113.0, cuDNN 117.1), the two-tile
# rule's 3 splits where their four waves are 84% full (1.12-1.26 units per SM): automatic (that
# rule), the 16-row rules (CLO_DECODE_WIDE_ROWS=0), two-tile blocks at 2-4 splits; below the band
# (1.06) and Nq 8 at GQA 32/8 too. (B, N, Nq, contiguous, Hkv)
WIDE_THREE_ROWS = [(b, 4096, 1, False, 1) for b in (140, 150, 160, 165)] + \
                  [(150, 4096, 1, True, 1), (150, 8192, 1, False, 1), (19, 4096, 8, False, 8), (20, 8192, 8, False, 8),
                   (19, 16384, 8, False, 8), (20, 4096, 8, True, 8)]


# --wide-low: `--wide-three` read 3 splits ahead at 1.06 units per SM too (MQA B=140/4K 112.0
# against 121.9), so the rule takes 3 from one unit per SM: its low end, 1.01-1.06
WIDE_LOW_ROWS = [(b, 4096, 1, False, 1) for b in (133, 136)] + \
                [(136, 4096, 1, True, 1), (17, 4096, 8, False, 8), (17, 16384, 8, False, 8), (136, 2048, 1, False, 1)]


def wide_splits_sweep(rows):
    """A `SWEEPS` entry: `hkv_rows_sweep` over `rows`: the automatic count and the 16-row rules'
    count (CLO_DECODE_WIDE_ROWS=0), then two-tile blocks (=1) at 2-4 splits."""
    return hkv_rows_sweep(rows, MQA_BEYOND_VARIANTS, (0, 2, 3, 4),
                          only=lambda ns, label: (label != "w1") == (ns == 0))


# --wide-balanced: the balanced schedule at two row tiles (CLO_DECODE_WIDE_ROWS=3, written in stop
# 72, not yet measured) where the even grid loses a wave's tail at any split count: one token at
# Hq 32 / Hkv 1 B=136/2K (0.79x cuDNN: 73.3 against 58.1 us), B=140-150/4K (3 splits, 61-65% of the
# copy rate), B=200/4K (two waves, the second half full: 0.96x), B=230/4K, contiguous B=136/2K;
# Nq 8 at GQA 32/8 B=17/4K, B=25/8K. The automatic count, then 2 splits as even two-tile splits
# (w1), as the balanced schedule (wb), and that with a box per plane (wbp). Full tables: the plan
# by capacity only (the test runs the plan by length). (B, N, Nq, contiguous, Hkv)
WIDE_BALANCED_ROWS = [(b, n, 1, False, 1) for b, n in ((136, 2048), (140, 4096), (150, 4096), (200, 4096),
                                                       (230, 4096))] + \
                     [(136, 2048, 1, True, 1), (17, 4096, 8, False, 8), (25, 8192, 8, False, 8)]
WIDE_BALANCED_VARIANTS = {"auto": {}, "w1": {"CLO_DECODE_WIDE_ROWS": "1"}, "wb": {"CLO_DECODE_WIDE_ROWS": "3"},
                          "wbp": {"CLO_DECODE_WIDE_ROWS": "3", "CLO_DECODE_PLANE_BOXES": "0"}}

# --wide-low-band (stop 102): two-row-tile blocks as the balanced schedule below one 32-row unit
# per SM (decode_wide_rows_streamk_blocks: half a unit to one a block, a unit in up to three
# pieces), where the even grid's one wave leaves SMs idle (the H100's 70% fill: MQA B=110/4K 85.5
# us on 110 of 132 SMs against cuDNN's 81.5; below 70% the 16-row blocks, B=80/4K 79.5 against
# 63.1): the automatic count, two-row-tile blocks at 1 split (w1) and the balanced 2 (wb), cuDNN
# first; one token at Hq 32 / Hkv 1 and Nq 8 at GQA 32/8, 0.5-0.97 units per SM
WIDE_LOW_BAND_ROWS = ([(b, n, 1, False, 1) for b in (66, 80, 90, 100, 110, 120, 128) for n in (2048, 4096, 8192)]
                      + [(b, 4096, 1, True, 1) for b in (80, 110)]
                      + [(b, n, 8, False, 8) for b in (9, 12, 15) for n in (4096, 8192)])
WIDE_LOW_BAND_VARIANTS = {"auto": {}, "w1": {"CLO_DECODE_WIDE_ROWS": "1"}, "wb": {"CLO_DECODE_WIDE_ROWS": "3"}}


def _wide_low_band_only(ns, label):
    """auto (and off, where a sweep has it) at the automatic count, w1 at 1 split, wb at 2."""
    return ns == {"auto": 0, "off": 0, "w1": 1, "wb": 2}[label]

# --h100-low-band-rule (stop 104): stop 103's candidate rule off HBM3e, automatic from its first
# commit (1 split of two-row-tile blocks from a 60% fill; paged tables of 4096 keys or more at
# 0.5-0.62 units per SM the balanced 2; the band as it landed: decode_wide_rows_balanced_band): auto against the 16-row blocks at their count (off: the rule before, below
# 70%), 1 split (w1) and the balanced 2 (wb), cuDNN first; the lengths stop 103 did not read
# (16K, contiguous 8K-16K, Nq 8 B=10-11) and the band's edges. (B, N, Nq, contiguous, Hkv)
H100_LOW_BAND_RULE_ROWS = ([(b, n, 1, False, 1) for b in (70, 76, 80, 84, 90) for n in (2048, 4096, 8192, 16384)]
                           + [(b, n, 8, False, 8) for b in (9, 10, 11) for n in (4096, 8192, 16384)]
                           + [(b, n, 1, True, 1) for b in (80, 90) for n in (8192, 16384)]
                           + [(10, n, 8, True, 8) for n in (4096, 16384)])
H100_LOW_BAND_RULE_VARIANTS = {"auto": {}, "off": {"CLO_DECODE_WIDE_ROWS": "0"},
                               **{k: v for k, v in WIDE_LOW_BAND_VARIANTS.items() if k != "auto"}}


# --fused-fold (stop 105): the fused split merge folding a thread's items together (one L2 round
# trip for 32 rows over 2 splits, where it took one per item) against the merge kernel that
# decode_merge_apart_pays takes for these rows (auto), on split calls whose blocks hold more
# items than threads: one token at Hq 32 / Hkv 1 (two-row tiles, the low band's balanced 2 and
# the even grid's many splits; 16-row blocks at 0.5 units per SM), Nq 8 and Nq 4 at GQA 32/8;
# auto twice (drift). (B, N, Nq, contiguous, Hkv)
FUSED_FOLD_ROWS = ([(66, n, 1, False, 1) for n in (2048, 4096)] + [(70, n, 1, False, 1) for n in (2048, 4096, 16384)]
                   + [(70, 4096, 1, True, 1), (80, 8192, 1, False, 1), (9, 4096, 8, False, 8), (8, 16384, 1, False, 1),
                      (8, 16384, 1, True, 1), (4, 16384, 8, False, 8), (136, 2048, 1, False, 1),
                      (150, 4096, 1, False, 1), (17, 4096, 8, False, 8), (1, 16384, 4, False, 8),
                      (4, 16384, 4, False, 8)])
FUSED_FOLD_VARIANTS = {"auto": {}, "fused": {"CLO_DECODE_MERGE_APART": "0"}, "auto2": {}}

# --fold-ab (stop 105, under scripts/gpu_ab.sh with AB_DEFINES=CLO_DEV_FOLD_ONE_ITEM): the
# fused fold of a thread's items together against one at a time, where it runs: FP8 caches
# (always fused) at one token of Hq 32 / Hkv 1 (16-row blocks, 512 items on 160 threads) at the
# automatic count, and FUSED_FOLD_ROWS' split rows under CLO_DECODE_MERGE_APART=0. (B, N)
FOLD_AB_FP8_ROWS = [(8, 16384), (16, 8192), (32, 4096), (66, 4096), (100, 2048)]
FOLD_AB_ROWS = [r for r in FUSED_FOLD_ROWS if r in {(66, 4096, 1, False, 1), (70, 4096, 1, False, 1),
                                                     (136, 2048, 1, False, 1), (9, 4096, 8, False, 8),
                                                     (8, 16384, 1, False, 1)}]


def fold_ab_sweep(iters, copy_bw):
    """FOLD_AB_FP8_ROWS (FP8 MQA, automatic count), then FOLD_AB_ROWS fused (graph replays,
    cold L2, cuDNN first)."""
    for B, N in FOLD_AB_FP8_ROWS:
        _fp8_sweep_row(B, N, 1, 128, (0,), {"auto": {}}, iters, copy_bw)
    hkv_rows_sweep(FOLD_AB_ROWS, {"fused": FUSED_FOLD_VARIANTS["fused"]})(iters, copy_bw)

# --cluster-pair (stop 106): 2-split calls of the TMA kernel's even grid with each unit's two
# splits as one cluster merging through distributed shared memory (pair:
# CLO_DECODE_SPLIT_CLUSTER=2, automatic since; at 20ab941 the knob CLO_DECODE_CLUSTER_PAIR=1, off
# by default) against the same calls without it (auto: knob 0, the merge kernel or the fused
# fold): the automatic count (0) and 2 splits forced, and the even grid forced where 2 splits
# would be the balanced schedule (CLO_DECODE_STREAMK=0); one token at
# Hq 32 / Hkv 1 (two-row tiles) at 0.3-0.5 units per SM, Nq 8 at GQA 32/8, one token at GQA 32/8
# (4-row units). (B, N, Nq, contiguous, Hkv)
CLUSTER_PAIR_ROWS = ([(66, n, 1, False, 1) for n in (2048, 4096, 8192)] + [(66, 4096, 1, True, 1)]
                     + [(b, 4096, 1, False, 1) for b in (40, 50, 60)]
                     + [(8, 4096, 8, False, 8), (8, 8192, 8, True, 8), (8, 8192, 1, False, 8), (4, 16384, 1, False, 8),
                        (16, 2048, 1, False, 8)])
CLUSTER_PAIR_VARIANTS = {"auto": {"CLO_DECODE_SPLIT_CLUSTER": "0"}, "pair": {"CLO_DECODE_SPLIT_CLUSTER": "2"},
                         "even": {"CLO_DECODE_STREAMK": "0", "CLO_DECODE_SPLIT_CLUSTER": "0"},
                         "even_pair": {"CLO_DECODE_STREAMK": "0", "CLO_DECODE_SPLIT_CLUSTER": "2"}}


def cluster_pair_sweep(iters, copy_bw):
    """CLUSTER_PAIR_ROWS at the automatic count and 2 splits, then FP8 MQA B=32/4K (16-row blocks)
    at 2 splits, each with and without the cluster pair (graph replays, cold L2, cuDNN first)."""
    hkv_rows_sweep(CLUSTER_PAIR_ROWS, CLUSTER_PAIR_VARIANTS, (0, 2))(iters, copy_bw)
    _fp8_sweep_row(32, 4096, 1, 128, (0, 2), {k: CLUSTER_PAIR_VARIANTS[k] for k in ("auto", "pair")}, iters, copy_bw)


# --split-clusters (stop 106): split clusters of 3 and 4 (CLO_DECODE_SPLIT_CLUSTER=4, automatic
# since 773c8c4) against the automatic choice as it was at d79aeb7 (2 only: 3-4 split calls merged
# as before; since 773c8c4 auto and c4 are the same), at 2-4 splits, where one wave of
# clusters at one block per SM can hold them (the H100: 42 clusters of 3, 32 of 4), each row
# with whether the clusters ran (a paged call's workspace: split 0's partials untouched): one
# token at Hq 32 / Hkv 1, GQA 32/8 one token (4-row units), Nq 4 and Nq 8 at 16K keys, FP8 MQA.
# (B, N, Nq, contiguous, Hkv)
SPLIT_CLUSTER_ROWS = ([(b, n, 1, False, 1) for b, n in ((20, 8192), (16, 16384), (24, 4096))]
                      + [(2, 16384, 1, False, 8), (3, 16384, 1, False, 8), (2, 16384, 4, False, 8),
                         (2, 16384, 8, False, 8), (3, 16384, 8, False, 8), (2, 16384, 8, True, 8)])
SPLIT_CLUSTER_VARIANTS = {"auto": {}, "c4": {"CLO_DECODE_SPLIT_CLUSTER": "4"}, "auto2": {}}


def _split_clusters_ran(B, N, nq, hkv, splits, env):
    """Whether a paged call at each of `splits` (the D = 128 block-16 row) under `env` ran split
    clusters (`cuda_llm_ops.testing.split_clusters_ran`)."""
    from cuda_llm_ops.testing import mark_split_partials_, split_clusters_ran
    set_knobs(env)
    inp = cd.make_paged_inputs(B, HQ_, hkv, N, 128, 16, torch.float16, nq)
    ran = []
    for ns in splits:
        ws = mark_split_partials_(llm.paged_attention_workspace(inp["q"], inp["k_cache"], inp["block_tables"],
                                                                num_splits=ns))
        llm.paged_attention(inp["q"], inp["k_cache"], inp["v_cache"], inp["block_tables"], inp["seq_lens"],
                            num_splits=ns, workspace=ws)
        ran.append(f"s{ns} {'yes' if split_clusters_ran(ws) else 'no'}")
    set_knobs({})
    del inp
    return ", ".join(ran)


def split_clusters_sweep(iters, copy_bw):
    """SPLIT_CLUSTER_ROWS at the automatic count and 2-4 splits, automatic against clusters up to
    4 splits, with where the clusters ran; FP8 MQA B=16/8K and B=12/8K the same (graph replays,
    cold L2, cuDNN first)."""
    for B, N, nq, contiguous, hkv in SPLIT_CLUSTER_ROWS:
        if not contiguous:
            print(f"  B={B} N={N} Nq={nq} Hkv={hkv} clusters (c4): "
                  + _split_clusters_ran(B, N, nq, hkv, (0, 2, 3, 4), SPLIT_CLUSTER_VARIANTS["c4"]), flush=True)
        hkv_rows_sweep([(B, N, nq, contiguous, hkv)], SPLIT_CLUSTER_VARIANTS, (0, 2, 3, 4))(iters, copy_bw)
    for B, N in ((16, 8192), (12, 8192)):
        _fp8_sweep_row(B, N, 1, 128, (0, 3, 4), SPLIT_CLUSTER_VARIANTS, iters, copy_bw)


# --h100-low-band-confirm (stop 104): the rule's edges after `--h100-low-band-rule`: Nq 5 (20
# rows, whose 16-row blocks waste less of their second tile) in the band and just past it, paged
# 3072 keys (1 split), contiguous units below the 60% fill, the band's 8192-key top (B=91: 0.69)
# and 0.76 units per SM at 16384 keys (outside it)
H100_LOW_BAND_CONFIRM_ROWS = ([(b, n, 5, False, 8) for b in (10, 11) for n in (4096, 16384)] + [(10, 16384, 5, True, 8)]
                              + [(76, 3072, 1, False, 1), (76, 4096, 1, True, 1), (76, 16384, 1, True, 1),
                                 (91, 8192, 1, False, 1), (100, 16384, 1, False, 1)])

# --h100-mqa-band (stop 101): after the ncu read of one-token MQA at 1.5 units per SM (a tail of
# whole one-per-SM two-row-tile blocks; `--wide-balanced` on the H100: B=200/4K balanced 2 splits
# 161.6 us against the automatic 1 split's 168.4, B=230/4K 181.0 against 175.2), the balanced
# schedule (wb) against the automatic count across 1.35-1.75 units per SM, 2K-8K keys, both
# layouts, Hq 32 / Hkv 1 and Nq 8 at GQA 32/8: (B, N, Nq, contiguous, Hkv)
H100_MQA_BAND_ROWS = ([(b, n, 1, False, 1) for b in (180, 190, 200, 210, 220) for n in (2048, 4096, 8192)]
                      + [(b, 4096, 1, True, 1) for b in (180, 200, 220)]
                      + [(b, n, 8, False, 8) for b in (23, 25, 27) for n in (4096, 8192)])
H100_MQA_BAND_VARIANTS = {"auto": WIDE_BALANCED_VARIANTS["auto"], "wb": WIDE_BALANCED_VARIANTS["wb"]}


# --wide-balanced-band: `--wide-balanced` (stop 73) read the balanced schedule at two row tiles
# ahead of the automatic count at 1.03-1.14 units per SM (MQA B=136/2K 73.1 -> 57.1 us, cuDNN
# 56.9; B=140/4K 111.0 -> 97.7; Nq 8 B=17/4K 109.6 -> 90.3) and at 1.52 on 8192 keys (Nq 8 B=25/8K
# 237.6 -> 226.3), behind it at 1.52-1.74 on 4096 (MQA B=200/4K 125.8 -> 129.1, B=230 127.6 ->
# 144.8): its band's edges over the length, 1-2 units per SM at 1024-16384 keys (one token at Hq
# 32 / Hkv 1 and Nq 8 at GQA 32/8, both layouts): the automatic count, then the balanced
# schedule. (B, N, Nq, contiguous, Hkv)
WIDE_BALANCED_BAND_ROWS = [(b, n, 1, False, 1) for n, bs in ((1024, (136, 170, 200)), (2048, (140, 170, 190, 200, 230)),
                                                             (4096, (160, 170, 185, 195, 210, 250)),
                                                             (8192, (140, 170, 200, 230)), (16384, (140, 200)))
                           for b in bs] + \
                          [(b, n, 8, False, 8) for b, n in ((17, 16384), (20, 4096), (22, 4096), (24, 8192),
                                                            (25, 4096), (28, 8192), (28, 16384))] + \
                          [(170, 4096, 1, True, 1), (200, 8192, 1, True, 1), (22, 4096, 8, True, 8),
                           (25, 8192, 8, True, 8)]
WIDE_BALANCED_BAND_VARIANTS = {"auto": {}, "wb": {"CLO_DECODE_WIDE_ROWS": "3"}}

# --wide-balanced-long: the bench read Nq 8 B=21/16K (1.27 units per SM) at 414.8 us paged under
# the balanced band (stop 73), where stop 69's sweep read even 2 splits at 380.8: the band's
# 8192- and 16384-key rows at 1.2-1.35 units per SM, the automatic count (balanced) against even
# 2 splits (w1) and the balanced knob (wb). (B, N, Nq, contiguous, Hkv)
WIDE_BALANCED_LONG_ROWS = [(b, n, 8, False, 8) for b, n in ((20, 16384), (21, 16384), (22, 16384), (21, 8192))] + \
                          [(170, 16384, 1, False, 1), (21, 16384, 8, True, 8)]
# --wide-balanced-ab: those rows read the variants in a row's order slower as the GPU heats (auto
# first 367.8 us at B=20/16K, the balanced knob third 407.6, though both run the same schedule):
# even 2 splits and balanced at 2 splits, interleaved, each twice
WIDE_BALANCED_AB_VARIANTS = {"even": {"CLO_DECODE_WIDE_ROWS": "1"}, "bal": {"CLO_DECODE_WIDE_ROWS": "3"},
                             "even.2": {"CLO_DECODE_WIDE_ROWS": "1"}, "bal.2": {"CLO_DECODE_WIDE_ROWS": "3"}}

# --pair-d160: paged 16-bit D=72-80 head pairs (160-column rows: 0.88x cuDNN on the D = 256
# kernel at stop 59) on the D = 160 kernel at 2 / 3 / 4 stages and PDL off / on, against the
# D = 256 kernel and unpaired: (B, N, Hkv, D, contiguous, splits, block_size)
PAIR_D160_ROWS = ([(64, 2048, 32, 80, False, (0,), 16), (64, 2048, 8, 80, False, (0,), 16),
                   (32, 4096, 8, 80, False, (0,), 16), (16, 2048, 32, 80, False, (0,), 16),
                   (56, 2048, 8, 80, False, (0,), 16), (56, 4096, 8, 80, False, (0,), 16),
                   (48, 8192, 8, 80, False, (0,), 16), (64, 2048, 32, 72, False, (0,), 16),
                   (9, 2048, 32, 80, False, (0,), 16), (34, 2048, 8, 80, False, (0,), 16)])
PAIR_D160_VARIANTS = {"auto": {}, "p256": {"CLO_DECODE_PAIR_KERNEL": "256"},
                      **{f"p160/tma{n}": {"CLO_DECODE_PAIR_KERNEL": "160", "CLO_DECODE_TMA_STAGES": str(n)}
                         for n in (2, 3, 4)},
                      "p160/tma3/pdl0": {"CLO_DECODE_PAIR_KERNEL": "160", "CLO_DECODE_TMA_STAGES": "3",
                                         "CLO_DECODE_PDL": "0"},
                      "p160/tma3/pdl1": {"CLO_DECODE_PAIR_KERNEL": "160", "CLO_DECODE_TMA_STAGES": "3",
                                         "CLO_DECODE_PDL": "1"},
                      "single": {"CLO_DECODE_PACK": "0"}}

# --pair-d160-bands: where decode_packs_head_pairs leaves D = 72-88 unpaired (measured on the
# D = 256 kernel: 1.12-1.6 pairs per SM, below 0.95), pairs on the D = 160 kernel against
# unpaired at forced split counts: (B, N, Hkv, D, contiguous, splits, block_size)
PAIR_D160_BAND_ROWS = ([(B, N, 8, 80, False, (0, 1, 2), 16) for N in (2048, 4096) for B in (20, 28, 40, 44, 50)]
                       + [(B, 8192, 8, 80, False, (0, 1, 2), 16) for B in (24, 40, 48)]
                       + [(B, 2048, 32, 80, False, (0, 1, 2), 16) for B in (5, 12)]
                       + [(44, 4096, 8, 72, False, (0, 1, 2), 16)]
                       + [(B, 2048, 8, 80, False, (0, 1, 2), 16) for B in (16, 34)]
                       + [(9, 2048, 32, 80, False, (0, 1, 2), 16)])
PAIR_D160_BAND_VARIANTS = {"auto": {}, "single": {"CLO_DECODE_PACK": "0"}, "pairs": {"CLO_DECODE_PACK": "2"}}
# --pair-d160-edge: around the rule's lower edge (0.45 pairs per SM at 5d90d2e, 0.35 since), 2 and 4 splits
PAIR_D160_EDGE_ROWS = ([(B, N, 8, 80, False, (0, 2, 4), 16) for B, N in ((12, 2048), (15, 2048), (16, 4096),
                                                                        (14, 8192))]
                       + [(3, 2048, 32, 80, False, (0, 2, 4), 16)])

# --pair-d160-small-blocks: block sizes below 8 (no TMA map: the cp.async kernels), where the
# automatic rule leaves 72-80 unpaired, against forced pairs (the D = 160 cp.async kernel);
# then PDL off / on at the D = 160 kernel's 2 stages (1.05-1.8 blocks per SM: off by rule)
PAIR_D160_SMALL_BLOCK_ROWS = [(64, 2048, 32, 80, False, (0, 1, 2), 4), (20, 2048, 8, 80, False, (0, 1, 2), 4),
                              (40, 4096, 8, 80, False, (0, 1, 2), 1)]
PAIR_D160_PDL_ROWS = [(B, N, 8, 80, False, (0,), 16) for B, N in ((34, 2048), (40, 4096), (50, 2048), (20, 4096))]
PAIR_D160_PDL_VARIANTS = {"auto": {}, "pdl0": {"CLO_DECODE_PDL": "0"}, "pdl1": {"CLO_DECODE_PDL": "1"},
                          "auto.2": {}}

# --pair-d160-small-grids: below the pairing rule's 0.35 pairs per SM (B=1/16K GQA D=80: 0.93x
# cuDNN unpaired), pairs at the split counts that refill the SMs against unpaired at theirs:
# (B, N, Hkv, D, unpaired split counts, paired split counts); 0 = the automatic count
PAIR_D160_SMALL_GRID_ROWS = [(1, 16384, 8, 80, (0, 12, 16, 24), (16, 24, 32, 33, 48)),
                             (1, 32768, 8, 80, (0, 16, 24), (24, 32, 33, 48, 64)),
                             (2, 16384, 8, 80, (0, 8, 12), (12, 16, 24, 33)),
                             (4, 8192, 8, 80, (0, 4, 6), (6, 8, 12, 16)),
                             (8, 4096, 8, 80, (0, 2, 3), (3, 4, 6, 8)),
                             (1, 16384, 32, 80, (0, 4, 6), (6, 8, 12)),
                             (1, 16384, 8, 72, (0, 16), (24, 32, 33))]
PAIR_D160_SMALL_GRID_VARIANTS = {"auto": {}, "single": {"CLO_DECODE_PACK": "0"}, "pairs": {"CLO_DECODE_PACK": "2"},
                                 "pairs/tma2": {"CLO_DECODE_PACK": "2", "CLO_DECODE_TMA_STAGES": "2"}}

# --pair-d160-small-auto: the rule stop 75 drew from those rows (pairs where one wave of pair
# splits of 512 keys or more fills 80-100% of the SMs; its first form, 4d9efb9: 90%, no key
# floor): the automatic call against unpaired (CLO_DECODE_PACK=0, its count), short and long
# keys, MHA, D = 72, block 4; then B=7/4K GQA (0.21 pairs per SM: 112 blocks at 4 splits, 85%
# of a wave, which made the 80%) with pairs forced at 4 and 5 splits:
# (B, N, Hkv, D, contiguous, splits, block_size)
PAIR_D160_SMALL_AUTO_ROWS = ([(1, N, 8, 80, False, (0,), 16) for N in (2048, 4096, 8192, 16384, 32768)]
                             + [(B, N, 8, 80, False, (0,), 16) for B, N in ((2, 4096), (2, 16384), (3, 16384),
                                                                              (4, 2048), (4, 8192), (5, 4096),
                                                                              (6, 8192), (8, 2048), (8, 8192),
                                                                              (10, 8192), (11, 4096))]
                             + [(1, N, 32, 80, False, (0,), 16) for N in (4096, 16384)]
                             + [(2, 8192, 32, 80, False, (0,), 16), (1, 16384, 8, 72, False, (0,), 16),
                                (1, 16384, 8, 80, False, (0,), 4), (4, 8192, 8, 80, False, (0,), 4)])
PAIR_D160_SMALL_AUTO_VARIANTS = {"auto": {}, "single": {"CLO_DECODE_PACK": "0"}}


def pair_d160_small_grid_sweep(iters, copy_bw):
    """PAIR_D160_SMALL_GRID_ROWS: paged block 16, cuDNN first, the automatic call, unpaired
    and paired at their own split counts (graph replays, cold L2)."""
    for B, N, Hkv, D, single_splits, pair_splits in PAIR_D160_SMALL_GRID_ROWS:
        def only(ns, label, single_splits=single_splits, pair_splits=pair_splits):
            if label == "auto":
                return ns == 0
            return ns in (single_splits if label == "single" else pair_splits)
        _split_sweep_row(cd.paged_case(B, N, Hkv, torch.float16, D=D), sorted({0, *single_splits, *pair_splits}),
                         PAIR_D160_SMALL_GRID_VARIANTS, iters, copy_bw, f"paged D={D} B={B} N={N} Hkv={Hkv}",
                         peer="sdpa-cudnn", only=only)


def pair_d160_small_auto_sweep(iters, copy_bw):
    """PAIR_D160_SMALL_AUTO_ROWS (graph replays, cold L2, cuDNN first), then B=7/4K GQA with
    pairs forced at 4 and 5 splits."""
    _layout_rows(PAIR_D160_SMALL_AUTO_ROWS, PAIR_D160_SMALL_AUTO_VARIANTS, iters, copy_bw)
    _split_sweep_row(cd.paged_case(7, 4096, 8, torch.float16, D=80), (0, 4, 5),
                     PAIR_D160_SMALL_GRID_VARIANTS, iters, copy_bw, "paged D=80 B=7 N=4096 Hkv=8",
                     peer="sdpa-cudnn", only=lambda ns, label: (ns == 0) == (label in ("auto", "single")))


# --narrow: the narrow math tile (stop 76: keys as the MMA's M dimension for units of at most 8
# rows, on the TMA kernel's even grid) against the 16-row tile (CLO_DECODE_NARROW=0): the
# automatic call, then the even grid forced (no balanced schedule or spread tail) both ways;
# paged GQA 32/8 and MHA from one block per SM to 15 units per SM, contiguous controls:
# (B, N, Hkv, D, contiguous, splits, block_size)
NARROW_ROWS = ([(B, N, 8, 128, False, (0,), 16) for B, N in ((1, 16384), (16, 1024), (16, 4096), (16, 16384),
                                                              (64, 1024), (64, 4096), (46, 8192), (10, 16384))]
               + [(B, N, 32, 128, False, (0,), 16) for B, N in ((64, 1024), (64, 4096), (16, 4096), (1, 16384))]
               + [(64, 4096, 32, 128, True, (0,), 16), (16, 4096, 8, 128, True, (0,), 16),
                  (1, 16384, 8, 128, True, (0,), 16)])
_EVEN_GRID = {"CLO_DECODE_STREAMK": "0", "CLO_DECODE_SPREAD": "0"}
NARROW_VARIANTS = {"auto": {}, "rows16": {"CLO_DECODE_NARROW": "0"}, "even": _EVEN_GRID,
                   "even16": {**_EVEN_GRID, "CLO_DECODE_NARROW": "0"}}
# --narrow-sustained: the large grids at the H200's power cap (stop 65), narrow against 16 rows
NARROW_SUSTAINED_ROWS = [(64, 1024, 32, 16), (64, 4096, 32, 16), (16, 16384, 8, 16), (46, 8192, 8, 16),
                         (64, 4096, 32, 16, True)]
NARROW_SUSTAINED_VARIANTS = [("auto", 0, {}), ("rows16", 0, {"CLO_DECODE_NARROW": "0"})]


# --narrow-dims: the narrow tile at the other kernel widths (9f25d0a ran it at 128 only): 64, 96
# and 256 unpaired, head pairs of 64 (on the 128 kernel), 72-80 (160) and 96 (256), and on the
# balanced schedule and the spread tail; paged block 16, cuDNN first, against the 16-row tile:
# (B, N, Hkv, D, contiguous, splits, block_size)
NARROW_DIMS_ROWS = ([(64, 2048, hkv, D, False, (0,), 16) for D in (64, 80, 96, 256) for hkv in (32, 8)]
                    + [(1, 16384, 8, D, False, (0,), 16) for D in (64, 80, 96, 256)]
                    + [(16, 4096, 8, D, False, (0,), 16) for D in (64, 96)]
                    + [(1, 16384, 32, 80, False, (0,), 16), (16, 4096, 8, 128, False, (0,), 16),
                       (1, 16384, 32, 128, False, (0,), 16)]
                    # 1-1.5 units per SM at D = 128: the spread tail and the balanced schedule
                    + [(B, N, 8, 128, False, (0,), 16) for B, N in ((17, 1024), (20, 4096), (22, 2048))]
                    + [(5, 4096, 32, 128, False, (0,), 16)])
NARROW_DIMS_VARIANTS = {"auto": {}, "rows16": {"CLO_DECODE_NARROW": "0"}}
# --narrow-d160: the one row f65759d read slower on the narrow tile (paged D = 80 MHA B=1/16K,
# head pairs on the 160 kernel: 46.5 against 45.5 us) and its neighbours, narrow / 16-row /
# narrow again
NARROW_D160_ROWS = [(1, 16384, 32, 80, False, (0,), 16), (1, 16384, 8, 80, False, (0,), 16),
                    (2, 8192, 32, 80, False, (0,), 16), (1, 16384, 32, 72, False, (0,), 16)]
NARROW_ABA_VARIANTS = {"auto": {}, "rows16": {"CLO_DECODE_NARROW": "0"}, "auto2": {}}


def narrow_sweep(iters, copy_bw):
    """NARROW_ROWS (graph replays, cold L2, cuDNN first), then NARROW_SUSTAINED_ROWS at the
    power cap (1 s of each variant's own calls before its timing, two interleaved rounds)."""
    _layout_rows(NARROW_ROWS, NARROW_VARIANTS, iters, copy_bw)
    sustained_sweep(iters, copy_bw, rows=NARROW_SUSTAINED_ROWS, variants=NARROW_SUSTAINED_VARIANTS)

# --small-d64-d96: paged 16-bit D = 64 and 96 on small grids (at most one unit per SM), where
# f65759d read cuDNN 7-9% ahead (D = 64 GQA B=16/4K 37.8 against 41.3 us, B=1/16K 14.3 against
# 15.3; D = 96 B=16/4K 54.6 against 58.8): head pairs (the 128 / 256 kernel over 128 / 192-
# column rows) against unpaired kernels at each depth, forced split counts, block 16:
# (B, N, Hkv, D, contiguous, splits, block_size)
SMALL_D64_D96_ROWS = ([(B, N, 8, 64, False, (0, 1, 2, 3, 4), 16) for B, N in ((16, 4096), (16, 2048), (8, 8192))]
                      + [(1, 16384, 8, 64, False, (0, 8, 16, 24, 32), 16), (4, 4096, 32, 64, False, (0, 1, 2, 3), 16)]
                      + [(B, N, 8, 96, False, (0, 1, 2, 3), 16) for B, N in ((16, 4096), (8, 8192))]
                      + [(1, 16384, 8, 96, False, (0, 8, 16, 24, 32), 16)])


def _small_d64_d96_variants(D, pairs=True, cp=True, rows16=False):
    """The automatic call, forced head pairs (`pairs`), the 16-row math tile in place of the
    narrow one (`rows16`), and unpaired kernels: cp.async (`cp`) and TMA at each depth that
    fits D."""
    single = {"CLO_DECODE_PACK": "0"}
    return {"auto": {}, **({"pairs": {"CLO_DECODE_PACK": "2"}} if pairs else {}),
            **({"rows16": {"CLO_DECODE_NARROW": "0"}} if rows16 else {}),
            **({"cp": {**single, **SWEEP_VARIANTS["cp"]}} if cp else {}),
            **{lb: {**single, **SWEEP_VARIANTS[lb]} for lb in ("tma2", "tma3", "tma4")
               if decode_tma_stages_fit(D, int(SWEEP_VARIANTS[lb]["CLO_DECODE_TMA_STAGES"]))}}


# --small-d64-d96-bands: bc028ce's finding (two blocks per SM: D = 64 on 3 stages, D = 96 on 2,
# 7-12% ahead of one block per SM) across the small grids: 0.36-1 units per SM, 2K-16K keys,
# both layouts; forced counts around 2 * SMs / units
SMALL_D64_D96_BAND_ROWS = ([(B, 4096, 8, 64, False, (0, 1, 2, 3, 4, 6), 16) for B in (10, 12, 14)]
                           + [(6, 4096, 8, 64, False, (0, 4, 5, 6, 8), 16), (16, 16384, 8, 64, False, (0, 1, 2, 3), 16),
                              (4, 16384, 8, 64, False, (0, 4, 6, 8, 12), 16),
                              (2, 16384, 8, 64, False, (0, 8, 12, 16, 24), 16)]
                           + [(B, 4096, 8, 96, False, (0, 1, 2, 3, 4), 16) for B in (12, 16)]
                           + [(8, 8192, 8, 96, False, (0, 3, 4, 5), 16), (16, 16384, 8, 96, False, (0, 1, 2, 3), 16),
                              (2, 16384, 8, 96, False, (0, 8, 12, 16, 24), 16)]
                           + [(16, 4096, 8, D, True, (0, 1, 2, 3), 16) for D in (64, 96)])


def _generic_small_grid_count(units, n, sms=132):
    """The split count of a 16-bit grid of `units` units at most one per SM without the stop-77
    rule: SMs // units below half the SMs (at most 128, none under 128 keys), else 1."""
    return 1 if 2 * units > sms else max(1, min(sms // units, -(-n // 128), 128))


# --small-d64-d96-confirm: the automatic count (2 SMs // units splits on HBM3e parts: stop 77)
# against the generic one it replaced (SMs // units below half the SMs, else 1), paged GQA
# 32/8 and MHA; then contiguous D = 96 small grids (the cp.async kernel) against TMA 3 and 4,
# where --small-d64-d96-bands read TMA 4 ahead at B=16/4K (49.9 against 53.0 us)
SMALL_D64_D96_CONFIRM_ROWS = [(B, N, hkv, D, False, (0, _generic_small_grid_count(B * hkv, N)), 16)
                              for D in (64, 96)
                              for B, N, hkv in ((16, 4096, 8), (13, 4096, 8), (11, 2048, 8), (9, 8192, 8),
                                                (5, 4096, 8), (3, 16384, 8), (16, 16384, 8), (4, 4096, 32))]
SMALL_CONTIG_D96_ROWS = [(B, N, 8, 96, True, (0,), 16) for B, N in ((1, 16384), (2, 16384), (8, 8192), (12, 4096),
                                                                    (16, 4096), (16, 16384))]


def small_d64_d96_confirm_sweep(iters, copy_bw):
    """SMALL_D64_D96_CONFIRM_ROWS (automatic against the generic count), then
    SMALL_CONTIG_D96_ROWS (automatic, cp.async, TMA 3 / 4), cuDNN first (graph replays, cold L2)."""
    _layout_rows(SMALL_D64_D96_CONFIRM_ROWS, {"auto": {}}, iters, copy_bw)
    _layout_rows(SMALL_CONTIG_D96_ROWS, {"auto": {}, "cp": SWEEP_VARIANTS["cp"], "tma3": SWEEP_VARIANTS["tma3"],
                                         "tma4": SWEEP_VARIANTS["tma4"]}, iters, copy_bw)


# --small-d64-d96-mid: where stop 77's 1024-key cap binds on short tables (2 SMs // units is
# more than keys / 1024), D = 64 B=5/4K read 17.8 us against cuDNN's 16.5 and D = 96 B=5/4K
# 24.5 at 4 splits on 2 stages against the generic 3 splits' 24.1: forced counts past the cap
# (splits of 512-1024 keys) x TMA depths, paged GQA 32/8 block 16
SMALL_D64_D96_MID_ROWS = [(B, N, 8, D, False, splits, 16) for D in (64, 96)
                          for B, N, splits in ((5, 4096, (0, 3, 4, 5, 6, 8)), (4, 4096, (0, 4, 6, 8)),
                                               (2, 4096, (0, 4, 6, 8, 12)), (7, 4096, (0, 4, 5, 6)),
                                               (10, 2048, (0, 2, 3)), (3, 8192, (0, 8, 10, 12)))]


def _stop77_small_grid_count(units, n, sms=132):
    """Stop 77's count (2 SMs // units, splits of 1024 keys or more, where that beats SMs //
    units), else the generic one: what --small-d64-d96-mid-confirm forces against the automatic."""
    two = min(2 * sms // units, n // 1024)
    return two if two > sms // units else _generic_small_grid_count(units, n, sms)


# --small-d64-d96-mid-confirm: the automatic count (stop 78: 512-key splits where 2 SMs //
# units of them fit, at most 16) against stop 77's (the 1024-key cap), paged GQA 32/8 block
# 16: the rows it moves (--small-d64-d96-mid's, 1024-key tables, B=11/2K, B=2/8K), the rows a
# 512-key cap everywhere moved and lost on (B=3/4K, B=1/16K, B=1/32K: stop 77's counts again)
# and three neither moves (B=1/8K, B=16/4K, B=7/4K)
SMALL_D64_D96_MID_CONFIRM_ROWS = [(B, N, 8, D, False, (0, _stop77_small_grid_count(8 * B, N)), 16)
                                  for D in (64, 96)
                                  for B, N in ((5, 4096), (4, 4096), (6, 4096), (10, 2048), (11, 2048), (9, 2048),
                                               (8, 2048), (3, 8192), (16, 1024), (12, 1024), (1, 16384), (1, 8192),
                                               (3, 4096), (2, 8192), (1, 32768), (16, 4096), (7, 4096))]


# --small-d64-behind: the paged D = 64 small grids stop 78 left behind cuDNN (GQA 32/8 block 16,
# f2a4a54, us: B=16/1K 13.4 against 12.6, B=12/1K 12.8 against 11.6, B=1/16K 15.4 against 14.3,
# B=3/4K 12.9 against 12.0): forced counts x the cp.async kernel, TMA depths and the 16-row
# math tile in place of the narrow one
SMALL_D64_BEHIND_ROWS = [(16, 1024, 8, 64, False, (0, 1, 2), 16), (12, 1024, 8, 64, False, (0, 1, 2), 16),
                         (1, 16384, 8, 64, False, (0, 16, 24, 32), 16), (3, 4096, 8, 64, False, (0, 4, 5, 6, 8), 16)]


# --small-d64-d96-spec: what stop 78's small-grid rule (one token only) leaves unmeasured.
# Paged D = 64 / 96 GQA 32/8 block 16 with Nq 2 and 4 (8 and 16 rows per KV head: one row tile),
# which keep the generic count, against about two blocks per SM; then one token at B=1 on 64K /
# 128K keys, where the rule takes 2 SMs // 8 = 33 splits: (B, N, Hkv, D, Nq, split counts)
SMALL_D64_D96_SPEC_ROWS = ([(B, N, 8, D, nq, (0, 2 * 132 // (8 * B))) for D in (64, 96) for nq in (2, 4)
                            for B, N in ((5, 4096), (16, 4096), (4, 16384), (2, 8192))]
                           + [(1, N, 8, D, 1, (0, 16, 24, 32)) for D in (64, 96) for N in (65536, 131072)])


def small_d64_d96_spec_sweep(iters, copy_bw, rows=SMALL_D64_D96_SPEC_ROWS):
    """`rows` (B, N, Hkv, D, Nq, split counts; Hq 32, block 16), the automatic count against
    forced ones, cuDNN first (with its causal mask for Nq > 1; graph replays, cold L2)."""
    for B, N, hkv, D, nq, splits in rows:
        _split_sweep_row(cd.paged_case(B, N, hkv, torch.float16, D=D, block_size=16, Nq=nq), splits, {"auto": {}},
                         iters, copy_bw, f"paged D={D} B={B} N={N} Hkv={hkv} Nq={nq}", peer="sdpa-cudnn")


# --small-spec-counts: --small-d64-d96-spec read paged D = 64 / 96 Nq 2 and 4 small grids 7-11%
# faster at about two blocks per SM than at the generic count (D = 96 B=5/4K Nq 2 25.2 -> 22.5
# us at 6 splits, D = 64 B=4/16K Nq 2 42.7 -> 38.3 at 8), but B=2/8K at 16 splits of 512 keys
# lost (D = 96 Nq 4 20.9 -> 25.7) and D = 64 B=16/4K Nq 4 at 2 (44.0 -> 46.6): forced counts
# from the generic one to 2 SMs // units, GQA 32/8 block 16; then B=1 one token at 40K / 48K
# keys, where the rule's 33 splits leave the 33rd empty, against 32: (B, N, Hkv, D, Nq, split counts)
SMALL_SPEC_COUNT_ROWS = ([(B, N, 8, D, nq, splits) for D in (64, 96) for nq in (2, 4)
                          for B, N, splits in ((5, 4096, (0, 3, 4, 5, 6)), (16, 4096, (0, 1, 2)),
                                               (4, 16384, (0, 4, 6, 8)), (2, 8192, (0, 8, 12, 16)),
                                               (8, 4096, (0, 2, 3, 4)), (12, 2048, (0, 1, 2)),
                                               (3, 8192, (0, 5, 8, 11)), (10, 4096, (0, 1, 2, 3)))]
                         + [(1, N, 8, D, 1, (0, 32, 33)) for D in (64, 96) for N in (40960, 49152)])


# --small-spec-confirm: stop 79's counts (Nq 2-4 on the small-grid count, every count cut back
# to the splits that hold keys), automatic against the count before them forced, on
# --small-spec-counts' rows; then B=1 one token at 64K keys (33 splits cut to 32)
SMALL_SPEC_CONFIRM_ROWS = ([(B, N, 8, D, nq, (0, _generic_small_grid_count(8 * B, N))) for D in (64, 96)
                            for nq in (2, 4)
                            for B, N in ((5, 4096), (16, 4096), (4, 16384), (2, 8192), (8, 4096), (12, 2048),
                                         (3, 8192), (10, 4096))]
                           + [(1, N, 8, D, 1, (0, 33)) for D in (64, 96) for N in (40960, 49152, 65536)])


# --small-spec-layouts: stop 79's Nq 2-4 rule on layouts it was not measured on (MHA Nq 2 / 4,
# GQA 32/8 Nq 3, GQA 32/4 Nq 2: 16-row units), automatic against the generic count forced:
# (B, N, Hkv, D, Nq, split counts)
SMALL_SPEC_LAYOUT_ROWS = [(B, N, hkv, D, nq, (0, _generic_small_grid_count(B * hkv, N))) for D in (64, 96)
                          for B, N, hkv, nq in ((2, 4096, 32, 2), (3, 4096, 32, 4), (1, 16384, 32, 2),
                                                (5, 4096, 8, 3), (10, 4096, 8, 3), (10, 4096, 4, 2), (20, 4096, 4, 2))]



# --balanced-merge: the balanced schedule's merge as its own kernel (decode_balanced_merge_kernel,
# stop 82) against the last piece of each cut unit folding (CLO_DECODE_MERGE_APART=0), at the
# automatic count and kernel (auto, fused, auto again: the drift within a row): the two-row-tile
# band (one token at Hq 32 / Hkv 1, Nq 8 at GQA 32/8), then D = 256 one token at GQA 32/8 (4 rows
# x 64 column groups: two round trips of its 128 math threads) and Nq 4 at D = 128 forced to the
# balanced 2 splits (16 rows). (B, N, Nq, contiguous, Hkv)
BALANCED_MERGE_ROWS = [(136, 2048, 1, False, 1), (140, 4096, 1, False, 1), (150, 4096, 1, False, 1),
                       (150, 4096, 1, True, 1), (170, 4096, 1, False, 1), (17, 4096, 8, False, 8),
                       (20, 4096, 8, False, 8), (25, 8192, 8, False, 8)]
BALANCED_MERGE_VARIANTS = {"auto": {}, "fused": {"CLO_DECODE_MERGE_APART": "0"}, "auto2": {}}


def balanced_merge_sweep(iters, copy_bw):
    """BALANCED_MERGE_ROWS, then D = 256 GQA 32/8 one token and D = 128 Nq 4 at 2 splits (graph
    replays, cold L2, cuDNN first)."""
    hkv_rows_sweep(BALANCED_MERGE_ROWS, BALANCED_MERGE_VARIANTS)(iters, copy_bw)
    for B, N in ((18, 2048), (20, 8192)):
        _split_sweep_row(cd.paged_case(B, N, 8, torch.float16, D=256, block_size=16), (0,), BALANCED_MERGE_VARIANTS,
                         iters, copy_bw, f"paged D=256 B={B} N={N} Hkv=8 Nq=1", peer="sdpa-cudnn")
    _nq_rows([(20, 4096, 4, False)], (2,), iters, copy_bw, BALANCED_MERGE_VARIANTS)


# Stand-alone sweeps (flag -> function(iters, copy_bw), help): each runs alone, then stops.
SWEEPS = {
    "graph-knobs": (graph_knob_sweep, "split counts and TMA depths on the small-grid targets"),
    "mid-grids": (mid_grid_sweep, "16-bit grids beyond one block per SM: splits x kernels, D=64 MHA pairs, cuDNN"),
    "d64-gqa-pairs": (d64_gqa_pairs_sweep, "16-bit D=64 GQA 32/8 beyond one block per SM: head pairs x kernels"),
    "d64-pairs-boundary": (d64_pairs_boundary_sweep, "16-bit D=64 at 1-8 blocks per SM: head pairs x splits"),
    "long-splits": (long_context_split_sweep, "16-bit D=128 GQA at one block per SM, long contexts: split counts"),
    "short-splits": (short_context_split_sweep, "B=1 at short contexts: split counts"),
    "seam-gaps": (seam_gap_sweep, "grids where cuDNN leads: block sizes, contiguous, kernels, pairs, splits"),
    "depth-seam": (depth_seam_sweep, "TMA depth and splits at 1-4 blocks per SM, block sizes 16 / 256, contiguous"),
    "split-balance": (split_balance_sweep, "split counts 1-4 at 1.2-3.5 blocks per SM, block sizes 16 / 256, contiguous"),
    "d64-contig-band": (d64_contig_band_sweep, "contiguous D=64 at 2.2-3.2 blocks per SM: TMA 2 vs 4 stages"),
    "balanced-dims": (balanced_dims_sweep, "D=64/96/256 at 1.2 and 2.2 units per SM: balanced against even grids"),
    "balanced": (balanced_sweep, "D=128 at 1-3 units per SM: the balanced schedule against even grids"),
    "d80": (lambda iters, copy_bw: d96_sweep(iters, copy_bw, D80_ROWS),
            "16-bit D=80 at 1.3-4.8 units per SM: each kernel, 1 and 2 splits"),
    "d80-wide": (d80_wide_sweep, "16-bit D=80 at 1.7-3.4 blocks per SM: auto vs cp.async / TMA 2 / TMA 3, 1-2 splits"),
    "d80-paged-seam": (lambda iters, copy_bw: d80_wide_sweep(iters, copy_bw, D80_PAGED_SEAM_ROWS, ("cp", "tma3")),
                       "paged 16-bit D=80 at 2.7-3.1 blocks per SM: auto vs cp.async / TMA 3, 1-2 splits"),
    "d80-long": (lambda iters, copy_bw: d80_wide_sweep(iters, copy_bw, D80_LONG_ROWS, ("cp", "tma3")),
                 "paged 16-bit D=80 at 8192 keys, 1.5-3.4 blocks per SM: auto vs cp.async / TMA 3, 1-2 splits"),
    "long-contig": (lambda iters, copy_bw: d80_wide_sweep(iters, copy_bw, LONG_CONTIG_ROWS, ("cp", "tma3")),
                    "contiguous 16-bit D=80 / 96 at 8192 keys: auto vs cp.async / TMA 3, 1-2 splits"),
    "contig-band-long": (contig_band_long_sweep,
                         "contiguous 16-bit D=96 / 80 at 1.2-1.8 and 2.8-3.15 units per SM, 4K-16K keys: 0-2 splits"),
    "paged-band-long": (lambda iters, copy_bw: contig_band_long_sweep(iters, copy_bw, contiguous=False),
                        "paged (block 16) 16-bit D=96 / 80, the --contig-band-long rows: 0-2 splits"),
    "d96-paged-long": (lambda iters, copy_bw: d96_sweep(iters, copy_bw, D96_PAGED_LONG_ROWS),
                       "paged 16-bit D=96 at 1.58 and 2.8-3.15 units per SM, 4K / 8K: kernels, pairs, 1-2 splits"),
    "window-long": (window_long_sweep, "paged 16-bit D=80 / 96 reading 4096 keys through a window on 8K / 16K tables"),
    "balanced-short": (balanced_short_sweep, "the balanced schedule on tables longer than the keys read, and windows"),
    "balanced-ragged": (balanced_ragged_sweep, "the balanced schedule's grids with ragged lengths"),
    "pdl-map": (pdl_map_sweep, "16-bit GQA 32/8 grids of 1-2.4 units per SM with PDL on and off"),
    "pdl-map-more": (pdl_map_more_sweep, "FP8 D=128 / 64, 16-bit D=64/96/256, D=128 at 1K and 2-split grids: PDL on and off"),
    "pdl-map-edges": (lambda iters, copy_bw: pdl_map_more_sweep(iters, copy_bw, PDL_MAP_EDGE_ROWS),
                      "the PDL rule's edges: FP8 D=128 / 64, 16-bit D=128 at 1.03 / 1.09 blocks per SM"),
    "d80-layout": (d80_layout_sweep, "16-bit D=80 B=64/2K: paged block 16 / 256 and contiguous against cuDNN"),
    "paged-order": (paged_order_sweep, "long paged tables: cp.async vs TMA with random, local and sequential blocks"),
    "d64-pair-tail": (d64_pair_tail_sweep, "paged 16-bit D=64 at 2-3 blocks per SM: head pairs balanced / even, splits"),
    "d64-contig-splits": (d64_contig_splits_sweep, "contiguous 16-bit D=64 at 2-3 blocks per SM: 1-4 splits"),
    "d96-contig-balanced": (d96_contig_balanced_sweep,
                            "contiguous 16-bit D=96 / 80 at 1-1.5 units per SM: balanced vs even 2 splits, 1 split"),
    "d64-unpaired-tail": (d64_unpaired_tail_sweep, "paged 16-bit D=64 without head pairs at 2-3 blocks per SM: 1-3 splits"),
    "d64-balanced2": (d64_balanced2_sweep, "16-bit D=64 without pairs at 2-3 blocks per SM: balanced at 2 per SM"),
    "d96": (d96_sweep, "16-bit D=96 / 80: unpaired kernels vs head pairs, paged and contiguous"),
    "fp8-splits": (fp8_split_sweep, "FP8 caches: forced split counts on small and medium grids"),
    "fp8-pack-splits": (fp8_pack_split_sweep, "FP8 small grids: split counts with and without head pairs"),
    "fp8-boundary": (fp8_boundary_sweep, "FP8 D=64 grids of one to two blocks per SM: splits and pairs"),
    "fp8-narrow": (fp8_narrow_kernel_sweep, "FP8 caches at head_dim <= 64: cp.async vs TMA kernel"),
    "l2-promotion-check": (l2_promotion_check_sweep, "automatic L2 promotion vs 256 B: 16-bit D=192, FP8 caches"),
    "l2-promotion": (l2_promotion_sweep, "tensor-map L2 promotion 256 / 128 / none and the cp.async kernel"),
    "wide-pairs": (wide_pair_sweep, "paged 16-bit D=72-96 with and without head pairs, per kernel"),
    "pair-d160": (lambda iters, copy_bw: _layout_rows(PAIR_D160_ROWS, PAIR_D160_VARIANTS, iters, copy_bw),
                  "paged 16-bit D=72-80 head pairs on the D=160 kernel (depths, PDL) vs the D=256 kernel"),
    "pair-d160-bands": (lambda iters, copy_bw: _layout_rows(PAIR_D160_BAND_ROWS, PAIR_D160_BAND_VARIANTS, iters,
                                                            copy_bw),
                        "paged 16-bit D=72-80 pairs on the D=160 kernel vs unpaired where pairs are off, splits"),
    "pair-d160-edge": (lambda iters, copy_bw: _layout_rows(PAIR_D160_EDGE_ROWS, PAIR_D160_BAND_VARIANTS, iters,
                                                           copy_bw),
                       "paged 16-bit D=80 pairs vs unpaired around 0.45 pairs per SM, 2 and 4 splits"),
    "pair-d160-small-blocks": (lambda iters, copy_bw: (_layout_rows(PAIR_D160_SMALL_BLOCK_ROWS,
                                                                     PAIR_D160_BAND_VARIANTS, iters, copy_bw),
                                                        _layout_rows(PAIR_D160_PDL_ROWS, PAIR_D160_PDL_VARIANTS,
                                                                     iters, copy_bw)),
                               "paged D=80 at block sizes 1-4: pairs (cp.async D=160) vs unpaired; PDL at 2 stages"),
    "pair-d160-small-grids": (pair_d160_small_grid_sweep,
                              "paged D=72-80 below 0.35 pairs per SM: pairs vs unpaired at their split counts"),
    "narrow": (narrow_sweep, "D=128 one token: the narrow math tile vs the 16-row one, cool and at the cap"),
    "narrow-dims": (lambda iters, copy_bw: _layout_rows(NARROW_DIMS_ROWS, NARROW_DIMS_VARIANTS, iters, copy_bw),
                    "head dims 64-256 and head pairs: the narrow math tile vs the 16-row one"),
    "narrow-d160": (lambda iters, copy_bw: _layout_rows(NARROW_D160_ROWS, NARROW_ABA_VARIANTS, iters, copy_bw),
                    "D=72-80 head pairs at B=1-2: narrow / 16-row / narrow"),
    "small-d64-d96": (lambda iters, copy_bw: _layout_rows(SMALL_D64_D96_ROWS, _small_d64_d96_variants, iters, copy_bw),
                      "paged D=64 / 96 at most one unit per SM: head pairs vs unpaired per depth, forced splits"),
    "small-d64-d96-bands": (lambda iters, copy_bw: _layout_rows(
                                SMALL_D64_D96_BAND_ROWS, lambda D: _small_d64_d96_variants(D, pairs=False), iters, copy_bw),
                            "D=64 / 96 at 0.36-1 units per SM, both layouts: forced splits x depths"),
    "small-d64-d96-confirm": (small_d64_d96_confirm_sweep,
                              "the stop 77 small-grid count against the generic one; contiguous D=96 small grids on TMA"),
    "small-d64-d96-mid": (lambda iters, copy_bw: _layout_rows(
                              SMALL_D64_D96_MID_ROWS, lambda D: _small_d64_d96_variants(D, pairs=False, cp=False),
                              iters, copy_bw),
                          "paged D=64 / 96 where the 1024-key cap binds: splits of 512-1024 keys x depths"),
    "small-d64-d96-mid-confirm": (lambda iters, copy_bw: _layout_rows(SMALL_D64_D96_MID_CONFIRM_ROWS, {"auto": {}},
                                                                       iters, copy_bw),
                                  "paged D=64 / 96 small grids: the automatic count (stop 78) vs stop 77's"),
    "small-d64-behind": (lambda iters, copy_bw: _layout_rows(
                             SMALL_D64_BEHIND_ROWS, lambda D: _small_d64_d96_variants(D, pairs=False, rows16=True),
                             iters, copy_bw),
                         "paged D=64 small grids behind cuDNN after stop 78: counts x kernels, depths, 16-row tile"),
    "small-d64-d96-spec": (small_d64_d96_spec_sweep,
                           "paged D=64 / 96 small grids at Nq 2 / 4, and B=1 at 64K / 128K keys: auto vs counts"),
    "small-spec-counts": (lambda iters, copy_bw: small_d64_d96_spec_sweep(iters, copy_bw, SMALL_SPEC_COUNT_ROWS),
                          "paged D=64 / 96 Nq 2 / 4 small grids: generic to two-blocks counts; B=1 33 vs 32"),
    "small-spec-confirm": (lambda iters, copy_bw: small_d64_d96_spec_sweep(iters, copy_bw, SMALL_SPEC_CONFIRM_ROWS),
                           "stop 79's counts (Nq 2-4 small grids; cut to splits holding keys) vs the previous ones"),
    "small-spec-layouts": (lambda iters, copy_bw: small_d64_d96_spec_sweep(iters, copy_bw, SMALL_SPEC_LAYOUT_ROWS),
                           "stop 79's Nq 2-4 rule on unmeasured layouts (MHA, Nq 3, GQA 32/4): auto vs generic"),
    "pair-d160-small-auto": (pair_d160_small_auto_sweep,
                             "paged D=72-80 below 0.35 pairs per SM: the automatic call vs unpaired"),
    "wide-pairs-bands": (wide_pair_band_sweep, "paged 16-bit D=72-88 pairs vs unpaired at 1-3.5 units per SM, splits"),
    "depth-bands": (depth_band_sweep, "16-bit D=128 small to large grids: auto vs cp.async / TMA 2-4 stages"),
    "large-grids": (large_grid_sweep, "bandwidth-bound grids (cuDNN ahead on the H200): kernels x TMA depths"),
    "d128-tail-splits": (split_band_sweep, "16-bit D=128 GQA at 1.03-1.4 units per SM and B=16/16K: splits x kernels"),
    "d128-tail-confirm": (auto_split_sweep(D128_TAIL_CONFIRM_ROWS),
                          "the HBM3e D=128 one-tail rule across B=18-23 at 2K-8K: automatic vs 1-3 splits"),
    "d128-wave-confirm": (auto_split_sweep(D128_WAVE_CONFIRM_ROWS),
                          "the D=128 second-wave band (2.1-2.5 units per SM) at 2K / 4K: automatic vs 1-3 splits"),
    "band-check-wide": (auto_split_sweep(BAND_CHECK_WIDE_ROWS),
                        "the H100 split bands at D=256 and D=96 (unmeasured on HBM3e): automatic vs 1-3 splits"),
    "hbm3e-band-edges": (auto_split_sweep(HBM3E_BAND_EDGE_ROWS),
                         "the ends of the D=256 / D=96 bands on HBM3e: automatic vs forced split counts"),
    "hbm3e-band-confirm": (auto_split_sweep(HBM3E_BAND_CONFIRM_ROWS),
                           "the HBM3e D=256 / D=96 split rules at unswept lengths and edges: automatic vs forced"),
    "hbm3e-band-edges2": (auto_split_sweep(HBM3E_BAND_EDGE2_ROWS),
                          "the moved HBM3e D=256 / D=96 band edges and 4 splits at 8K-16K: automatic vs forced"),
    "hbm3e-band-final": (auto_split_sweep(HBM3E_BAND_FINAL_ROWS),
                         "the final HBM3e D=256 / D=96 counts against the H100's at points of each band"),
    "hbm3e-narrow-bands": (auto_split_sweep(HBM3E_NARROW_BAND_ROWS),
                           "the HBM3e one-tail edges at D=160/192 and contiguous D=80/88: automatic vs 1-2 splits"),
    "hbm3e-contig-192": (auto_split_sweep(HBM3E_CONTIG_192_ROWS),
                         "contiguous D=192 on HBM3e at 1.5-1.7 units per SM: automatic vs 1-2 splits"),
    "hbm3e-band-tops": (auto_split_sweep(HBM3E_BAND_TOP_ROWS),
                        "contiguous D=192 past 1.7 units per SM and paged D=96 8K-16K at 2.48-2.55: automatic vs forced"),
    "hbm3e-band-tops-confirm": (auto_split_sweep(HBM3E_BAND_TOP_CONFIRM_ROWS),
                                "the moved tops at their edges, and contiguous D=192 at 2-2.5 units per SM"),
    "hbm3e-contig-192-wave": (auto_split_sweep(HBM3E_CONTIG_192_WAVE_ROWS),
                              "contiguous D=192 past two units per SM on HBM3e: automatic vs 1-2 splits"),
    "hbm3e-contig-192-fill": (auto_split_sweep(HBM3E_CONTIG_192_FILL_ROWS),
                              "contiguous D=192 at 2.0-3.3 units per SM on HBM3e: automatic vs 1-4 splits"),
    "spread-tail": (spread_tail_sweep, "D=128 GQA at 1-1.4 units per SM: automatic vs the spread tail in 4-16 pieces"),
    "h100-spread-low-confirm": (lambda iters, copy_bw: h100_spread_rounds(iters, copy_bw, H100_SPREAD_LOW_CONFIRM_ROWS),
                                "the H100 spread-tail rule's edges: automatic vs 1 split vs 8 pieces, three rounds"),
    "h100-spread-low": (h100_spread_low_sweep,
                        "the H100's spread-tail band (1.0-1.1 units per SM) at B=17-19, 1K-16K: auto, 1 split, 4-8 pieces"),
    "hbm3e-contig-192-top": (auto_split_sweep(HBM3E_CONTIG_192_TOP_ROWS),
                             "contiguous D=192 at the 2-split band's top (2.5 units per SM) on HBM3e"),
    "spread-tail-other": (auto_split_sweep(SPREAD_TAIL_OTHER_ROWS),
                          "the spread tail's rule at MHA and at block sizes 8 and 256: automatic vs forced counts"),
    "spread-tail-confirm": (spread_tail_confirm_sweep,
                            "D=128 GQA at 1-1.3 units per SM: the automatic count, the spread tail on and off"),
    "spread-tail-top": (spread_tail_top_sweep, "D=128 GQA paged at 1.27-1.4 units per SM: automatic, spread off, 1 split"),
    "paged-box-rows": (auto_split_sweep(PAGED_BOX_ROW_ROWS),
                       "paged D=128 large grids at block sizes 16, 64 and 256 against contiguous keys"),
    "paged-box-rows-more": (auto_split_sweep(PAGED_BOX_ROW_MORE_ROWS), "the same at block sizes 8-64"),
    "plane-boxes": (plane_box_sweep(PLANE_BOX_ROWS), "one TMA box over every plane of its rows against a box per plane"),
    "plane-boxes-confirm": (plane_box_sweep(PLANE_BOX_CONFIRM_ROWS),
                            "the plane-box rule's edges: automatic, a box per plane, one over every plane"),
    "spread-tail-wide": (spread_tail_wide_sweep,
                         "D=128 GQA at 1.27-1.45 units per SM: automatic, 1-2 splits vs the spread tail in 2-4 pieces"),
    "partial-wave": (auto_split_sweep(PARTIAL_WAVE_ROWS),
                     "16-bit D=128 at 0.5-0.97 units per SM: automatic (2 * SMs / units splits) vs 1-3"),
    "wave-top": (wave_top_sweep, "paged D=128 GQA at 2.5-3.9 units per SM: 1-2 splits, 4 stages, cool and at the cap"),
    "contig-partial-wave": (auto_split_sweep(CONTIG_PARTIAL_WAVE_ROWS),
                            "contiguous D=128 at 0.5-0.9 units per SM: 1-3 splits"),
    "bands-next": (bands_next_sweep, "stop 66's bands: contiguous at the cap, Nq 2 and 4 at 0-3 splits"),
    "nq-rules": (nq_rules_sweep, "Nq 2 and 4 at the HBM3e D=128 bands' edges, one token at 3 splits on the wave top"),
    "nq-next": (nq_next_sweep, "paged Nq 2-4 small grids at TMA 4 stages; Nq 8 (two row tiles) at 0-3 splits"),
    "nq-confirm": (nq_confirm_sweep, "stop 67: contiguous Nq > 1 small grids on TMA 3, the Nq rules' edges, the cap"),
    "nq-tiles": (nq_tiles_sweep, "Nq 8 and 16 (two and four row tiles) across the HBM3e D=128 bands; paged small-grid stages"),
    "nq-tiles-confirm": (nq_tiles_confirm_sweep, "stop 68's multi-tile rules at their edges; Nq 16 bands; paged small-grid stages"),
    "nq-small-splits": (lambda iters, copy_bw: _nq_rows_each(NQ_SMALL_SPLIT_ROWS, iters, copy_bw),
                        "Nq 8 and 16 small grids at 1, 1.5 and 2 blocks per SM"),
    "wide-rows": (wide_rows_sweep, "two row tiles per block against 16-row blocks: Nq 8 GQA 32/8, one token MQA"),
    "wide-rows-confirm": (auto_narrow_rows_sweep(WIDE_ROWS_CONFIRM_ROWS),
                          "the automatic two-row-tile choice against 16-row blocks at its edges"),
    "wide-rows-partial": (wide_rows_partial_sweep, "the automatic two-row-tile choice at 20-28 rows (Nq 5-7)"),
    "merge-apart": (merge_apart_sweep, "the split merge as its own kernel against the last split block merging"),
    "wide-boxes": (hkv_rows_sweep(WIDE_BOXES_ROWS, WIDE_BOXES_VARIANTS), "the two-row-tile kernel at one wave: spanning boxes against a box per plane"),
    "wide-boxes-depth": (hkv_rows_sweep(WIDE_BOXES_DEPTH_ROWS, WIDE_BOXES_DEPTH_VARIANTS), "paged two-tile one-wave rows: auto, a box per plane, 3 stages"),
    "wide-boxes-confirm": (hkv_rows_sweep(WIDE_BOXES_CONFIRM_ROWS, WIDE_BOXES_CONFIRM_VARIANTS),
                           "the bench's MQA rows and Nq 8 B=8/16K: auto, a box per plane, spanning at 4 stages"),
    "wide-beyond": (hkv_rows_sweep(WIDE_BEYOND_ROWS, WIDE_BEYOND_VARIANTS),
                    "the two-row-tile kernel beyond one wave (Nq 8, MQA; both layouts): PDL on / off, a box per plane"),
    "mqa-beyond": (hkv_rows_sweep(MQA_BEYOND_ROWS, MQA_BEYOND_VARIANTS, (0, 1, 2, 3), _auto_at_s0),
                   "one token at Hq 32 / Hkv 1 at 1.1-2 units per SM: 1-3 splits, 16-row and two-tile blocks"),
    "wide-three": (wide_splits_sweep(WIDE_THREE_ROWS),
                   "two-tile blocks at 3 splits, 1.06-1.25 units per SM (MQA, Nq 8): auto, 16-row rules, 2-4 splits"),
    "wide-low": (wide_splits_sweep(WIDE_LOW_ROWS), "the same at 1.01-1.06 units per SM and 2K keys (3 splits from one unit per SM)"),
    "wide-balanced": (hkv_rows_sweep(WIDE_BALANCED_ROWS, WIDE_BALANCED_VARIANTS, (0, 2), _auto_at_s0),
                      "the balanced schedule at two row tiles (MQA near one unit per SM, Nq 8): auto, even 2, balanced"),
    "h100-mqa-narrow": (hkv_rows_sweep(H100_MQA_NARROW_ROWS, H100_MQA_NARROW_VARIANTS, (0, 1, 2), _auto_at_s0),
                        "one-token MQA rows on 16-row blocks at 2-4 stages and 0-2 splits against the two-tile auto"),
    "wide-low-band": (hkv_rows_sweep(WIDE_LOW_BAND_ROWS, WIDE_LOW_BAND_VARIANTS, (0, 1, 2), _wide_low_band_only),
                      "two-row-tile blocks as the balanced schedule at 0.5-0.97 units per SM against auto and 1 split"),
    "h100-low-band-rule": (hkv_rows_sweep(H100_LOW_BAND_RULE_ROWS, H100_LOW_BAND_RULE_VARIANTS, (0, 1, 2),
                                          _wide_low_band_only),
                           "the off-HBM3e low-band rule (auto) against 16-row blocks, 1 split and the balanced 2"),
    "fused-fold": (hkv_rows_sweep(FUSED_FOLD_ROWS, FUSED_FOLD_VARIANTS),
                   "split calls of more items than threads: the fused fold (items together) against the merge kernel"),
    "cluster-pair": (cluster_pair_sweep, "2-split even grids: the cluster pair's DSMEM merge against the merge kernel / fused fold"),
    "split-clusters": (split_clusters_sweep, "3-4 split even grids as split clusters against the merge kernel / fused fold"),
    "fold-ab": (fold_ab_sweep, "FP8 MQA and fused split rows: the fused fold, for builds with and without CLO_DEV_FOLD_ONE_ITEM"),
    "h100-low-band-confirm": (hkv_rows_sweep(H100_LOW_BAND_CONFIRM_ROWS, H100_LOW_BAND_RULE_VARIANTS, (0, 1, 2),
                                             _wide_low_band_only),
                              "the low-band rule's edges: Nq 5, 3K paged, contiguous below 60%%, 0.69-0.76 units per SM"),
    "h100-mqa-band": (hkv_rows_sweep(H100_MQA_BAND_ROWS, H100_MQA_BAND_VARIANTS, (0, 2), _auto_at_s0),
                      "one-token MQA and Nq 8 at 1.35-1.75 units per SM: auto against the balanced 2 splits"),
    "balanced-merge": (balanced_merge_sweep, "the balanced schedule's merge as its own kernel against the fused fold"),
    "wide-balanced-band": (hkv_rows_sweep(WIDE_BALANCED_BAND_ROWS, WIDE_BALANCED_BAND_VARIANTS, (0, 2), _auto_at_s0),
                           "the two-tile balanced schedule's band: 1-2 units per SM at 1K-16K, auto against balanced"),
    "wide-balanced-long": (hkv_rows_sweep(WIDE_BALANCED_LONG_ROWS, WIDE_BALANCED_VARIANTS, (0, 2), _auto_at_s0),
                           "the two-tile balanced band at 8K-16K keys: auto (balanced) against even 2"),
    "wide-balanced-ab": (hkv_rows_sweep(WIDE_BALANCED_LONG_ROWS, WIDE_BALANCED_AB_VARIANTS, (2,)),
                         "the two-tile balanced band at 8K-16K keys: even 2 and balanced interleaved, twice"),
    "wide-sustained": (cool_then_cap_sweep(WIDE_SUSTAINED_ROWS, WIDE_SUSTAINED_VARIANTS),
                       "paged two-tile one-wave rows (Nq 8, MQA), cool and at the cap: auto, a box per plane, span 4"),
    "one-wave-boxes": (hkv_rows_sweep(ONE_WAVE_BOXES_ROWS, WIDE_BOXES_VARIANTS),
                       "one-wave paged GQA / MQA, one and two row tiles: spanning boxes against a box per plane"),
    "mqa-paged": (mqa_paged_sweep, "one-token MQA paged (table orders, spanning boxes, 3 stages) vs contiguous; Nq 4 B=16/4K"),
    "mqa-block-sizes": (mqa_block_sizes_sweep, "one-token MQA paged at block sizes 16-128 (and a sequential table) vs contiguous"),
    "build-ab": (hkv_rows_sweep(BUILD_AB_ROWS, BUILD_AB_VARIANTS), "the automatic choice on a row of each D=128 kernel family (two builds compared)"),
    "build-ab-ragged": (hkv_rows_sweep(BUILD_AB_RAGGED_ROWS, BUILD_AB_VARIANTS),
                        "--build-ab's families at lengths that end inside a tile (two builds compared)"),
    "pair-band-edges": (forced_splits_sweep(PAIR_BAND_EDGE_ROWS), "the length edges of stop 86's HBM3e bands: auto against 1-3 splits"),
    "pair-band-confirm": (forced_splits_sweep(PAIR_BAND_CONFIRM_ROWS), "stop 86's HBM3e 1-split bands (D=64 pairs, D=104-120): auto against 1-3 splits"),
    "misaligned-rows": (forced_splits_sweep(MISALIGNED_ROWS, MISALIGNED_VARIANTS, MISALIGNED_RUNS, show_kernels=True),
                        "paged heads not a whole number of 128-byte lines: balanced 2 splits, 1 and even 2, by L2 promotion"),
    "wide-rows-h100": (auto_narrow_rows_sweep(WIDE_ROWS_H100_ROWS, WIDE_ROWS_H100_VARIANTS),
                       "two row tiles per block on non-HBM3e sm_90: auto vs 16-row blocks (stop 99)"),
    "wide-rows-h100-fill": (auto_narrow_rows_sweep(WIDE_ROWS_H100_FILL_ROWS),
                            "two row tiles per block on non-HBM3e sm_90 under 90%% fill and at MQA rows (stop 100)"),
    "wide-rows-h100-fill-confirm": (auto_narrow_rows_sweep(WIDE_ROWS_H100_FILL_CONFIRM_ROWS),
                                    "the 70%% fill of two row tiles on non-HBM3e sm_90: auto vs 16-row blocks (stop 100)"),
    "h100-mqa-rate": (h100_mqa_rate_sweep, "one-token MQA at 0.5-1.5 units per SM: auto against the rate knobs (stop 100)"),
    "h100-tails": (h100_tails_sweep, "the one-tail band on non-HBM3e sm_90: auto against 1-3 splits (stop 99)"),
    "misaligned-band": (forced_splits_sweep(MISALIGNED_BAND_ROWS, MISALIGNED_BAND_VARIANTS, MISALIGNED_BAND_RUNS),
                        "the D=256 kernel's one-tail band over paged heads of 144-240 columns: auto, 1, 3, balanced 2"),
    "shared-tiles": (forced_splits_sweep(SHARED_TILES_ROWS, MISALIGNED_BAND_VARIANTS, SHARED_TILES_RUNS),
                     "units of two row tiles of one KV head in the balanced band: auto, 1, 3, even and balanced 2"),
    "shared-tiles-contig": (forced_splits_sweep(SHARED_TILES_CONTIG_ROWS, SIXTEEN_ROW_VARIANTS, SHARED_TILES_RUNS),
                            "contiguous D=64 / 96 balanced bands with two row tiles per KV head: auto, 1, 3, even and balanced 2"),
    "pair-vs-d128": (forced_splits_sweep(PAIR_VS_D128_ROWS, show_kernels=True),
                     "paged D=64 head pairs against D=128 at the same grid and bytes: auto, 1-3 splits"),
    "spec-contig": (forced_splits_sweep(SPEC_CONTIG_ROWS, SIXTEEN_ROW_VARIANTS, SHARED_TILES_RUNS),
                    "contiguous D=64 / 96 Nq 5 and 8 (two row tiles per KV head) over their bands: auto, 1, 3, even and balanced 2"),
    "wide-d64-d96": (forced_splits_sweep(WIDE_D64_D96_ROWS, WIDE_D64_D96_VARIANTS, WIDE_D64_D96_RUNS, peer=None),
                     "D=64 / 96 Nq 5 and 8 (two row tiles per KV head): 16-row blocks at auto against wide blocks at 1-4 splits"),
    "wide-small": (forced_splits_sweep(WIDE_SMALL_ROWS, WIDE_D64_D96_VARIANTS, wide_small_runs, peer=None),
                   "D=64 / 96 Nq 5 below 0.45 KV heads per SM: auto against wide blocks at half, one and two waves' counts"),
    "wide-small-confirm": (forced_splits_sweep(WIDE_SMALL_CONFIRM_ROWS, WIDE_CONFIRM_VARIANTS, WIDE_SMALL_CONFIRM_RUNS,
                                               peer=None),
                           "stop 89's two-row-tile counts (below 0.45, contiguous D=64 past one) against the 16-row rules"),
    "wide-paged-depth": (forced_splits_sweep(WIDE_PAGED_DEPTH_ROWS, WIDE_PAGED_DEPTH_VARIANTS, WIDE_PAGED_DEPTH_RUNS,
                                             peer=None),
                         "paged against contiguous D=64 two-row-tile blocks at 2-4 stages, 3 / 4 / 8 splits"),
    "wide-paged-d64": (forced_splits_sweep(WIDE_PAGED_D64_ROWS, WIDE_PAGED_D64_VARIANTS, wide_paged_d64_runs, peer=None),
                       "paged D=64 Nq 5 two-tile blocks at 2 / 3 stages, the paged and contiguous rules' counts"),
    "wide-paged-d64-confirm": (forced_splits_sweep(WIDE_PAGED_D64_CONFIRM_ROWS, WIDE_CONFIRM_VARIANTS, WIDE_CONFIRM_RUNS,
                                                   peer=None),
                               "paged D=64 two-tile rows on the contiguous rule's counts against the 16-row rules"),
    "wide-short": (forced_splits_sweep(WIDE_SHORT_ROWS, WIDE_SHORT_VARIANTS, wide_short_runs, peer=None),
                   "D=64 / 96 Nq 5 small band at 2-4K keys: auto, 16-row rules, wide at splits of 256 / 512 keys"),
    "wide-short-confirm": (forced_splits_sweep(WIDE_SHORT_CONFIRM_ROWS, WIDE_SHORT_VARIANTS, wide_short_confirm_runs,
                                               peer=None),
                           "paged D=64 small band at one and two waves' counts, and the 16-row rules at half-full grids"),
    "wide-1k": (forced_splits_sweep(WIDE_1K_ROWS, WIDE_1K_VARIANTS, wide_1k_runs, show_kernels=True, peer=None),
                "D=64 / 96 Nq 5 under 2048 keys: auto (16-row blocks) against wide blocks, paged D=96 also tail spans"),
    "wide-1k-confirm": (forced_splits_sweep(WIDE_1K_CONFIRM_ROWS, WIDE_1K_CONFIRM_VARIANTS, auto_old_runs("plane"),
                                            show_kernels=True, peer=None),
                        "two-tile blocks from 1024 keys and D=96 tail spans from 512 keys a block: auto / old / plane"),
    "wide-1k-d64-contig": (forced_splits_sweep(WIDE_1K_D64_CONTIG_ROWS, WIDE_1K_D64_CONTIG_VARIANTS,
                                               WIDE_1K_D64_CONTIG_RUNS, show_kernels=True, peer=None),
                           "contiguous D=64 Nq 5-8 / MQA under 2048 keys: auto (4 splits at 2 splits' units) / old (16-row) / wide 2, 4"),
    "paged-layouts": (paged_layouts_sweep(PAGED_LAYOUT_VARIANTS),
                      "two-tile rows paged / paged in order / token-major / contiguous: 3-4 stages, no promotion, spans"),
    "paged-layouts-deep": (paged_layouts_sweep(PAGED_LAYOUT_DEEP_VARIANTS, [r for r in PAGED_LAYOUT_ROWS if r[4] > 1]),
                           "the two-tile rows of --paged-layouts at 4-6 stages (CLO_DEV_DEEP_STAGES builds)"),
    "tail-spans-confirm": (paged_layouts_sweep(TAIL_SPANS_CONFIRM_VARIANTS, TAIL_SPANS_CONFIRM_ROWS,
                                               PAGED_LAYOUTS[:2] + PAGED_LAYOUTS[3:]),
                           "paged D=96 two-tile rows: the automatic tail spans against a box per plane"),
    "wide-mid": (forced_splits_sweep(WIDE_MID_ROWS, WIDE_MID_VARIANTS, WIDE_MID_RUNS, peer=None),
                 "D=64 Nq 5 at 1.03-1.38 KV heads per SM: auto, wide at 1-3 and 16-row at 1-2 splits"),
    "wide-d64-d96-confirm": (forced_splits_sweep(WIDE_CONFIRM_ROWS, WIDE_CONFIRM_VARIANTS, WIDE_CONFIRM_RUNS, peer=None),
                             "stop 88's two-row-tile rule at D=64 / 96 against the 16-row rules it replaced"),
    "wide-d64-d96-h100": (forced_splits_sweep(WIDE_H100_ROWS, WIDE_H100_VARIANTS, auto_old_runs("span"), peer=None),
                          "stop 101's two-row-tile counts at D=64 / 96 off HBM3e against the 16-row rules"),
    "h100-d64-two-waves": (forced_splits_sweep(H100_D64_TWO_WAVES_ROWS, WIDE_D64_D96_VARIANTS, H100_D64_TWO_WAVES_RUNS,
                                               peer=None),
                           "contiguous head_dim 64 at 0.34-0.5 units per SM, 2K-16K: auto (4) against 2 and 4 splits"),
    "wide-d64-2k-h100": (forced_splits_sweep(WIDE_D64_2K_ROWS, WIDE_D64_2K_VARIANTS, wide_d64_2k_runs, peer=None),
                         "head_dim 64 two-tile rows at 2-4K keys: auto and the 16-row rules against 1-16 wide splits"),
    "pair-spread-confirm": (forced_splits_sweep(PAIR_SPREAD_ROWS, PAIR_DEPTH_VARIANTS, PAIR_SPREAD_RUNS),
                            "paged D=64 head pairs: the automatic spread tail below 8K against 1 split and 4 pieces"),
    "h100-pairs": (forced_splits_sweep(H100_PAIR_ROWS, PAIR_DEPTH_VARIANTS, H100_PAIR_RUNS, show_kernels=True),
                   "paged D=64 head pairs in their band off HBM3e: auto (1 since stop 107; the balanced 2 before) against 1, 3, 4 spread"),
    "h100-bands": (forced_splits_sweep(H100_BAND_ROWS, H100_BAND_VARIANTS, H100_BAND_RUNS),
                   "the H100's split bands from v28-v33 (D=128 / 256 / 96 / 64): auto against 1, even 2 and 3 splits"),
    "h100-bands-next": (forced_splits_sweep(H100_BAND_NEXT_ROWS, H100_BAND_VARIANTS, H100_BAND_RUNS),
                        "paged D=96 at 2-2.9 and contiguous D=64 at 2-2.7 units per SM: auto against 1, even 2 and 3"),
    "h100-small-grids": (forced_splits_sweep(H100_SMALL_GRID_ROWS, H100_BAND_VARIANTS, h100_small_grid_runs),
                         "paged D=64 / 96 small grids off HBM3e: auto against the HBM3e two-blocks-per-SM count"),
    "h100-half-wave": (forced_splits_sweep(H100_HALF_WAVE_ROWS, H100_BAND_VARIANTS, H100_HALF_WAVE_RUNS),
                       "paged D=64 / 96 one token at 0.5-0.67 units per SM off HBM3e: auto (3) against 1 and 2 splits"),
    "h100-half-wave-next": (forced_splits_sweep(H100_HALF_WAVE_NEXT_ROWS, H100_BAND_VARIANTS, H100_HALF_WAVE_RUNS),
                            "contiguous D=64 / 96 and D=128 at 0.5-0.67 units per SM off HBM3e: auto against 1, 2, 3"),
    "h100-d128-next": (forced_splits_sweep(H100_D128_NEXT_ROWS, H100_BAND_VARIANTS, h100_d128_next_runs),
                       "one-token D=128 around stop 108's H100 rules: half wave, 0.7-1, below half, 2.0-2.1, 2.5-3"),
    "h100-contig-small": (forced_splits_sweep(H100_CONTIG_SMALL_ROWS, H100_CONTIG_SMALL_VARIANTS, h100_contig_small_runs),
                          "contiguous D=128 one-token small grids: cp.async against TMA 3 / 4, generic and doubled counts"),
    "h100-d128-confirm": (forced_splits_sweep(H100_D128_CONFIRM_ROWS, H100_BAND_VARIANTS, H100_HALF_WAVE_RUNS),
                          "D=128 at 2.06 units per SM (4K) and 2.5-2.91 (4-16K): auto against 1, 2, 3"),
    "h100-contig-tma": (h100_contig_tma_sweep,
                        "contiguous D=128 small grids on TMA 3: split counts; Nq 2 / 4, MHA, B=1 against cp.async"),
    "h100-wave-top": (forced_splits_sweep(H100_WAVE_TOP_ROWS, H100_BAND_VARIANTS, H100_HALF_WAVE_RUNS),
                      "D=128 at 2.85-2.97 units per SM from 8192 keys: auto (2) against 1, 2, 3"),
    "h100-d128-left": (forced_splits_sweep(H100_D128_LEFT_ROWS, H100_BAND_VARIANTS, h100_d128_next_runs),
                       "contiguous D=128 below half a unit per SM and paged D=128's half wave: auto against 1, 2, 3"),
    "h100-d128-left-confirm": (forced_splits_sweep(H100_D128_LEFT_CONFIRM_ROWS, H100_BAND_VARIANTS,
                                                   h100_d128_next_runs),
                               "around stop 109's D=128 rules: GQA 32/4 and MHA contiguous, paged 0.42-0.48: auto against 1, 2, 3"),
    "h100-paged-depth": (forced_splits_sweep(H100_PAGED_DEPTH_ROWS, H100_PAGED_DEPTH_VARIANTS, H100_PAGED_DEPTH_RUNS,
                                             show_kernels=True),
                         "paged D=128 at 0.53-0.67 units per SM: TMA 2 / 3 / 4 stages and cp.async at 2 and 3 splits"),
    "h100-d224-splits": (forced_splits_sweep(H100_D224_SPLITS_ROWS, H100_D224_SPLITS_VARIANTS, H100_D224_SPLITS_RUNS,
                                             peer="sdpa-flash"),
                         "paged rows not whole lines on the D=256 kernel (D=176-240), one-tail band: auto (3) against 2-8 even splits, flash first"),
    "h100-d224-long": (forced_splits_sweep(H100_D224_LONG_ROWS, H100_D224_LONG_VARIANTS, h100_d224_long_runs,
                                           peer="sdpa-flash"),
                       "paged D=144-240 rows not whole lines, 8192-32768 keys: auto against 3-16 even splits, flash first"),
    "h100-d224-confirm": (shared_lines_sweep(H100_D224_CONFIRM_ROWS, H100_D224_CONFIRM_RUNS),
                          "paged D=176-240 rows not whole lines: auto (2048 keys a split, head clusters) against no clusters, 3 and 8"),
    "h100-shared-lines-bands": (forced_splits_sweep(H100_SHARED_LINES_BANDS_ROWS, H100_BAND_VARIANTS,
                                                    H100_SHARED_LINES_BANDS_RUNS, peer="sdpa-flash"),
                                "paged D=176-240 rows not whole lines outside the one-tail band: auto against 2-16 splits, flash first"),
    "h100-shared-lines-confirm": (shared_lines_sweep(H100_SHARED_LINES_CONFIRM_ROWS, h100_shared_lines_confirm_runs),
                                  "stop 111's rule for paged D=176-240 outside the band against the count before, with and without head clusters"),
    "hbm3e-shared-lines": (shared_lines_sweep(HBM3E_SHARED_LINES_ROWS, hbm3e_shared_lines_runs),
                           "paged D=224 B=6-64 at 4-16K on HBM3e parts: auto against 2, 3 and 2048-key splits, with and without head clusters"),
    "h100-shared-lines-final": (shared_lines_sweep(H100_SHARED_LINES_FINAL_ROWS, H100_SHARED_LINES_FINAL_RUNS),
                                "stop 111's head clusters at 1-2 splits and small grids: auto against no / forced head clusters"),
    "h100-shared-lines-short": (shared_lines_sweep(H100_SHARED_LINES_SHORT_ROWS, H100_SHARED_LINES_SHORT_RUNS),
                                "paged D=176-240 below 4096 keys: auto (no head clusters there) against them forced"),
    "h100-d128-band": (forced_splits_sweep(H100_D128_BAND_ROWS, H100_BAND_VARIANTS, H100_D128_BAND_RUNS),
                       "D=128 at 2.1-2.5 units per SM from 4096 keys, GQA and MHA, both layouts: auto (even 2) against 3"),
    "pair-depth": (forced_splits_sweep(PAIR_DEPTH_ROWS, PAIR_DEPTH_VARIANTS, PAIR_DEPTH_RUNS, show_kernels=True),
                   "paged D=64 head pairs at D=128's HBM3e depths and the spread tail against their own"),
    "pair-band": (forced_splits_sweep(PAIR_BAND_ROWS, PAIR_BAND_VARIANTS, PAIR_BAND_RUNS, show_kernels=True), "D=64 head pairs and D=112 around their balanced band: 1-3 splits, pairs / unpaired, cp.async"),
    "balanced-plan": (balanced_plan_sweep, "the balanced schedule's seq_lens plan: by length against by capacity (16-row blocks; MQA band: capacity)"),
    "mqa-tiles": (mqa_tiles_sweep, "one token at Hq 32 / Hkv 1 (two row tiles) against Nq 8's two-tile counts"),
    "one-wave-long": (cool_then_cap_sweep(ONE_WAVE_LONG_ROWS, SPLITS_1_2_VARIANTS),
                      "paged D=128 GQA at 0.91-0.97 units per SM, 4-16K keys: 1-2 splits, cool and at the cap"),
    "wave-top-edge": (auto_split_sweep(WAVE_TOP_EDGE_ROWS + ONE_WAVE_LONG_CONTIG_ROWS),
                      "D=128 GQA at 2.91-2.97 units per SM (both layouts) and contiguous 0.91-0.97 at 8-16K: 0-2 splits"),
    "wave-top-confirm": (auto_split_sweep(WAVE_TOP_CONFIRM_ROWS),
                         "stop 66's edges: paged 2.67-2.91 and contiguous 2.5-3 units per SM, contiguous partial waves"),
    "sustained": (sustained_sweep, "cuDNN and ours' split counts / depths each at the clock it sustains (power cap)"),
    "sustained-splits": (cool_then_cap_sweep(SUSTAINED_SPLIT_ROWS, SUSTAINED_SPLIT_VARIANTS),
                         "split counts at one unit per SM or less and at 2.8, cool and at the cap"),
    "bench-gap": (bench_gap_sweep, "ours after each SDPA backend, idle and fresh inputs, stamped (bench vs sweep gap)"),
    "fp8-pack": (fp8_pack_sweep, "FP8 (and 16-bit GQA) D=64 caches with and without head pairs"),
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--full", action="store_true", help="also the other shapes, sweeps and contiguous/bf16 cases")
    ap.add_argument("--variants", action="store_true",
                    help="first compare the kernel variants of the CLO_DECODE_VARIANT dev knob (sets it to 0 "
                         "before the first decode call, so the process can switch between them)")
    ap.add_argument("--variants-only", action="store_true", help="--variants, then stop")
    ap.add_argument("--shape-sweep", action="store_true",
                    help="the kernel variants over head dims, block sizes, grid sizes and GQA 64/8, then stop")
    ap.add_argument("--pack-sweep", action="store_true",
                    help="paged D=64 MHA with and without head pairs (CLO_DECODE_PACK), then stop")
    ap.add_argument("--pack-confirm", action="store_true", help="--pack-sweep on the large grids, three rounds")
    for flag, (_, help_text) in SWEEPS.items():
        ap.add_argument(f"--{flag}", action="store_true", help=help_text + ", timed as llm-speed bench does")
    ap.add_argument("--anchor", action="store_true",
                    help="SDPA and ours timed the shared anchors' way (eager, warm L2) and in graphs")
    args = ap.parse_args()
    sweeps = [fn for flag, (fn, _) in SWEEPS.items() if getattr(args, flag.replace("-", "_"))]
    if sweeps or any((args.variants, args.variants_only, args.shape_sweep, args.pack_sweep,
                                 args.pack_confirm)):
        for knob in _KNOBS:  # dev mode: each knob must be set before the first decode call
            os.environ.setdefault(knob, "")
    if not torch.cuda.is_available() or not llm.kernels_available():
        print("needs a GPU and the built kernels", file=sys.stderr)
        return 1
    torch.manual_seed(0)
    dev = torch.cuda.get_device_properties(0)
    bw = copy_tbps(args.iters)
    print(f"{dev.name}, {dev.multi_processor_count} SMs; cold D2D copy {bw:.3f} TB/s (read + write)")
    dt = torch.float16
    if args.anchor:
        anchor_method(args.iters)
    if sweeps:  # in SWEEPS' order
        for sweep in sweeps:
            sweep(args.iters, bw)
        return 0
    if args.pack_sweep or args.pack_confirm:
        cases = PACK_CONFIRM_CASES if args.pack_confirm else PACK_SWEEP_CASES
        compare_variants(args.iters, bw, variants=PACK_VARIANTS, cases=cases)
        return 0
    if args.shape_sweep:
        compare_variants(args.iters, bw, variants=SWEEP_VARIANTS, cases=shape_sweep_cases())
        return 0
    if args.variants or args.variants_only:
        compare_variants(args.iters, bw)
        if args.variants_only:
            return 0
    # 1. The issue's target table (B=1/16K/GQA first: the split-KV target), 2. B=1 split sweeps,
    # 3. kernel time at B=1 (one kernel now), 4. with --full the rest.
    for B, N, Hkv in [(1, 16384, 8), (1, 16384, 32), (16, 1024, 32), (16, 1024, 8), (16, 4096, 8),
                      (64, 4096, 32)]:
        run_case(B, N, Hkv, dt, args.iters, bw)
        torch.cuda.empty_cache()
    run_case(1, 16384, 8, dt, args.iters, bw, contiguous=True)
    for B, N, Hkv, sp in [(1, 16384, 8, (8, 12, 16, 20, 24, 32, 48)), (1, 16384, 32, (2, 4, 8)),
                          (1, 4096, 8, (8, 16, 32))]:
        sweep_splits(B, N, Hkv, sp, args.iters, bw)
        torch.cuda.empty_cache()
    profile_kernels(1, 16384, 8)
    if args.full:
        for B, N, Hkv in [(16, 4096, 32), (64, 1024, 32), (64, 4096, 8), (64, 16384, 8), (16, 16384, 8),
                          (1, 4096, 8), (1, 1024, 32)]:
            run_case(B, N, Hkv, dt, args.iters, bw)
            torch.cuda.empty_cache()
        for B, N, Hkv, sp in [(64, 4096, 32, (1, 2, 4)), (16, 4096, 32, (1, 2)), (64, 4096, 8, (1, 2)),
                              (16, 1024, 8, (1, 2)), (4, 4096, 8, (2, 4, 8))]:
            sweep_splits(B, N, Hkv, sp, args.iters, bw)
            torch.cuda.empty_cache()
        for B, N, Hkv in [(64, 4096, 32), (16, 4096, 8)]:
            run_case(B, N, Hkv, dt, args.iters, bw, contiguous=True)
            torch.cuda.empty_cache()
        run_case(16, 4096, 8, torch.bfloat16, args.iters, bw)
    return 0


if __name__ == "__main__":
    sys.exit(main())
