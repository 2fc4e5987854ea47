"""Benchmark cases of decode attention: `paged_attention` (block table, split-KV)
against SDPA's backends on the same keys in a contiguous `[B, Hkv, N, D]` layout, and
against a plain-PyTorch paged implementation (gather through the block table, then SDPA).

Shapes (issue 5): Hq = 32, D = 128, block size 16, fp16/bf16, B in {1, 16, 64} x
context in {1024, 4096, 16384} x Hkv in {32 (MHA), 8 (GQA 32/8)}, every sequence at
the full context, physical blocks shuffled; with preset "all" also D in {64, 96, 256}
and D = 80 and 192 (no kernel of their own: 192 runs on the 256-wide one, 80 on the
96-wide one or, on HBM3e parts, as head pairs on the 160-wide one) at
B=64, N=2048 (MHA and GQA 32/8), and D = 80 and 192 at B=1, N=16384, GQA 32/8 (split-KV);
a sliding window of 4096 keys at N=16384, GQA 32/8, B in {1, 16} (ours reads the
window; the SDPA peers run on the last 4096 keys of the contiguous cache); and 4 new tokens
per sequence (speculative decoding, q `[B, Hq, 4, D]`) at B=1/N=16384 and B=16/N=4096, GQA
32/8 (the SDPA peers with a bottom-right causal mask); grids between one and two blocks per
SM (B=17/N=1024 and B=24/N=2048, GQA 32/8). Memory-bound (~1 FLOP/byte): cold L2, bytes
= K and V read once + q read + out written (block tables not counted).

Ours runs as a serving loop would: `out=` and a preallocated workspace (no allocation
per call) and `check_indices=False` (no host synchronisation; the kernel's device-side
guards stay on). Every implementation is timed as CUDA-graph replays over rotated
input copies (cold L2): decode steps run inside graphs in serving engines, and without
one the small cases measure host overhead (SDPA's cuDNN path spends tens of microseconds
on the CPU per call), not kernels; `llm-speed bench --eager` times them that way, call by
call, for eager serving loops (SDPA's backend pinned once, outside the calls: bench/sdpa.py). Op `decode_attention`: the same kernel over a contiguous cache
(`flash_attention` with one query row dispatches there) on a few of the shapes. Op
`paged_attention_fp8`: an FP8 (e4m3) paged cache against SDPA and ours on the same values
in 16 bits (`fp8_case`). Op `paged_mla_attention`: MLA decode (DeepSeek's latent cache,
576-wide keys, 512-wide values, one KV head) against SDPA's backends and the absorbed
PyTorch composition on a contiguous cache, and that composition gathering through the
block table (`mla_case`).
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from .. import _ops
from ..roofline import decode_attention_work, mla_decode_work, paged_kv_append_work
from . import sdpa
from .registry import BenchCase, BenchImpl, register

try:  # torch >= 2.3
    from torch.nn.attention.bias import causal_lower_right
except ImportError:  # pragma: no cover - older torch
    causal_lower_right = None

BATCHES = (1, 16, 64)
CONTEXTS = (1024, 4096, 16384)
# Grids between one and two thread blocks per SM (136 and 192 blocks on 132 SMs)
MID_GRIDS = ((17, 1024, 8), (24, 2048, 8))
# Head_dim 128 one-token GQA 32/8 grids of stop 108's H100 rules (csrc/decode/NOTES.md "Stop
# 108"; preset "all"), (B, N), paged and contiguous (decode_attention): half a unit per SM to 2/3
# (B=9/16K: paged 3 splits from 8192 keys, 2 since stop 109, contiguous 1 on TMA 3; B=11/4K: 1 on both), past 2
# units per SM to 2.5 from 4096 keys (B=34, 37, 38) and 2.5-2.8 from 8192 (B=44): 3 splits
D128_THREE_SPLIT_GRIDS = ((9, 16384), (11, 4096), (34, 16384), (37, 16384), (38, 8192), (44, 16384))
# ... and contiguous small grids, which the H100 runs on TMA 3 since stop 108 (the cp.async kernel
# before): 0.36 and 0.73 units per SM (3 splits since stop 109, 1), and 0.42-0.48 (1 split since
# stop 109, 2 before; MHA B=2 too), (B, N, Hkv)
D128_CONTIGUOUS_SMALL_GRIDS = ((6, 16384, 8), (12, 16384, 8), (7, 2048, 8), (7, 16384, 8), (8, 2048, 8),
                               (2, 2048, 32))
# Serving tables (preset "all"): block tables 4x the sequences' length, as engines size them
# for the longest context, at a grid where the split heuristic takes the balanced schedule
# (160 blocks: 2 splits), with the same grid at full capacity beside it: (B, N, Hkv)
SERVING_TABLE_GRIDS = ((20, 4096, 8),)
SERVING_TABLE_FACTOR = 4
KV_HEADS = (32, 8)
HQ, HEAD_DIM, BLOCK_SIZE = 32, 128, 16
# Head dims besides the 128 (preset "all" only): B=64 at this context, GQA 32/8
# (512 thread blocks) and MHA (2048).
OTHER_HEAD_DIMS = (64, 80, 96, 192, 256)
OTHER_HEAD_DIMS_CONTEXT = 2048
# Head dims run on a wider kernel, also on the split-KV grid of one long sequence.
PADDED_HEAD_DIMS = (80, 192)
# Head dims 64 and 96 on small GQA 32/8 grids (preset "all"; paged and contiguous): where the
# split heuristic puts about two blocks per SM on paged caches on HBM3e parts (stop 77; B=5/4K
# in splits of 512-1024 keys, stop 78); B=9/8K (0.55 units per SM) on other sm_90 parts too (stop 107).
SMALL_GRID_HEAD_DIMS = (64, 96)
SMALL_GRIDS = ((16, 4096), (4, 16384), (5, 4096), (9, 8192))
# ... and their Nq 2-4 calls (paged; stop 79): (B, N, Nq)
SMALL_SPEC_GRIDS = ((5, 4096, 2), (10, 4096, 4))
# ... and speculative rows of two row tiles there (GQA 32/8 Nq 5: 20 query rows per KV head), which
# HBM3e parts run as two-row-tile blocks (stop 88; below 0.45 KV heads per SM and contiguous
# D = 64 past one, stop 89), both layouts: (B, N, Nq)
SMALL_GRID_WIDE_GRIDS = ((8, 16384, 5), (16, 4096, 5), (2, 16384, 5), (20, 16384, 5))
# Sliding-window cases (preset "all"): Mistral-7B's 4096 keys at a 16K context.
SLIDING_WINDOW = 4096
# Speculative-decoding cases (preset "all"): new tokens per sequence (GQA 32/8: 4 x 4 = 16
# query rows per KV head, one thread block's tile).
SPEC_TOKENS = 4
# Their grids: a long sequence split, one wave (B=16/4K), the HBM3e partial wave (B=10) and
# wave top (B=42) at 16K keys (csrc/decode/NOTES.md "Stop 67")
SPEC_GRIDS = ((1, 16384), (16, 4096), (10, 16384), (42, 16384))
# Units of two row tiles (8 new tokens: 32 query rows per KV head), by grid: a long sequence
# split, the partial wave's top (B=8/16K), the spread tail (B=10/4K) and the wave top
# (B=21/16K) on HBM3e parts ("Stop 68")
SPEC_TWO_TILE_TOKENS = 8
SPEC_TWO_TILE_GRIDS = ((1, 16384), (8, 16384), (10, 4096), (21, 16384))
SPEC_ROWS = ((SPEC_TOKENS, SPEC_GRIDS), (SPEC_TWO_TILE_TOKENS, SPEC_TWO_TILE_GRIDS))
# One new token at Hq 32 / Hkv 1 (MQA: 32 query rows per KV head, one 32-row block on HBM3e
# parts, csrc/decode/NOTES.md "Stop 69"), (B, N): a long-context small grid split 16 ways, one
# wave at 2 splits (B=64/4K, B=66/8K), a little past one wave (B=136/2K, B=150/4K: the balanced
# schedule, "Stop 73"); contiguous (decode_attention) the first and (B=66/8K) the third
MQA_GRIDS = ((8, 16384), (64, 4096), (66, 8192), (136, 2048), (150, 4096))
MQA_CONTIGUOUS_GRIDS = ((8, 16384), (66, 8192))
# Head dims off the 128 past one block per SM (preset "all"; GQA 32/8): D = 64 in
# head pairs at 1.21 pairs per SM (B=40) and D = 112 on the D = 128 kernel at 1.21 units per
# SM (B=20), where HBM3e parts run the spread tail or 3 splits, the H100 1 split
# (csrc/decode/NOTES.md "Stop 86", "Stop 99", "Stop 107"); D = 224 on the D = 256 kernel at
# 1.21 units per SM, rows that are not whole 128-byte lines: 3 splits ("Stop 87", "Stop 99"), off
# HBM3e from 8192 keys one of 2048 keys each ("Stop 110"), also at 2.42 and 3.88 units per SM and
# 0.36 ("Stop 111"); D = 96 at 2.06 and 2.42 units per SM, 3 splits from 4096 keys ("Stop 107"):
# (D, B, N)
BAND_HEAD_DIM_GRIDS = ((64, 40, 2048), (64, 40, 16384), (112, 20, 4096), (224, 20, 4096), (224, 20, 16384),
                       (224, 40, 16384), (224, 64, 8192), (224, 6, 16384), (96, 34, 16384), (96, 40, 8192))
# ... and contiguous (decode_attention) D = 64 at 2.42 units per SM: 3 splits off HBM3e ("Stop 107")
BAND_CONTIGUOUS_GRIDS = ((64, 40, 2048),)
SDPA_BACKENDS = ("flash", "cudnn", "efficient")
# The plain-PyTorch paged peer materialises a gathered copy of the cache per call.
TORCH_PAGED_MAX_BYTES = 3 << 30


def make_paged_inputs(B: int, Hq: int, Hkv: int, N: int, D: int, block_size: int,
                      dtype: torch.dtype, Nq: int = 1, capacity: int = 0) -> dict[str, Any]:
    """Random q `[B, Hq, D]` (`[B, Hq, Nq, D]` for Nq > 1 new tokens) and a paged cache
    holding N keys per sequence in shuffled blocks; `capacity` > N: block tables that
    many keys long (as a serving engine sizes them for the longest context), the entries
    past N pointing at block 0."""
    nblk = (N + block_size - 1) // block_size
    num_blocks = B * nblk
    q = torch.randn(B, Hq, *((Nq,) if Nq > 1 else ()), D, device="cuda", dtype=dtype)
    k_cache = torch.randn(num_blocks, block_size, Hkv, D, device="cuda", dtype=dtype)
    v_cache = torch.randn(num_blocks, block_size, Hkv, D, device="cuda", dtype=dtype)
    block_tables = torch.randperm(num_blocks, device="cuda").view(B, nblk).to(torch.int32)
    extra = max(0, -(-capacity // block_size) - nblk)
    if extra:
        block_tables = torch.cat([block_tables, block_tables.new_zeros(B, extra)], 1).contiguous()
    seq_lens = torch.full((B,), N, dtype=torch.int32, device="cuda")
    return {"q": q, "k_cache": k_cache, "v_cache": v_cache, "block_tables": block_tables, "seq_lens": seq_lens}


def contiguous_kv(inp: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    """The paged cache's keys/values as contiguous `[B, Hkv, N, D]` (one copy, outside any
    timing), kept in `inp["_contig"]` for the next caller (the impls on one input set share it)."""
    if "_contig" in inp:
        return inp["_contig"]
    bt, n = inp["block_tables"].long(), int(inp["seq_lens"].max())
    out = []
    for cache in (inp["k_cache"], inp["v_cache"]):
        g = cache[bt]  # [B, nblk, bs, Hkv, D]
        g = g.view(g.shape[0], -1, *g.shape[3:])[:, :n]
        out.append(g.transpose(1, 2).contiguous())
        del g
    inp["_contig"] = (out[0], out[1])
    return inp["_contig"]


def ours_paged(window: int = 0) -> BenchImpl:
    def unavailable(inp) -> str | None:
        if not _ops.has_op("paged_attention"):
            return f"op paged_attention not in this build ({_ops.build_info()})"
        return None

    def build(inp):
        from ..decode import paged_attention, paged_attention_workspace

        q, kc, vc, bt, sl = inp["q"], inp["k_cache"], inp["v_cache"], inp["block_tables"], inp["seq_lens"]
        out = torch.empty_like(q)
        ws = paged_attention_workspace(q, kc, bt)
        return lambda: paged_attention(q, kc, vc, bt, sl, out=out, workspace=ws, check_indices=False,
                                       window_left=window - 1)

    return BenchImpl("cuda_llm_ops", False, build, unavailable)


def ours_contiguous() -> BenchImpl:
    def unavailable(inp) -> str | None:
        if not _ops.has_op("decode_attention"):
            return f"op decode_attention not in this build ({_ops.build_info()})"
        return None

    def build(inp):
        from ..decode import decode_attention, decode_workspace

        k, v = contiguous_kv(inp)
        one_token = inp["q"].dim() == 3  # [B, Hq, D]; else [B, Hq, Nq, D]
        q = inp["q"].unsqueeze(2) if one_token else inp["q"]
        B, Hq, Nq, D = q.shape
        out = torch.empty_like(q)
        ws = decode_workspace(B, Hq, k.shape[1], D, k.shape[2], q.dtype, seq_len_q=Nq, paged=False)
        # Nq > 1 new tokens: bottom-right causal, as the paged op's speculative rows
        fn = lambda: decode_attention(q, k, v, out=out, workspace=ws, is_causal=not one_token,  # noqa: E731
                                      check_workspace=False)
        return (lambda: fn().squeeze(2)) if one_token else fn

    return BenchImpl("cuda_llm_ops", False, build, unavailable)


def sdpa_peer(name: str, window: int = 0) -> BenchImpl:
    """SDPA pinned to one backend on contiguous K/V; GQA natively (enable_gqa) when the
    backend takes it, else with K/V expanded once outside the timing (noted as more bytes).
    With a sliding window of `window` keys: on the last `window` keys (a slice, no copy),
    as a contiguous cache's user would call it."""
    mode: dict[str, bool] = {}

    def _prepare(inp):
        k, v = contiguous_kv(inp)
        if window:
            k, v = k[:, :, -window:], v[:, :, -window:]
        q = inp["q"] if inp["q"].dim() == 4 else inp["q"].unsqueeze(2)
        if q.shape[1] == k.shape[1] or mode.get("gqa", True):
            return q, k, v, q.shape[1] != k.shape[1]
        g = q.shape[1] // k.shape[1]
        return q, k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1), False

    def _call(q, k, v, gqa):
        # Several new tokens: causal aligned bottom-right (SDPA's is_causal is top-left).
        mask = causal_lower_right(q.shape[2], k.shape[2]) if q.shape[2] > 1 else None
        return sdpa.call(name, q, k, v, gqa, attn_mask=mask)

    def unavailable(inp) -> str | None:
        if sdpa.backend(name) is None:
            return "torch has no torch.nn.attention.sdpa_kernel or no such backend"
        errors = []
        gqa_case = inp["q"].shape[1] != inp["k_cache"].shape[2]
        for native in ((True, False) if gqa_case else (True,)):
            mode["gqa"] = native
            try:
                q, k, v, gqa = _prepare(inp)
                _call(q, k, v, gqa)
                torch.cuda.synchronize()
                return None
            except RuntimeError as exc:
                errors.append((str(exc).strip().splitlines() or [type(exc).__name__])[0])
        return f"sdpa {name} backend cannot run this case: {errors[-1][:160]}"

    def build(inp):
        q, k, v, gqa = _prepare(inp)
        squeeze = inp["q"].dim() == 3
        return lambda: (lambda o: o.squeeze(2) if squeeze else o)(_call(q, k, v, gqa))

    return BenchImpl(f"sdpa-{name}", True, build, unavailable, scope=lambda: sdpa.pinned(name))


