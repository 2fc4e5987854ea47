"""Loading of the compiled extension and access to its ops.

`import cuda_llm_ops` always works; the kernels live in `cuda_llm_ops._C`, which
is built only where torch has CUDA. Every public op goes through `op()`, which
raises a RuntimeError saying how to build the kernels when they are missing.
"""
from __future__ import annotations

import torch

_BUILD_HINT = (
    "build them on a machine with a CUDA toolkit and a CUDA build of torch: "
    "`MAX_JOBS=8 TORCH_CUDA_ARCH_LIST=9.0a python -m pip install --no-build-isolation -e .` "
    "(use the arch of your GPU, e.g. 8.0 for A100)"
)

import importlib
import importlib.util

_C = None
_LOAD_ERROR: str | None = None
if importlib.util.find_spec(f"{__package__}._C") is None:
    _LOAD_ERROR = "no compiled extension cuda_llm_ops._C was found"
else:
    try:
        _C = importlib.import_module(f"{__package__}._C")  # loading it registers the ops
    except (ImportError, OSError) as exc:  # e.g. built against another torch
        _LOAD_ERROR = f"loading cuda_llm_ops._C failed: {exc}"


def kernels_available() -> bool:
    """True when the compiled CUDA kernels were loaded."""
    return _C is not None


def build_info() -> str:
    """Which kernel areas the loaded extension was built with (e.g. "areas=attention,gemm")."""
    if _C is None:
        return "not built"
    return torch.ops.cuda_llm_ops.build_info()


_HAS_OP: dict[str, bool] = {}


def has_op(name: str) -> bool:
    """True when op `name` is registered (its area was built). Remembered per name: the
    loaded extension never changes and flash_attention asks on every call (a plain dict,
    not functools.cache, which torch.compile warns about when it traces the caller)."""
    known = _HAS_OP.get(name)
    if known is None:
        known = _HAS_OP[name] = _C is not None and hasattr(torch.ops.cuda_llm_ops, name)
    return known


def op(name: str):
    """The `torch.ops.cuda_llm_ops.<name>` op, or a RuntimeError that says why it is missing."""
    if _C is None:
        raise RuntimeError(
            f"cuda_llm_ops.{name}: the package was installed without its CUDA kernels ({_LOAD_ERROR}); "
            + _BUILD_HINT
        )
    if not hasattr(torch.ops.cuda_llm_ops, name):
        raise RuntimeError(
            f"cuda_llm_ops.{name}: this build of the extension has no '{name}' kernel ({build_info()}); "
            "rebuild without CUDA_LLM_OPS_AREAS set to build every area"
        )
    return getattr(torch.ops.cuda_llm_ops, name)


def register_fake(name: str):
    """Decorator: register a fake (meta) kernel for op `name` when the op exists.

    Fake kernels let torch.compile trace through our ops without running them.
    Without the extension there is no op to attach to, and nothing is registered.
    """

    def wrap(fn):
        if has_op(name):
            torch.library.register_fake(f"cuda_llm_ops::{name}")(fn)
        return fn

    return wrap
