"""Fused decode block configurations side by side (dev knob CLO_FUSED_CLUSTER: cluster size):
kernel time with a cold L2 (flush before each call, no graph) at Llama-2-7B shapes, next to the
memory floor. Peers: `llm-speed bench fused_decode_block` (graph replays, same process).

  python3 scripts/probe_fused.py            # prints a table; PROBE_SHAPES="1x1024,16x4096" to pick
"""
import os

os.environ.setdefault("CLO_FUSED_CLUSTER", "")  # set before the first call, so the launcher reads it per call
import torch  # noqa: E402

import cuda_llm_ops as llm  # noqa: E402
from cuda_llm_ops.reference import make_fused_decode_problem  # noqa: E402
from cuda_llm_ops.roofline import fused_decode_block_work  # noqa: E402
from cuda_llm_ops.timing import benchmark  # noqa: E402

shapes = [tuple(int(v) for v in s.split("x")) for s in os.environ.get(
    "PROBE_SHAPES", "1x1024,1x4096,1x16384,16x1024,16x4096").split(",")]
configs = os.environ.get("PROBE_CONFIGS", "4,2").split(",")  # cluster sizes
print(f"{'B':>3} {'N':>6} | " + " | ".join(f"{'C' + c:>8}" for c in configs) + " | floor us")
for b, n in shapes:
    p = make_fused_decode_problem(b, 4096, 32, 32, 128, n, 16, torch.float16, "cuda")
    args = [p[k] for k in ("x", "w_qkv", "w_o", "k_cache", "v_cache", "block_tables", "seq_lens")]
    out = torch.empty_like(p["x"])
    ws = llm.fused_decode_block_workspace(p["x"], p["w_o"])
    row = []
    for cfg in configs:
        os.environ["CLO_FUSED_CLUSTER"] = cfg
        t = benchmark(lambda: llm.fused_decode_block(*args, cos=p["cos"], sin=p["sin"], out=out, workspace=ws,
                                                      check_indices=False, path="fused"),
                      cold_l2=True, iterations=30, warmup=3)
        row.append(t.median_ms * 1e3)
    floor = fused_decode_block_work(b, 4096, 32, 32, 128, n).bytes / 3.0e12 * 1e6
    print(f"{b:>3} {n:>6} | " + " | ".join(f"{v:8.1f}" for v in row) + f" | {floor:7.1f}")
    del p, args
    torch.cuda.empty_cache()