def torch_paged_peer() -> BenchImpl:
    """Plain PyTorch through the block table: gather the blocks, then SDPA (default backend)."""

    def unavailable(inp) -> str | None:
        kv_bytes = 2 * inp["k_cache"].numel() * inp["k_cache"].element_size()
        if kv_bytes > TORCH_PAGED_MAX_BYTES:
            return f"gathers a copy of the cache per call: run only up to {TORCH_PAGED_MAX_BYTES >> 30} GiB of K/V"
        return None

    def build(inp):
        q, kc, vc, bt = inp["q"].unsqueeze(2), inp["k_cache"], inp["v_cache"], inp["block_tables"].long()
        n = int(inp["seq_lens"].max())
        gqa = q.shape[1] != kc.shape[2]

        def call():
            k = kc[bt].flatten(1, 2)[:, :n].transpose(1, 2)
            v = vc[bt].flatten(1, 2)[:, :n].transpose(1, 2)
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa).squeeze(2)

        return call

    return BenchImpl("torch-paged", True, build, unavailable)


def paged_case(B: int, N: int, Hkv: int, dtype: torch.dtype, Hq: int = HQ, D: int = HEAD_DIM,
               block_size: int = BLOCK_SIZE, op: str = "paged_attention", window: int = 0, Nq: int = 1,
               capacity: int = 0) -> BenchCase:
    """`window` > 0: a sliding window of that many keys (ours: window_left = window - 1;
    the SDPA peers on the last `window` keys; bytes: those keys). `Nq` > 1: that many new
    tokens per sequence (speculative decoding; the SDPA peers with a bottom-right causal mask).
    `capacity` > N (paged): block tables that many keys long, N keys in each sequence (the
    SDPA peers on the N keys)."""
    w = decode_attention_work(B, Hq, Hkv, min(N, window) if window else N, D,
                              torch.empty((), dtype=dtype).element_size(), seq_len_q=Nq)

    def make_inputs():
        return make_paged_inputs(B, Hq, Hkv, N, D, block_size, dtype, Nq, capacity)

    ours = ours_paged(window) if op == "paged_attention" else ours_contiguous()
    impls = [sdpa_peer(p, window) for p in SDPA_BACKENDS] + [ours]
    if op == "paged_attention" and not window and Nq == 1:
        impls.append(torch_paged_peer())
    return BenchCase(
        op=op, dtype=dtype,
        shape={"B": B, "Hq": Hq, "Hkv": Hkv, "N": N, "D": D, "block_size": block_size,
               **({"window": window} if window else {}), **({"Nq": Nq} if Nq > 1 else {}),
               **({"capacity": capacity} if capacity > N else {})},
        flops=w.flops, bytes=w.bytes, compute="fp16_tc" if dtype == torch.float16 else "bf16_tc",
        make_inputs=make_inputs, impls=impls, reference=None,
        rel_tol={torch.float16: 1e-2, torch.bfloat16: 3e-2}[dtype], cold_l2=True, cuda_graph=True,
        label=f"B={B} N={N} {'MHA' if Hkv == Hq else f'GQA {Hq}/{Hkv}'}" + ("" if D == HEAD_DIM else f" D={D}")
        + (f" window={window}" if window else "") + (f" Nq={Nq}" if Nq > 1 else "")
        + (f" in a {capacity}-key table" if capacity > N else ""),
        x_key="N")


