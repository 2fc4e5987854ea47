"""Dev timing of the attention kernels next to SDPA, in one process.

    python3 scripts/bench_attention_dev.py [--sm90 | --sm90-dims | --sm90-short | --sm90-causal-rule |
                                            --sm90-d64-rule | --sm90-causal-pairs | --sm90-vs-cudnn |
                                            --sm90-wide | --sm90-tile-overlap | --sm90-d64-stages | [--rounds R] |
                                            --fp32 | --decode-reroute | --kernels-ab]

Prints median ms and TFLOP/s (non-causal FLOPs = 4*B*H*Nq*Nk*D, causal half)
for flash_attention vs F.scaled_dot_product_attention (flash and cuDNN
backends), and tiled/naive at a small N. Warm L2 (compute-bound op).
"""
from __future__ import annotations

import itertools
import os

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import cuda_llm_ops as llm
from cuda_llm_ops.testing import rel_error
from cuda_llm_ops.timing import benchmark


def flops(b, h, n, d, causal):
    f = 4.0 * b * h * n * n * d
    return f / 2 if causal else f


def seeded_qkv(b, h, n, d, dtype, hkv=None):
    """q [b, h, n, d], then k and v [b, hkv (default h), n, d]: randn from one generator seeded 0."""
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(b, h, n, d, device="cuda", generator=g).to(dtype)
    k, v = (torch.randn(b, hkv or h, n, d, device="cuda", generator=g).to(dtype) for _ in range(2))
    return q, k, v


def sdpa(backend):
    def run(q, k, v, causal):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return run


def row(name, t, f, base_ms=None):
    tf = f / (t.median_ms * 1e-3) / 1e12
    rel = f"  x{base_ms / t.median_ms:5.2f} of ours" if base_ms else ""
    print(f"  {name:<22} {t.median_ms:8.3f} ms  (p20 {t.p20_ms:.3f}, p80 {t.p80_ms:.3f})  {tf:7.1f} TFLOP/s{rel}")
    return t.median_ms


# Our prefill kernels by name (the `ours=` names).
OURS = {"flash": llm.flash_attention, "tiled": llm.tiled_attention, "naive": llm.naive_attention}


def compare(b, h, n, d, dtype, causal, peers=True, ours=("flash",), iters=30):
    q, k, v = seeded_qkv(b, h, n, d, dtype)
    f = flops(b, h, n, d, causal)
    print(f"B={b} H={h} N={n} D={d} {str(dtype).replace('torch.', '')} causal={causal}")
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    ours_ms = None
    for name in ours:
        fn = OURS[name]
        out = fn(q, k, v, is_causal=causal)
        err = rel_error(out.float(), ref.float())
        t = benchmark(lambda: fn(q, k, v, is_causal=causal), warmup=5, iterations=iters)
        ms = row(f"cuda_llm_ops.{name}", t, f)
        print(f"    rel err vs SDPA {err:.2e}")
        ours_ms = ours_ms or ms
    if peers:
        backends = (("sdpa-flash", SDPBackend.FLASH_ATTENTION), ("sdpa-cudnn", SDPBackend.CUDNN_ATTENTION),
                    ("sdpa-efficient", SDPBackend.EFFICIENT_ATTENTION))
        if dtype == torch.float32:
            backends = backends[2:]
        for pname, ms in time_sdpa(backends, q, k, v, causal, f, iters):
            if ours_ms:
                print(f"    ours / {pname}: {ms / ours_ms * 100:5.1f}% of its speed")


def time_sdpa(backends, q, k, v, causal, f, iters, base_ms=None):
    """Times each available SDPA backend on the same inputs; yields (name, median ms)."""
    for pname, backend in backends:
        fn = sdpa(backend)
        try:
            fn(q, k, v, causal)
        except RuntimeError as exc:
            print(f"  {pname:<22} unavailable: {str(exc).splitlines()[0][:80]}")
            continue
        t = benchmark(lambda: fn(q, k, v, causal), warmup=5, iterations=iters)
        yield pname, row(pname, t, f, base_ms)


