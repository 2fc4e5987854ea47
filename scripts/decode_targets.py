#!/usr/bin/env python3
"""Issue #5's decode targets, read from `llm-speed bench --json` files: each case, and whether it is met.

    python3 scripts/decode_targets.py benchmarks/results/h100.json
    python3 scripts/decode_targets.py $OUT/bench.json $OUT/recheck.json   # later files replace earlier records

The issue's cases: fp16, Hq=32, D=128, one new token, no window (`llm-speed bench` times them
with cold L2 and CUDA graphs):
- `paged_attention` (block_size 16), B >= 16 at >= 1024 keys, Hkv 32 and 8: >= 85% of the copy
  bandwidth; B = 1 at 16384 keys, Hkv 8 (split-KV): >= 75% of it;
- against SDPA's best backend on the same contiguous data (`decode_attention`): >= 1.0x at B=64,
  4096 keys, MHA; >= 1.5x at B=1, 16384 keys, GQA 32:8.
"% of copy" is the records' % of roofline: these cases are memory-bound, and the bench's memory
roof is the calibrated copy bandwidth, else the roofline table's copy figure for the GPU (H100
SXM, H200 SXM), else the datasheet HBM rate. The issue's named cases missing from the files are
listed as "not measured"; a case whose ours or SDPA did not run reads "n/a", not a miss. The
1.5x is under the H100's copy floor (csrc/decode/NOTES.md, "Where it stands").
"""
from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from cuda_llm_ops.bench.report import best_peer_ms, group_cases, merge_records, one_gpu, read_json, timed  # noqa: E402

PLAIN_KEYS = {"B", "Hq", "Hkv", "N", "D", "block_size"}  # a window, Nq > 1 or a capacity make another case
# (name, op, metric, threshold), in the issue's order
TARGETS = (("B>=16, N>=1K: % of copy", "paged_attention", "pct", 85.0),
           ("B=1, N=16K, GQA: % of copy", "paged_attention", "pct", 75.0),
           ("B=64, N=4K, MHA: x SDPA", "decode_attention", "x_sdpa", 1.0),
           ("B=1, N=16K, GQA: x SDPA", "decode_attention", "x_sdpa", 1.5))
# each target's cases the issue names (B, N, Hkv): a file without them has not measured the target
NAMED = ({(16, 1024, 32), (16, 1024, 8)}, {(1, 16384, 8)}, {(64, 4096, 32)}, {(1, 16384, 8)})


def _issue_case(rec: dict) -> bool:
    s = rec["shape"]
    return rec["dtype"] == "float16" and set(s) == PLAIN_KEYS and (s["Hq"], s["D"], s["block_size"]) == (32, 128, 16)


def _counts_for(target: int, b: int, n: int, hkv: int) -> bool:
    if target == 0:
        return b >= 16 and n >= 1024 and hkv in (32, 8)
    return (b, n, hkv) in NAMED[target]