@register("paged_attention")
def paged_attention_cases(dtype: torch.dtype, preset: str, quick: bool) -> list[BenchCase]:
    if dtype not in (torch.float16, torch.bfloat16) or preset not in ("all", "llama-7b", "llama-8b"):
        return []
    kv_heads = KV_HEADS if preset == "all" else ((32,) if preset == "llama-7b" else (8,))
    if quick:
        shapes = [(16, 4096, 32), (64, 4096, 32), (16, 1024, 8), (1, 16384, 8)]
        return [paged_case(b, n, h, dtype) for b, n, h in shapes if h in kv_heads]
    cases = [paged_case(b, n, h, dtype) for h in kv_heads for b in BATCHES for n in CONTEXTS]
    if preset == "all":  # the other head dims on a medium (GQA) and a large (MHA) grid
        cases += [paged_case(64, OTHER_HEAD_DIMS_CONTEXT, h, dtype, D=d) for d in OTHER_HEAD_DIMS for h in KV_HEADS]
        cases += [paged_case(1, 16384, 8, dtype, D=d) for d in PADDED_HEAD_DIMS]
        cases += [paged_case(b, n, 8, dtype, D=d) for d in SMALL_GRID_HEAD_DIMS for b, n in SMALL_GRIDS]
        cases += [paged_case(b, n, 8, dtype, D=d, Nq=nq) for d in SMALL_GRID_HEAD_DIMS
                  for b, n, nq in SMALL_SPEC_GRIDS + SMALL_GRID_WIDE_GRIDS]
        cases += [paged_case(b, n, 8, dtype, D=d) for d, b, n in BAND_HEAD_DIM_GRIDS]
        cases += [paged_case(b, 16384, 8, dtype, window=SLIDING_WINDOW) for b in (1, 16)]
        cases += [paged_case(b, n, 8, dtype, Nq=nq) for nq, grids in SPEC_ROWS for b, n in grids]
        cases += [paged_case(b, n, 1, dtype) for b, n in MQA_GRIDS]
        cases += [paged_case(b, n, h, dtype) for b, n, h in MID_GRIDS]
        cases += [paged_case(b, n, 8, dtype) for b, n in D128_THREE_SPLIT_GRIDS]
        cases += [paged_case(b, n, h, dtype, capacity=c) for b, n, h in SERVING_TABLE_GRIDS
                  for c in (n, SERVING_TABLE_FACTOR * n)]
    return cases