def tile_variants(b, h, n, d, dtype, causal):
    """The D=128 tile shapes compiled for comparison (CUDA_LLM_OPS_FLASH_TILES, dev only)."""
    q, k, v = seeded_qkv(b, h, n, d, dtype)
    f = flops(b, h, n, d, causal)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    print(f"tile variants, B={b} H={h} N={n} D={d} {str(dtype).replace('torch.', '')} causal={causal}")
    for tiles in ("default", "16x64", "32x64", "32x32"):
        os.environ["CUDA_LLM_OPS_FLASH_TILES"] = "" if tiles == "default" else tiles
        out = llm.flash_attention(q, k, v, is_causal=causal)
        err = rel_error(out.float(), ref.float())
        t = benchmark(lambda: llm.flash_attention(q, k, v, is_causal=causal), warmup=5, iterations=30)
        row(f"flash tiles={tiles}", t, f)
        print(f"    rel err vs SDPA {err:.2e}")
    os.environ["CUDA_LLM_OPS_FLASH_TILES"] = ""


def time_knob_variants(q, k, v, causal, f, ref, knobs, variants, iters, warmup):
    """Times flash_attention under each (label, knob values) variant, the knobs it does not
    name empty (defaults), and prints its error against `ref` (fp32 or fp64 SDPA); returns
    the first variant's median ms. The knobs are left empty."""
    base = None
    for label, env in variants:
        for key in knobs:
            os.environ[key] = ""
        os.environ.update(env)
        out = llm.flash_attention(q, k, v, is_causal=causal)
        err = rel_error(out.to(ref.dtype), ref)
        t = benchmark(lambda: llm.flash_attention(q, k, v, is_causal=causal), warmup=warmup, iterations=iters)
        ms = row(label, t, f, base)
        base = base or ms
        print(f"    rel err vs {str(ref.dtype).replace('torch.', '')} SDPA {err:.2e}")
    for key in knobs:
        os.environ[key] = ""
    return base


SM90_CASES = [(4, 16, 4096, 128, torch.float16, False), (4, 16, 4096, 128, torch.float16, True),
              (4, 16, 4096, 128, torch.bfloat16, False), (16, 32, 1024, 128, torch.float16, False),
              (2, 32, 8192, 128, torch.float16, True), (4, 32, 4096, 96, torch.float16, False),
              (1, 32, 1000, 128, torch.bfloat16, True)]
# The head-dim tiles besides 128 (64: D <= 64, 256: D in (128, 256]) and D = 128 as the control.
SM90_DIM_CASES = [(4, 32, 4096, 64, torch.float16, False), (4, 32, 4096, 64, torch.float16, True),
                  (16, 32, 1024, 64, torch.bfloat16, False), (4, 32, 4096, 32, torch.float16, False),
                  (4, 16, 4096, 256, torch.float16, False), (4, 16, 4096, 256, torch.float16, True),
                  (16, 16, 1024, 256, torch.bfloat16, False), (4, 16, 4096, 160, torch.float16, False),
                  (4, 16, 4096, 192, torch.float16, False), (4, 16, 4096, 192, torch.float16, True),
                  (16, 16, 1024, 160, torch.bfloat16, False), (4, 16, 4096, 128, torch.float16, False)]


# Short sequences (4-8 key tiles a work tile): persistent CTAs against one CTA per tile.
SM90_SHORT_CASES = [(32, 32, 512, 128, torch.float16, False), (32, 32, 512, 128, torch.float16, True),
                    (16, 32, 1024, 128, torch.bfloat16, False), (16, 32, 1024, 128, torch.bfloat16, True),
                    (16, 32, 1024, 64, torch.float16, False), (16, 32, 1024, 64, torch.float16, True),
                    (16, 32, 1024, 256, torch.float16, False), (4, 32, 4096, 128, torch.float16, False),
                    (4, 32, 4096, 128, torch.float16, True), (1, 32, 1000, 128, torch.bfloat16, True)]


