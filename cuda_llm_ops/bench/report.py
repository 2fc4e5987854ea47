"""Tables, JSON files and plots from benchmark records (the dicts of `runner.to_record`).

Everything here works on plain records, so a committed result file can be re-tabled
and re-plotted on any machine (`llm-speed plot FILE --out DIR`).
"""
from __future__ import annotations

import json
import math
import os
import re
from collections import OrderedDict
from typing import Any, Iterable

from .. import roofline as rl
from .._files import write_json_atomically


def shape_label(shape: dict) -> str:
    """Compact text of a shape dict: `B=4 H=32 N=4096 D=128 causal=yes`."""
    parts = []
    for k, v in shape.items():
        if isinstance(v, bool):
            v = "yes" if v else "no"
        elif isinstance(v, float):
            v = f"{v:g}"
        elif isinstance(v, (list, tuple)):
            v = ",".join(str(x) for x in v) if len(v) <= 4 else f"{v[0]}..{v[-1]}({len(v)})"
        parts.append(f"{k}={v}")
    return " ".join(parts)


def case_key(rec: dict) -> tuple:
    """A case is one op, dtype and shape on one GPU: ours and the peers are compared, and a
    re-run replaces records, only within it (a file may hold several GPUs' records)."""
    return rec["gpu"], rec["op"], rec["dtype"], json.dumps(rec["shape"], sort_keys=True)


def by_gpu(records: Iterable[dict]) -> "OrderedDict[str, list[dict]]":
    """The records of each GPU, GPUs in order of first appearance."""
    groups: OrderedDict[str, list[dict]] = OrderedDict()
    for r in records:
        groups.setdefault(r["gpu"], []).append(r)
    return groups


def group_cases(records: Iterable[dict]) -> "OrderedDict[tuple, list[dict]]":
    groups: OrderedDict[tuple, list[dict]] = OrderedDict()
    for r in records:
        groups.setdefault(case_key(r), []).append(r)
    return groups


def timed(rec: dict) -> bool:
    return rec.get("status") in ("ok", "unchecked") and rec.get("median_ms")


def compared_peers(recs: list[dict]) -> list[dict]:
    """The timed peers "vs best peer" is against: those from elsewhere (cuBLAS, SDPA, PyTorch,
    Triton) where a case has any; records mark our own other paths as peers too (the fused
    block's `cuda_llm_ops-unfused`), which only cases of our variants alone (gemm_pipeline) compare with."""
    peers = [r for r in recs if r["is_peer"] and timed(r)]
    external = [r for r in peers if not r["impl"].startswith("cuda_llm_ops")]
    return external or peers


def best_peer_ms(recs: list[dict]) -> float | None:
    peers = [r["median_ms"] for r in compared_peers(recs)]
    return min(peers) if peers else None


def _num(v: Any, fmt: str) -> str:
    return "-" if v is None or (isinstance(v, float) and not math.isfinite(v)) else format(v, fmt)


def _rate(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.0f}" if v >= 100 else (f"{v:.1f}" if v >= 10 else f"{v:.2f}")


def _ms(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.4f}" if v < 1 else (f"{v:.3f}" if v < 100 else f"{v:.1f}")


def one_gpu(records: list[dict], gpu: str | None = None, source: str = "records") -> list[dict]:
    """The records of one GPU, for summaries that speak of one (the README table, the decode
    targets): those of `gpu` (its full name, or a part of one name, any case), else all of
    them where they are one GPU's. ValueError naming the GPUs otherwise."""
    names = list(by_gpu(records))
    if gpu is None:
        if len(names) > 1:
            raise ValueError(f"{source}: records of {len(names)} GPUs ({', '.join(names)}): pick one with --gpu")
        return records
    picked = [n for n in names if n == gpu] or [n for n in names if gpu.lower() in n.lower()]
    if len(picked) != 1:
        raise ValueError(f"{source}: --gpu {gpu!r} names {len(picked)} of its GPUs ({', '.join(names) or 'none'}), "
                         f"expected one")
    return [r for r in records if r["gpu"] == picked[0]]


def table_rows(records: list[dict]) -> list[list[str]]:
    """Rows of the bench table: one per (case, implementation), cases in run order."""
    rows = []
    for (_, op, dtype, _), recs in group_cases(records).items():
        best = best_peer_ms(recs)
        first = True
        for r in recs:
            name = r["impl"] + ("" if r["is_peer"] else " *")
            head = [op, dtype, shape_label(r["shape"])] if first else ["", "", ""]
            first = False
            note = (r.get("error") or "")[:120]
            if timed(r):
                ratio = f"{best / r['median_ms']:.2f}x" if best else "-"
                if r["status"] == "unchecked":
                    note = "UNCHECKED: " + note
                rows.append(head + [name, _ms(r["median_ms"]), _rate(r["tflops"]), _num(r["tbps"], ".2f"),
                                    _num(r["pct_of_roofline"], ".1f"), r["bottleneck"] or "-", ratio, note])
            else:
                what = "FAILED" if r["status"] == "failed" else "unavailable"
                rows.append(head + [name, what, "", "", "", "", "", note])
    return rows