@register("decode_attention")
def decode_attention_cases(dtype: torch.dtype, preset: str, quick: bool) -> list[BenchCase]:
    if dtype not in (torch.float16, torch.bfloat16) or preset not in ("all", "llama-7b", "llama-8b"):
        return []
    shapes = [(64, 4096, 32), (1, 16384, 8)] if quick else [(64, 4096, 32), (16, 4096, 8), (1, 16384, 8),
                                                             (1, 16384, 32)]
    cases = [paged_case(b, n, h, dtype, op="decode_attention") for b, n, h in shapes]
    if preset == "all" and not quick:
        cases += [paged_case(b, n, 8, dtype, op="decode_attention", Nq=nq) for nq, grids in SPEC_ROWS
                  for b, n in grids]
        cases += [paged_case(b, n, 1, dtype, op="decode_attention") for b, n in MQA_CONTIGUOUS_GRIDS]
        cases += [paged_case(b, n, 8, dtype, op="decode_attention", D=d) for d in SMALL_GRID_HEAD_DIMS
                  for b, n in SMALL_GRIDS]
        cases += [paged_case(b, n, 8, dtype, op="decode_attention", D=d, Nq=nq) for d in SMALL_GRID_HEAD_DIMS
                  for b, n, nq in SMALL_GRID_WIDE_GRIDS]
        cases += [paged_case(b, n, 8, dtype, op="decode_attention", D=d) for d, b, n in BAND_CONTIGUOUS_GRIDS]
        cases += [paged_case(b, n, 8, dtype, op="decode_attention") for b, n in D128_THREE_SPLIT_GRIDS]
        cases += [paged_case(b, n, h, dtype, op="decode_attention") for b, n, h in D128_CONTIGUOUS_SMALL_GRIDS]
    return cases