def sm90_vs_mma(cases=SM90_CASES, iters=30, short=False):
    """The Hopper wgmma kernel against the mma.sync one (CUDA_LLM_OPS_FLASH_SM90=0, dev
    only) and SDPA's flash and cuDNN backends, same inputs, same process. The knobs are
    set (empty: defaults) in main() before the first call, so they are read per call."""
    for b, h, n, d, dtype, causal in cases:
        q, k, v = seeded_qkv(b, h, n, d, dtype)
        f = flops(b, h, n, d, causal)
        ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
        print(f"sm90 | B={b} H={h} N={n} D={d} {str(dtype).replace('torch.', '')} causal={causal}")
        knobs = ("CUDA_LLM_OPS_FLASH_SM90", "CUDA_LLM_OPS_FLASH_SM90_SCHED", "CUDA_LLM_OPS_FLASH_SM90_PERSISTENT",
                 "CUDA_LLM_OPS_FLASH_SM90_TILE192")
        variants = [("wgmma auto", {}), ("wgmma pingpong", {knobs[1]: "2"}),
                    ("wgmma overlap", {knobs[1]: "1"}), ("wgmma CTA per tile", {knobs[2]: "0"}),
                    ("mma.sync", {knobs[0]: "0"})]
        if short:  # auto timed again last: the order effect (NOTES.md v3)
            variants = [variants[0], variants[3], ("wgmma auto again", {})]
        elif d <= 64:  # the 64 tile's three-consumer variant (192 query rows a CTA)
            variants.insert(3, ("wgmma 3 consumers", {knobs[1]: "3"}))
        elif 128 < d <= 192:  # the 256 tile these D ran on before the 192 tile
            variants.insert(3, ("wgmma 256 tile", {knobs[3]: "0"}))
        base = time_knob_variants(q, k, v, causal, f, ref, knobs, variants, iters, warmup=5)
        backends = (("sdpa-flash", SDPBackend.FLASH_ATTENTION), ("sdpa-cudnn", SDPBackend.CUDNN_ATTENTION))
        for _ in time_sdpa(backends, q, k, v, causal, f, iters, base):
            pass


# Causal shapes for the schedule rule (ping-pong or overlap on the 128 and 256 tiles).
SM90_CAUSAL_CASES = [(32, 32, 512, 128), (16, 32, 1024, 128), (8, 32, 2048, 128), (4, 32, 4096, 128),
                     (2, 32, 8192, 128), (1, 32, 1000, 128), (16, 32, 1024, 256), (4, 16, 4096, 256),
                     (32, 32, 512, 192), (16, 32, 1024, 192), (32, 32, 512, 256)]


def set_knobs(knob, val):
    """Sets the knob to val, or (val a dict) each knob the dict names; the others it names empty."""
    if isinstance(val, dict):
        for key, value in val.items():
            os.environ[key] = value
    else:
        os.environ[knob] = val


def clear_knobs(knob, variants):
    for _, val, *_own in variants:
        set_knobs(knob, {key: "" for key in val} if isinstance(val, dict) else "")


def best_medians(call, knob, variants, rounds, iters, cuda_graph=False, warmup_ms=0.0):
    """Times call() under each (name, knob value) of `variants` (the value may be a dict of
    knob values, set_knobs; a variant may carry its own callable third, e.g. a peer), the order
    rotated every round so the order effect (NOTES.md v3) falls on all; returns each name's
    best median ms. `warmup_ms`: back-to-back calls before each timing (timing.benchmark), so
    each runs at the clock the call sustains. The knobs are left empty (the defaults)."""
    best = {}
    for r in range(rounds):
        for name, val, *own in variants[r % len(variants):] + variants[:r % len(variants)]:
            clear_knobs(knob, variants)
            set_knobs(knob, val)
            t = benchmark(own[0] if own else call, warmup=3, iterations=iters, cuda_graph=cuda_graph,
                          warmup_ms=warmup_ms)
            best[name] = min(best.get(name, 1e9), t.median_ms)
    clear_knobs(knob, variants)
    return best


def sm90_causal_rule(rounds=3, iters=20):
    """Causal calls, overlap against ping-pong timed in alternating order (rounds x both),
    so the order effect (NOTES.md v3) falls on both; prints each variant's best median."""
    for b, h, n, d in SM90_CAUSAL_CASES:
        q, k, v = seeded_qkv(b, h, n, d, torch.float16)
        best = best_medians(lambda: llm.flash_attention(q, k, v, is_causal=True), "CUDA_LLM_OPS_FLASH_SM90_SCHED",
                            (("overlap", "1"), ("pingpong", "2")), rounds, iters)
        print(f"causal rule | B={b} H={h} N={n} D={d} fp16: overlap {best['overlap']:.4f} ms, "
              f"pingpong {best['pingpong']:.4f} ms, pingpong/overlap speed {best['overlap'] / best['pingpong']:.3f}")


