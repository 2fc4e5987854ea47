"""Helpers for tests and correctness checks: poisoned outputs, fresh random
inputs and dtype-aware comparison against a higher-precision reference."""
from __future__ import annotations

import torch

# Relative Frobenius error allowed against a float32/float64 reference, by the
# dtype the kernel computed in (fp32 accumulation everywhere).
REL_TOL = {torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def poison_(t: torch.Tensor) -> torch.Tensor:
    """Fill `t` with NaN (floats) or an unlikely sentinel (ints) so unwritten outputs fail."""
    if t.is_floating_point():
        return t.fill_(float("nan"))
    return t.fill_(-0x5A5A5A5A if t.dtype == torch.int32 else -77)


def first_tensor(out) -> torch.Tensor | None:
    """The tensor to check in an op's result: the result itself, or the first item of a tuple/list."""
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        return out[0]
    return None


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float64 (inf when out holds NaN/inf)."""
    o, r = out.double(), ref.double()
    if not torch.isfinite(o).all():
        return float("inf")
    denom = r.norm().item()
    diff = (o - r).norm().item()
    return diff / denom if denom > 0 else diff


def assert_close(out: torch.Tensor, ref: torch.Tensor, dtype: torch.dtype | None = None, rel_tol: float | None = None,
                 what: str = "output") -> None:
    """Assert shape equality, no NaN/inf, and relative error within the dtype's tolerance.

    Also bounds the worst element against the reference's scale, and each row's error (a row:
    the last dimension) against 8x the tolerance times that row's norm (at least 5% of the
    largest row's), so one wrong or unwritten row cannot hide inside a small average error
    when other rows are much larger (a long sequence's output beside short ones').
    """
    dtype = dtype or out.dtype
    tol = rel_tol if rel_tol is not None else REL_TOL[dtype]
    assert tuple(out.shape) == tuple(ref.shape), f"{what}: shape {tuple(out.shape)} != reference {tuple(ref.shape)}"
    assert torch.isfinite(out).all(), f"{what}: contains NaN/inf (unwritten or overflowed elements)"
    err = rel_error(out, ref)
    assert err <= tol, f"{what}: relative error {err:.3e} > tolerance {tol:.1e} for {dtype}"
    scale = ref.double().abs().max().item() + 1e-6
    worst = (out.double() - ref.double()).abs().max().item()
    assert worst <= 50 * tol * scale + 1e-6, (
        f"{what}: worst element error {worst:.3e} exceeds {50 * tol:.1e} x max|ref| ({scale:.3e})")
    if out.dim() >= 2 and out.numel():
        r = ref.double().reshape(-1, ref.shape[-1])
        row_err = (out.double().reshape(-1, out.shape[-1]) - r).norm(dim=1)
        row_ref = r.norm(dim=1)
        bound = 8 * tol * torch.clamp(row_ref, min=0.05 * row_ref.max().item()) + 1e-6
        bad = (row_err > bound).nonzero()
        if bad.numel():
            i = int(bad[0, 0])
            raise AssertionError(f"{what}: row {i} (of {r.shape[0]}, flattened) has error {row_err[i].item():.3e} "
                                 f"> {bound[i].item():.3e} (8 x {tol:.1e} x its norm {row_ref[i].item():.3e}); "
                                 f"{bad.shape[0]} such rows")


def randn(*shape, dtype=torch.float16, device="cuda", generator=None, scale: float = 1.0) -> torch.Tensor:
    """Fresh standard-normal data (never zeros), made in float32 then cast."""
    return (torch.randn(*shape, device=device, generator=generator) * scale).to(dtype)


def decode_tma_stages_fit(head_dim: int, stages: int) -> bool:
    """Whether the decode TMA kernel with `stages` pipeline stages fits in the H100's 227 KB
    of shared memory at 16-bit K/V: `decode_tma_smem_bytes` (csrc/decode), i.e. the 1 KB
    alignment pad, K and V tiles of 64 keys in 64-column planes per stage, 16 q rows padded
    by 8 elements and two mbarriers per stage. Which depths the CLO_DECODE_TMA_STAGES knob
    can pick. A head dim without its own kernel counts as the one it runs on."""
    from .decode import decode_kernel_head_dim

    d = decode_kernel_head_dim(head_dim) or head_dim
    planes = (d + 63) // 64
    return 1024 + stages * (2 * planes * 64 * 64 * 2 + 16) + 16 * (d + 8) * 2 <= 227 * 1024


def device_is_hopper_hbm3e(device: int | None = None) -> bool:
    """Whether the GPU (default: torch's current device) is a Hopper part (sm_90) whose
    peak memory clock is above 3 GHz (HBM3e: the H200's 3.2 GHz; the H100's HBM3 runs 2.6),
    as the extension's `device_is_hopper_hbm3e` (csrc/include/cuda_llm_ops/common.cuh)
    decides, the clock read through the driver API: for tests of the choices that rule
    switches (decode head pairs at head_dim 72-88, TMA depths, the L2 promotion)."""
    import ctypes

    import torch

    device = torch.cuda.current_device() if device is None else device
    if torch.cuda.get_device_capability(device)[0] != 9:
        return False
    cuda = ctypes.CDLL("libcuda.so.1")
    handle, value = ctypes.c_int(), ctypes.c_int()
    memory_clock_rate = 36  # CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, kHz
    for call in (lambda: cuda.cuInit(0), lambda: cuda.cuDeviceGet(ctypes.byref(handle), device),
                 lambda: cuda.cuDeviceGetAttribute(ctypes.byref(value), memory_clock_rate, handle)):
        rc = call()
        if rc != 0:
            raise RuntimeError(f"CUDA driver call failed with CUresult {rc}")
    return value.value > 3_000_000


# A decode split workspace's first floats: split 0's partials of row 0, which every split call
# writes except those whose splits run as thread-block clusters (they merge through shared
# memory and write no partials, csrc/decode/NOTES.md "Stop 106").
_SPLIT_MARK, _SPLIT_MARK_FLOATS = 12345.0, 16


def mark_split_partials_(workspace: torch.Tensor) -> torch.Tensor:
    """Writes a sentinel over split 0's first partials in a decode `workspace` (in place)."""
    workspace[:_SPLIT_MARK_FLOATS] = _SPLIT_MARK
    return workspace


def split_clusters_ran(workspace: torch.Tensor) -> bool:
    """Whether the split calls since `mark_split_partials_(workspace)` left the sentinel: their
    splits ran as thread-block clusters (no partials written)."""
    return bool((workspace[:_SPLIT_MARK_FLOATS] == _SPLIT_MARK).all())


def kernel_names(fn) -> str:
    """The names of the GPU kernels one call of `fn` launches (torch profiler), one
    string: for tests that check which kernel variant a dispatcher picked."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return " ".join(e.key for e in prof.key_averages())


def kernel_grid_blocks(fn, name_part: str) -> int:
    """Thread blocks of the largest grid among the GPU kernels whose name contains
    `name_part` that one call of `fn` launches (the torch profiler's trace), 0 if none ran:
    for tests and sweeps that check a dispatcher's grid."""
    import json
    import tempfile

    import torch
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        with open(f.name) as trace:
            events = json.load(trace).get("traceEvents", [])
    grids = [e["args"]["grid"] for e in events
             if e.get("cat") == "kernel" and name_part in e.get("name", "") and "grid" in e.get("args", {})]
    return max((g[0] * g[1] * g[2] for g in grids), default=0)


class IsolatedChild:
    """One test script running in a child Python process (started at construction).

    `check()` waits for it and asserts it finished: exit code 0 and the ISOLATED-OK line the
    script ends with. The `timeout` counts from `clock`: the start, or where a pool hands the
    child to its test, the hand-over (IsolatedPool.take), so time spent queued beside other
    work is not the test's. Output goes to temporary files, not pipes: a child that prints a
    lot never blocks on a reader."""

    def __init__(self, code: str, timeout: float = 120.0, env: dict[str, str] | None = None,
                 base_env: dict[str, str] | None = None):
        import os
        import subprocess
        import sys
        import tempfile
        import textwrap
        import time

        self.timeout = timeout
        self._out, self._err = tempfile.TemporaryFile("w+"), tempfile.TemporaryFile("w+")
        script = textwrap.dedent(code) + "\nprint('ISOLATED-OK')\n"
        self.launched = self.clock = time.monotonic()
        self.proc = subprocess.Popen([sys.executable, "-c", script], stdout=self._out, stderr=self._err, text=True,
                                     env={**os.environ, **(base_env or {}), **(env or {})})

    def done(self) -> bool:
        return self.proc.poll() is not None

    def wait(self, until: float) -> bool:
        """Wait for the child to end, up to time.monotonic() `until`; True if it ended."""
        import subprocess
        import time

        try:
            self.proc.wait(timeout=max(0.0, until - time.monotonic()))
        except subprocess.TimeoutExpired:
            return False
        return True

    def _outputs(self) -> tuple[str, str]:
        texts = []
        for f in (self._out, self._err):
            f.seek(0)
            texts.append(f.read())
            f.close()
        return texts[0], texts[1]

    def kill(self) -> None:
        if not self.done():
            self.proc.kill()
            self.proc.wait()
        for f in (self._out, self._err):
            f.close()

    def check(self) -> None:
        if not self.wait(self.clock + self.timeout):
            self.proc.kill()
            self.proc.wait()
            out, err = self._outputs()
            raise AssertionError(f"child still running after {self.timeout} s, killed\nstdout:\n{out[-2000:]}\n"
                                 f"stderr:\n{err[-4000:]}")
        out, err = self._outputs()
        rc = self.proc.returncode
        assert rc == 0 and "ISOLATED-OK" in out, f"child exited with {rc}\nstdout:\n{out[-2000:]}\nstderr:\n{err[-4000:]}"


def _isolated_key(code: str, timeout: float, env: dict[str, str] | None) -> tuple:
    import textwrap

    return textwrap.dedent(code), float(timeout), tuple(sorted((env or {}).items()))


class IsolatedPool:
    """Child scripts started ahead of the tests that check them, at most `max_running` at a
    time: the GPU tests' subprocesses (each pays its own interpreter, torch import and CUDA
    context) then overlap one another and the tests running in this process.

    `add` queues a script, `top_up` starts queued ones while fewer than `max_running` run
    (tests/conftest.py calls it before each test), `take` hands over the child of an identical
    (code, timeout, env) script, started now if it was still queued, or None if none was
    added or it was taken already; `wait_running` lets the running ones end (before a test
    that times the GPU). `base_env` goes into every child's environment (not part of the
    match)."""

    def __init__(self, max_running: int = 4, base_env: dict[str, str] | None = None):
        self.max_running = max_running
        self.base_env = dict(base_env or {})
        self._queued: dict[tuple, tuple] = {}
        self._started: dict[tuple, IsolatedChild] = {}

    def add(self, code: str, timeout: float = 120.0, env: dict[str, str] | None = None) -> None:
        key = _isolated_key(code, timeout, env)
        if key not in self._started:
            self._queued.setdefault(key, (code, timeout, env))

    def running(self) -> int:
        return sum(not c.done() for c in self._started.values())

    def _start(self, key: tuple) -> IsolatedChild:
        code, timeout, env = self._queued.pop(key)
        child = self._started[key] = IsolatedChild(code, timeout, env, base_env=self.base_env)
        return child

    def top_up(self) -> None:
        while self._queued and self.running() < self.max_running:
            self._start(next(iter(self._queued)))

    def wait_running(self) -> None:
        """Wait for the started children to end, each at most to its timeout from its start."""
        for child in self._started.values():
            child.wait(child.launched + child.timeout)

    def take(self, code: str, timeout: float = 120.0, env: dict[str, str] | None = None) -> IsolatedChild | None:
        import time

        key = _isolated_key(code, timeout, env)
        if key in self._queued:
            self._start(key)
        child = self._started.pop(key, None)
        if child is not None:
            child.clock = time.monotonic()
        return child

    def close(self) -> None:
        """Kill the children no test took and drop the queue."""
        for child in self._started.values():
            child.kill()
        self._started.clear()
        self._queued.clear()


# The pool run_isolated takes its children from (tests/conftest.py sets it for a GPU session).
isolated_pool: IsolatedPool | None = None


def run_isolated(code: str, timeout: float = 120.0, env: dict[str, str] | None = None) -> None:
    """Run `code` (a Python script) in a child process and assert it finished.

    For tests of errors raised from inside the C++ extension: if raising ever
    crashes the process again (a toolchain mismatch did once, see
    csrc/bindings/checks.h), the test fails with the child's output instead of
    the whole pytest session dying. `env`: variables added to the child's
    environment (dev knobs read once per process, such as CLO_DECODE_VARIANT).
    Where `isolated_pool` holds the same script (started ahead), its child is the one checked.
    """
    child = isolated_pool.take(code, timeout, env) if isolated_pool is not None else None
    child = child or IsolatedChild(code, timeout, env)
    try:
        child.check()
    except BaseException:  # an interrupt too: no child outlives its test
        child.kill()
        raise