# FP8 (e4m3) caches: shapes of the table (GQA 32/8 and MHA, D = 128, block 16), and
# the scale of both caches: a power of two, so the dequantized 16-bit copy the peers read
# holds exactly the values ours reads (randn / 2^-6 stays below 448).
FP8_SHAPES = ((1, 16384, 8), *((b, n, 8) for b in (16, 64) for n in CONTEXTS), (16, 4096, 32), (64, 4096, 32))
FP8_SHAPES_QUICK = ((16, 1024, 8), (1, 16384, 8), (64, 4096, 32))
# Other head dims (preset "all"): B=64 at OTHER_HEAD_DIMS_CONTEXT, MHA and GQA 32/8; at
# D=64 also two small grids (the split heuristic's two-blocks-per-SM rule for 64-byte rows).
FP8_OTHER_HEAD_DIMS = (64, 256)
FP8_D64_SMALL_GRIDS = ((1, 16384, 8), (16, 2048, 8))
FP8_SCALE = 2.0 ** -6


def fp8_case(B: int, N: int, Hkv: int, dtype: torch.dtype, Hq: int = HQ, D: int = HEAD_DIM,
             block_size: int = BLOCK_SIZE) -> BenchCase:
    """`paged_attention` over an FP8 (e4m3) paged cache against SDPA's backends on the same
    values as a contiguous 16-bit cache (what runs without FP8 support) and against ours on
    that 16-bit cache paged (`cuda_llm_ops-16bit-kv`). Bytes: the FP8 cache's (K and V one
    byte per element, q and out two): the 16-bit impls move about twice that, so their
    TB/s column reads half their real rate; the times compare directly."""
    w = decode_attention_work(B, Hq, Hkv, N, D, torch.empty((), dtype=dtype).element_size(), kv_elem_bytes=1)

    def make_inputs():
        from ..reference import quantize_fp8_e4m3

        inp = make_paged_inputs(B, Hq, Hkv, N, D, block_size, dtype)
        for name in ("k_cache", "v_cache"):
            c8 = quantize_fp8_e4m3(inp[name], FP8_SCALE)
            inp[name + "_fp8"] = c8
            inp[name] = c8.to(dtype).mul_(FP8_SCALE)  # exact: e4m3 times a power of two
        return inp

    def ours_fp8() -> BenchImpl:
        def build(inp):
            from ..decode import paged_attention, paged_attention_workspace

            q, kc, vc, bt, sl = inp["q"], inp["k_cache_fp8"], inp["v_cache_fp8"], inp["block_tables"], inp["seq_lens"]
            out = torch.empty_like(q)
            ws = paged_attention_workspace(q, kc, bt)
            return lambda: paged_attention(q, kc, vc, bt, sl, out=out, workspace=ws, check_indices=False,
                                           k_scale=FP8_SCALE, v_scale=FP8_SCALE)

        return BenchImpl("cuda_llm_ops", False, build, ours_paged().unavailable)

    ours16 = ours_paged()
    ours16 = BenchImpl("cuda_llm_ops-16bit-kv", False, ours16.build, ours16.unavailable)
    return BenchCase(
        op="paged_attention_fp8", dtype=dtype,
        shape={"B": B, "Hq": Hq, "Hkv": Hkv, "N": N, "D": D, "block_size": block_size},
        flops=w.flops, bytes=w.bytes, compute="fp16_tc" if dtype == torch.float16 else "bf16_tc",
        make_inputs=make_inputs, impls=[sdpa_peer("flash"), sdpa_peer("cudnn"), ours_fp8(), ours16],
        reference=None, rel_tol={torch.float16: 1e-2, torch.bfloat16: 3e-2}[dtype], cold_l2=True, cuda_graph=True,
        label=f"B={B} N={N} {'MHA' if Hkv == Hq else f'GQA {Hq}/{Hkv}'}" + ("" if D == HEAD_DIM else f" D={D}")
        + " fp8 KV", x_key="N")


