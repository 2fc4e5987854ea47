"""Benchmark cases of the fused decode attention block: `fused_decode_block` (QKV projection,
rotary embedding, KV-cache append, paged attention and output projection of one decode step)
against the same step as separate calls.

Shapes: the attention blocks of Llama-2-7B (hidden 4096, Hq = Hkv = 32, D = 128: the one-kernel
path's shape) and Llama-3-8B (GQA 32/8: the op's unfused path), fp16/bf16, B in {1, 4, 16} x
context in {1024, 4096, 16384} (quick: Llama-2-7B, B=1 at 1024 and 4096), block size 16, every
sequence at the full context (the new token its last key), physical blocks shuffled.
Memory-bound (~1-6 FLOP/byte): the weights (134 MB / 84 MB in 16 bits) dominate the bytes at
B=1 and short contexts, the K/V at long ones; bytes = both weights + the cached K/V read once +
the new k/v written + x read + out written (`fused_decode_block_work`). Cold L2 and CUDA-graph
replays, as the decode cases (cases_decode.py): decode steps run inside graphs in serving engines.

Implementations:
- `cuda_llm_ops`: the op as a serving loop calls it (`out=`, a preallocated workspace for
  either path, `check_indices=False`: no host synchronisation per call), on the path
  `fused_decode_block_path` picks: the one-kernel path where it measured faster (batch 1, a
  table of at most 1024 keys), else the unfused ops;
- `cuda_llm_ops-one-kernel`: the same call forced onto the one-kernel path (`path="fused"`),
  wherever it supports the shapes (MHA, B <= 16).
- `torch-cublas+sdpa-<backend>`: what users run today: F.linear (cuBLAS) for qkv_proj, the
  rotary embedding in PyTorch ops, the new k/v written into the paged cache with `index_copy_`
  at slots precomputed outside the step (a serving engine's slot_mapping), SDPA pinned to one
  backend (one peer per backend; the table picks the best) on a contiguous `[B, H, N, D]` copy of
  K/V made outside the timing whose last position receives the new k/v each call, F.linear for
  o_proj.
- `cuda_llm_ops-unfused`: our own ops in sequence as a user composes them: `gemm`,
  `paged_kv_append` (rotary embedding of q and k and the slots from the block table in the same
  launch), `paged_attention`, `gemm`; a peer: what the one-kernel path saves.

Every implementation updates the cache in place; a repeated call writes the same k/v at the
same slot, so checks, warm-ups and replays all run the same step. The reference is
`fused_decode_block_reference` in float32 (rounding to the inputs' dtype where an unfused
pipeline rounds); the tolerance is the decode cases' (the peers' relative errors against it,
measured on an H200: 5e-4 in fp16, 4e-3 in bf16).
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from .. import _ops
from ..reference.decode import decode_append_slots
from ..reference.fused import apply_rotary, fused_decode_block_reference, make_fused_decode_problem
from ..roofline import fused_decode_block_work
from . import sdpa
from .cases_decode import SDPA_BACKENDS, contiguous_kv
from .registry import PRESETS, BenchCase, BenchImpl, register

PRESETS_RUN = ("llama-7b", "llama-8b")
BATCHES = (1, 4, 16)
CONTEXTS = (1024, 4096, 16384)
QUICK_SHAPES = ((1, 1024), (1, 4096))
BLOCK_SIZE = 16


def _args(inp: dict[str, Any]) -> tuple[torch.Tensor, ...]:
    """The op's positional arguments: x, w_qkv, w_o, k_cache, v_cache, block_tables, seq_lens."""
    return tuple(inp[k] for k in ("x", "w_qkv", "w_o", "k_cache", "v_cache", "block_tables", "seq_lens"))


def _heads(inp: dict[str, Any]) -> tuple[int, int, int]:
    """(Hq, Hkv, D) of an input set."""
    hkv, d = inp["k_cache"].shape[2:]
    return inp["w_o"].shape[1] // d, hkv, d


def _slots(inp: dict[str, Any]) -> torch.Tensor:
    """int64 `[B]`: the flat cache slot (block * block_size + offset) of each sequence's new token."""
    kc = inp["k_cache"]
    return decode_append_slots(inp["block_tables"], inp["seq_lens"], kc.shape[1], kc.shape[0])