def target_rows(records: list[dict]) -> list[dict]:
    """One row per (issue case, target): ours, the figure, the threshold and whether it is met
    (None: not measured, or ours / SDPA did not run), in the issue's order; then a row per
    named case no record holds."""
    rows = []
    for recs in group_cases(r for r in records if _issue_case(r)).values():
        ours = next((r for r in recs if not r["is_peer"] and r["impl"] == "cuda_llm_ops"), None)
        if ours is None:
            continue
        s = ours["shape"]
        sdpa_ms = best_peer_ms([r for r in recs if r["impl"].startswith("sdpa-")])
        ours_ms = ours["median_ms"] if timed(ours) else None
        for t, (name, op, metric, threshold) in enumerate(TARGETS):
            if op != ours["op"] or not _counts_for(t, s["B"], s["N"], s["Hkv"]):
                continue
            value = None
            if ours_ms is not None:
                value = ours.get("pct_of_roofline") if metric == "pct" else (sdpa_ms / ours_ms if sdpa_ms else None)
            rows.append({"order": t, "target": name, "op": op, "shape": s, "git_sha": ours["git_sha"],
                         "gpu": ours["gpu"], "status": ours.get("status"),
                         "us": ours_ms * 1e3 if ours_ms else None, "sdpa_us": sdpa_ms * 1e3 if sdpa_ms else None,
                         "metric": metric, "value": value, "threshold": threshold,
                         "met": None if value is None else value >= threshold})
    for t, (name, op, metric, threshold) in enumerate(TARGETS):
        seen = {(r["shape"]["B"], r["shape"]["N"], r["shape"]["Hkv"]) for r in rows if r["order"] == t}
        for b, n, hkv in sorted(NAMED[t] - seen):
            rows.append({"order": t, "target": name, "op": op, "shape": {"B": b, "N": n, "Hkv": hkv},
                         "git_sha": "-", "gpu": None, "status": "not measured", "us": None, "sdpa_us": None,
                         "metric": metric, "value": None, "threshold": threshold, "met": None})
    rows.sort(key=lambda r: (r["order"], r["shape"]["Hkv"], r["shape"]["B"], r["shape"]["N"]))
    return rows


def _figure(row: dict) -> str:
    if row["value"] is None:
        return "-"
    return f"{row['value']:.1f}%" if row["metric"] == "pct" else f"{row['value']:.3f}x"


def _verdict(row: dict) -> str:
    if row["status"] == "not measured":
        return "not measured"
    if row["met"] is None:
        return f"n/a ({row['status']})"
    return ("yes" if row["met"] else "NO") + (" (unchecked)" if row["status"] == "unchecked" else "")


def format_rows(rows: list[dict]) -> str:
    out = ["| target | op | B N Hkv | ours us | SDPA best us | figure | need | met | commit |", "|" + "---|" * 9]
    for r in rows:
        s = r["shape"]
        need = f">= {r['threshold']:g}%" if r["metric"] == "pct" else f">= {r['threshold']:g}x"
        us = "-" if r["us"] is None else f"{r['us']:.1f}"
        sd = "-" if r["sdpa_us"] is None else f"{r['sdpa_us']:.1f}"
        out.append(f"| {r['target']} | {r['op']} | {s['B']} {s['N']} {s['Hkv']} | {us} | {sd} | {_figure(r)} | "
                   f"{need} | {_verdict(r)} | {r['git_sha'][:7]} |")
    return "\n".join(out)


def summary_line(rows: list[dict]) -> str:
    judged = [r for r in rows if r["met"] is not None]
    missed = [f"{r['op']} B={r['shape']['B']} N={r['shape']['N']} Hkv={r['shape']['Hkv']} {_figure(r)}"
              for r in judged if not r["met"]]
    line = f"{len(judged) - len(missed)} of {len(judged)} met"
    if missed:
        line += f"; not met: {', '.join(missed)}"
    if len(judged) < len(rows):
        line += f"; {len(rows) - len(judged)} not measured or n/a"
    return line


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+", help="`llm-speed bench --json` files; later ones replace earlier records")
    ap.add_argument("--gpu", help="the GPU whose records count, where the files hold several (a part of its name)")
    args = ap.parse_args(argv)
    records: list[dict] = []
    for path in args.files:
        if not os.path.exists(path):
            print(f"{path}: missing, skipped")
            continue
        records = merge_records(records, read_json(path))
    try:  # a case one GPU lacks must read "not measured", not another GPU's figure
        records = one_gpu(records, args.gpu, ", ".join(args.files))
    except ValueError as exc:
        print(f"decode_targets: {exc}", file=sys.stderr)
        return 2
    rows = target_rows(records)
    if all(r["status"] == "not measured" for r in rows):
        print("no issue #5 case in " + ", ".join(args.files))
        return 0
    print(f"issue #5 targets on {records[0]['gpu']}:")
    print(format_rows(rows))
    print(summary_line(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