@register("paged_attention_fp8")
def paged_attention_fp8_cases(dtype: torch.dtype, preset: str, quick: bool) -> list[BenchCase]:
    if dtype not in (torch.float16, torch.bfloat16) or preset not in ("all", "llama-7b", "llama-8b"):
        return []
    kv_heads = KV_HEADS if preset == "all" else ((32,) if preset == "llama-7b" else (8,))
    cases = [fp8_case(b, n, h, dtype) for b, n, h in (FP8_SHAPES_QUICK if quick else FP8_SHAPES) if h in kv_heads]
    if preset == "all" and not quick:
        cases += [fp8_case(64, OTHER_HEAD_DIMS_CONTEXT, h, dtype, D=d) for d in FP8_OTHER_HEAD_DIMS for h in KV_HEADS]
        cases += [fp8_case(b, n, h, dtype, D=64) for b, n, h in FP8_D64_SMALL_GRIDS]
    return cases


# paged_kv_append: T new tokens into a cache of this many slots per layer (K and V 16 MB each
# at Hkv=8, D=128, fp16: a cold-L2 rotation of input copies stays within a few GB).
APPEND_CACHE_SLOTS = 8192
APPEND_TOKENS = (1, 16, 64, 256, 4096)


def append_case(T: int, dtype: torch.dtype, Hkv: int = 8, D: int = HEAD_DIM, block_size: int = BLOCK_SIZE) -> BenchCase:
    """`paged_kv_append` (vLLM's reshape_and_cache) of T tokens at distinct random slots
    (decode: one token per sequence) against PyTorch's `index_copy_` into the flat cache."""
    w = paged_kv_append_work(T, Hkv, D, torch.empty((), dtype=dtype).element_size())
    num_blocks = APPEND_CACHE_SLOTS // block_size

    def make_inputs():
        k = torch.randn(T, Hkv, D, device="cuda", dtype=dtype)
        v = torch.randn(T, Hkv, D, device="cuda", dtype=dtype)
        # K and V caches as the two halves of one buffer, which the impls return: the check
        # then covers both (a returned tuple would be checked on its first item only).
        kv = torch.randn(2, num_blocks, block_size, Hkv, D, device="cuda", dtype=dtype)
        slots = torch.randperm(num_blocks * block_size, device="cuda")[:T]
        return {"k": k, "v": v, "kv_cache": kv, "k_cache": kv[0], "v_cache": kv[1], "slot_mapping": slots}

    def ours() -> BenchImpl:
        def unavailable(inp) -> str | None:
            return None if _ops.has_op("paged_kv_append") else f"op paged_kv_append not in this build ({_ops.build_info()})"

        def build(inp):
            from ..decode import paged_kv_append

            k, v, kc, vc, sm = inp["k"], inp["v"], inp["k_cache"], inp["v_cache"], inp["slot_mapping"]

            def call():
                paged_kv_append(k, v, kc, vc, sm, check_slots=False)
                return inp["kv_cache"]

            return call

        return BenchImpl("cuda_llm_ops", False, build, unavailable)

    def torch_index_copy() -> BenchImpl:
        def build(inp):
            k, v, kc, vc, sm = inp["k"], inp["v"], inp["k_cache"], inp["v_cache"], inp["slot_mapping"]
            kf, vf = kc.view(-1, Hkv, D), vc.view(-1, Hkv, D)

            def call():
                kf.index_copy_(0, sm, k)
                vf.index_copy_(0, sm, v)
                return inp["kv_cache"]

            return call

        return BenchImpl("torch-index-copy", True, build)

    return BenchCase(
        op="paged_kv_append", dtype=dtype, shape={"T": T, "Hkv": Hkv, "D": D, "block_size": block_size},
        flops=w.flops, bytes=w.bytes, compute="fp16_tc" if dtype == torch.float16 else "bf16_tc",
        make_inputs=make_inputs, impls=[torch_index_copy(), ours()], reference=None, rel_tol=0.0,
        cold_l2=True, cuda_graph=True, label=f"T={T}", x_key="T")