# D = 64 at the bench's GQA 32/8 shapes (B = 16384 / N): the 64 tile's schedules.
SM90_D64_CASES = [(32, 512), (16, 1024), (8, 2048), (4, 4096)]


def sm90_d64_rule(rounds=3, iters=20):
    """D = 64, fp16, GQA 32/8, causal and not: three consumers, ping-pong and overlap with two,
    timed in rotating order (rounds x all), each one's best median."""
    scheds = (("3 consumers", "3"), ("pingpong", "2"), ("overlap", "1"))
    for b, n in SM90_D64_CASES:
        for causal in (False, True):
            q, k, v = seeded_qkv(b, 32, n, 64, torch.float16, hkv=8)
            best = best_medians(lambda: llm.flash_attention(q, k, v, is_causal=causal),
                                "CUDA_LLM_OPS_FLASH_SM90_SCHED", scheds, rounds, iters)
            print(f"d64 rule | B={b} Hq=32 Hkv=8 N={n} causal={causal}: " +
                  ", ".join(f"{name} {best[name]:.4f} ms" for name, _ in scheds), flush=True)


# Causal calls whose row blocks fit one wave unpaired (B=1 H=32 N=512), and controls past it.
SM90_PAIR_CASES = [(1, 32, 512, 128), (1, 32, 256, 128), (2, 32, 512, 128), (1, 64, 512, 128), (1, 32, 1024, 128)]


def sm90_causal_pairs(rounds=3, iters=30):
    """Causal fp16 calls, row blocks paired (CUDA_LLM_OPS_FLASH_SM90_CAUSAL_PAIRS=1) against one per
    unit (=0), alternating order, each one's best median; CUDA-graph replays (these calls are as
    short as an eager call's host time)."""
    for b, h, n, d in SM90_PAIR_CASES:
        q, k, v = seeded_qkv(b, h, n, d, torch.float16)
        best = best_medians(lambda: llm.flash_attention(q, k, v, is_causal=True), "CUDA_LLM_OPS_FLASH_SM90_CAUSAL_PAIRS",
                            (("pairs", "1"), ("single", "0")), rounds, iters, cuda_graph=True)
        print(f"causal pairs | B={b} H={h} N={n} D={d} fp16: pairs {best['pairs'] * 1e3:.1f} us, "
              f"one row block a unit {best['single'] * 1e3:.1f} us", flush=True)


# The bench's fp16 shapes (B = 16384 / N) at D = 128 and 64, causal and not.
SM90_VS_CUDNN_CASES = [(32, 32, 32, 512, 128, False), (16, 32, 32, 1024, 128, False), (8, 32, 32, 2048, 128, False),
                       (4, 32, 32, 4096, 128, False), (16, 32, 8, 1024, 128, False), (32, 32, 32, 512, 128, True),
                       (16, 32, 32, 1024, 128, True), (4, 32, 32, 4096, 128, True), (16, 32, 8, 1024, 64, False),
                       (4, 32, 8, 4096, 64, False), (16, 32, 8, 1024, 64, True), (4, 32, 8, 4096, 64, True)]


