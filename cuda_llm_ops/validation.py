"""Input checks shared by every op. Each failure names the argument, what was
expected and what was given; none needs a host synchronisation."""
from __future__ import annotations

import torch

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
ATTENTION_MAX_HEAD_DIM = 256


def call_or_explain(call, explain):
    """Runs `call()` (the op) with the Python checks behind it, not in front of it.

    Every op's C++ binding (csrc/bindings) checks each input its kernel relies on before
    anything launches, in a few microseconds; running the same checks in Python first
    cost 6-28 us of host time per call over the raw op (H100 machine,
    `scripts/host_overhead.py`, csrc/decode/NOTES.md v8), which an eager decode loop
    pays per layer. When the op refuses, `explain()` runs the Python checks, which raise the
    richer ValueError/TypeError naming the argument; if they find nothing, the op's own
    error goes up. While torch.compile traces, the checks run first as always (fake
    tensors reach no C++ check).
    """
    if torch.compiler.is_compiling():
        explain()
        return call()
    try:
        return call()
    except (RuntimeError, TypeError, ValueError, AttributeError, IndexError) as exc:
        refused = exc
    explain()  # outside the handler: its error is not shown as raised "during" the op's
    raise refused


def byte_range(t: torch.Tensor) -> tuple[int, int]:
    """[first, end) bytes of a tensor, from its first element to the end of its last: its size
    when contiguous, more for a strided view (csrc/bindings/checks.h `span_bytes`); empty for
    no elements. Two ranges that intersect are exact overlap for contiguous tensors and
    transposes; strided views that interleave without sharing an element also intersect."""
    lo = t.data_ptr()
    if t.is_contiguous():  # the common case, without the Python loop below
        return lo, lo + t.nbytes
    if t.numel() == 0:
        return lo, lo
    return lo, lo + (sum((n - 1) * st for n, st in zip(t.shape, t.stride())) + 1) * t.element_size()


def _stride_levels(a: torch.Tensor, b: torch.Tensor) -> list[list[int]] | None:
    """[stride, size in a, size in b] of the two views' dimensions of size > 1, one level per
    distinct stride, largest first (size 1 where a view has none); None where a view has two
    dims of one stride. csrc/bindings/checks.h `stride_levels`."""
    levels: dict[int, list[int]] = {}
    for which, t in ((1, a), (2, b)):
        for n, st in zip(t.shape, t.stride()):
            if n > 1:
                level = levels.setdefault(st, [st, 1, 1])
                if level[which] != 1:
                    return None
                level[which] = n
    return sorted(levels.values(), reverse=True)


def ranges_overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors share an element, the test of every "must not overlap" check: no
    where their spans (`byte_range`) are apart; exact where each one's dimensions nest (in stride
    order, each stride at least the span of those below it) and they start a whole number of
    equal-sized elements apart, so views of one buffer that interleave without sharing an
    element are apart (a fused projection's q / k / v views: per token [q heads | k heads |
    v heads], GPT-NeoX's per head [q | k | v], Bloom's [H, 3, D]); else by their spans.
    csrc/bindings/checks.h `ranges_overlap`."""
    return _spans_meet(byte_range(a), byte_range(b)) and _share_element(a, b)


def _spans_meet(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Whether two `byte_range`s intersect (both non-empty): `ranges_overlap`'s first test."""
    return a[0] < a[1] and b[0] < b[1] and a[0] < b[1] and b[0] < a[1]


