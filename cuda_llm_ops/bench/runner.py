"""Runs the registered benchmark cases: each implementation is checked against the
case's reference (or its first peer) on identical inputs, then timed with
`cuda_llm_ops.timing.benchmark`, then placed on the device roofline.

Case modules are the `cases_*.py` files of this package; `load_case_modules`
imports all of them so their `@register(group)` decorators run. A module that
fails to import raises: a benchmark that silently drops an area would report
a partial picture as the whole one.
"""
from __future__ import annotations

import contextlib
import importlib
import math
import pkgutil
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable

import torch

from .. import roofline as rl
from ..testing import first_tensor, rel_error
from ..timing import DEFAULT_GRAPH_CALLS, Timing, benchmark, graph_replay_calls, pool_timings, rotation_count
from . import registry
from .registry import BenchCase, BenchImpl

DTYPES = {
    "fp32": torch.float32, "float32": torch.float32,
    "fp16": torch.float16, "float16": torch.float16, "half": torch.float16,
    "bf16": torch.bfloat16, "bfloat16": torch.bfloat16,
    "int8": torch.int8,
}
ALL_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.int8)

# JSON record fields, in order (issue 4's list, then status and error).
RECORD_FIELDS = ("op", "impl", "is_peer", "dtype", "shape", "median_ms", "p20_ms", "p80_ms", "tflops", "tbps",
                 "pct_of_roofline", "bottleneck", "cold_l2", "cuda_graph", "gpu", "torch", "cuda", "git_sha",
                 "timestamp", "status", "error")
STATUSES = ("ok", "unchecked", "failed", "unavailable")
# Fields a record carries beyond those (records written before stop 95 lack them): the ceilings
# its pct_of_roofline is against (`Ceilings.as_record`, from the run's environment) and how its
# L2 was made cold ("", "flush" or "rotate:<sets>"; null when not timed).
OPTIONAL_FIELDS = ("roofline", "l2_method")


# Cold-L2 cases rotate over up to this many input copies; a case too small to span 3x the
# L2 with them is timed with the L2 flush instead (cuda_llm_ops.timing).
MAX_ROTATION_SETS = 64


class CaseModuleError(RuntimeError):
    pass


def load_case_modules() -> list[str]:
    """Import every `cuda_llm_ops.bench.cases_*` module; raise CaseModuleError naming the one that fails."""
    from .. import bench as pkg

    loaded = []
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if not info.name.startswith("cases_"):
            continue
        name = f"{pkg.__name__}.{info.name}"
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - re-raised with the module's name
            raise CaseModuleError(f"benchmark case module {name} failed to import: "
                                  f"{type(exc).__name__}: {exc}") from exc
        loaded.append(name)
    return loaded


def dtype_name(d: torch.dtype) -> str:
    return str(d).replace("torch.", "")


def parse_dtypes(names: Iterable[str] | None) -> list[torch.dtype]:
    """`--dtype` values (fp16, bf16, fp32, int8, their torch names, or "all"); default fp16."""
    names = list(names or ["fp16"])
    out: list[torch.dtype] = []
    for n in names:
        if n.lower() == "all":
            ds = list(ALL_DTYPES)
        elif n.lower() in DTYPES:
            ds = [DTYPES[n.lower()]]
        else:
            raise ValueError(f"--dtype: unknown dtype {n!r}; choose from fp16, bf16, fp32, int8, all "
                             "(OPS go before the options)")
        out += [d for d in ds if d not in out]
    return out


def parse_shape_filters(items: Iterable[str] | None) -> dict[str, set[str]]:
    """`--shapes N=1024,4096 causal=1` -> {"N": {"1024", "4096"}, "causal": {"1"}} (values are
    read as booleans only against boolean shape keys, so B=1 still means batch 1)."""
    filters: dict[str, set[str]] = {}
    for item in items or []:
        for part in item.split():
            if "=" not in part:
                raise ValueError(f"--shapes: expected KEY=VALUE[,VALUE...], got {part!r} (e.g. N=4096 causal=1)")
            key, vals = part.split("=", 1)
            if not key or not vals:
                raise ValueError(f"--shapes: expected KEY=VALUE[,VALUE...], got {part!r}")
            # commas inside brackets belong to a value as printed (b=[N,K])
            filters.setdefault(key, set()).update(v.strip().lower() for v in re.split(r",(?![^\[]*\])", vals))
    return filters