TABLE_HEADERS = ["op", "dtype", "shape", "impl", "median ms", "TFLOP/s", "TB/s", "% roof", "bottleneck",
                 "vs best peer", "note"]


def format_table(records: list[dict]) -> str:
    """The bench table; one per GPU, each headed by its name, where the records span several."""
    gpus = by_gpu(records)
    if len(gpus) > 1:
        return "\n\n".join(f"GPU: {gpu}\n{_format_one_table(recs)}" for gpu, recs in gpus.items())
    return _format_one_table(records)


def _format_one_table(records: list[dict]) -> str:
    rows = table_rows(records)
    if not rows:
        return "(no benchmark cases selected)"
    w = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(TABLE_HEADERS)]
    left = {0, 1, 2, 3, 8, 10}

    def line(cells):
        return "  ".join(c.ljust(w[i]) if i in left else c.rjust(w[i]) for i, c in enumerate(cells)).rstrip()

    out = [line(TABLE_HEADERS), line(["-" * x for x in w])]
    out += [line(r) for r in rows]
    out.append("* ours. vs best peer: best peer's median time / this median time (> 1: faster than every peer). "
               "% roof: roofline time / median time.")
    return "\n".join(out)


def record_key(rec: dict) -> tuple:
    return case_key(rec) + (rec["impl"],)


def merge_records(old: list[dict], new: list[dict]) -> list[dict]:
    """`old` with every record that `new` measures again replaced in place; new ones appended."""
    fresh = {record_key(r): r for r in new}
    out = [fresh.pop(record_key(r), r) for r in old]
    return out + [r for r in new if record_key(r) in fresh]


def write_json(records: list[dict], path: str) -> None:
    write_json_atomically(records, path, indent=1)


def read_json(path: str) -> list[dict]:
    from .runner import validate_record

    with open(path) as f:
        data = json.load(f)
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON list of benchmark records, got {type(data).__name__}")
    for i, rec in enumerate(data):
        try:
            validate_record(rec)
        except ValueError as exc:
            raise ValueError(f"{path}: record {i}: {exc}") from None
    return data


# --------------------------------------------------------------------------- plots


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", s).strip("_")


_X_PREFERENCE = ("N", "seq_len", "context", "L", "M", "K", "B")


def _x_key(recs: list[dict]) -> str | None:
    """The numeric shape key with the most distinct values among an op's records (ties: sequence
    length before sizes before batch); a sweep key (_X_PREFERENCE) with 3 or more values comes
    before any other key (a few extra head dims must not turn the context axis into panels)."""
    best, score = None, (0, 1, 0)
    keys: list[str] = []
    for r in recs:
        keys += [k for k in r["shape"] if k not in keys]
    for k in keys:
        vals = {r["shape"].get(k) for r in recs}
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
            continue
        pref = len(_X_PREFERENCE) - _X_PREFERENCE.index(k) if k in _X_PREFERENCE else 0
        sweep = int(pref > 0 and len(vals) >= 3)
        if (sweep, len(vals), pref) > score:
            best, score = k, (sweep, len(vals), pref)
    return best


def _dependent_keys(recs: list[dict], xk: str | None) -> set[str]:
    """Shape keys that vary, but only with the x key (e.g. B = 16384 // N): one panel, not one per value."""
    if not xk:
        return set()
    out = set()
    keys = {k for r in recs for k in r["shape"]} - {xk}
    for k in keys:
        seen: dict[Any, set] = {}
        for r in recs:
            seen.setdefault(json.dumps(r["shape"].get(xk)), set()).add(json.dumps(r["shape"].get(k)))
        if all(len(v) == 1 for v in seen.values()) and len({json.dumps(r["shape"].get(k)) for r in recs}) > 1:
            out.add(k)
    return out


def split_panels(recs: list[dict], xk: str | None) -> tuple["OrderedDict[str, list[dict]]", list[dict]]:
    """An op's records as line panels (one per shape combination left when the x key and the
    keys that follow it are set aside, where the x key takes two values or more) and the
    records of single-point cases, which `plot_records` draws together as grouped bars
    rather than as panels of one x value each."""
    dependent = _dependent_keys(recs, xk)
    panels: OrderedDict[str, list[dict]] = OrderedDict()
    for r in recs:
        rest = {k: v for k, v in r["shape"].items() if k != xk and k not in dependent}
        panels.setdefault(shape_label(rest), []).append(r)
    lines: OrderedDict[str, list[dict]] = OrderedDict()
    points: list[dict] = []
    for title, prs in panels.items():
        if xk and len({json.dumps(r["shape"].get(xk)) for r in prs}) > 1:
            lines[title] = prs
        else:
            points += prs
    return lines, points


