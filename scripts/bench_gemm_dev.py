"""Dev benchmark of the GEMM family: ours vs cuBLAS / torch._int_mm side by side in one process,
CUDA events, median (cuda_llm_ops.timing.benchmark). Prints a table; JSON to $OUT/gemm_dev.json
when OUT is set. Kernel variants (tile configs, the unpipelined twins) go through the
benchmark-only op `_gemm_variant`.

  python3 scripts/bench_gemm_dev.py
  GEMM_BENCH_SECTIONS=skinny python3 scripts/bench_gemm_dev.py   # the skinny kernels' knob sweep
  GEMM_BENCH_SECTIONS=wgmma_sched python3 scripts/bench_gemm_dev.py   # Hopper GEMM: clusters x persistence
  GEMM_BENCH_SECTIONS=tail_split python3 scripts/bench_gemm_dev.py   # Hopper GEMM: split last wave off/auto/forced
  SKINNY_WGMMA_SWEEP=1 GEMM_BENCH_SECTIONS=skinny python3 scripts/bench_gemm_dev.py   # the Hopper skinny tile vs the skinny kernels
  GEMM_BENCH_SECTIONS=int8 python3 scripts/bench_gemm_dev.py   # int8: wgmma (single, pairs) vs mma.sync vs _int_mm
  GEMM_BENCH_SECTIONS=int8_kn python3 scripts/bench_gemm_dev.py   # int8, B [K, N], M 1-512: mma.sync (split-K or not) vs wgmma + transpose vs the skinny int8 kernel
  GEMM_BENCH_SECTIONS=int8_nk python3 scripts/bench_gemm_dev.py   # int8, B [N, K], M 17-256: mma.sync vs the wgmma family, split along K or whole
  GEMM_BENCH_SECTIONS=f32_wide python3 scripts/bench_gemm_dev.py   # fp32: the 128x128 tile vs the long one vs auto
  GEMM_BENCH_SECTIONS=pdl python3 scripts/bench_gemm_dev.py   # PDL modes on decode shapes, graphs, cold L2
  GEMM_BENCH_SECTIONS=batch_sweep python3 scripts/bench_gemm_dev.py   # fp16 b [N, K] at every batch size 1-256 vs cuBLAS, with both kernels' names
"""
from __future__ import annotations

import json
import os

import torch

import cuda_llm_ops as llm
from cuda_llm_ops.gemm import _gemm_variant
from cuda_llm_ops.testing import rel_error
from cuda_llm_ops.timing import benchmark

torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 peer on CUDA cores, as ours
rows: list[dict] = []


def ms_of(fn, iters=30, cold=False):
    return benchmark(fn, warmup=5, iterations=iters, cold_l2=cold).median_ms


def row(kind, shape, dtype, name, ms, flops, peer_name, peer_ms, note=""):
    tf = flops / (ms * 1e-3) / 1e12
    ptf = flops / (peer_ms * 1e-3) / 1e12
    rec = dict(kind=kind, shape=shape, dtype=str(dtype).replace("torch.", ""), impl=name, ms=ms, tflops=tf,
               peer=peer_name, peer_ms=peer_ms, peer_tflops=ptf, pct_of_peer=100 * peer_ms / ms, note=note)
    rows.append(rec)
    print(f"{kind:9s} {shape:16s} {rec['dtype']:8s} {name:24s} {ms:8.4f} ms {tf:6.1f} T | {peer_name:20s} "
          f"{peer_ms:8.4f} ms {ptf:6.1f} T | {rec['pct_of_peer']:6.1f}% {note}", flush=True)


