"""`llm-speed`: benchmark our kernels against their peers, print roofline floors, calibrate the GPU.

Exit codes: 0 success; 1 a benchmark implementation FAILED its correctness check or
crashed (the table and JSON still list every row), or a case module failed to import;
2 usage errors and "no CUDA GPU" for commands that need one.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

EXAMPLES = """\
examples:
  llm-speed bench --quick                          smoke run of every op (a minute)
  llm-speed bench attention --preset llama-8b      one op group on one model's shapes
  llm-speed bench flash_attention --shapes N=4096  our flash_attention and its peers at N=4096
  llm-speed bench --dtype fp16 bf16 fp32 int8 --json benchmarks/results/h100.json --plot benchmarks/results/plots
  llm-speed roofline --gpu a100-80gb               analytical floors, no GPU needed
  llm-speed calibrate                              measure this GPU's copy bandwidth and matmul rates
"""


def _prog() -> str:
    return "python -m cuda_llm_ops" if sys.argv and sys.argv[0].endswith("__main__.py") else "llm-speed"


def _add_selection(p: argparse.ArgumentParser) -> None:
    from .bench.registry import PRESET_NAMES

    p.add_argument("ops", nargs="*", metavar="OPS",
                   help="what to run, before any option: op groups or ops as `--list` prints them (attention, "
                        "gemm, paged_attention, attention_prefill, ...) or one of our functions "
                        "(flash_attention: it and its peers). Default: everything.")
    p.add_argument("--dtype", nargs="+", default=["fp16"], metavar="DTYPE",
                   help="dtypes to run: fp16 (default), bf16, fp32, int8, or all")
    p.add_argument("--preset", default="all", choices=PRESET_NAMES,
                   help="model shapes: llama-7b (32 heads, MHA), llama-8b (GQA 32/8), llama-70b (GQA 64/8), "
                        "square (square GEMMs) or all (default)")
    p.add_argument("--shapes", nargs="+", metavar="KEY=V[,V]",
                   help="keep only cases whose shape has these values, e.g. --shapes N=1024,4096 causal=1 "
                        "(keys as printed in the shape column)")
    p.add_argument("--quick", action="store_true", help="a few shapes per op: a smoke run")
    p.add_argument("--list", action="store_true", help="list the selected cases and implementations; run nothing")


def build_parser() -> argparse.ArgumentParser:
    from .roofline import LATENCY_FACTOR, device_keys

    parser = argparse.ArgumentParser(
        prog=_prog(), formatter_class=argparse.RawDescriptionHelpFormatter,
        description="LLM-Speed: hand-written CUDA kernels for LLM inference, measured against their peers "
                    "(cuBLAS, SDPA backends, PyTorch) on a roofline.",
        epilog=EXAMPLES)
    from . import __version__

    parser.add_argument("--version", action="version", version=f"llm-speed {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    b = sub.add_parser(
        "bench", formatter_class=argparse.RawDescriptionHelpFormatter,
        help="run our ops and their peers side by side; table, JSON, plots",
        description="Run our ops and their peers side by side in this process on LLM shapes. Each "
                    "implementation is first checked against the case's reference (or its first peer) on the "
                    "same inputs; one that fails is listed as FAILED and not timed. Then it is timed (CUDA events, "
                    "median of many runs; cold L2 for memory-bound cases, CUDA graphs for launch-bound ones) and "
                    "placed on the GPU's roofline. Needs a CUDA GPU (without one: exit code 2; use `roofline`).",
        epilog="Table columns: median ms; TFLOP/s and TB/s over the op's FLOP and minimum-byte model; % roof = "
               "roofline time / median time; bottleneck by the GPU's ridge point (latency_bound: under "
               f"{100 / LATENCY_FACTOR:.0f}% of the roofline); vs best peer = best peer time / this time.\n"
               "Exit code 1 when an implementation FAILED.")
    _add_selection(b)
    b.add_argument("--json", metavar="FILE", help="write one record per (case, implementation) to FILE")
    b.add_argument("--append", action="store_true",
                   help="merge into an existing --json FILE: records of the same (op, impl, dtype, shape) are "
                        "replaced, others kept (build one result file over several runs); --plot then draws "
                        "the merged file")
    b.add_argument("--plot", metavar="DIR", help="write PNG plots (per op, and a roofline of every case) to DIR")
    b.add_argument("--gpu", metavar="GPU", help=f"ceilings to use instead of the visible GPU's ({', '.join(device_keys())})")
    b.add_argument("--iterations", type=int, default=100, metavar="N",
                   help="timed runs per implementation at most (default 100; slow ones get fewer, at least 5; "
                        "under a CUDA graph a run is one replay of 10 calls or more)")
    b.add_argument("--budget-ms", type=float, default=300.0, metavar="MS",
                   help="target timing time per implementation, picks the run count from the calls' time "
                        "(default 300)")
    b.add_argument("--rounds", type=int, default=1, metavar="R",
                   help="time a case's implementations in R interleaved rounds (alternating order, the runs "
                        "pooled; --iterations is the total): clocks that fall as a long compute-bound run heats "
                        "the GPU then slow every implementation alike (default 1: one after the other)")
    b.add_argument("--warmup-ms", type=float, default=0.0, metavar="MS",
                   help="before each timing (each round), run the call back to back for MS ms of GPU time: a GPU "
                        "at its power cap runs the first tens of ms after an idle gap at its full clock, then "
                        "throttles; warmed, every run sees the clock the call sustains (default 0: 10 calls)")
    b.add_argument("--no-progress", action="store_true", help="no progress bar")
    b.add_argument("--eager", action="store_true",
                   help="time launch-bound cases too as eager calls from Python, without CUDA graphs: the host's "
                        "dispatch time then counts where it exceeds the GPU's (what an eager decode loop sees; "
                        "cold L2 stays). Records say cuda_graph=false; keep them in their own --json file")

    r = sub.add_parser(
        "roofline", help="print the analytical floors of the benchmark shapes (no GPU needed)",
        description="For every selected case: FLOPs, minimum bytes, arithmetic intensity, the GPU's ridge point, "
                    "the compute and memory floors (time at peak FLOP/s and at full bandwidth) and which one "
                    "bounds it. Needs no GPU.")
    _add_selection(r)
    r.add_argument("--gpu", metavar="GPU",
                   help=f"ceilings from the table: {', '.join(device_keys())} (default: the visible GPU, else h100)")

    c = sub.add_parser(
        "calibrate", help="measure this GPU's copy bandwidth and matmul rates and cache them",
        description="Measure a 1 GiB device-to-device copy (bytes read + written) and large library matmuls "
                    "(fp16, bf16, fp32 with TF32 off, int8) on the visible GPU, and cache them per GPU name; "
                    "later rooflines use the measured bandwidth.")
    c.add_argument("--no-save", action="store_true", help="print only, do not write the cache")
    c.add_argument("--path", metavar="FILE", help="cache file (default: ~/.cache/llm-speed/calibration.json)")

    p = sub.add_parser("plot", help="redraw plots (and the table) from a result file",
                       description="Read a `bench --json` file, print its table and write its plots.")
    p.add_argument("file", metavar="FILE", help="result JSON written by `llm-speed bench --json`")
    p.add_argument("--out", metavar="DIR", help="write the PNGs to DIR (default: no plots, table only)")
    return parser


def _dtypes(args):
    from .bench.runner import parse_dtypes

    return parse_dtypes(args.dtype)


def _select(args, parser):
    from .bench.runner import CaseModuleError, load_case_modules, parse_shape_filters, select_cases

    try:
        load_case_modules()
    except CaseModuleError as exc:
        print(f"{parser.prog}: {exc}", file=sys.stderr)
        raise SystemExit(1) from exc
    try:
        return select_cases(args.ops, _dtypes(args), args.preset, args.quick, parse_shape_filters(args.shapes))
    except ValueError as exc:
        print(f"{parser.prog} {args.command}: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from exc


def _list(selected, eager: bool = False) -> None:
    from .bench.report import shape_label
    from .bench.runner import dtype_name

    wg = max([len(s.group) for s in selected] + [5])
    wo = max([len(s.case.op) for s in selected] + [2])
    ws = max([len(shape_label(s.case.shape)) for s in selected] + [5])
    for s in selected:
        c = s.case
        impls = ", ".join(i.name + ("" if i.is_peer else "*") for i in s.impls)
        flags = "".join([" cold-L2" if c.cold_l2 else "", (" eager" if eager else " graph") if c.cuda_graph else ""])
        print(f"{s.group:{wg}s}  {c.op:{wo}s}  {dtype_name(c.dtype):8s}  {shape_label(c.shape):{ws}s}{flags}  [{impls}]")
    print(f"{len(selected)} cases, {sum(len(s.impls) for s in selected)} implementations (* ours)")


NO_GPU = ("no CUDA GPU is visible (torch {torch}, CUDA {cuda}): `llm-speed bench` needs one; "
          "`llm-speed roofline` prints the analytical floors without a GPU.")


def cmd_bench(args, parser) -> int:
    import torch

    if args.iterations < 1:
        parser.error("--iterations must be >= 1")
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    if not 0 <= args.warmup_ms < math.inf:
        parser.error("--warmup-ms must be finite and >= 0")
    if args.append and not args.json:
        parser.error("--append needs --json FILE")
    # The outputs are checked before anything runs: a run's records must not be lost at the end.
    if args.json and os.path.isdir(args.json):
        parser.error(f"--json {args.json} is a directory: give a file name")
    if args.plot and os.path.exists(args.plot) and not os.path.isdir(args.plot):
        parser.error(f"--plot {args.plot} is a file: give a directory")
    appended_to = None  # the records already in --json, for --append
    if args.append and os.path.exists(args.json):
        from .bench import report

        try:
            appended_to = report.read_json(args.json)
        except (OSError, ValueError) as exc:
            parser.error(f"--append: cannot read {args.json} ({exc}); write to another --json file")
        # Records are replaced within one GPU's (report.case_key): another GPU's graph timings stay.
        here = torch.cuda.get_device_name() if torch.cuda.is_available() else None
        if args.eager and any(r["cuda_graph"] and r["status"] in ("ok", "unchecked") and here in (None, r["gpu"])
                              for r in appended_to):
            parser.error(f"--eager --append: {args.json} holds CUDA-graph timings; eager records would replace "
                         "them under the same keys: write them to their own --json file")
    selected = _select(args, parser)
    if args.list:
        _list(selected, args.eager)
        return 0
    if not torch.cuda.is_available():
        print(f"{parser.prog} bench: " + NO_GPU.format(torch=torch.__version__, cuda=torch.version.cuda),
              file=sys.stderr)
        return 2
    if not selected:
        print(f"{parser.prog} bench: no cases match this selection (see --list)", file=sys.stderr)
        return 2
    from . import roofline as rl
    from .bench import report
    from .bench.runner import environment, run_cases, to_record

    try:
        ceilings = rl.ceilings_for(args.gpu)
    except ValueError as exc:
        if args.gpu:  # a name asked for and not known: say so, as `roofline --gpu` does
            print(f"{parser.prog} bench: error: {exc}", file=sys.stderr)
            return 2
        print(f"{torch.cuda.get_device_name()} is not in the ceilings table: measuring it (llm-speed calibrate)",
              file=sys.stderr)
        ceilings = rl.ceilings_for(torch.cuda.get_device_name(),
                                   {torch.cuda.get_device_name(): rl.calibrate(("fp16_tc", "fp32", "tf32"))})
    env = environment() | {"roofline": ceilings.as_record()}
    from . import build_info

    print(f"llm-speed bench: {env['gpu']}, torch {env['torch']}, CUDA {env['cuda']}, git {env['git_sha']}, "
          f"kernels: {build_info()}")
    print(f"roofline: {ceilings.describe()}")
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    results = []
    interrupted = False
    try:
        run_cases(selected, ceilings, iterations=args.iterations, budget_ms=args.budget_ms,
                  progress=not args.no_progress, on_result=results.append, eager=args.eager, rounds=args.rounds,
                  warmup_ms=args.warmup_ms)
    except KeyboardInterrupt:  # keep what was measured: table, JSON and plots of the finished cases
        interrupted = True
        print(f"interrupted: reporting the {len(results)} implementations measured so far", file=sys.stderr)
    records = run_records = [to_record(r, env, stamp) for r in results]
    print(report.format_table(records))
    if args.json:
        if appended_to is not None:
            records = report.merge_records(appended_to, records)
        report.write_json(records, args.json)
        print(f"wrote {len(records)} records to {args.json}")
    if args.plot:
        try:
            paths = report.plot_records(records, args.plot,
                                        {s.case.op: s.case.x_key for s in selected if s.case.x_key})
            print(f"wrote {len(paths)} plots to {args.plot}")
        except ImportError as exc:
            print(f"--plot needs matplotlib ({exc}): pip install 'llm-speed[bench]'", file=sys.stderr)
    failed = [r for r in run_records if r["status"] == "failed"]
    if interrupted:
        return 130
    if failed:
        print(f"{len(failed)} implementation(s) FAILED: " + ", ".join(f"{r['op']}/{r['impl']}" for r in failed[:10]))
        return 1
    return 0


def cmd_roofline(args, parser) -> int:
    from . import roofline as rl
    from .bench.report import shape_label
    from .bench.runner import dtype_name

    try:
        ceilings = rl.ceilings_for(args.gpu)
    except ValueError as exc:
        print(f"{parser.prog} roofline: error: {exc}", file=sys.stderr)
        return 2
    selected = _select(args, parser)
    if args.list:
        _list(selected)
        return 0
    print(f"roofline floors on {ceilings.describe()}")
    head = ["op", "dtype", "shape", "GFLOP", "MB", "FLOP/B", "ridge", "compute us", "memory us", "floor us",
            "bound"]
    rows = []
    unknown = set()
    for s in selected:
        c = s.case
        head_cells = [c.op, dtype_name(c.dtype), shape_label(c.shape), f"{c.flops / 1e9:.2f}", f"{c.bytes / 1e6:.2f}"]
        try:
            r = rl.analyze(c.flops, c.bytes, ceilings, c.compute)
        except ValueError as exc:  # a calibrated GPU without this compute kind's peak: the row has no floor
            unknown.add(str(exc))
            rows.append(head_cells + [f"{c.flops / c.bytes:.1f}" if c.bytes else "-"] + ["-"] * 5)
            continue
        rows.append(head_cells + [f"{r.intensity:.1f}", f"{r.ridge:.0f}", f"{r.compute_floor_s * 1e6:.2f}",
                                  f"{r.memory_floor_s * 1e6:.2f}", f"{r.floor_s * 1e6:.2f}", r.bound])
    if not rows:
        print("(no cases match this selection)")
        return 0
    w = [max(len(h), *(len(x[i]) for x in rows)) for i, h in enumerate(head)]
    left = {0, 1, 2, 10}
    for row in [head, ["-" * x for x in w]] + rows:
        print("  ".join(v.ljust(w[i]) if i in left else v.rjust(w[i]) for i, v in enumerate(row)).rstrip())
    print("floor = max(compute, memory): no implementation can run faster on this GPU; bound: compute when "
          "FLOP/B >= ridge (the GPU's peak FLOP/s over its bandwidth).")
    for msg in sorted(unknown):
        print(f"-: {msg}")
    return 0


def cmd_calibrate(args, parser) -> int:
    import torch

    from . import roofline as rl

    if not torch.cuda.is_available():
        print(f"{parser.prog} calibrate: no CUDA GPU is visible (torch {torch.__version__}, CUDA "
              f"{torch.version.cuda}); nothing to measure", file=sys.stderr)
        return 2
    rec = rl.calibrate(progress=lambda s: print(f"measuring {s} ...", file=sys.stderr))
    spec = rl.find_device(rec["gpu"])
    print(f"{rec['gpu']} (torch {rec['torch']}, CUDA {rec['cuda']})")
    sheet = f" (datasheet {spec.hbm_tbps:g})" if spec else ""
    print(f"  copy bandwidth: {rec['copy_tbps']:.3f} TB/s read+write{sheet}")
    for k, v in rec["matmul_tflops"].items():
        peak = f" (datasheet peak {spec.peak_tflops.get(k):g})" if spec and spec.peak_tflops.get(k) else ""
        shown = f"{v:.1f}" if v else f"failed: {rec.get('errors', {}).get(k, '?')}"
        print(f"  matmul {k}: {shown} TFLOP/s{peak}")
    if not args.no_save:
        path = rl.save_calibration(rec, args.path)
        print(f"saved to {path}")
    return 0


def cmd_plot(args, parser) -> int:
    from .bench import report

    try:
        records = report.read_json(args.file)
    except (OSError, ValueError) as exc:
        print(f"{parser.prog} plot: error: {exc}", file=sys.stderr)
        return 2
    print(report.format_table(records))
    if args.out and not records:
        print(f"{parser.prog} plot: error: {args.file} holds no records: nothing to plot", file=sys.stderr)
        return 2
    if args.out and os.path.exists(args.out) and not os.path.isdir(args.out):
        print(f"{parser.prog} plot: error: --out {args.out} is a file: give a directory", file=sys.stderr)
        return 2
    if args.out:
        try:
            paths = report.plot_records(records, args.out)
        except ImportError as exc:
            print(f"{parser.prog} plot: needs matplotlib ({exc}): pip install 'llm-speed[bench]'", file=sys.stderr)
            return 2
        print(f"wrote {len(paths)} plots to {args.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    try:
        return {"bench": cmd_bench, "roofline": cmd_roofline, "calibrate": cmd_calibrate,
                "plot": cmd_plot}[args.command](args, parser)
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