def _share_element(a: torch.Tensor, b: torch.Tensor) -> bool:
    """`ranges_overlap` for two views whose spans meet: the exact test where it applies, else True."""
    e, diff = a.element_size(), a.data_ptr() - b.data_ptr()
    levels = _stride_levels(a, b) if b.element_size() == e and diff % e == 0 else None
    if levels is None:
        return True
    below = []  # each view's span of the levels below each level
    span_a = span_b = 1
    for s, na, nb in reversed(levels):
        if s < span_a or s < span_b:
            return True  # not nested: the spans' answer
        below.append((span_a, span_b))
        span_a, span_b = span_a + s * (na - 1), span_b + s * (nb - 1)
    below.reverse()

    def meet(i: int, d: int) -> bool:  # offsets y - x = d, x in a's levels from i down, y in b's
        if i == len(levels):
            return d == 0
        s, na, nb = levels[i]
        lo = max(-((-(d - below[i][1] + 1)) // s), 1 - na)
        hi = min((d + below[i][0] - 1) // s, nb - 1)
        return any(meet(i + 1, d - k * s) for k in range(lo, hi + 1))

    return meet(0, diff // e)


def check_elements_apart(t: torch.Tensor, name: str) -> None:
    """A tensor an op writes must give each element its own memory: the dimensions of size > 1
    in stride order, each stride at least the span of those below it (an expand()ed view or
    overlapping as_strided rows would have several elements written at once; every permutation,
    slice or narrow of a dense buffer passes). csrc/bindings/checks.h `elements_apart`."""
    if t.numel() <= 1:
        return
    span = 1
    for stride, size in sorted((st, n) for st, n in zip(t.stride(), t.shape) if n > 1):
        if stride < span:
            raise ValueError(f"{name} is written and its elements must not share memory (an expand()ed or "
                             f"overlapping as_strided view), got strides {t.stride()} for shape {tuple(t.shape)}")
        span += stride * (size - 1)


def check_out_apart(out: torch.Tensor | None, named, allow_same=(), out_name: str = "out") -> None:
    """`out` (a tensor the op writes, called `out_name`) must not overlap any (tensor, name) of
    `named` (None entries skipped; overlap as `ranges_overlap`); a name in `allow_same` may be out
    itself (same address). Skipped while torch.compile traces (fake tensors have no addresses)."""
    if out is not None:  # the common no-out= call: no spans to compute
        check_writes_apart([(out, out_name)] + list(named), (out_name,), allow_same)


def check_writes_apart(named, written, allow_same=()) -> None:
    """Each tensor an op writes lands apart from every other argument: for each name of
    `written` in turn, the first (tensor, name) of `named` so called must not overlap any other
    entry of `named` (`ranges_overlap`; None entries skipped), in `named`'s order; a name in `allow_same`
    may be the written tensor itself (same address). Each span is computed once and the exact
    test runs only where two spans meet (an eager call's host time: fused_decode_block's four
    written tensors against ten others). Skipped while torch.compile traces (fake tensors have
    no addresses)."""
    present = []  # the written tensors given, as indices into `named`
    for w_name in written:
        i = next((k for k, (_, name) in enumerate(named) if name == w_name), None)
        if i is None:  # a caller's slip, not to pass unchecked
            raise ValueError(f"check_writes_apart: no argument named {w_name!r} among {[n for _, n in named]}")
        if named[i][0] is not None:
            present.append(i)
    if not present or torch.compiler.is_compiling():
        return
    spans = [byte_range(t) if t is not None else None for t, _ in named]
    for i in present:
        w, w_name = named[i]
        for j, (t, name) in enumerate(named):
            if j == i or t is None or (name in allow_same and t.data_ptr() == w.data_ptr()):
                continue
            if _spans_meet(spans[i], spans[j]) and _share_element(w, t):
                raise ValueError(f"{w_name} must not overlap {name}" + (f" (it may be {name} itself)"
                                                                        if name in allow_same else ""))


def _dt(d: torch.dtype) -> str:
    return str(d).replace("torch.", "")


def check_tensor(t, name: str) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")


def check_rank(t: torch.Tensor, name: str, rank: int, layout: str) -> None:
    if t.dim() != rank:
        raise ValueError(f"{name} must be {rank}-D {layout}, got {t.dim()}-D with shape {tuple(t.shape)}")


def check_cuda(t: torch.Tensor, name: str) -> None:
    if t.device.type != "cuda":
        raise ValueError(f"{name} must be a CUDA tensor, got device '{t.device}'")


def check_same_device(t: torch.Tensor, name: str, ref: torch.Tensor, ref_name: str) -> None:
    if t.device != ref.device:
        raise ValueError(f"{name} must be on the same device as {ref_name} ({ref.device}), got {t.device}")


def given(*named):
    """The (tensor, name) pairs of `named` whose tensor is not None (an op's optional arguments)."""
    return [(t, name) for t, name in named if t is not None]


def check_one_cuda_device(named) -> None:
    """The first (tensor, name) pair must be a CUDA tensor and every other on its device."""
    (ref, ref_name), *rest = named
    check_cuda(ref, ref_name)
    for t, name in rest:
        check_same_device(t, name, ref, ref_name)


def check_dtype(t: torch.Tensor, name: str, allowed) -> None:
    allowed = tuple(allowed) if isinstance(allowed, (tuple, list)) else (allowed,)
    if t.dtype not in allowed:
        want = " or ".join(_dt(d) for d in allowed)
        raise ValueError(f"{name} must have dtype {want}, got {_dt(t.dtype)}")


def check_same_dtype(t: torch.Tensor, name: str, ref: torch.Tensor, ref_name: str) -> None:
    if t.dtype != ref.dtype:
        raise ValueError(f"{name} must have the same dtype as {ref_name} ({_dt(ref.dtype)}), got {_dt(t.dtype)}")


def check_nonempty(t: torch.Tensor, name: str, dims: str) -> None:
    if t.numel() == 0:
        raise ValueError(f"{name} must have no empty dimension ({dims}), got shape {tuple(t.shape)}")


def check_contiguous(t: torch.Tensor, name: str) -> None:
    if not t.is_contiguous():
        raise ValueError(
            f"{name} must be contiguous, got shape {tuple(t.shape)} with strides {t.stride()}; call .contiguous()"
        )


def check_last_dim_contiguous(t: torch.Tensor, name: str) -> None:
    """Rows must be dense and 16-byte aligned (kernels load 16 bytes at a time);
    the outer dimensions may have any stride (e.g. a transposed [B, N, H, D] view)."""
    elem = t.element_size()
    if t.dim() and t.shape[-1] * elem % 16:
        raise ValueError(f"{name} rows must be a multiple of 16 bytes (the kernels load 16 bytes at a time), got "
                         f"last dimension {t.shape[-1]} x {elem} bytes = {t.shape[-1] * elem}")
    # Under torch.compile tensors are fakes without a data pointer; the op's C++
    # check still refuses a misaligned pointer at run time.
    ptr_ok = torch.compiler.is_compiling() or t.data_ptr() % 16 == 0
    aligned = ptr_ok and all((s * elem) % 16 == 0 for s in t.stride()[:-1])
    if t.stride(-1) != 1 or not aligned:
        raise ValueError(
            f"{name} must have a contiguous last dimension and 16-byte aligned rows, got strides {t.stride()} "
            f"(element size {elem} bytes, data_ptr % 16 = {t.data_ptr() % 16}); call .contiguous()"
        )


def validate_attention_inputs(q, k, v) -> None:
    """Check q `[B, Hq, Nq, D]`, k and v `[B, Hkv, Nk, D]` for the attention ops.

    Accepted: CUDA tensors of one dtype (float32, float16 or bfloat16) on one device;
    Hq a multiple of Hkv (GQA/MQA); D a multiple of 8 up to 256; every dimension >= 1.
    Strided inputs are accepted when the last dimension is contiguous and rows are
    16-byte aligned (e.g. `x.transpose(1, 2)` of a contiguous `[B, N, H, D]`);
    anything else raises a ValueError asking for `.contiguous()`.
    Raises TypeError/ValueError naming the argument, the expected and the actual value.
    """
    for t, name in ((q, "q"), (k, "k"), (v, "v")):
        check_tensor(t, name)
    check_rank(q, "q", 4, "[batch, num_q_heads, seq_len_q, head_dim]")
    check_rank(k, "k", 4, "[batch, num_kv_heads, seq_len_k, head_dim]")
    check_rank(v, "v", 4, "[batch, num_kv_heads, seq_len_k, head_dim]")
    check_dtype(q, "q", FLOAT_DTYPES)
    check_same_dtype(k, "k", q, "q")
    check_same_dtype(v, "v", q, "q")
    check_one_cuda_device(((q, "q"), (k, "k"), (v, "v")))
    for t, name in ((q, "q"), (k, "k"), (v, "v")):
        check_nonempty(t, name, "batch, heads, seq_len, head_dim")
    if tuple(k.shape) != tuple(v.shape):
        raise ValueError(f"k and v must have the same shape, got k {tuple(k.shape)} and v {tuple(v.shape)}")
    if k.shape[0] != q.shape[0]:
        raise ValueError(f"k batch size (dim 0) must match q's ({q.shape[0]}), got {k.shape[0]}")
    if k.shape[3] != q.shape[3]:
        raise ValueError(f"k head_dim (dim 3) must match q's ({q.shape[3]}), got {k.shape[3]}")
    hq, hkv = q.shape[1], k.shape[1]
    if hq % hkv != 0:
        raise ValueError(
            f"q's number of heads ({hq}) must be a multiple of k/v's number of heads, got num_kv_heads={hkv}"
        )
    d = q.shape[3]
    if d % 8 != 0 or d > ATTENTION_MAX_HEAD_DIM:
        raise ValueError(f"head_dim must be a multiple of 8 between 8 and {ATTENTION_MAX_HEAD_DIM}, got {d}")
    for t, name in ((q, "q"), (k, "k"), (v, "v")):
        check_last_dim_contiguous(t, name)


FLOAT32_MAX = torch.finfo(torch.float32).max  # the kernels take the scale as a float32
FLOAT32_MIN_NORMAL = torch.finfo(torch.float32).tiny
# The largest softmax scale / soft cap the kernels take: they multiply it by log2(e) in float32
# (csrc/bindings/checks.h kMaxScoreFactor).
MAX_SCORE_FACTOR = FLOAT32_MAX / 2


def score_factor_ok(x: float) -> bool:
    """A softmax scale or soft cap as the kernels take it: a normal float32 whose product with
    log2(e) stays finite (csrc/bindings/checks.h score_factor_ok)."""
    return FLOAT32_MIN_NORMAL <= x <= MAX_SCORE_FACTOR


def resolve_scale(scale: float, head_dim: int) -> float:
    """`scale == 0` means the usual 1/sqrt(head_dim)."""
    # NaN, negative, or infinite as a float32
    if scale != scale or scale < 0 or scale > FLOAT32_MAX:
        raise ValueError(f"scale must be finite and >= 0 (0 means 1/sqrt(head_dim)), got {scale}")
    if scale != 0 and not score_factor_ok(scale):
        raise ValueError(f"scale must be 0 or a normal float32 of at most 1.7e38 (the kernels take scale * log2(e)), "
                         f"got {scale}")
    if head_dim < 1:
        raise ValueError(f"head_dim (q's last dimension) must be >= 1, got {head_dim}")
    return scale if scale > 0 else head_dim ** -0.5
