"""What `llm-speed bench` runs: benchmark cases, each with our implementation
and its peers, registered per op group by the area modules (cases_*.py).

A case describes a shape and its FLOP and byte counts without touching the GPU,
so `llm-speed roofline` can print floors on any machine; `make_inputs` and the
implementations' `build` run only when the bench runs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, ContextManager

import torch

Inputs = dict[str, Any]


@dataclass
class BenchImpl:
    """One implementation of a case: ours (is_peer=False) or a peer's."""

    name: str  # "cuda_llm_ops", "cublas", "sdpa-flash", "torch-eager", "triton", ...
    is_peer: bool
    # Builds a zero-argument callable from the inputs; calling it runs the op once
    # and returns the output to check (a tensor, or a tuple whose first item is checked).
    build: Callable[[Inputs], Callable[[], Any]]
    # Why this impl cannot run on this device/shape, or None when it can.
    unavailable: Callable[[Inputs], str | None] | None = None
    # A context the runner holds around this impl's check, build and timing (SDPA's
    # backend pin, bench/sdpa.py), so the timed call carries no per-call set-up.
    scope: Callable[[], ContextManager[Any]] | None = None


@dataclass
class BenchCase:
    op: str  # e.g. "flash_attention", "gemm", "paged_attention"
    dtype: torch.dtype
    shape: dict[str, Any]  # e.g. {"B": 4, "H": 16, "N": 4096, "D": 128, "causal": False}
    flops: float  # useful floating-point (or integer) operations of one call
    bytes: float  # fewest bytes one call must move through device memory
    compute: str  # which peak bounds it: one of roofline.COMPUTE_KINDS
    make_inputs: Callable[[], Inputs]  # fresh random inputs on the current CUDA device
    impls: list[BenchImpl] = field(default_factory=list)
    # Output every impl is checked against before timing (None: compare with the first peer).
    reference: Callable[[Inputs], Any] | None = None
    rel_tol: float = 2e-2
    cold_l2: bool = False  # memory-bound: flush/rotate L2 between runs
    cuda_graph: bool = False  # launch-bound: time graph replays
    label: str = ""  # short text for tables and plot x axes (e.g. "N=4096")
    # Optional: the shape key plotted on the x axis by `llm-speed bench --plot` (e.g. "N", "M");
    # empty: the numeric shape key with the most distinct values among the op's cases.
    x_key: str = ""


# Model shapes the presets stand for (`llm-speed bench --preset NAME`). "square" means square
# GEMMs (M = N = K); "all" (the default) means every preset a group has.
PRESETS: dict[str, dict[str, int]] = {
    "llama-7b": {"hidden": 4096, "heads": 32, "kv_heads": 32, "head_dim": 128, "intermediate": 11008},
    "llama-8b": {"hidden": 4096, "heads": 32, "kv_heads": 8, "head_dim": 128, "intermediate": 14336},
    "llama-70b": {"hidden": 8192, "heads": 64, "kv_heads": 8, "head_dim": 128, "intermediate": 28672},
    "square": {},
}
PRESET_NAMES = ("all", *PRESETS)

# op group name -> function(dtype, preset, quick) -> list[BenchCase]
_GROUPS: dict[str, Callable[..., list[BenchCase]]] = {}


def register(group: str):
    """Decorator for a case generator `fn(dtype: torch.dtype, preset: str, quick: bool) -> list[BenchCase]`.

    - `dtype`: the dtype asked for (`--dtype`, default float16; also float32, bfloat16, int8);
      return [] when the group does not bench that dtype.
    - `preset`: "all" or a key of `PRESETS`; return [] for a preset that does not apply.
    - `quick`: a handful of shapes for a smoke run (`--quick`, seconds, not minutes).
    Generating cases must not touch the GPU (`llm-speed roofline` lists them on any machine).
    The runner runs `make_inputs` under a fixed seed once per implementation, so an op that
    updates its inputs in place cannot disturb the next implementation's check. For a
    `cold_l2` case it also calls `make_inputs` and `build` once more per rotated input copy
    (copies spanning 3x the L2, see `cuda_llm_ops.timing`), so `build` must not assume it runs once.
    """

    def wrap(fn):
        _GROUPS[group] = fn
        return fn

    return wrap


def groups() -> dict[str, Callable[..., list[BenchCase]]]:
    return dict(_GROUPS)