def _norm_value(v: Any) -> str:
    s = str(v).strip().lower()
    return {"1": "true", "yes": "true", "y": "true", "t": "true", "0": "false", "no": "false", "n": "false",
            "f": "false"}.get(s, s) if not isinstance(v, bool) else ("true" if v else "false")


def _shape_matches(shape: dict, filters: dict[str, set[str]]) -> bool:
    for key, vals in filters.items():
        if key not in shape:
            return False
        v = shape[key]
        if isinstance(v, bool):
            if _norm_value(v) not in {_norm_value(x) for x in vals}:
                return False
        elif str(v).lower() not in vals:
            return False
    return True


@dataclass
class Selected:
    group: str
    case: BenchCase
    impls: list[BenchImpl]


def select_cases(ops: Iterable[str] | None = None, dtypes: Iterable[torch.dtype] | None = None,
                 preset: str = "all", quick: bool = False, shape_filters: dict[str, set[str]] | None = None,
                 groups: dict[str, Callable] | None = None) -> list[Selected]:
    """The cases and implementations an `llm-speed bench/roofline` command line asks for.

    OPS may name a group ("attention", "gemm", ...), an op ("attention_prefill", ...) or one of
    our implementations ("flash_attention": that implementation and the case's peers).
    """
    if preset not in registry.PRESET_NAMES:
        raise ValueError(f"--preset: unknown preset {preset!r}; choose from {', '.join(registry.PRESET_NAMES)}")
    groups = registry.groups() if groups is None else groups
    dtypes = list(dtypes) if dtypes else [torch.float16]
    ops = [o for o in (ops or [])]
    generated: list[tuple[str, BenchCase]] = []
    for gname, gen in groups.items():
        for dt in dtypes:
            for case in gen(dt, preset, quick) or []:
                generated.append((gname, case))
    if ops:
        known_groups = set(groups)
        known_ops = {c.op for _, c in generated}
        known_impls = {i.name for _, c in generated for i in c.impls if not i.is_peer}
        # names are known across all dtypes/presets, so a filter that matches nothing here is not an error
        all_names = known_groups | known_ops | known_impls | _all_names(groups)
        unknown = [o for o in ops if o not in all_names]
        if unknown:
            raise ValueError(f"unknown op(s) {unknown}; groups: {sorted(known_groups)}; "
                             f"ops: {sorted(known_ops | _all_names(groups, 'op'))}; "
                             f"our implementations: {sorted(known_impls | _all_names(groups, 'impl'))}")
    chosen: list[Selected] = []  # the ops / implementations asked for, before the shape filter
    for gname, case in generated:
        if not ops or gname in ops or case.op in ops:
            impls = list(case.impls)
        else:
            named = [i for i in case.impls if not i.is_peer and i.name in ops]
            if not named:
                continue
            impls = [i for i in case.impls if i.is_peer or i.name in ops]
        chosen.append(Selected(gname, case, impls))
    if shape_filters and chosen:  # a key none of them has (mistyped, or another op's) matches nothing: say so
        keys = {k for s in chosen for k in s.case.shape}
        missing = sorted(k for k in shape_filters if k not in keys)
        if missing:
            raise ValueError(f"--shapes: no case of this selection has key(s) {missing} (keys are case-sensitive); "
                             f"its keys: {', '.join(sorted(keys))}")
    return [s for s in chosen if not shape_filters or _shape_matches(s.case.shape, shape_filters)]


_NAME_CACHE: dict[tuple[int, str], set[str]] = {}


