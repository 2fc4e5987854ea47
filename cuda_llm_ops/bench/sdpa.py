"""SDPA pinned to one backend: the peer the attention and decode cases time.

`pinned(name)` restricts `F.scaled_dot_product_attention` to one backend (and silences
the warnings a pinned backend prints when it declines a call). The runner enters it once
around an SDPA peer's check and timing (`BenchImpl.scope`), so each timed call is the bare
SDPA call, as in a model that picks its backend once; `run(name, fn)` pins per call only
outside such a scope (dev scripts, availability checks), so a peer built anywhere runs on
its backend. In graph replays the pin costs nothing either way; in `--eager` timing,
`sdpa_kernel` on every call would add ~10 us of host time that a serving loop does not pay.
"""
from __future__ import annotations

import contextlib
import warnings
from typing import Any, Callable, Iterator

import torch.nn.functional as F

try:  # torch >= 2.3
    from torch.nn.attention import SDPBackend, sdpa_kernel
except ImportError:  # pragma: no cover - older torch
    SDPBackend = sdpa_kernel = None

NAMES = ("flash", "cudnn", "efficient", "math")
_active: list[str] = []  # backends pinned by enclosing scopes, innermost last


def backend(name: str):
    """The `SDPBackend` for `name` (one of NAMES), or None when this torch lacks it."""
    if name not in NAMES:
        raise ValueError(f"SDPA backend must be one of {NAMES}, got {name!r}")
    if SDPBackend is None:
        return None
    return {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": getattr(SDPBackend, "CUDNN_ATTENTION", None),
            "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}[name]


@contextlib.contextmanager
def pinned(name: str) -> Iterator[None]:
    """SDPA runs only backend `name` inside (its warnings silenced); a torch without
    that backend gets no pin (the peer's availability check reports it)."""
    chosen = backend(name)
    with warnings.catch_warnings(), (sdpa_kernel(chosen) if chosen is not None else contextlib.nullcontext()):
        warnings.simplefilter("ignore")
        _active.append(name)
        try:
            yield
        finally:
            _active.pop()


def run(name: str, fn: Callable[[], Any]) -> Any:
    """`fn()` on backend `name`: as is inside `pinned(name)`, else inside a pin of its own."""
    if _active and _active[-1] == name:
        return fn()
    with pinned(name):
        return fn()


def call(name: str, q, k, v, gqa: bool, **kwargs) -> Any:
    """`F.scaled_dot_product_attention(q, k, v, **kwargs)` on backend `name` (`run`), with
    `enable_gqa=True` when `gqa` (not passed otherwise: torch before 2.5 lacks it)."""
    if gqa:
        kwargs["enable_gqa"] = True
    return run(name, lambda: F.scaled_dot_product_attention(q, k, v, **kwargs))