def roof_rate(recs: list[dict], metric: str) -> float | None:
    """The rate the records' roofline allows in `metric` (TB/s: the copy bandwidth the bench
    measured; TFLOP/s: the compute peak), from records bound by it: rate / (% of roofline);
    the median where several give it. None when no record is bound by that roof."""
    bound = "memory_bound" if metric == "tbps" else "compute_bound"
    vals = sorted(r[metric] * 100.0 / r["pct_of_roofline"] for r in recs
                  if r["bottleneck"] == bound and r.get(metric) and r.get("pct_of_roofline"))
    return vals[len(vals) // 2] if vals else None


def _panel_metric(recs: list[dict]) -> tuple[str, str]:
    """TFLOP/s where most of a panel's cases are compute-bound, else TB/s."""
    compute_like = sum(r["bottleneck"] == "compute_bound" for r in recs)
    memory_like = sum(r["bottleneck"] == "memory_bound" for r in recs)
    return ("tflops", "TFLOP/s") if compute_like >= memory_like else ("tbps", "TB/s")


def _draw_roof(ax, roof: float | None, ylabel: str) -> None:
    if roof:
        ax.axhline(roof, color="0.35", linestyle=":", linewidth=1.2, label=f"roofline ({roof:.3g} {ylabel})")


def _bar_panel(ax, points: list[dict], metric: str, ylabel: str, roof: float | None) -> None:
    """Single-point cases side by side: one group of bars per case, one bar per implementation
    (ours solid with an edge, peers lighter); the keys every case shares go in the title."""
    cases = list(group_cases(points).values())  # one op and dtype: a group per shape
    shapes = [recs[0]["shape"] for recs in cases]
    shared = {k: v for k, v in shapes[0].items() if all(sh.get(k, object()) == v for sh in shapes)}
    labels = [shape_label({k: v for k, v in sh.items() if k not in shared}) or "case" for sh in shapes]
    impls: OrderedDict[str, bool] = OrderedDict()
    for r in points:
        impls.setdefault(r["impl"], r["is_peer"])
    width = 0.8 / len(impls)
    for j, (name, peer) in enumerate(impls.items()):
        xs, ys = [], []
        for i, recs in enumerate(cases):
            for r in recs:
                if r["impl"] == name:
                    xs.append(i - 0.4 + (j + 0.5) * width)
                    ys.append(r[metric])
        ax.bar(xs, ys, width=width * 0.95, alpha=0.55 if peer else 1.0, edgecolor="none" if peer else "black",
               linewidth=0 if peer else 1.0, label=name + ("" if peer else " (ours)"))
    _draw_roof(ax, roof, ylabel)
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=25, ha="right", fontsize=7)
    ax.set_ylabel(ylabel)
    ax.set_title(f"single cases ({shape_label(shared)})" if shared else "single cases", fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)


def plot_records(records: list[dict], outdir: str, x_keys: dict[str, str] | None = None) -> list[str]:
    """Per GPU and (op, dtype): throughput against the sweep dimension, one line per implementation,
    one panel per remaining shape combination, the cases of one point each as grouped bars in
    a last row; each panel in TFLOP/s or TB/s as most of its cases are compute- or
    memory-bound, with that roof's rate (compute peak or copy bandwidth) as a dotted line;
    plus `roofline.png` with every timed case. The files of a GPU carry its name
    (`OP_DTYPE_GPU.png`) where the records span several GPUs. Returns the PNG paths written."""
    os.makedirs(outdir, exist_ok=True)
    gpus = by_gpu(records)
    paths = []
    for gpu, recs in (gpus or {"": []}).items():
        paths += _plot_one_gpu(recs, outdir, x_keys, "" if len(gpus) <= 1 else "_" + _slug(gpu))
    return paths