def _all_names(groups: dict[str, Callable], kind: str = "any") -> set[str]:
    """Op and implementation names over every dtype and preset (to tell 'unknown' from 'not in this selection')."""
    key = (id(groups), kind)
    if key not in _NAME_CACHE:
        names: set[str] = set()
        for gen in groups.values():
            for dt in ALL_DTYPES:
                try:
                    cases = gen(dt, "all", True) or []
                except Exception:  # noqa: BLE001 - a generator failing here is reported when it runs
                    cases = []
                for c in cases:
                    if kind in ("any", "op"):
                        names.add(c.op)
                    if kind in ("any", "impl"):
                        names.update(i.name for i in c.impls if not i.is_peer)
        _NAME_CACHE[key] = names
    return _NAME_CACHE[key]


# --------------------------------------------------------------------------- running


@dataclass
class Result:
    group: str
    case: BenchCase
    impl: BenchImpl
    status: str  # one of STATUSES
    error: str | None = None
    timing: Timing | None = None
    rel_err: float | None = None
    roof: rl.Roofline | None = None
    notes: list[str] = field(default_factory=list)
    eager: bool = False  # run under --eager: an untimed row then says cuda_graph=false too


def _short(exc: BaseException) -> str:
    msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__
    return text if len(text) <= 240 else text[:237] + "..."


def _missing_kernel(exc: BaseException) -> bool:
    s = str(exc)
    return isinstance(exc, RuntimeError) and s.startswith("cuda_llm_ops.") and (
        "without its CUDA kernels" in s or "this build of the extension has no" in s)


def _inputs(case: BenchCase, seed: int):
    torch.manual_seed(seed)
    return case.make_inputs()


def _all_finite(t: torch.Tensor) -> bool:
    """No NaN/inf, read in float64 as rel_error reads outputs (FP8 has no isfinite kernel)."""
    return bool(torch.isfinite(t.double()).all())


def _check(out: Any, ref: torch.Tensor, tol: float) -> tuple[float, str | None]:
    o = first_tensor(out)
    if o is None:
        return math.inf, f"returned {type(out).__name__}, not a tensor"
    if tuple(o.shape) != tuple(ref.shape):
        return math.inf, f"output shape {tuple(o.shape)} != reference {tuple(ref.shape)}"
    err = rel_error(o, ref)
    if not math.isfinite(err):
        return err, "output holds NaN/inf"
    if err > tol:
        return err, f"relative error {err:.2e} > tolerance {tol:.1e}"
    return err, None


def _estimate_ms(fn: Callable[[], Any]) -> float:
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    fn()
    e.record()
    torch.cuda.synchronize()
    return max(s.elapsed_time(e), 1e-3)


