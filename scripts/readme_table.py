#!/usr/bin/env python3
"""Regenerate the README's results table from a `llm-speed bench --json` file.

    python scripts/readme_table.py                       # benchmarks/results/h100.json -> README.md
    python scripts/readme_table.py --check               # exit 1 when README.md is out of date
    python scripts/readme_table.py RESULTS.json --readme OTHER.md --print

The table goes between the `<!-- bench:begin -->` and `<!-- bench:end -->` markers:
one row per (case, our implementation): our median time, the best peer and its time,
the ratio (best peer time / ours: > 1 means we are faster), our % of the roofline and
the bottleneck. Never edit the table by hand: rerun this script.
"""
from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from cuda_llm_ops.bench.report import compared_peers, group_cases, one_gpu, read_json, shape_label, timed  # noqa: E402

BEGIN = "<!-- bench:begin -->"
END = "<!-- bench:end -->"


def _ms(v: float) -> str:
    if v >= 100:
        return f"{v:.1f}"
    if v >= 1:
        return f"{v:.3f}"
    return f"{v * 1000:.1f} us"


def _ms_cell(v: float) -> str:
    return _ms(v) if v < 1 else f"{_ms(v)} ms"


def _provenance(records: list[dict]) -> str:
    """'commit X, TIME', or per-op commits when groups were re-run with `--append`."""
    shas = {r["git_sha"] for r in records}
    if len(shas) == 1:
        return f"commit {records[0]['git_sha']}, {min(r['timestamp'] for r in records)}"
    by_sha: dict[str, set] = {}
    for r in records:
        by_sha.setdefault(r["git_sha"], set()).add(r["op"])
    return "; ".join(f"commit {sha}: {', '.join(sorted(ops))}" for sha, ops in sorted(by_sha.items()))


def render(records: list[dict], source: str) -> str:
    """The markdown block (without markers) for `records`."""
    if not records:
        return f"_No records in `{source}`._"
    r0 = records[0]
    header = ["| dtype | shape | ours | time | best peer | peer time | vs best peer | % of roofline | bottleneck |",
              "|---|---|---|---:|---|---:|---:|---:|---|"]
    rows_by_op: dict[str, list[str]] = {}
    for (_, op, dtype, _), recs in group_cases(records).items():
        peers = compared_peers(recs)
        best = min(peers, key=lambda r: r["median_ms"]) if peers else None
        for r in recs:
            if r["is_peer"]:
                continue
            shape = shape_label(r["shape"])
            peer_cells = [best["impl"], _ms_cell(best["median_ms"])] if best else ["-", "-"]
            if timed(r):
                ratio = f"{best['median_ms'] / r['median_ms']:.2f}x" if best else "-"
                pct = f"{r['pct_of_roofline']:.1f}%" if r["pct_of_roofline"] is not None else "-"
                cells = [dtype, shape, f"`{r['impl']}`", _ms_cell(r["median_ms"]), *peer_cells, ratio, pct,
                         r["bottleneck"] or "-"]
            else:
                what = "FAILED" if r["status"] == "failed" else "unavailable"
                cells = [dtype, shape, f"`{r['impl']}`", what, *peer_cells, "-", "-", "-"]
            rows_by_op.setdefault(op, []).append("| " + " | ".join(cells) + " |")
    lines = [
        f"Measured on {r0['gpu']} (torch {r0['torch']}, CUDA {r0['cuda']}, {_provenance(records)}); generated from `{source}` by `scripts/readme_table.py`. One table per op "
        "(click to open).",
        "",
    ]
    # one collapsible table per op keeps the README readable with hundreds of rows
    for op, rows in rows_by_op.items():
        lines += [f"<details><summary><code>{op}</code>: {len(rows)} rows</summary>", "", *header, *rows, "",
                  "</details>", ""]
    lines += ["", "vs best peer: the fastest peer's median time divided by ours (> 1: ours is faster); peers are "
              "other libraries' (cuBLAS, SDPA's backends, PyTorch, Triton), our own other paths only where a case "
              "has no other (gemm_pipeline's variants). "
              "% of roofline: the roofline time (FLOPs at peak rate or bytes at the measured copy bandwidth, "
              "whichever is longer) over our median time. Full records, peers included: the JSON file; plots: "
              "`benchmarks/results/plots/`."]
    return "\n".join(lines)


def splice(readme: str, block: str) -> str:
    if readme.count(BEGIN) != 1 or readme.count(END) != 1 or readme.index(BEGIN) > readme.index(END):
        raise ValueError(f"README must hold exactly one {BEGIN} ... {END} pair")
    head, rest = readme.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{block}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", nargs="?", default=os.path.join(ROOT, "benchmarks", "results", "h100.json"),
                    help="bench JSON (default: benchmarks/results/h100.json)")
    ap.add_argument("--readme", default=os.path.join(ROOT, "README.md"), help="file with the markers")
    ap.add_argument("--check", action="store_true", help="do not write; exit 1 when the README is out of date")
    ap.add_argument("--print", dest="print_only", action="store_true", help="print the table; write nothing")
    ap.add_argument("--gpu", help="the GPU whose records make the table, where the file holds several (a part of "
                                  "its name)")
    args = ap.parse_args(argv)
    source = os.path.relpath(args.results, ROOT) if os.path.abspath(args.results).startswith(ROOT) else args.results
    try:  # one "Measured on" line and one table per op: one GPU's records
        records = one_gpu(read_json(args.results), args.gpu, source)
    except ValueError as exc:
        print(f"readme_table: {exc}", file=sys.stderr)
        return 2
    block = render(records, source)
    if args.print_only:
        print(block)
        return 0
    with open(args.readme) as f:
        old = f.read()
    new = splice(old, block)
    if args.check:
        if new != old:
            print(f"{args.readme} is out of date: run python scripts/readme_table.py", file=sys.stderr)
            return 1
        print(f"{args.readme} is up to date")
        return 0
    if new != old:
        with open(args.readme, "w") as f:
            f.write(new)
    print(f"{args.readme}: {sum(1 for r in records if not r['is_peer'])} rows from {len(records)} records")
    return 0


if __name__ == "__main__":
    sys.exit(main())