def float_section(dtype):
    shapes = [(1024,) * 3, (2048,) * 3, (4096,) * 3]
    if dtype != torch.float32:
        shapes += [(4096, 12288, 4096), (8192, 8192, 8192), (1, 12288, 4096), (16, 12288, 4096)]
    # fp16/bf16: alt_a = 128x256x64 (alt_b is its one-stage twin, timed in the pipeline rows);
    # wgmma / wgmma_n128 = the Hopper family (TMA + wgmma), 128x256x64 / 128x128x64
    # fp32: pipelined / alt_a / alt_b = the large / medium / long tile (auto takes one of them)
    variants = ["pipelined", "alt_a", "alt_b", "small_tile"] if dtype == torch.float32 else \
        ["pipelined", "alt_a", "small_tile", "wgmma", "wgmma_n128"]
    for M, N, K in shapes:
        a = torch.randn(M, K, device="cuda").to(dtype)
        b = torch.randn(K, N, device="cuda").to(dtype)
        ref = torch.matmul(a.double(), b.double())
        fl = 2.0 * M * N * K
        shape = f"{M}x{N}x{K}"
        cold = M <= 64
        iters = 10 if dtype == torch.float32 and M >= 4096 else 30
        peer = ms_of(lambda: torch.matmul(a, b), iters, cold)
        row("gemm", shape, dtype, "gemm(auto)", ms_of(lambda: llm.gemm(a, b), iters, cold), fl, "cublas", peer,
            f"err={rel_error(llm.gemm(a, b), ref):.1e}")
        if M < 1024:
            continue
        if dtype != torch.float32 and M >= 4096:
            row("tc_gemm", shape, dtype, "tensor_core_gemm", ms_of(lambda: llm.tensor_core_gemm(a, b), iters), fl,
                "cublas", peer, f"err={rel_error(llm.tensor_core_gemm(a, b), ref):.1e}")
        for v in variants:
            if v == "small_tile" and M >= 4096 or M >= 8192 and v not in ("wgmma", "pipelined"):
                continue
            row("variant", shape, dtype, v, ms_of(lambda v=v: _gemm_variant(a, b, v), iters), fl, "cublas", peer,
                f"err={rel_error(_gemm_variant(a, b, v), ref):.1e}")
        if dtype == torch.float32:  # fp32: every layout at every size, auto and the long tile
            v2 = ["alt_b"]
            for ta, tb in ((True, False), (False, True), (True, True)):
                at, bt = (a.t().contiguous() if ta else a), (b.t().contiguous() if tb else b)
                if M < 4096:  # 4096: auto below
                    f = lambda at=at, bt=bt, ta=ta, tb=tb: llm.gemm(at, bt, trans_a=ta, trans_b=tb)
                    row("layout", shape, dtype, f"gemm(ta={int(ta)},tb={int(tb)})", ms_of(f, iters), fl, "cublas",
                        peer, f"err={rel_error(f(), ref):.1e}")
                for v in v2:
                    f = lambda at=at, bt=bt, ta=ta, tb=tb, v=v: _gemm_variant(at, bt, v, False, ta, tb)
                    row("layout", shape, dtype, f"{v}(ta={int(ta)},tb={int(tb)})", ms_of(f, iters), fl, "cublas",
                        peer, f"err={rel_error(f(), ref):.1e}")
                del at, bt
        if M == N == K == 4096:
            for ta, tb in ((True, False), (False, True), (True, True)):
                at = a.t().contiguous() if ta else a
                bt = b.t().contiguous() if tb else b
                f = lambda at=at, bt=bt, ta=ta, tb=tb: llm.gemm(at, bt, trans_a=ta, trans_b=tb)
                row("layout", shape, dtype, f"gemm(ta={int(ta)},tb={int(tb)})", ms_of(f, iters), fl, "cublas", peer,
                    f"err={rel_error(f(), ref):.1e}")
                if dtype != torch.float32:
                    f = lambda at=at, bt=bt, ta=ta, tb=tb: _gemm_variant(at, bt, "wgmma", False, ta, tb)
                    row("layout", shape, dtype, f"wgmma(ta={int(ta)},tb={int(tb)})", ms_of(f, iters), fl, "cublas",
                        peer, f"err={rel_error(f(), ref):.1e}")
            piped = ms_of(lambda: _gemm_variant(a, b, "pipelined"), iters)
            row("pipeline", shape, dtype, "pipelined", piped, fl, "unpipelined twin",
                ms_of(lambda: _gemm_variant(a, b, "unpipelined"), iters),
                f"err_twin={rel_error(_gemm_variant(a, b, 'unpipelined'), ref):.1e}")
            if dtype != torch.float32:
                row("pipeline", shape, dtype, "large 128x256 pipelined",
                    ms_of(lambda: _gemm_variant(a, b, "alt_a"), iters),
                    fl, "its unpipelined twin", ms_of(lambda: _gemm_variant(a, b, "alt_b"), iters),
                    f"err_twin={rel_error(_gemm_variant(a, b, 'alt_b'), ref):.1e}")
        del a, b, ref


# Skinny-kernel dev knobs swept side by side (read per call once set before the first call;
# CLO_SKINNY_BLOCKS_PER_SM does not apply to fp32 B [K, N], whose rows in the default sweep
# repeat one configuration: SKINNY_FP32_SWEEP=1 sweeps that kernel's k-warps).
# (CLO_SKINNY_BLOCKS_PER_SM, CLO_SKINNY_KWARPS, CLO_SKINNY_PIPE: 0 register batches, 1 cp.async
# rings, 16-bit only; CLO_GEMM_SKINNY_WGMMA: 0 the skinny kernels, 2 the Hopper skinny tile
# wherever it can (16-bit); -1 leaves a knob at its default)
SKINNY_KNOB_NAMES = ("CLO_SKINNY_BLOCKS_PER_SM", "CLO_SKINNY_KWARPS", "CLO_SKINNY_PIPE", "CLO_GEMM_SKINNY_WGMMA")
SKINNY_KNOBS = [(2, 1, -1, 0), (1, 1, -1, 0), (4, 1, -1, 0), (8, 1, -1, 0), (2, 4, -1, 0), (1, 8, -1, 0)]
SKINNY_PIPE_KNOBS = [(2, 4, 0, 0), (1, 8, 0, 0), (1, 8, 1, 0), (2, 4, 1, 0), (2, 8, 1, 0), (1, 4, 1, 0)]
# SKINNY_WGMMA_SWEEP=1: the skinny kernels' defaults against the Hopper skinny tile (16-bit)
SKINNY_WGMMA_KNOBS = [(-1, -1, -1, 0), (-1, -1, -1, 2)]
# SKINNY_FP32_SWEEP=1: fp32 B [K, N], every k-warp count against the fill rule's (-1)
SKINNY_FP32_KNOBS = [(-1, -1, -1, -1), (-1, 1, -1, -1), (-1, 2, -1, -1), (-1, 4, -1, -1), (-1, 8, -1, -1)]


PIPE_SWEEP = os.environ.get("SKINNY_PIPE_SWEEP", "0") == "1"  # fp16 only, the cp.async rings' sweep
WGMMA_SWEEP = os.environ.get("SKINNY_WGMMA_SWEEP", "0") == "1"  # 16-bit only
FP32_SWEEP = os.environ.get("SKINNY_FP32_SWEEP", "0") == "1"  # fp32, B [K, N] only