def _time_impl(case: BenchCase, impl: BenchImpl, fn: Callable[[], Any], seed: int, iterations: int,
               budget_ms: float, notes: list[str], eager: bool = False, rounds: int = 1,
               warmup_ms: float = 0.0) -> Timing:
    # eager: launch-bound cases too are timed call by call from Python (no graph), so the
    # host's dispatch time counts wherever it exceeds the GPU's: what an eager loop sees.
    # rounds: this is one of `rounds` rounds, which share the run count.
    graph = case.cuda_graph and not eager
    est = _estimate_ms(fn)
    need = rotation_count(case.bytes, max_sets=None)
    rotate = case.cold_l2 and (need <= MAX_ROTATION_SETS or graph)
    n = min(need, MAX_ROTATION_SETS) if rotate else 1

    def runs(calls_per_run: int) -> tuple[int, int]:
        # (timed runs, warm-up runs) for runs of this many calls: the budget, the run cap and
        # the 50-ms warm-up count calls (a graph's run is a replay of several)
        run_ms = est * calls_per_run
        return (-(-int(min(iterations, max(5, budget_ms // run_ms))) // rounds),
                int(min(10, max(1, 50 // run_ms))))

    iters, warm = runs(graph_replay_calls(DEFAULT_GRAPH_CALLS, n) if graph else 1)
    eager_iters, eager_warm = runs(1)  # where a capture fails
    if rotate:
        # cold by rotating over input copies spanning 3x the L2 (see cuda_llm_ops.timing)
        if need > n:
            notes.append(f"L2 partly warm: {n} input sets of {case.bytes / 1e6:.2f} MB span less than 3x the L2")
        fns = [fn] + [impl.build(_inputs(case, seed + j)) for j in range(1, n)]

        def rotated(iters: int, warm: int, **graph_kw) -> Timing:
            # a record says cold_l2 only where the sets span 3x the L2
            t = benchmark(fn, warmup=warm, iterations=iters, fn_sets=fns, cold_l2=True, warmup_ms=warmup_ms,
                          **graph_kw)
            return replace(t, cold_l2=False) if need > n else t

        if graph:
            try:
                return rotated(iters, warm, cuda_graph=True)
            except RuntimeError as exc:  # not capturable (host sync, eager allocation, ...)
                notes.append(f"graph capture failed ({_short(exc)}); timed without a graph")
                torch.cuda.synchronize()
        return rotated(eager_iters, eager_warm)
    if graph:
        try:
            return benchmark(fn, warmup=warm, iterations=iters, cuda_graph=True, warmup_ms=warmup_ms)
        except RuntimeError as exc:
            notes.append(f"graph capture failed ({_short(exc)}); timed without a graph")
            torch.cuda.synchronize()
    return benchmark(fn, warmup=eager_warm, iterations=eager_iters, cold_l2=case.cold_l2, warmup_ms=warmup_ms)


def run_cases(selected: list[Selected], ceilings: rl.Ceilings | None, *, iterations: int = 100,
              budget_ms: float = 300.0, seed: int = 0, progress: bool = True,
              on_result: Callable[[Result], None] | None = None, eager: bool = False,
              rounds: int = 1, warmup_ms: float = 0.0) -> list[Result]:
    """Check and time every selected implementation; one Result each, in order (`eager`:
    no CUDA graphs, every call launched from Python, host time included; `rounds` > 1: each
    case's implementations timed in that many interleaved rounds, see _time_rounds; `warmup_ms`:
    each timing first runs the call back to back this long, timing.benchmark)."""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    total = sum(len(s.impls) for s in selected)
    bar = _progress(total, progress)
    results: list[Result] = []
    old_tf32 = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 peers run true fp32, as our fp32 kernels do
    torch.backends.cudnn.allow_tf32 = False
    try:
        for sel in selected:
            interrupted = None
            try:
                case_results = _run_case(sel, ceilings, iterations, budget_ms, seed, bar, eager, rounds,
                                         warmup_ms)
            except _RoundsInterrupted as exc:  # the case's rounds so far still count
                case_results, interrupted = exc.results, exc
            for r in case_results:
                if on_result:
                    on_result(r)
            results += case_results
            if interrupted is not None:
                raise KeyboardInterrupt from interrupted
            torch.cuda.empty_cache()
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old_tf32
        bar.close()
    return results


def _run_case(sel: Selected, ceilings, iterations, budget_ms, seed, bar, eager: bool = False,
              rounds: int = 1, warmup_ms: float = 0.0) -> list[Result]:
    case = sel.case
    results: list[Result] = []
    why_not: dict[str, str] = {}

    def unavailable(impl: BenchImpl, inputs) -> str | None:
        if impl.name in why_not:
            return why_not[impl.name]
        why = None
        if impl.unavailable is not None:
            try:
                why = impl.unavailable(inputs)
            except Exception as exc:  # noqa: BLE001
                why = f"availability check raised {_short(exc)}"
        why_not[impl.name] = why
        return why

    # The reference output: the case's own, else the first peer that runs and returns a tensor.
    ref: torch.Tensor | None = None
    ref_name = ""
    ref_problem = "no reference or peer output to check against"
    if case.reference is not None:
        inputs = None
        try:
            inputs = _inputs(case, seed)
            ref = first_tensor(case.reference(inputs))
            ref_name = "reference"
            if ref is not None and not _all_finite(ref):  # it would fail every implementation
                ref, ref_problem = None, "the case's reference output holds NaN/inf and no peer ran"
        except Exception as exc:  # noqa: BLE001 - fall back to the peers, say so if none runs
            ref_problem = f"the case's reference failed ({_short(exc)}) and no peer ran"
            if isinstance(exc, torch.cuda.OutOfMemoryError):
                torch.cuda.empty_cache()
        finally:
            del inputs
    if ref is None:
        for impl in case.impls:
            if not impl.is_peer:
                continue
            inputs = _inputs(case, seed)
            try:
                if unavailable(impl, inputs):
                    continue
                ref = first_tensor(impl.build(inputs)())
                ref_name = impl.name
                if ref is not None and not _all_finite(ref):  # this peer fails in its own row
                    ref = None
            except Exception as exc:  # noqa: BLE001 - this peer then fails in its own row
                if isinstance(exc, torch.cuda.OutOfMemoryError):
                    torch.cuda.empty_cache()
                continue
            finally:
                del inputs
            if ref is not None:
                break
    if ref is not None:
        ref = ref.detach().clone()

    for impl in sel.impls:
        bar.set_postfix_str(f"{case.op} {case.label or ''} {impl.name}"[:60])
        res = Result(sel.group, case, impl, "ok", eager=eager)
        inputs = fn = out = None
        with contextlib.ExitStack() as scope:
            try:
                if impl.scope is not None:  # SDPA's backend pin: held over the check and the timing
                    scope.enter_context(impl.scope())
                inputs = _inputs(case, seed)
                why = unavailable(impl, inputs)
                if why:
                    res.status, res.error = "unavailable", why
                else:
                    fn = impl.build(inputs)
                    out = fn()
                    torch.cuda.synchronize()
                    if ref is None:
                        res.status, res.error = "unchecked", ref_problem
                    else:
                        res.rel_err, err = _check(out, ref, case.rel_tol)
                        if err:
                            res.status, res.error = "failed", f"{err} (vs {ref_name})"
                    if res.status in ("ok", "unchecked"):
                        del out
                        out = None
                        res.timing = _time_impl(case, impl, fn, seed, iterations, budget_ms, res.notes, eager,
                                                rounds, warmup_ms=warmup_ms)
                        res.roof = _roof(case, ceilings, res.timing.median_ms * 1e-3)
            except Exception as exc:  # noqa: BLE001 - reported as FAILED, the run goes on
                if _missing_kernel(exc):
                    res.status, res.error = "unavailable", _short(exc)
                else:
                    res.status, res.error = "failed", _short(exc)
                res.timing = None
                if isinstance(exc, torch.cuda.OutOfMemoryError):
                    torch.cuda.empty_cache()
            finally:
                del inputs, fn, out
        results.append(res)
        bar.update(1)
    del ref
    if rounds > 1:
        _time_rounds(case, results, ceilings, iterations, budget_ms, seed, eager, rounds, warmup_ms)
    return results


class _RoundsInterrupted(KeyboardInterrupt):
    """Ctrl-C during a case's later rounds: its results, timed over the rounds pooled so far."""

    def __init__(self, results: list[Result]):
        super().__init__()
        self.results = results


def _time_rounds(case: BenchCase, results: list[Result], ceilings, iterations, budget_ms, seed, eager,
                 rounds: int, warmup_ms: float = 0.0) -> None:
    """Rounds 2..rounds of a case's timed implementations (round 1 timed each right after its
    check), in alternating order, each on fresh inputs under its scope; each Result's timing
    pools its rounds' runs. A long compute-bound case heats the GPU and its clocks drop as it
    goes (H100 prefill rows: one implementation's p20 and median 20% apart): timed one after
    the other, the later implementations pay for the earlier ones' heat; interleaved, all pay
    alike. A round that fails, or is timed another way (say its graph capture failed), is left
    out and named in the notes; the implementation's later rounds still run."""
    timed = [r for r in results if r.timing is not None]
    pooled = {id(r): 1 for r in timed}
    try:
        for k in range(1, rounds):
            for res in (timed[::-1] if k % 2 else timed):
                inputs = fn = None
                notes: list[str] = []
                with contextlib.ExitStack() as scope:
                    try:
                        if res.impl.scope is not None:
                            scope.enter_context(res.impl.scope())
                        inputs = _inputs(case, seed)
                        fn = res.impl.build(inputs)
                        fn()
                        torch.cuda.synchronize()
                        part = _time_impl(case, res.impl, fn, seed, iterations, budget_ms, notes, eager, rounds,
                                          warmup_ms=warmup_ms)
                        res.timing = pool_timings([res.timing, part])
                        pooled[id(res)] += 1
                    except Exception as exc:  # noqa: BLE001 - the other rounds stand
                        res.notes.append(f"round {k + 1} of {rounds} left out ({_short(exc)})")
                        if isinstance(exc, torch.cuda.OutOfMemoryError):
                            torch.cuda.empty_cache()
                    finally:
                        del inputs, fn
                res.notes += [n for n in notes if n not in res.notes]
    except KeyboardInterrupt as exc:
        _finish_rounds(case, timed, pooled, ceilings, rounds)
        raise _RoundsInterrupted(results) from exc
    _finish_rounds(case, timed, pooled, ceilings, rounds)


def _finish_rounds(case: BenchCase, timed: list[Result], pooled: dict[int, int], ceilings, rounds: int) -> None:
    for res in timed:
        res.roof = _roof(case, ceilings, res.timing.median_ms * 1e-3)
        n = pooled[id(res)]
        # first: the table cuts a row's note at 120 characters
        res.notes.insert(0, f"{rounds} interleaved rounds" if n == rounds else f"{n} of {rounds} interleaved rounds")


def _roof(case: BenchCase, ceilings: rl.Ceilings | None, time_s: float) -> rl.Roofline | None:
    if ceilings is None or case.bytes <= 0:
        return None
    try:
        return rl.analyze(case.flops, case.bytes, ceilings, case.compute, time_s)
    except ValueError:
        return None


class _NoBar:
    def set_postfix_str(self, s):
        pass

    def update(self, n):
        pass

    def close(self):
        pass


def _progress(total: int, enabled: bool):
    if not enabled:
        return _NoBar()
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _NoBar()
    tty = sys.stderr.isatty()
    return tqdm(total=total, desc="llm-speed bench", unit="impl", file=sys.stderr, dynamic_ncols=True,
                mininterval=0.2 if tty else 30.0)


# --------------------------------------------------------------------------- records


def environment() -> dict[str, str]:
    gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "none"
    return {"gpu": gpu, "torch": torch.__version__, "cuda": str(torch.version.cuda), "git_sha": git_sha()}


def git_sha() -> str:
    """Short commit of the package's checkout, "-dirty" when tracked files changed; "unknown" outside git.

    Only a checkout of this package counts: installed from a wheel, the package's parent is
    site-packages, which may lie inside some other repository (a project's .venv)."""
    import os

    if os.environ.get("LLM_SPEED_GIT_SHA"):
        return os.environ["LLM_SPEED_GIT_SHA"]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        top_sha = subprocess.run(["git", "-C", root, "rev-parse", "--show-toplevel", "--short", "HEAD"],
                                 capture_output=True, text=True, timeout=5).stdout.splitlines()
        if len(top_sha) != 2 or not os.path.samefile(top_sha[0], root):
            return "unknown"
        sha = top_sha[1]
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def _json_safe(v: Any) -> Any:
    if isinstance(v, (bool, int, str)) or v is None:
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, torch.dtype):
        return dtype_name(v)
    if isinstance(v, (list, tuple)):
        return [_json_safe(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _json_safe(x) for k, x in v.items()}
    return str(v)


def to_record(r: Result, env: dict[str, str], timestamp: str | None = None) -> dict:
    """One JSON record (fields `RECORD_FIELDS`); numbers are null for failed/unavailable rows."""
    t, c = r.timing, r.case
    sec = t.median_ms * 1e-3 if t else None
    rec = {
        "op": c.op, "impl": r.impl.name, "is_peer": bool(r.impl.is_peer), "dtype": dtype_name(c.dtype),
        "shape": _json_safe(c.shape),
        "median_ms": t.median_ms if t else None, "p20_ms": t.p20_ms if t else None,
        "p80_ms": t.p80_ms if t else None,
        "tflops": c.flops / sec / 1e12 if sec else None, "tbps": c.bytes / sec / 1e12 if sec else None,
        "pct_of_roofline": r.roof.pct_of_roofline if r.roof else None,
        "bottleneck": r.roof.bottleneck.value if (r.roof and r.roof.bottleneck) else None,
        "cold_l2": bool(t.cold_l2) if t else bool(c.cold_l2),
        "cuda_graph": bool(t.cuda_graph) if t else bool(c.cuda_graph) and not r.eager,
        "gpu": env["gpu"], "torch": env["torch"], "cuda": env["cuda"], "git_sha": env["git_sha"],
        "timestamp": timestamp or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "status": r.status,
        "error": "; ".join([r.error] + r.notes) if r.error else ("; ".join(r.notes) or None),
        "roofline": env.get("roofline"),
        "l2_method": t.l2_method if t else None,
    }
    return {k: _json_safe(rec[k]) for k in RECORD_FIELDS + OPTIONAL_FIELDS}


def validate_record(rec: dict) -> None:
    """Raise ValueError when a record does not follow the schema (used by tests and `plot`)."""
    missing, extra = set(RECORD_FIELDS) - set(rec), set(rec) - set(RECORD_FIELDS) - set(OPTIONAL_FIELDS)
    if missing or extra:
        raise ValueError(f"record fields differ from the schema: missing {sorted(missing)}, extra {sorted(extra)}")
    roof = rec.get("roofline")
    if roof is not None and not (isinstance(roof, dict) and isinstance(roof.get("bandwidth_tbps"), (int, float))
                                 and isinstance(roof.get("peak_tflops"), dict)):
        raise ValueError(f"record field roofline must be null or a dict with bandwidth_tbps and peak_tflops, "
                         f"got {roof!r}")
    if not isinstance(rec.get("l2_method"), (str, type(None))):
        raise ValueError(f"record field l2_method must be a string or null, got {rec['l2_method']!r}")
    if rec["status"] not in STATUSES:
        raise ValueError(f"record status must be one of {STATUSES}, got {rec['status']!r}")
    for k in ("op", "impl", "dtype", "gpu", "torch", "cuda", "git_sha", "timestamp"):
        if not isinstance(rec[k], str):
            raise ValueError(f"record field {k} must be a string, got {rec[k]!r}")
    for k in ("is_peer", "cold_l2", "cuda_graph"):
        if not isinstance(rec[k], bool):
            raise ValueError(f"record field {k} must be a bool, got {rec[k]!r}")
    if not isinstance(rec["shape"], dict):
        raise ValueError(f"record field shape must be a dict, got {rec['shape']!r}")
    timed = rec["status"] in ("ok", "unchecked")
    for k in ("median_ms", "p20_ms", "p80_ms", "tflops", "tbps"):
        v = rec[k]
        # tflops may be 0: a pure copy (paged_kv_append) does no floating-point work
        ok = isinstance(v, (int, float)) and (v >= 0 if k == "tflops" else v > 0)
        if timed and not ok:
            what = "a number >= 0" if k == "tflops" else "a positive number"
            raise ValueError(f"record field {k} must be {what} for a timed row, got {v!r}")
        if not timed and v is not None:
            raise ValueError(f"record field {k} must be null for a {rec['status']} row, got {v!r}")
    if timed and not (rec["p20_ms"] <= rec["median_ms"] <= rec["p80_ms"]):
        raise ValueError(f"record needs p20 <= median <= p80, got {rec['p20_ms']}, {rec['median_ms']}, "
                         f"{rec['p80_ms']}")
    if rec["bottleneck"] is not None and rec["bottleneck"] not in {b.value for b in rl.Bottleneck}:
        raise ValueError(f"record bottleneck must be one of {[b.value for b in rl.Bottleneck]}, "
                         f"got {rec['bottleneck']!r}")
    if not timed and not rec["error"]:
        raise ValueError(f"a {rec['status']} record must say why in 'error'")