@register("paged_kv_append")
def paged_kv_append_cases(dtype: torch.dtype, preset: str, quick: bool) -> list[BenchCase]:
    if dtype not in (torch.float16, torch.bfloat16) or preset not in ("all", "llama-8b"):
        return []
    return [append_case(t, dtype) for t in ((64, 4096) if quick else APPEND_TOKENS)]


# MLA decode (preset "all"): DeepSeek-V2-Lite / a V3 shard over 8 GPUs (16 heads:
# memory-bound), over 2 (64 heads) and V3 on one GPU (128 heads: near the H100's ridge),
# block size 64 (FlashMLA's and vLLM's for MLA).
MLA_BATCHES = (1, 16, 64)
MLA_CONTEXTS = (1024, 4096, 16384)
MLA_HEADS = (16, 64, 128)
MLA_BLOCK_SIZE = 64
MLA_SHAPES_QUICK = ((1, 16384, 16), (64, 4096, 128))


def _mla_absorbed(q, rows, scale):
    """The absorbed MLA decode in PyTorch ops: q `[B, Hq, 576]` against rows `[B, N, 576]`
    (one KV head: bmm, each row read once per product), softmax in float32."""
    s = torch.matmul(q, rows.transpose(1, 2)).float() * scale
    return torch.matmul(torch.softmax(s, dim=-1).to(q.dtype), rows[..., :512])