def skinny_section():
    """Decode shapes, both layouts of b, cold L2; every knob setting timed twice, in forward and in
    reverse order (the first-timed variant can lead by itself), the better median kept."""
    dtypes = (torch.float16,) if PIPE_SWEEP else (torch.float16, torch.bfloat16) if WGMMA_SWEEP else \
        (torch.float32,) if FP32_SWEEP else (torch.float16, torch.float32, torch.bfloat16)
    shapes = ((1, 12288, 4096), (16, 12288, 4096), (4, 4096, 4096), (16, 4096, 14336), (1, 4096, 4096))
    if WGMMA_SWEEP or FP32_SWEEP:
        shapes += ((8, 28672, 4096), (16, 4096, 4096), (16, 8192, 4096), (16, 6144, 4096), (1, 6144, 4096))
    for dtype in dtypes:
        for M, N, K in shapes:
            for b_nk in ((False,) if FP32_SWEEP else (True, False)):
                a = torch.randn(M, K, device="cuda").to(dtype)
                b = torch.randn((N, K) if b_nk else (K, N), device="cuda").to(dtype)
                bb = b.t() if b_nk else b
                ref = torch.matmul(a.double(), bb.double())
                fl, shape = 2.0 * M * N * K, f"{M}x{N}x{K}" + ("nk" if b_nk else "kn")
                peer = min(ms_of(lambda: torch.matmul(a, bb), 30, True) for _ in range(2))
                best: dict = {}
                knobs = SKINNY_WGMMA_KNOBS if WGMMA_SWEEP else SKINNY_FP32_KNOBS if FP32_SWEEP else \
                    SKINNY_PIPE_KNOBS if dtype != torch.float32 and PIPE_SWEEP else SKINNY_KNOBS
                for order in (knobs, knobs[::-1]):
                    for cfg in order:
                        for name, v in zip(SKINNY_KNOB_NAMES, cfg):
                            os.environ[name] = str(v) if v >= 0 else ""
                        ms = ms_of(lambda: llm.gemm(a, b, trans_b=b_nk), 30, True)
                        err = rel_error(llm.gemm(a, b, trans_b=b_nk), ref)
                        best[cfg] = min(best.get(cfg, (1e9, 0))[0], ms), err
                for (bps, kw, pipe, wg), (ms, err) in best.items():
                    row("skinny", shape, dtype, f"bps={bps} kw={kw} pipe={pipe} wgmma={wg}", ms, fl, "cublas", peer,
                        f"err={err:.1e}")
                del a, b, bb, ref
    for name in SKINNY_KNOB_NAMES:
        os.environ[name] = ""


# Hopper wgmma GEMM schedule knobs swept side by side:
# (CLO_GEMM_WGMMA_CLUSTER, CLO_GEMM_WGMMA_PERSISTENT, CLO_GEMM_WGMMA_TMA_STORE, CLO_GEMM_WGMMA_RASTER)
WGMMA_KNOB_NAMES = ("CLO_GEMM_WGMMA_CLUSTER", "CLO_GEMM_WGMMA_PERSISTENT", "CLO_GEMM_WGMMA_TMA_STORE",
                    "CLO_GEMM_WGMMA_RASTER")
# (1, 0, 0, 8) is the kernel before persistence, TMA stores and clusters (one CTA per tile).
WGMMA_SCHED_KNOBS = [(1, 0, 0, 8), (1, 1, 0, 8), (1, 0, 1, 8), (1, 1, 1, 8), (1, 1, 1, 16), (1, 1, 1, -8),
                     (2, 0, 1, 8), (2, 1, 1, 8), (2, 1, 1, -8)]


