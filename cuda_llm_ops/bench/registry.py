"""What `llm-speed bench` runs: benchmark cases, each with our implementation
and its peers, registered per op group by the area modules (cases_*.py).

A case describes a shape and its FLOP and byte counts without touching the GPU,
so `llm-speed roofline` can print floors on any machine; `make_inputs` and the
implementations' `build` run only when the bench runs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

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


@dataclass
class BenchCase:
    op: str  # e.g. "flash_attention", "gemm", "paged_attention"
    dtype: torch.dtype
    shape: dict[str, Any]  # e.g. {"B": 4, "H": 16, "N": 4096, "D": 128, "causal": False}
    flops: float  # useful floating-point (or integer) operations of one call
    bytes: float  # fewest bytes one call must move through device memory
    compute: str  # which peak bounds it: "fp32", "tf32", "fp16_tc", "bf16_tc", "int8_tc"
    make_inputs: Callable[[], Inputs]  # fresh random inputs on the current CUDA device
    impls: list[BenchImpl] = field(default_factory=list)
    # Output every impl is checked against before timing (None: compare with the first peer).
    reference: Callable[[Inputs], Any] | None = None
    rel_tol: float = 2e-2
    cold_l2: bool = False  # memory-bound: flush/rotate L2 between runs
    cuda_graph: bool = False  # launch-bound: time graph replays
    label: str = ""  # short text for tables and plot x axes (e.g. "N=4096")


# op group name -> function(dtype, preset, quick) -> list[BenchCase]
_GROUPS: dict[str, Callable[..., list[BenchCase]]] = {}


def register(group: str):
    """Decorator for a case generator `fn(dtype: torch.dtype, preset: str, quick: bool) -> list[BenchCase]`."""

    def wrap(fn):
        _GROUPS[group] = fn
        return fn

    return wrap


def groups() -> dict[str, Callable[..., list[BenchCase]]]:
    return dict(_GROUPS)