def mla_case(B: int, N: int, Hq: int, dtype: torch.dtype, block_size: int = MLA_BLOCK_SIZE) -> BenchCase:
    """`paged_mla_attention` on a paged latent cache (shuffled blocks, every sequence at N keys)
    against SDPA (q `[B, Hq, 1, 576]`, keys `[B, 1, N, 576]`, values their first 512 columns
    as a view, GQA over one KV head) and `_mla_absorbed` on the same rows contiguous, and
    `_mla_absorbed` after a gather through the block table (`torch-paged`)."""
    from ..mla import MLA_HEAD_DIM_QK, MLA_HEAD_DIM_V

    w = mla_decode_work(B, Hq, N, MLA_HEAD_DIM_QK, MLA_HEAD_DIM_V, torch.empty((), dtype=dtype).element_size())
    scale = MLA_HEAD_DIM_QK ** -0.5

    def make_inputs():
        nblk = -(-N // block_size)
        kv = torch.randn(B * nblk, block_size, MLA_HEAD_DIM_QK, device="cuda", dtype=dtype)
        table = torch.randperm(B * nblk, device="cuda").view(B, nblk).to(torch.int32)
        q = torch.randn(B, Hq, MLA_HEAD_DIM_QK, device="cuda", dtype=dtype)
        return {"q": q, "kv_cache": kv, "block_tables": table,
                "seq_lens": torch.full((B,), N, dtype=torch.int32, device="cuda")}

    def contiguous(inp):
        if "_rows" not in inp:
            inp["_rows"] = inp["kv_cache"][inp["block_tables"].long()].flatten(1, 2)[:, :N].contiguous()
        return inp["_rows"]

    def ours() -> BenchImpl:
        def unavailable(inp) -> str | None:
            if not _ops.has_op("paged_mla_attention"):
                return f"op paged_mla_attention not in this build ({_ops.build_info()})"
            return None

        def build(inp):
            from ..mla import mla_workspace, paged_mla_attention

            q, kv, bt, sl = inp["q"], inp["kv_cache"], inp["block_tables"], inp["seq_lens"]
            out = q.new_empty(B, Hq, MLA_HEAD_DIM_V)
            ws = mla_workspace(B, Hq, bt.shape[1] * block_size)
            return lambda: paged_mla_attention(q, kv, bt, sl, out=out, workspace=ws, check_indices=False)

        return BenchImpl("cuda_llm_ops", False, build, unavailable)

    def sdpa_mla(name: str) -> BenchImpl:
        def _call(inp):
            rows = contiguous(inp)[:, None]  # [B, 1, N, 576]
            return sdpa.call(name, inp["q"][:, :, None], rows, rows[..., :MLA_HEAD_DIM_V], Hq > 1, scale=scale)

        def unavailable(inp) -> str | None:
            if sdpa.backend(name) is None:
                return "torch has no torch.nn.attention.sdpa_kernel or no such backend"
            try:
                _call(inp)
                torch.cuda.synchronize()
                return None
            except RuntimeError as exc:
                return f"sdpa {name} backend cannot run this case: {(str(exc).strip().splitlines() or ['?'])[0][:160]}"

        def build(inp):
            return lambda: _call(inp)[:, :, 0]

        return BenchImpl(f"sdpa-{name}", True, build, unavailable, scope=lambda: sdpa.pinned(name))

    def absorbed() -> BenchImpl:
        def build(inp):
            q, rows = inp["q"], contiguous(inp)
            return lambda: _mla_absorbed(q, rows, scale)

        return BenchImpl("torch-absorbed", True, build)

    def torch_paged() -> BenchImpl:
        def unavailable(inp) -> str | None:
            nbytes = inp["kv_cache"].numel() * inp["kv_cache"].element_size()
            if nbytes > TORCH_PAGED_MAX_BYTES:
                return f"gathers a copy of the cache per call: run only up to {TORCH_PAGED_MAX_BYTES >> 30} GiB"
            return None

        def build(inp):
            q, kv, bt = inp["q"], inp["kv_cache"], inp["block_tables"].long()
            return lambda: _mla_absorbed(q, kv[bt].flatten(1, 2)[:, :N], scale)

        return BenchImpl("torch-paged", True, build, unavailable)

    return BenchCase(
        op="paged_mla_attention", dtype=dtype,
        shape={"B": B, "Hq": Hq, "N": N, "Dqk": MLA_HEAD_DIM_QK, "Dv": MLA_HEAD_DIM_V, "block_size": block_size},
        flops=w.flops, bytes=w.bytes, compute="fp16_tc" if dtype == torch.float16 else "bf16_tc",
        make_inputs=make_inputs,
        impls=[absorbed()] + [sdpa_mla(n) for n in (*SDPA_BACKENDS, "math")] + [ours(), torch_paged()],
        reference=None, rel_tol={torch.float16: 1e-2, torch.bfloat16: 3e-2}[dtype], cold_l2=True, cuda_graph=True,
        label=f"B={B} N={N} Hq={Hq}", x_key="N")


@register("paged_mla_attention")
def paged_mla_attention_cases(dtype: torch.dtype, preset: str, quick: bool) -> list[BenchCase]:
    if dtype not in (torch.float16, torch.bfloat16) or preset != "all":
        return []
    if quick:
        return [mla_case(b, n, h, dtype) for b, n, h in MLA_SHAPES_QUICK]
    return [mla_case(b, n, h, dtype) for h in MLA_HEADS for b in MLA_BATCHES for n in MLA_CONTEXTS]