def _split_rope(qkv: torch.Tensor, inp: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q `[B, Hq, D]`, k and v `[B, Hkv, D]` from qkv_proj's output, q and k rotated in
    PyTorch ops of the inputs' dtype (v stays a view of qkv)."""
    hq, hkv, d = _heads(inp)
    b = qkv.shape[0]
    q, k, v = qkv.split([hq * d, hkv * d, hkv * d], dim=-1)
    q, k, v = q.view(b, hq, d), k.view(b, hkv, d), v.view(b, hkv, d)
    return apply_rotary(q, inp["cos"], inp["sin"]), apply_rotary(k, inp["cos"], inp["sin"]), v


def ours(path: str = "auto") -> BenchImpl:
    """The op as a serving loop calls it, on `path` ("auto": the path the op picks; "fused":
    the one-kernel path, unavailable where it does not support the shapes)."""

    def unavailable(inp) -> str | None:
        if not _ops.has_op("fused_decode_block"):
            return f"op fused_decode_block not in this build ({_ops.build_info()})"
        if path == "fused":
            from ..fused import fused_decode_block_path

            fused, why = fused_decode_block_path(inp["x"], inp["w_o"], inp["k_cache"], inp["block_tables"], path)
            return None if fused else f"the one-kernel path does not run this case: {why}"
        return None

    def build(inp):
        from ..fused import fused_decode_block, fused_decode_block_workspace

        x, w_qkv, w_o, kc, vc, bt, sl = _args(inp)
        out = torch.empty_like(x)
        ws = fused_decode_block_workspace(x, w_o, kc, bt)  # serves either path
        return lambda: fused_decode_block(x, w_qkv, w_o, kc, vc, bt, sl, cos=inp["cos"], sin=inp["sin"], out=out,
                                          workspace=ws, check_indices=False, path=path)

    return BenchImpl("cuda_llm_ops" if path == "auto" else "cuda_llm_ops-one-kernel", False, build, unavailable)


def torch_peer(name: str) -> BenchImpl:
    """cuBLAS projections, PyTorch rotary and cache write, SDPA pinned to backend `name` on a
    contiguous K/V copy (GQA natively with enable_gqa)."""

    def build(inp):
        x, w_qkv, w_o, kc, vc, _, sl = _args(inp)
        hq, hkv, d = _heads(inp)
        n = int(sl.max())  # every sequence holds n keys: the new one goes to position n - 1
        k_contig, v_contig = contiguous_kv(inp)  # [B, Hkv, n, D]
        k_flat, v_flat = kc.view(-1, hkv, d), vc.view(-1, hkv, d)
        slots = _slots(inp)

        def call():
            q, k, v = _split_rope(F.linear(x, w_qkv), inp)
            k_flat.index_copy_(0, slots, k)
            v_flat.index_copy_(0, slots, v)
            k_contig[:, :, n - 1] = k
            v_contig[:, :, n - 1] = v
            o = sdpa.call(name, q.unsqueeze(2), k_contig, v_contig, hq != hkv)  # [B, Hq, 1, D]
            return F.linear(o.reshape(x.shape[0], hq * d), w_o)

        return call

    def unavailable(inp) -> str | None:
        if sdpa.backend(name) is None:
            return "torch has no torch.nn.attention.sdpa_kernel or no such backend"
        try:
            build(inp)()
            torch.cuda.synchronize()
        except RuntimeError as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            return f"sdpa {name} backend cannot run this case: {first[:160]}"
        return None

    return BenchImpl(f"torch-cublas+sdpa-{name}", True, build, unavailable, scope=lambda: sdpa.pinned(name))


def unfused_peer() -> BenchImpl:
    def unavailable(inp) -> str | None:
        missing = [op for op in ("gemm", "paged_kv_append", "paged_attention") if not _ops.has_op(op)]
        return f"ops {', '.join(missing)} not in this build ({_ops.build_info()})" if missing else None

    def build(inp):
        from ..decode import paged_attention, paged_attention_workspace, paged_kv_append
        from ..gemm import gemm

        x, w_qkv, w_o, kc, vc, bt, sl = _args(inp)
        hq, hkv, d = _heads(inp)
        b = x.shape[0]
        o = torch.empty(b, hq, d, dtype=x.dtype, device=x.device)
        ws = paged_attention_workspace(o, kc, bt)

        def call():
            qkv = gemm(x, w_qkv, trans_b=True)
            q, k, v = qkv.view(b, hq + 2 * hkv, d).split([hq, hkv, hkv], dim=1)
            paged_kv_append(k, v, kc, vc, None, check_slots=False, block_tables=bt, seq_lens=sl, cos=inp["cos"],
                            sin=inp["sin"], q=q)
            paged_attention(q, kc, vc, bt, sl, out=o, workspace=ws, check_indices=False)
            return gemm(o.view(b, hq * d), w_o, trans_b=True)

        return call

    return BenchImpl("cuda_llm_ops-unfused", True, build, unavailable)


def fused_case(B: int, N: int, dtype: torch.dtype, preset: str = PRESETS_RUN[0]) -> BenchCase:
    """One decode step of `preset`'s attention block for B sequences of N keys each (the new token included)."""
    m = PRESETS[preset]
    hidden, hq, hkv, d = m["hidden"], m["heads"], m["kv_heads"], m["head_dim"]
    w = fused_decode_block_work(B, hidden, hq, hkv, d, N, torch.empty((), dtype=dtype).element_size())

    def make_inputs():
        return make_fused_decode_problem(B, hidden, hq, hkv, d, N, BLOCK_SIZE, dtype, "cuda")

    def reference(inp):
        return fused_decode_block_reference(*_args(inp), cos=inp["cos"], sin=inp["sin"], dtype=torch.float32)

    return BenchCase(
        op="fused_decode_block", dtype=dtype,
        shape={"B": B, "hidden": hidden, "Hq": hq, "Hkv": hkv, "N": N, "D": d, "block_size": BLOCK_SIZE},
        flops=w.flops, bytes=w.bytes, compute="fp16_tc" if dtype == torch.float16 else "bf16_tc",
        make_inputs=make_inputs, impls=[torch_peer(b) for b in SDPA_BACKENDS] + [unfused_peer(), ours(), ours("fused")],
        reference=reference, rel_tol={torch.float16: 1e-2, torch.bfloat16: 3e-2}[dtype], cold_l2=True,
        cuda_graph=True, label=f"B={B} Hkv={hkv} N={N}", x_key="N")


@register("fused_decode_block")
def fused_decode_block_cases(dtype: torch.dtype, preset: str, quick: bool) -> list[BenchCase]:
    if dtype not in (torch.float16, torch.bfloat16):
        return []
    if quick:
        return [fused_case(b, n, dtype) for b, n in QUICK_SHAPES] if preset in ("all", PRESETS_RUN[0]) else []
    return [fused_case(b, n, dtype, p) for p in PRESETS_RUN if preset in ("all", p) for b in BATCHES
            for n in CONTEXTS]