def wgmma_sched_section():
    """Large fp16/bf16 shapes (and the four layouts at 4096^3): every schedule timed twice, in
    forward and reverse order, the better median kept; cuBLAS timed before and after."""
    cases = [(torch.float16, 4096, 4096, 4096, False, False), (torch.float16, 4096, 12288, 4096, False, False),
             (torch.float16, 8192, 8192, 8192, False, False), (torch.float16, 2048, 2048, 2048, False, False),
             (torch.float16, 4096, 4096, 4096, True, False), (torch.float16, 4000, 4104, 4096, False, False),
             (torch.float16, 8192, 14336, 4096, False, False), (torch.float16, 8192, 4096, 14336, False, False),
             (torch.bfloat16, 4096, 12288, 4096, False, False), (torch.float16, 4000, 4096, 4096, False, False),
             (torch.float16, 4096, 4104, 4096, False, False)]
    for dtype, M, N, K, ta, tb in cases:
        a = torch.randn(M, K, device="cuda").to(dtype)
        b = torch.randn(K, N, device="cuda").to(dtype)
        ref = torch.matmul(a.double(), b.double())
        at = a.t().contiguous() if ta else a
        bt = b.t().contiguous() if tb else b
        fl, shape = 2.0 * M * N * K, f"{M}x{N}x{K}" + (f" ta={int(ta)} tb={int(tb)}" if ta or tb else "")
        iters = 10 if M >= 8192 else 30
        peer = min(ms_of(lambda: torch.matmul(a, b), iters) for _ in range(2))
        best: dict = {}
        for order in (WGMMA_SCHED_KNOBS, WGMMA_SCHED_KNOBS[::-1]):
            for cfg in order:
                for name, v in zip(WGMMA_KNOB_NAMES, cfg):
                    os.environ[name] = str(v)
                f = lambda: llm.gemm(at, bt, trans_a=ta, trans_b=tb)
                ms = ms_of(f, iters)
                best[cfg] = min(best.get(cfg, (1e9, 0))[0], ms), rel_error(f(), ref)
        peer = min(peer, ms_of(lambda: torch.matmul(a, b), iters))
        for (cl, pers, st, ras), (ms, err) in best.items():
            row("wgmma", shape, dtype, f"cl={cl} pers={pers} st={st} ras={ras}", ms, fl, "cublas", peer,
                f"err={err:.1e}")
        del a, b, at, bt, ref
    # fp32 output (tensor_core_gemm): the register epilogue against TMA stores of fp32 boxes.
    for dtype, M, N, K in ((torch.float16, 4096, 4096, 4096), (torch.float16, 4096, 12288, 4096),
                           (torch.bfloat16, 4096, 12288, 4096)):
        a = torch.randn(M, K, device="cuda").to(dtype)
        b = torch.randn(K, N, device="cuda").to(dtype)
        ref = torch.matmul(a.double(), b.double())
        f = lambda: llm.tensor_core_gemm(a, b)
        peer_f = lambda: torch.matmul(a, b).float()
        peer = ms_of(peer_f)
        res = {}
        for order in ((0, 1), (1, 0)):
            for st in order:
                os.environ["CLO_GEMM_WGMMA_TMA_STORE"] = str(st)
                res[st] = min(res.get(st, 1e9), ms_of(f))
        peer = min(peer, ms_of(peer_f))
        for st, ms in res.items():
            os.environ["CLO_GEMM_WGMMA_TMA_STORE"] = str(st)
            row("tc_f32out", f"{M}x{N}x{K}", dtype, f"tensor_core_gemm st={st}", ms, 2.0 * M * N * K,
                "cublas+.float()", peer, f"err={rel_error(f(), ref):.1e}")
        del a, b, ref
    for name in WGMMA_KNOB_NAMES:
        os.environ[name] = ""