def sm90_vs_cudnn(cases=SM90_VS_CUDNN_CASES, dtypes=(torch.float16,), knob="CUDA_LLM_OPS_FLASH_SM90_SCHED",
                  ours=(("ours", ""),), rounds=3, iters=20, warmup_ms=0.0):
    """Our Hopper kernel (each (name, knob value) of `ours`) against SDPA-cuDNN timed in
    rotating order (rounds x all), each one's best median: the order effect (NOTES.md v3)
    falls on all. The speed printed is cuDNN's time over the first of `ours`."""
    for (b, hq, hkv, n, d, causal), dtype in itertools.product(cases, dtypes):
        q, k, v = seeded_qkv(b, hq, n, d, dtype, hkv=hkv)
        call = lambda: llm.flash_attention(q, k, v, is_causal=causal)  # noqa: E731
        ref = F.scaled_dot_product_attention(q.float(), k.float().repeat_interleave(hq // hkv, 1),
                                             v.float().repeat_interleave(hq // hkv, 1), is_causal=causal)
        for _, val in ours:
            clear_knobs(knob, ours)
            set_knobs(knob, val)
            err = rel_error(call().float(), ref)
            assert err < 1e-2, f"{knob}={val}: relative error {err:.2e}"
        clear_knobs(knob, ours)

        def cudnn():  # as the bench's peer (cuda_llm_ops.bench.sdpa): GQA through enable_gqa
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=hq != hkv)

        best = best_medians(call, knob, tuple(ours) + (("cudnn", "", cudnn),), rounds, iters, warmup_ms=warmup_ms)
        f = flops(b, hq, n, d, causal)
        print(f"vs cudnn | B={b} Hq={hq} Hkv={hkv} N={n} D={d} causal={causal} {str(dtype)[6:]}: " +
              ", ".join(f"{name} {ms:.4f} ms ({f / ms / 1e9:.0f} TFLOP/s)" for name, ms in best.items()) +
              f"; {ours[0][0]}/cudnn speed {best['cudnn'] / best[ours[0][0]]:.3f}", flush=True)


# Where a work tile's first S = Q K^T issues (with the last P V of the tile before, or after
# its epilogue) and how many Q buffers the kernel uses, on the bench's short and long shapes.
SM90_TILE_OVERLAP_VARIANTS = (
    ("rule", {"CUDA_LLM_OPS_FLASH_SM90_EARLY_QK": "", "CUDA_LLM_OPS_FLASH_SM90_Q_STAGES": ""}),
    ("early 2q", {"CUDA_LLM_OPS_FLASH_SM90_EARLY_QK": "1", "CUDA_LLM_OPS_FLASH_SM90_Q_STAGES": "2"}),
    ("late 1q", {"CUDA_LLM_OPS_FLASH_SM90_EARLY_QK": "0", "CUDA_LLM_OPS_FLASH_SM90_Q_STAGES": "1"}),
    ("early 1q", {"CUDA_LLM_OPS_FLASH_SM90_EARLY_QK": "1", "CUDA_LLM_OPS_FLASH_SM90_Q_STAGES": "1"}),
    ("late 2q", {"CUDA_LLM_OPS_FLASH_SM90_EARLY_QK": "0", "CUDA_LLM_OPS_FLASH_SM90_Q_STAGES": "2"}))
SM90_TILE_OVERLAP_CASES = [(32, 32, 32, 512, 128, True), (32, 32, 8, 512, 128, True), (16, 32, 32, 1024, 128, True),
                           (16, 32, 8, 1024, 64, True), (16, 32, 8, 1024, 64, False), (32, 32, 32, 512, 128, False),
                           (8, 32, 8, 2048, 128, False), (4, 32, 8, 4096, 128, True), (16, 32, 8, 1024, 256, True)]


# The bench's D = 192 and 256 shapes (GQA 32/8) and a control at D = 160.
SM90_WIDE_CASES = [(16, 32, 8, 1024, 192, False), (16, 32, 8, 1024, 192, True), (4, 32, 8, 4096, 192, False),
                   (4, 32, 8, 4096, 192, True), (16, 32, 8, 1024, 256, False), (16, 32, 8, 1024, 256, True),
                   (4, 32, 8, 4096, 256, False), (16, 16, 16, 1024, 160, False)]


# fp32: the 3xTF32 tensor-core kernel's tiles (4 and 8 warps) against SDPA's mem-efficient
# backend (3xTF32 too). The CUDA-core kernel it replaced is in NOTES.md v7.
FP32_CASES = [(1, 16, 2048, 128, False), (8, 32, 2048, 128, False), (8, 32, 2048, 128, True),
              (32, 32, 512, 128, False), (4, 32, 4096, 64, False), (4, 32, 4096, 64, True),
              (4, 32, 2048, 96, False), (2, 16, 2048, 256, False), (2, 16, 2048, 256, True)]


def fp32_variants(iters=10):
    knobs = ("CUDA_LLM_OPS_FLASH_FP32_TILE",)
    for b, h, n, d, causal in FP32_CASES:
        q, k, v = seeded_qkv(b, h, n, d, torch.float32)
        f = flops(b, h, n, d, causal)
        ref = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)
        print(f"fp32 | B={b} H={h} N={n} D={d} causal={causal}")
        variants = [("tf32x3 default", {}), ("tf32x3 4 warps", {knobs[0]: "1"}), ("tf32x3 8 warps", {knobs[0]: "2"})]
        base = time_knob_variants(q, k, v, causal, f, ref, knobs, variants, iters, warmup=3)
        for _ in time_sdpa((("sdpa-efficient", SDPBackend.EFFICIENT_ATTENTION),), q, k, v, causal, f, iters, base):
            pass


# flash_attention's few-query-row reroute (use_decode_path: Nq <= 16 whatever the group):
# (B, Hq, Hkv, Nk) x Nq, D = 128, causal (speculative decoding's rows). Rows per KV head run
# from 1 to 128: past 16 the decode kernel's row tiles each read the keys (from L2 when
# they run together), the prefill kernel reads them once per query tile.
DECODE_REROUTE_CASES = [(b, hq, hkv, nk) for b in (1, 8) for hq, hkv in ((32, 32), (32, 8), (64, 8))
                        for nk in (2048, 16384)]
DECODE_REROUTE_NQ = (1, 4, 8, 16)


def decode_reroute():
    """Where the reroute pays: `llm-speed bench`'s decode_attention cases (its SDPA peers, checks,
    cold L2 and graph replays) over DECODE_REROUTE_CASES x DECODE_REROUTE_NQ, with our prefill
    kernel (the raw op, which never reroutes) as one more implementation beside them. The table's
    rows give each time; our prefill kernel faster than `cuda_llm_ops` (the decode path) says the
    reroute loses there. Records go to $OUT/decode_reroute.json when OUT is set."""
    from cuda_llm_ops import roofline as rl
    from cuda_llm_ops.bench import cases_decode as cd
    from cuda_llm_ops.bench import report
    from cuda_llm_ops.bench.registry import BenchImpl
    from cuda_llm_ops.bench.runner import Selected, environment, run_cases, to_record

    def build_prefill(inp):
        k, v = cd.contiguous_kv(inp)
        one_token = inp["q"].dim() == 3  # [B, Hq, D]; else [B, Hq, Nq, D]
        q = inp["q"].unsqueeze(2) if one_token else inp["q"]
        scale = q.shape[-1] ** -0.5
        fn = lambda: torch.ops.cuda_llm_ops.flash_attention(q, k, v, scale, not one_token)  # noqa: E731
        return (lambda: fn().squeeze(2)) if one_token else fn

    selected = []
    for (b, hq, hkv, nk), nq in itertools.product(DECODE_REROUTE_CASES, DECODE_REROUTE_NQ):
        case = cd.paged_case(b, nk, hkv, torch.float16, Hq=hq, op="decode_attention", Nq=nq)
        case.impls.append(BenchImpl("prefill kernel", True, build_prefill))
        selected.append(Selected("decode_attention", case, case.impls))
    env = environment()
    records = [to_record(r, env) for r in run_cases(selected, rl.ceilings_for(None), progress=False)]
    print(report.format_table(records))
    if os.environ.get("OUT"):
        report.write_json(records, os.path.join(os.environ["OUT"], "decode_reroute.json"))


# The prefill kernels other than the Hopper one, as the H100 runs them (fp16 / bf16 head dims
# outside the wgmma kernel's on mma.sync, fp32 on 3xTF32, tiled and naive): a change to code
# they share timed as a build A/B (scripts/gpu_ab.sh). (b, h, n, d, dtype, causal, ours)
KERNELS_AB_CASES = [(4, 32, 4096, 256, torch.float16, False, ("flash",)),
                    (4, 32, 4096, 192, torch.bfloat16, True, ("flash",)),
                    (8, 32, 2048, 32, torch.float16, False, ("flash",)),
                    (2, 16, 2048, 128, torch.float32, False, ("flash",)),
                    (2, 16, 2048, 64, torch.float32, True, ("flash",)),
                    (1, 16, 1024, 64, torch.float16, False, ("tiled", "naive")),
                    (1, 16, 1024, 128, torch.float32, True, ("tiled", "naive"))]


def kernels_ab(iters=30):
    """One table line ('|') per case and kernel: median ms of graph-free calls, warm L2."""
    for b, h, n, d, dtype, causal, ours in KERNELS_AB_CASES:
        q, k, v = seeded_qkv(b, h, n, d, dtype)
        ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
        for name in ours:
            fn = OURS[name]
            err = rel_error(fn(q, k, v, is_causal=causal).float(), ref)
            t = benchmark(lambda: fn(q, k, v, is_causal=causal), warmup=5, iterations=iters)
            print(f"| B={b} H={h} N={n} D={d} {str(dtype).replace('torch.', '')} causal={int(causal)} | {name} "
                  f"| {t.median_ms:.3f} ms | err {err:.1e} |")


def main():
    import sys
    # Dev knobs are read per call only when set before the first call (dev_knob, common.cuh).
    for knob in ("CUDA_LLM_OPS_FLASH_SM90", "CUDA_LLM_OPS_FLASH_SM90_SCHED", "CUDA_LLM_OPS_FLASH_TILES",
                 "CUDA_LLM_OPS_FLASH_SM90_PERSISTENT", "CUDA_LLM_OPS_FLASH_SM90_TILE192",
                 "CUDA_LLM_OPS_FLASH_FP32_TILE", "CUDA_LLM_OPS_FLASH_SM90_CAUSAL_PAIRS",
                 "CUDA_LLM_OPS_FLASH_SM90_EARLY_QK", "CUDA_LLM_OPS_FLASH_SM90_Q_STAGES",
                 "CUDA_LLM_OPS_FLASH_SM90_D64_STAGES"):
        os.environ.setdefault(knob, "")
    torch.backends.cuda.matmul.allow_tf32 = False
    print(torch.cuda.get_device_name(), torch.__version__, llm.build_info())
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 3  # the knob sweeps
    if "--decode-reroute" in sys.argv[1:]:
        decode_reroute()
        return
    if "--sm90" in sys.argv[1:]:
        sm90_vs_mma()
        return
    if "--sm90-causal-rule" in sys.argv[1:]:
        sm90_causal_rule()
        return
    if "--sm90-causal-pairs" in sys.argv[1:]:
        sm90_causal_pairs()
        return
    if "--sm90-vs-cudnn" in sys.argv[1:]:
        sm90_vs_cudnn()
        return
    if "--sm90-tile-overlap" in sys.argv[1:]:
        sm90_vs_cudnn(SM90_TILE_OVERLAP_CASES, (torch.bfloat16,), ours=SM90_TILE_OVERLAP_VARIANTS, rounds=rounds,
                      warmup_ms=50)
        return
    if "--sm90-d64-stages" in sys.argv[1:]:
        cases = [(32, 32, 8, 512, 64, True), (16, 32, 8, 1024, 64, True), (8, 32, 8, 2048, 64, True),
                 (4, 32, 8, 4096, 64, True), (16, 32, 8, 1024, 64, False), (4, 32, 8, 4096, 64, False)]
        sm90_vs_cudnn(cases, (torch.bfloat16,), knob="CUDA_LLM_OPS_FLASH_SM90_D64_STAGES",
                      ours=(("3 stages", ""), ("2 stages", "2")), rounds=rounds, warmup_ms=50)
        return
    if "--sm90-wide" in sys.argv[1:]:
        sm90_vs_cudnn(SM90_WIDE_CASES, (torch.float16, torch.bfloat16))
        return
    if "--sm90-d64-rule" in sys.argv[1:]:
        sm90_d64_rule()
        return
    if "--sm90-short" in sys.argv[1:]:
        sm90_vs_mma(SM90_SHORT_CASES, short=True)
        return
    if "--fp32" in sys.argv[1:]:
        fp32_variants()
        return
    if "--kernels-ab" in sys.argv[1:]:
        kernels_ab()
        return
    if "--sm90-dims" in sys.argv[1:]:
        sm90_vs_mma(SM90_DIM_CASES)
        return
    for causal in (False, True):
        compare(4, 16, 4096, 128, torch.float16, causal)
    for causal in (False, True):
        tile_variants(4, 16, 4096, 128, torch.float16, causal)
    compare(4, 16, 4096, 128, torch.bfloat16, False)
    compare(4, 32, 4096, 64, torch.float16, False)
    compare(1, 16, 16384, 128, torch.float16, True, iters=10)
    compare(1, 16, 2048, 128, torch.float32, False, iters=10)
    compare(1, 16, 1024, 64, torch.float16, False, ours=("flash", "tiled", "naive"), peers=False, iters=10)
    compare(1, 16, 1024, 64, torch.float32, False, ours=("flash", "tiled", "naive"), peers=False, iters=10)


if __name__ == "__main__":
    main()
