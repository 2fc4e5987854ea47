"""Where `fused_decode_block`'s time goes on each path, and which path wins at which batch.

Times (CUDA-graph replays of 10 calls, inputs rotated so every call reads from HBM, median of
30, us) the one-kernel path, the op's unfused path (`cuda_llm_ops.fused._unfused`) and its
pieces: QKV gemm, the glue as PyTorch ops (rotary embedding, slots; then the append) or as one
`paged_kv_append` launch (slots from the table, rotary embedding of q and k), paged attention,
output gemm. Llama-2-7B (MHA) and Llama-3-8B (GQA 32/8) attention blocks.

  python3 scripts/probe_fused_paths.py      # PROBE_BATCHES=1,2,4,8,16 PROBE_CONTEXTS=1024,4096,16384
"""
import os

import torch

import cuda_llm_ops as llm
from cuda_llm_ops import fused as F
from cuda_llm_ops.reference import decode_append_slots, make_fused_decode_problem
from cuda_llm_ops.reference.fused import apply_rotary
from cuda_llm_ops.roofline import fused_decode_block_work
from cuda_llm_ops.timing import benchmark, rotation_count

BATCHES = [int(v) for v in os.environ.get("PROBE_BATCHES", "1,2,4,8,16").split(",")]
CONTEXTS = [int(v) for v in os.environ.get("PROBE_CONTEXTS", "1024,4096,16384").split(",")]
PIECES = os.environ.get("PROBE_PIECES", "1") == "1"
MODELS = {"llama2-7b": (4096, 32, 32, 128), "llama3-8b": (4096, 32, 8, 128)}
KEYS = ("x", "w_qkv", "w_o", "k_cache", "v_cache", "block_tables", "seq_lens")


def timed(make, sets):
    fns = [make(p) for p in sets]
    t = benchmark(None, warmup=3, iterations=30, cuda_graph=True, fn_sets=fns, cold_l2=True)
    return t.median_ms * 1e3


def pieces(p, hq, hkv, d):
    x, w_qkv, w_o, kc, vc, bt, sl = (p[k] for k in KEYS)
    b = x.shape[0]
    qkv = llm.gemm(x, w_qkv, trans_b=True)
    q = qkv[:, :hq * d].view(b, hq, d)
    k = qkv[:, hq * d:(hq + hkv) * d].view(b, hkv, d)
    v = qkv[:, (hq + hkv) * d:].view(b, hkv, d)
    o = torch.empty(b, hq, d, dtype=x.dtype, device=x.device)
    ws = llm.paged_attention_workspace(o, kc, bt)

    def glue_torch():
        c, s_ = p["cos"].float(), p["sin"].float()
        qr, kr = apply_rotary(q.float(), c, s_).to(q.dtype), apply_rotary(k.float(), c, s_).to(k.dtype)
        slots = decode_append_slots(bt, sl, kc.shape[1], kc.shape[0])
        llm.paged_kv_append(kr, v.contiguous(), kc, vc, slots, check_slots=False)
        return qr

    def glue_append():
        llm.paged_kv_append(k, v, kc, vc, None, check_slots=False, block_tables=bt, seq_lens=sl, cos=p["cos"],
                            sin=p["sin"], q=q)

    return {
        "qkv gemm": lambda: llm.gemm(x, w_qkv, trans_b=True),
        "glue (torch)": glue_torch,
        "glue (append)": glue_append,
        "attention": lambda: llm.paged_attention(q, kc, vc, bt, sl, out=o, workspace=ws, check_indices=False),
        "o gemm": lambda: llm.gemm(o.view(b, hq * d), w_o, trans_b=True),
    }


for model, (hidden, hq, hkv, d) in MODELS.items():
    for dtype in (torch.float16,):
        for n in CONTEXTS:
            for b in BATCHES:
                w = fused_decode_block_work(b, hidden, hq, hkv, d, n)
                nsets = rotation_count(w.bytes)
                sets = [make_fused_decode_problem(b, hidden, hq, hkv, d, n, 16, dtype, "cuda") for _ in range(nsets)]
                fused_ok, why = F.fused_decode_block_path(sets[0]["x"], sets[0]["w_o"], sets[0]["k_cache"],
                                                          path="fused")
                row = {}
                if fused_ok:
                    def make_fused(p):
                        out, ws = torch.empty_like(p["x"]), F.fused_decode_block_workspace(p["x"], p["w_o"])
                        return lambda: F.fused_decode_block(*(p[k] for k in KEYS), cos=p["cos"], sin=p["sin"],
                                                            out=out, workspace=ws, check_indices=False,
                                                            path="fused")
                    row["fused"] = timed(make_fused, sets)

                def make_unfused(p):
                    out = torch.empty_like(p["x"])
                    return lambda: F._unfused(*(p[k] for k in KEYS), p["cos"], p["sin"], 1.0 / d ** 0.5, out)
                row["unfused op"] = timed(make_unfused, sets)
                if PIECES and b in (1, 16):
                    for name in pieces(sets[0], hq, hkv, d):
                        row[name] = timed(lambda p, name=name: pieces(p, hq, hkv, d)[name], sets)
                floor = w.bytes / 3.0e12 * 1e6
                print(f"{model} B={b:<3} N={n:<6} floor {floor:7.1f} | "
                      + " | ".join(f"{k} {v:7.1f}" for k, v in row.items()), flush=True)
                del sets
                torch.cuda.empty_cache()