def _plot_one_gpu(records: list[dict], outdir: str, x_keys: dict[str, str] | None, suffix: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    by_op: OrderedDict[tuple[str, str], list[dict]] = OrderedDict()
    for r in records:
        if timed(r):
            by_op.setdefault((r["op"], r["dtype"]), []).append(r)
    for (op, dtype), recs in by_op.items():
        xk = (x_keys or {}).get(op) or _x_key(recs)
        lines, points = split_panels(recs, xk)
        ncols = max(1, min(3, len(lines)))
        line_rows = math.ceil(len(lines) / ncols)
        nrows = line_rows + (1 if points else 0)
        point_cases = len(group_cases(points))
        fig = plt.figure(figsize=(max(7.0, 5.2 * ncols, 1.1 * point_cases), 3.8 * nrows + 0.4 + (1.2 if points else 0.0)))
        grid = fig.add_gridspec(nrows, ncols, height_ratios=[1.0] * line_rows + ([1.3] if points else []))
        for i, (title, prs) in enumerate(lines.items()):
            ax = fig.add_subplot(grid[i // ncols, i % ncols])
            metric, ylabel = _panel_metric(prs)
            impls: OrderedDict[str, list[dict]] = OrderedDict()
            for r in prs:
                impls.setdefault(r["impl"], []).append(r)
            for name, irs in impls.items():
                irs = sorted(irs, key=lambda r: r["shape"][xk])
                xs = [r["shape"][xk] for r in irs]
                ys = [r[metric] for r in irs]
                peer = irs[0]["is_peer"]
                ax.plot(xs, ys, marker="o" if not peer else "x", linestyle="-" if not peer else "--",
                        linewidth=2.2 if not peer else 1.3, label=name + ("" if peer else " (ours)"))
            _draw_roof(ax, roof_rate(recs, metric), ylabel)
            if len({r["shape"][xk] for r in prs}) > 2:
                ax.set_xscale("log", base=2)
            ax.set_xlabel(xk)
            ax.set_ylabel(ylabel)
            ax.set_title(title or op, fontsize=8)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
        if points:
            metric, ylabel = _panel_metric(points)
            _bar_panel(fig.add_subplot(grid[line_rows, :]), points, metric, ylabel, roof_rate(recs, metric))
        gpu = recs[0]["gpu"]
        fig.suptitle(f"{op} ({dtype}) on {gpu}: throughput, higher is better", fontsize=10)
        fig.tight_layout(rect=(0, 0, 1, 1 - 0.35 / fig.get_figheight()))  # room for the suptitle
        path = os.path.join(outdir, f"{_slug(op)}_{_slug(dtype)}{suffix}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    paths.append(plot_roofline(records, os.path.join(outdir, f"roofline{suffix}.png")))
    return paths


_ROOF_KINDS = (("fp32", "FP32"), ("fp16_tc", "FP16/BF16 tensor"), ("int8_tc", "INT8 tensor (TOPS)"))


def plot_roofline(records: list[dict], path: str) -> str:
    """Log-log roofline: every timed record at (FLOP/byte, TFLOP/s); the roofs of its GPU when
    known. The records are one GPU's (`plot_records` splits a file by GPU)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [r for r in records if timed(r) and r.get("tflops") and r.get("tbps")]
    fig, ax = plt.subplots(figsize=(8.5, 6))
    ais = [r["tflops"] / r["tbps"] for r in pts] or [0.1, 1000]
    lo, hi = max(min(ais) / 3, 1e-3), max(max(ais) * 3, 10)
    gpu = pts[0]["gpu"] if pts else "h100"
    try:
        ceil = rl.ceilings_for(gpu, calibrations={})
    except ValueError:
        ceil = None
    if ceil:
        for kind, label in _ROOF_KINDS:
            try:
                peak = ceil.peak(kind)
            except ValueError:
                continue
            xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
            ax.plot(xs, [min(peak, x * ceil.bandwidth_tbps) for x in xs], linewidth=1, color="gray",
                    linestyle={"fp32": ":", "fp16_tc": "-", "int8_tc": "-."}[kind])
            ax.text(hi, peak, f" {label} {peak:g}", fontsize=7, va="bottom", ha="right", color="dimgray")
        ax.text(lo * 1.1, lo * ceil.bandwidth_tbps * 1.3, f"{ceil.bandwidth_tbps:.2f} TB/s", fontsize=7,
                color="dimgray", rotation=30)
    ops = list(OrderedDict.fromkeys(r["op"] for r in pts))
    cmap = plt.get_cmap("tab10")
    for i, op in enumerate(ops):
        color = cmap(i % 10)
        for peer in (False, True):
            sel = [r for r in pts if r["op"] == op and r["is_peer"] == peer]
            if not sel:
                continue
            ax.scatter([r["tflops"] / r["tbps"] for r in sel], [r["tflops"] for r in sel], s=28 if not peer else 18,
                       marker="o" if not peer else "x", color=color, alpha=0.85,
                       label=f"{op} ({'peers' if peer else 'ours'})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("TFLOP/s (TOPS for int8)")
    ax.set_title(f"Roofline: every measured case on {gpu}" + (f" ({ceil.bandwidth_source})" if ceil else ""),
                 fontsize=9)
    ax.grid(True, which="both", alpha=0.25)
    if pts:
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