def tail_split_section():
    """The Hopper GEMM's split last wave (CLO_GEMM_WGMMA_TAIL_SPLIT 0 off / 1 auto / 2 forced) on
    shapes whose 128x256 tiles fill whole waves or not (132 SMs): units and the last wave's fill
    in the note. Each mode timed twice (forward and reverse order), the better median kept;
    cuBLAS before and after, the better kept."""
    cases = [(torch.float16, 4096, 4096, 4096), (torch.float16, 8192, 8192, 8192),  # last wave > half full: whole
             (torch.float16, 4096, 4104, 4096), (torch.float16, 4000, 4104, 4096), (torch.float16, 4352, 4096, 4096),
             (torch.bfloat16, 4352, 4096, 4096), (torch.float16, 2176, 4096, 4096), (torch.float16, 4608, 4096, 4096),
             (torch.float16, 2304, 4096, 8192), (torch.float16, 4352, 14336, 4096), (torch.float16, 4352, 4096, 14336)]
    for dtype, M, N, K in cases:
        a = torch.randn(M, K, device="cuda").to(dtype)
        b = torch.randn(K, N, device="cuda").to(dtype)
        ref = torch.matmul(a.double(), b.double())
        units = -(-M // 128) * -(-N // 256)
        fl, shape = 2.0 * M * N * K, f"{M}x{N}x{K}"
        iters = 10 if M * N * K >= 8192 ** 3 // 2 else 30
        peer = min(ms_of(lambda: torch.matmul(a, b), iters) for _ in range(2))
        best: dict = {}
        for order in ((0, 1, 2), (2, 1, 0)):
            for mode in order:
                os.environ["CLO_GEMM_WGMMA_TAIL_SPLIT"] = str(mode)
                ms = ms_of(lambda: llm.gemm(a, b), iters)
                best[mode] = min(best.get(mode, (1e9, 0))[0], ms), rel_error(llm.gemm(a, b), ref)
        peer = min(peer, ms_of(lambda: torch.matmul(a, b), iters))
        for mode, (ms, err) in best.items():
            row("tail_split", shape, dtype, f"split={mode}", ms, fl, "cublas", peer,
                f"units={units} last_wave={units % 132 or 132}/132 err={err:.1e}")
        del a, b, ref
    os.environ["CLO_GEMM_WGMMA_TAIL_SPLIT"] = ""


def pdl_section():
    """Programmatic dependent launch (CLO_GEMM_PDL: 0 none, 1 where it pays, 2 every kernel) on
    decode and batched-decode shapes with b [N, K] (nn.Linear; "kn": b [K, N]), CUDA-graph
    replays of back-to-back calls over rotated inputs (cold L2), as `llm-speed bench` times
    them. Each mode timed in forward and reverse order, the better median kept; cuBLAS before
    and after, the better kept. The `launches` rows time the same rotation launch by launch
    (no graph, mode 1), against cuBLAS likewise: what a graph changes for each."""
    from cuda_llm_ops.timing import rotation_count
    shapes = [(1, 4096, 4096), (1, 12288, 4096), (1, 12288, 4096, "kn"), (8, 4096, 4096, "kn"), (16, 4096, 4096, "kn"),
              (16, 4096, 4096), (16, 12288, 4096), (64, 4096, 4096), (64, 6144, 4096), (128, 4096, 4096),
              (128, 6144, 4096), (256, 4096, 4096), (256, 6144, 4096), (256, 4096, 14336), (2048, 4096, 4096)]
    dtype = torch.float16

    def time_sets(calls, graph):
        return benchmark(None, warmup=5, iterations=30, cold_l2=True, cuda_graph=graph, fn_sets=calls,
                         warmup_ms=20).median_ms

    for M, N, K, *layout in shapes:
        nk = not layout
        sets = rotation_count(2.0 * (M * K + N * K + M * N))
        data = [(torch.randn(M, K, device="cuda").to(dtype),
                 torch.randn((N, K) if nk else (K, N), device="cuda").to(dtype)) for _ in range(sets)]
        ours = [lambda a=a, w=w: llm.gemm(a, w, trans_b=nk) for a, w in data]
        theirs = [lambda a=a, w=w: torch.matmul(a, w.t() if nk else w) for a, w in data]
        ref = torch.matmul(data[0][0].double(), data[0][1].double().t() if nk else data[0][1].double())
        fl, shape = 2.0 * M * N * K, f"{M}x{N}x{K}" + ("" if nk else " kn")
        peer = time_sets(theirs, True)
        best: dict = {}
        for order in ((0, 1, 2), (2, 1, 0)):
            for mode in order:
                os.environ["CLO_GEMM_PDL"] = str(mode)
                best[mode] = min(best.get(mode, 1e9), time_sets(ours, True))
        peer = min(peer, time_sets(theirs, True))
        os.environ["CLO_GEMM_PDL"] = ""
        err = rel_error(ours[0](), ref)
        for mode, ms in best.items():
            row("pdl", shape, dtype, f"graph pdl={mode}", ms, fl, "cublas graph", peer, f"sets={sets} err={err:.1e}")
        row("pdl", shape, dtype, "launches pdl=1", time_sets(ours, False), fl, "cublas launches",
            time_sets(theirs, False), f"sets={sets}")
        del data, ours, theirs, ref


# Batch sizes a serving engine's decode step sees (the bench's rows are 1, 16, 64, 128, 256 only).
BATCH_SWEEP_M = (1, 2, 4, 8, 12, 16, 17, 24, 32, 40, 48, 56, 64, 72, 80, 96, 112, 128, 144, 160, 192, 224, 256)
# Llama-8B's projections (QKV, O, gate+up, down) and Llama-2-7B's QKV, nn.Linear weights [N, K].
BATCH_SWEEP_NK = ((4096, 4096), (6144, 4096), (4096, 14336), (12288, 4096), (28672, 4096))
# (M, N) rows also timed at every L2 promotion of the skinny tile's maps (CLO_TMA_L2_PROMOTION 0-3).
BATCH_SWEEP_L2_PROMOTION = ((64, 4096), (128, 4096), (256, 4096), (256, 6144))
# GEMM_SWEEP_M="17,24,32" and GEMM_SWEEP_NK="4096x8192,4096x11008" replace the two lists above.
if os.environ.get("GEMM_SWEEP_M"):
    BATCH_SWEEP_M = tuple(int(m) for m in os.environ["GEMM_SWEEP_M"].split(","))
if os.environ.get("GEMM_SWEEP_NK"):
    BATCH_SWEEP_NK = tuple(tuple(int(d) for d in nk.split("x")) for nk in os.environ["GEMM_SWEEP_NK"].split(","))


def _kernels_of(fn) -> str:
    """The kernels one call of `fn` launches (torch profiler), each name without its namespace, return
    type and parameter list, spaces dropped, joined by '+': the template arguments show our tile and
    cuBLAS's name its own (nvjet_sm90_hsh_64x32_...)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = []
    for e in prof.key_averages():
        n = e.key.split("(")[0] if "<" not in e.key else e.key[:e.key.index(">") + 1]
        names.append(n.replace("void ", "").split("::")[-1].replace(" ", "")[:70])
    return "+".join(names) or "?"


def batch_sweep_section():
    """fp16, b [N, K] (nn.Linear), every batch size of BATCH_SWEEP_M through Llama-8B's projections
    and Llama-2-7B's QKV: ours (kAuto) against cuBLAS as `llm-speed bench` times them (CUDA-graph
    replays over rotated inputs, cold L2), the better of two interleaved medians each, with the
    kernel each side ran (ours: the kernel's name; the deal is the host planner's)."""
    from cuda_llm_ops.timing import rotation_count
    dtype = torch.float16

    def time_sets(calls):
        return benchmark(None, warmup=5, iterations=30, cold_l2=True, cuda_graph=True, fn_sets=calls,
                         warmup_ms=20).median_ms

    for N, K in BATCH_SWEEP_NK:
        for M in BATCH_SWEEP_M:
            sets = rotation_count(2.0 * (M * K + N * K + M * N))
            data = [(torch.randn(M, K, device="cuda").to(dtype), torch.randn(N, K, device="cuda").to(dtype))
                    for _ in range(sets)]
            ours = [lambda a=a, w=w: llm.gemm(a, w, trans_b=True) for a, w in data]
            theirs = [lambda a=a, w=w: torch.matmul(a, w.t()) for a, w in data]
            mine, peer = time_sets(ours), time_sets(theirs)
            mine, peer = min(mine, time_sets(ours)), min(peer, time_sets(theirs))
            ref = torch.matmul(data[0][0].double(), data[0][1].double().t())
            err = rel_error(ours[0](), ref)
            note = f"err={err:.1e} ours={_kernels_of(ours[0])} cublas={_kernels_of(theirs[0])}"
            shape, fl = f"{M}x{N}x{K}", 2.0 * M * N * K
            row("batch", shape, dtype, "auto", mine, fl, "cublas graph", peer, note)

            def knob_row(knob, value, label):  # ours again with a dev knob set (the better of two medians)
                os.environ[knob] = value
                try:
                    ms = min(time_sets(ours), time_sets(ours))
                    row("batch", shape, dtype, label, ms, fl, "cublas graph", peer,
                        f"err={rel_error(ours[0](), ref):.1e} ours={_kernels_of(ours[0])}")
                finally:
                    os.environ[knob] = ""

            if 16 < M <= 32 and N <= 66 * 128:  # 17-32 tokens in two 16-wide token tiles (132 SMs), or not
                tt16_default = -(-K // 64) <= 128  # plan_skinny_token_tiles: at most 128 k-tiles
                knob_row("CLO_GEMM_SKINNY_TT16", "0" if tt16_default else "1", "tt16_off" if tt16_default else "tt16")
            if 32 < M < 256 and N <= 6144 and M % 64 != 0:  # token tiles of the kernel's width (the last one short)
                knob_row("CLO_GEMM_SKINNY_TT_EVEN", "0", "tt_even_off")
            if 128 < M <= 192 and N in (12288, 14336, 16384, 28672):  # the 192-wide tile against the family
                knob_row("CLO_GEMM_SKINNY_WIDE", "0", "wide_off")
            if 128 < M <= 192 and N <= 4224 and K > 8192:  # the 192-wide tile split along K, not token tiles
                knob_row("CLO_GEMM_SKINNY_WIDE_SPLIT", "0", "wide_split_off")
            if 128 < M <= 192 and N <= 4224 and K <= 8192:  # the same split at short K (dev knob 2)
                knob_row("CLO_GEMM_SKINNY_WIDE_SPLIT", "2", "wide_split_any_k")
            if N < 16384 and (M % 8 != 0 or M in (72, 80, 96, 144, 160, 192, 224)):  # the last token tile's box unclipped
                knob_row("CLO_GEMM_SKINNY_BOX_CLIP", "0", "box_unclipped")
            if (M, N) in BATCH_SWEEP_L2_PROMOTION:  # the TMA maps' L2 promotion (dev knob), forward and back
                best: dict = {}
                for order in ((0, 1, 2, 3), (3, 2, 1, 0)):
                    for v in order:
                        os.environ["CLO_TMA_L2_PROMOTION"] = str(v)
                        best[v] = min(best.get(v, 1e9), time_sets(ours))
                os.environ["CLO_TMA_L2_PROMOTION"] = ""
                for v, ms in best.items():
                    row("batch", shape, dtype, f"l2_promotion={v}", ms, fl, "cublas graph", peer)
            del data, ours, theirs, ref
        torch.cuda.empty_cache()


def f32_wide_section():
    """fp32 SIMT: the large 128x128 tile (8x8 a thread, two blocks per SM; `pipelined`), the long
    tile (`alt_b`, one block per SM: NN 256x128 with 16x8 a thread at BK 16, TT 128x256 with 8x16
    at BK 16, TN / NT 128x256 at BK 32) and auto's pick between them, against
    cuBLAS (TF32 off). FP32_WIDE_LAYOUTS=all: every layout at a few shapes; default: NN and TT
    (the layouts auto gives the long tile) at shapes whose long blocks fill the last wave or not.
    Each timed in ROUNDS orders (forward, reverse, ...), the best median kept; cuBLAS before and
    after, the better kept. (Runs 1-2 of NOTES.md "fp32 v3" timed both long shapes at BK 16 and
    32 in every layout, through knobs since removed.)"""
    if os.environ.get("FP32_WIDE_LAYOUTS") == "all":
        cases = [(4096, 4096, 4096, ta, tb) for ta in (False, True) for tb in (False, True)] + \
                [(2048, 2048, 2048, False, False), (3000, 3000, 3000, False, False), (4096, 11008, 4096, False, True),
                 (8192, 4096, 2048, False, False), (2048, 2048, 2048, True, True)]
    else:
        nn = [(2048, 2048, 2048), (4096, 4096, 4096), (8192, 4096, 2048), (6144, 4096, 4096), (1024, 8192, 4096),
              (4096, 4096, 1024), (3072, 3072, 3072), (2560, 4096, 4096), (4096, 2560, 4096), (4096, 1024, 4096)]
        tt = [(2048, 2048, 2048), (4096, 4096, 4096), (8192, 4096, 2048), (3072, 3072, 3072), (6144, 4096, 4096),
              (1024, 4096, 4096)]
        cases = [(m, n, k, False, False) for m, n, k in nn] + [(m, n, k, True, True) for m, n, k in tt]
    rounds = int(os.environ.get("ROUNDS", "2"))
    for M, N, K, ta, tb in cases:
        a = torch.randn((K, M) if ta else (M, K), device="cuda")
        b = torch.randn((N, K) if tb else (K, N), device="cuda")
        at, bt = (a.t() if ta else a), (b.t() if tb else b)
        ref = torch.matmul(at.double(), bt.double())
        fl = 2.0 * M * N * K
        fills, sms = {}, torch.cuda.get_device_properties(0).multi_processor_count
        long_bm = 256 if not ta and not tb else 128
        for name, (bm, bn, slots) in (("long", (long_bm, 384 - long_bm, sms)), ("large", (128, 128, 2 * sms))):
            tiles = -(-M // bm) * -(-N // bn)
            fills[name] = f"{tiles}/{-(-tiles // slots) * slots}"
        shape = f"{M}x{N}x{K} ta={int(ta)} tb={int(tb)}"
        iters = 10 if M * N * K >= 4096 ** 3 else 20
        peer = ms_of(lambda: torch.matmul(at, bt), iters)
        fns = {"large": lambda: _gemm_variant(a, b, "pipelined", False, ta, tb),
               "long": lambda: _gemm_variant(a, b, "alt_b", False, ta, tb),
               "auto": lambda: llm.gemm(a, b, trans_a=ta, trans_b=tb)}
        names = list(fns)
        best: dict = {}
        for r in range(rounds):
            for name in (names if r % 2 == 0 else names[::-1]):
                ms = ms_of(fns[name], iters)
                err = rel_error(fns[name](), ref) if r == 0 else best[name][1]
                best[name] = min(best.get(name, (1e9, 0))[0], ms), err
        peer = min(peer, ms_of(lambda: torch.matmul(at, bt), iters))
        for name, (ms, err) in best.items():
            fill = f"tiles/slots={fills[name]} " if name in fills else ""
            row("f32_wide", shape, torch.float32, name, ms, fl, "cublas", peer, f"{fill}err={err:.1e}")
        del a, b, at, bt, ref, fns


INT8_KNOB_NAMES = ("CLO_GEMM_INT8_WGMMA", "CLO_GEMM_WGMMA_CLUSTER")
# (name, knob values): the wgmma family in single CTAs and in pairs along M, and mma.sync.
INT8_CONFIGS = (("wgmma", ("1", "1")), ("wgmma pairs", ("1", "2")), ("mma.sync", ("0", "1")))


def int8_section():
    """Our int8 kernels (INT8_CONFIGS, through the knobs) on both B layouts against torch._int_mm's
    fast column-major path; a row-major B includes its transpose on the wgmma family. Exactness
    checked once per config and layout."""
    for M, N, K in ((2048, 2048, 2048), (4096, 4096, 4096), (4096, 12288, 4096), (4352, 4096, 14336)):
        a = torch.randint(-128, 128, (M, K), dtype=torch.int8, device="cuda")
        b = torch.randint(-128, 128, (K, N), dtype=torch.int8, device="cuda")
        bc = b.t().contiguous().t()
        ref = torch.matmul(a.double(), b.double()).to(torch.int32)
        fl = 2.0 * M * N * K
        shape = f"{M}x{N}x{K}"
        mm_col = ms_of(lambda: torch._int_mm(a, bc))
        for name, values in INT8_CONFIGS:
            os.environ.update(dict(zip(INT8_KNOB_NAMES, values)))
            for layout, bb in (("col", bc), ("row", b)):
                ms = ms_of(lambda: llm.tensor_core_gemm_int8(a, bb))
                exact = torch.equal(llm.tensor_core_gemm_int8(a, bb), ref)
                row("int8", shape, torch.int8, f"{name} {layout}-major B", ms, fl, "_int_mm col-major B", mm_col,
                    f"exact={exact}")
        for knob in INT8_KNOB_NAMES:
            os.environ[knob] = ""
        del a, b, bc, ref
        torch.cuda.empty_cache()


def int8_batched_section(col_major_b):
    """int8 at decode and small-batch M, cold L2, B stored [K, N] (`int8_kn`) or [N, K] (`int8_nk`,
    the `.t()` of a contiguous weight, from 17 rows: below that the skinny tile takes it): mma.sync
    (CLO_GEMM_INT8_WGMMA=0), with and without its split-K (CLO_GEMM_INT8_SPLITK=0), the default
    (knob 1), and the wgmma family forced onto 128x256 tiles (knob 2; with B [K, N] through a
    per-call transpose of B; up to 128 rows also whole, CLO_GEMM_WGMMA_SHORT_SPLIT=0); with B
    [N, K] the swapped skinny tile forced (CLO_GEMM_SKINNY_WGMMA=2, token tiles past 128 rows). With B [K, N] at M <= 16 the default takes the skinny int8 kernel
    for weights of 32 MiB and more: the mma.sync rows turn it off (CLO_GEMM_INT8_SKINNY=0), the
    skinny rows force it (=2) at 8 and 4 k-warps (CLO_SKINNY_KWARPS). The peer is _int_mm on a column-major copy of B (rows of A padded to 17
    inside the call where M <= 16, as `llm-speed bench`)."""
    kind, layout = ("int8_nk", "[N,K]") if col_major_b else ("int8_kn", "[K,N]")
    shapes = ((28672, 4096), (12288, 4096), (4096, 4096)) + (((4096, 14336),) if col_major_b else ())
    for N, K in shapes:
        b = torch.randint(-128, 128, (K, N), dtype=torch.int8, device="cuda")
        bc = b.t().contiguous().t()
        ours_b = bc if col_major_b else b
        for M in ((17, 64, 128, 129, 256) if col_major_b else (1, 16, 64, 128, 256, 512)):
            a = torch.randint(-128, 128, (M, K), dtype=torch.int8, device="cuda")
            ref = torch.matmul(a.double(), b.double()).to(torch.int32)
            pad = max(0, 17 - M)

            def peer():
                ap = torch.nn.functional.pad(a, (0, 0, 0, pad)) if pad else a
                return torch._int_mm(ap, bc)

            peer_ms = ms_of(peer, cold=True)
            # (name, CLO_GEMM_INT8_WGMMA, CLO_GEMM_INT8_SPLITK, CLO_GEMM_INT8_SKINNY, CLO_SKINNY_KWARPS,
            #  CLO_GEMM_WGMMA_SHORT_SPLIT, CLO_GEMM_SKINNY_WGMMA)
            variants = (("mma.sync, no split-K", "0", "0", "0", "", "", ""),) if M <= 128 else ()  # it splits up to 128 rows
            variants += (("mma.sync", "0", "", "0", "", "", ""), ("default", "1", "", "", "", "", ""),
                         ("wgmma" if col_major_b else "wgmma+transpose", "2", "", "0", "", "", ""))
            if M <= 128:  # the family's grid under a wave, whole units (no short-wave split)
                variants += (("wgmma unsplit" if col_major_b else "wgmma+transpose unsplit", "2", "", "0", "", "0", ""),)
            if col_major_b:  # the swapped skinny tile wherever it can run (default: up to 128 rows, by its rule)
                variants += (("skinny tile", "1", "", "", "", "", "2"),)
            if M <= 16 and not col_major_b:  # the skinny int8 kernel wherever it applies (its rule: >= 32 MiB)
                variants += (("skinny kw=8", "1", "", "2", "", "", ""), ("skinny kw=4", "1", "", "2", "4", ""))
            for name, mode, split, skinny, kwarps, short, tile in variants:
                os.environ["CLO_GEMM_INT8_WGMMA"], os.environ["CLO_GEMM_INT8_SPLITK"] = mode, split
                os.environ["CLO_GEMM_INT8_SKINNY"], os.environ["CLO_SKINNY_KWARPS"] = skinny, kwarps
                os.environ["CLO_GEMM_WGMMA_SHORT_SPLIT"], os.environ["CLO_GEMM_SKINNY_WGMMA"] = short, tile
                ms = ms_of(lambda: llm.tensor_core_gemm_int8(a, ours_b), cold=True)
                exact = torch.equal(llm.tensor_core_gemm_int8(a, ours_b), ref)
                row(kind, f"{M}x{N}x{K}", torch.int8, f"{name} {layout} B", ms, 2.0 * M * N * K,
                    "_int_mm col-major B", peer_ms, f"exact={exact}")
            for knob in ("CLO_GEMM_INT8_WGMMA", "CLO_GEMM_INT8_SPLITK", "CLO_GEMM_INT8_SKINNY", "CLO_SKINNY_KWARPS",
                         "CLO_GEMM_WGMMA_SHORT_SPLIT", "CLO_GEMM_SKINNY_WGMMA"):
                os.environ[knob] = ""
        del b, bc, ours_b
        torch.cuda.empty_cache()


if __name__ == "__main__":
    print(torch.cuda.get_device_name(), torch.__version__, llm.build_info())
    # GEMM_BENCH_SECTIONS=f16,bf16 (default: int8,f16,f32,bf16) picks sections.
    wanted = os.environ.get("GEMM_BENCH_SECTIONS", "int8,f16,f32,bf16").split(",")
    if "skinny" in wanted:  # before the first gemm call, so the knobs are read per call
        for name in SKINNY_KNOB_NAMES:
            os.environ.setdefault(name, "")
    if "wgmma_sched" in wanted:
        for name in WGMMA_KNOB_NAMES:
            os.environ.setdefault(name, "")
    if "tail_split" in wanted:
        os.environ.setdefault("CLO_GEMM_WGMMA_TAIL_SPLIT", "")
    if "pdl" in wanted:
        os.environ.setdefault("CLO_GEMM_PDL", "")
    if "batch_sweep" in wanted:
        os.environ.setdefault("CLO_TMA_L2_PROMOTION", "")
        os.environ.setdefault("CLO_GEMM_SKINNY_TT16", "")
        os.environ.setdefault("CLO_GEMM_SKINNY_TT_EVEN", "")
        os.environ.setdefault("CLO_GEMM_SKINNY_BOX_CLIP", "")
        os.environ.setdefault("CLO_GEMM_SKINNY_WIDE", "")
        os.environ.setdefault("CLO_GEMM_SKINNY_WIDE_SPLIT", "")
    if "int8_kn" in wanted or "int8_nk" in wanted:
        for name in ("CLO_GEMM_INT8_SPLITK", "CLO_GEMM_INT8_SKINNY", "CLO_SKINNY_KWARPS", "CLO_GEMM_WGMMA_SHORT_SPLIT",
                     "CLO_GEMM_SKINNY_WGMMA"):
            os.environ.setdefault(name, "")
    if "int8" in wanted or "int8_kn" in wanted or "int8_nk" in wanted:
        for name in INT8_KNOB_NAMES:
            os.environ.setdefault(name, "")
    for name, section, arg in (("batch_sweep", batch_sweep_section, None), ("pdl", pdl_section, None), ("f32_wide", f32_wide_section, None), ("tail_split", tail_split_section, None), ("wgmma_sched", wgmma_sched_section, None), ("skinny", skinny_section, None), ("int8", int8_section, None),
                               ("int8_kn", int8_batched_section, False), ("int8_nk", int8_batched_section, True),
                               ("f16", float_section, torch.float16),
                               ("f32", float_section, torch.float32), ("bf16", float_section, torch.bfloat16)):
        if name not in wanted:
            continue
        try:
            section() if arg is None else section(arg)
        except Exception as exc:  # keep the other sections' figures
            print(f"{section.__name__}({arg}) failed: {type(exc).__name__}: {exc}", flush=True)
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "gemm_dev.json"), "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "git_sha": os.environ.get("LLM_SPEED_GIT_SHA", "unknown"), "rows": rows}, f, indent=1)
