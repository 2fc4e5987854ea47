"""Roofline model: device ceilings, FLOP/byte counts of every op, and the bottleneck.

Ceilings
    `DEVICES` holds datasheet figures (dense, no sparsity) of known GPUs: peak FP32,
    TF32, FP16/BF16 tensor-core (FP32 accumulate), INT8 tensor-core and FP8, and the
    HBM bandwidth. `llm-speed calibrate` measures the two ceilings that matter on the
    GPU at hand (a device-to-device copy, counting bytes read + written, and large
    library matmuls) and caches them per GPU name in
    `~/.cache/llm-speed/calibration.json` (`$LLM_SPEED_CACHE_DIR` overrides the folder).

    Which figure a roofline uses (`ceilings_for`):
    - bandwidth: the calibrated copy bandwidth, else a copy bandwidth measured on that
      GPU model and recorded in the table (H100 SXM: 3.0 TB/s; H200 SXM: 4.22 TB/s,
      `llm-speed calibrate`'s 4.224 of 2026-11-28), else the datasheet.
      No kernel reaches the datasheet HBM figure (a copy gets ~90%), so a percentage of
      it would read low; the measured copy is the reachable limit.
    - compute: the datasheet peak of the unit the op runs on. A library matmul is a
      peer to beat, not a ceiling. For a GPU missing from the table the calibrated
      matmul figures stand in.

Bottleneck (`classify`)
    The floors are `flops / peak` and `bytes / bandwidth`; the larger is the roofline
    time. An op whose arithmetic intensity (FLOP/byte) is at or above the device's
    ridge point (peak / bandwidth, per compute unit) is COMPUTE_BOUND, below it
    MEMORY_BOUND. A measured time more than `LATENCY_FACTOR` (10) times the roofline
    time, i.e. under 10% of the roofline, is LATENCY_BOUND: neither roof explains it;
    launch overhead, dependent-instruction latency, too little parallelism or bytes
    moved beyond the model's minimum (re-reads, spills) do.

FLOP/byte models (the `*_work` functions) count useful FLOPs (a multiply-add is 2) and
the fewest bytes one call must move through device memory: each input read once,
each output written once.
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Iterable

import torch

from ._files import write_json_atomically

# tf32x3: fp32-accurate products on the TF32 tensor cores, three TF32 products each
# (flash_attention in fp32, and SDPA's mem-efficient kernel): a third of the TF32 peak.
COMPUTE_KINDS = ("fp32", "tf32", "tf32x3", "fp16_tc", "bf16_tc", "int8_tc", "fp8_tc")

# A measured time above this multiple of the roofline time is LATENCY_BOUND (see module doc).
LATENCY_FACTOR = 10.0


class Bottleneck(Enum):
    COMPUTE_BOUND = "compute_bound"
    MEMORY_BOUND = "memory_bound"
    LATENCY_BOUND = "latency_bound"


# --------------------------------------------------------------------------- devices


@dataclass(frozen=True)
class DeviceSpec:
    key: str  # short name for --gpu, e.g. "h100-sxm"
    name: str  # marketing name
    match: tuple[str, ...]  # lowercase substrings that must all appear in torch's device name
    exclude: tuple[str, ...]  # ... and none of these
    peak_tflops: dict[str, float]  # dense peak per compute kind (TOPS for int8/fp8)
    hbm_tbps: float  # datasheet memory bandwidth, TB/s
    copy_tbps: float | None = None  # device-to-device copy measured on this model (read + write)
    l2_mb: float = 0.0
    sms: int = 0
    aliases: tuple[str, ...] = ()


def _peaks(fp32, tf32, fp16, int8, fp8=None):
    d = {"fp32": fp32, "tf32": tf32, "fp16_tc": fp16, "bf16_tc": fp16, "int8_tc": int8}
    if fp8:
        d["fp8_tc"] = fp8
    return d


# Datasheet figures, dense (NVIDIA's sparse figures halved). Order matters: the first
# entry whose `match` fits the device name wins, so specific variants come first.
DEVICES: tuple[DeviceSpec, ...] = (
    DeviceSpec("h100-pcie", "NVIDIA H100 PCIe 80GB", ("h100", "pcie"), (), _peaks(51.2, 378.0, 756.0, 1513.0, 1513.0),
               2.0, None, 50, 114),
    DeviceSpec("h100-nvl", "NVIDIA H100 NVL 94GB", ("h100", "nvl"), (), _peaks(60.0, 417.5, 835.5, 1670.5, 1670.5),
               3.9, None, 50, 132),
    DeviceSpec("h100-sxm", "NVIDIA H100 SXM5 80GB", ("h100",), (), _peaks(66.9, 494.7, 989.4, 1978.9, 1978.9),
               3.35, 3.0, 50, 132, aliases=("h100",)),
    DeviceSpec("h200-nvl", "NVIDIA H200 NVL 141GB", ("h200", "nvl"), ("gh200",), _peaks(60.0, 417.5, 835.5, 1670.5, 1670.5),
               4.8, None, 50, 132),
    DeviceSpec("h200", "NVIDIA H200 SXM 141GB", ("h200",), ("gh200",), _peaks(66.9, 494.7, 989.4, 1978.9, 1978.9),
               4.8, 4.22, 50, 132, aliases=("h200-sxm",)),
    DeviceSpec("a100-pcie-40gb", "NVIDIA A100 PCIe 40GB", ("a100", "pcie", "40gb"), (),
               _peaks(19.5, 156.0, 312.0, 624.0), 1.555, None, 40, 108),
    DeviceSpec("a100-pcie-80gb", "NVIDIA A100 PCIe 80GB", ("a100", "pcie"), (),
               _peaks(19.5, 156.0, 312.0, 624.0), 1.935, None, 40, 108),
    DeviceSpec("a100-40gb", "NVIDIA A100 SXM4 40GB", ("a100", "40gb"), (),
               _peaks(19.5, 156.0, 312.0, 624.0), 1.555, None, 40, 108, aliases=("a100-sxm-40gb",)),
    DeviceSpec("a100-80gb", "NVIDIA A100 SXM4 80GB", ("a100",), (),
               _peaks(19.5, 156.0, 312.0, 624.0), 2.039, None, 40, 108, aliases=("a100", "a100-sxm-80gb")),
    DeviceSpec("l40s", "NVIDIA L40S", ("l40s",), (), _peaks(91.6, 183.0, 362.05, 733.0, 733.0),
               0.864, None, 96, 142),
    DeviceSpec("rtx4090", "NVIDIA GeForce RTX 4090", ("4090",), (), _peaks(82.6, 82.6, 165.2, 660.6, 660.6),
               1.008, None, 72, 128, aliases=("4090", "rtx-4090")),
    DeviceSpec("l4", "NVIDIA L4", ("l4",), ("l40",), _peaks(30.3, 60.0, 121.0, 242.5, 242.5),
               0.300, None, 48, 58),
    DeviceSpec("a10", "NVIDIA A10", ("a10",), ("a100", "a10g"), _peaks(31.2, 62.5, 125.0, 250.0),
               0.600, None, 6, 72),
)


def _norm(s: str) -> str:
    return s.lower().replace("_", "-").replace(" ", "")


def find_device(name: str) -> DeviceSpec | None:
    """The table entry for a `--gpu` key/alias ("h100", "a100-40gb") or a torch device name."""
    n = _norm(name)
    for d in DEVICES:
        if n == d.key or n in d.aliases:
            return d
    low = name.lower()
    for d in DEVICES:
        if all(m in low for m in d.match) and not any(x in low for x in d.exclude):
            return d
    return None


def device_keys() -> list[str]:
    return [d.key for d in DEVICES]


# --------------------------------------------------------------------------- calibration


def cache_dir() -> str:
    if os.environ.get("LLM_SPEED_CACHE_DIR"):
        return os.environ["LLM_SPEED_CACHE_DIR"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "llm-speed")


def calibration_path() -> str:
    return os.path.join(cache_dir(), "calibration.json")


def load_calibrations(path: str | None = None) -> dict[str, dict]:
    """GPU name -> calibration record ({} when there is no cache or it is unreadable)."""
    path = path or calibration_path()
    try:
        with open(path) as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def save_calibration(record: dict, path: str | None = None) -> str:
    path = path or calibration_path()
    data = load_calibrations(path)
    data[record["gpu"]] = record
    write_json_atomically(data, path, indent=1, sort_keys=True)
    return path


def measure_copy_tbps(nbytes: int = 1 << 30, iterations: int = 20) -> float:
    """Device-to-device copy bandwidth in TB/s, counting bytes read plus bytes written."""
    from .timing import benchmark

    src = torch.randint(0, 255, (nbytes,), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    t = benchmark(lambda: dst.copy_(src), warmup=3, iterations=iterations)
    return 2 * nbytes / (t.median_ms * 1e-3) / 1e12


def measure_matmul_tflops(kind: str, n: int = 8192, iterations: int = 10) -> float:
    """A large library matmul's rate on this GPU: torch.matmul (cuBLAS; TF32 off for fp32)
    or torch._int_mm with a column-major B (its fast layout) for int8."""
    from .timing import benchmark

    if kind == "int8_tc":
        a = torch.randint(-64, 64, (n, n), dtype=torch.int8, device="cuda")
        b = torch.randint(-64, 64, (n, n), dtype=torch.int8, device="cuda").t()
        fn = lambda: torch._int_mm(a, b)  # noqa: E731
    else:
        dtype = {"fp32": torch.float32, "tf32": torch.float32, "fp16_tc": torch.float16,
                 "bf16_tc": torch.bfloat16}[kind]
        a = torch.randn(n, n, device="cuda", dtype=dtype)
        b = torch.randn(n, n, device="cuda", dtype=dtype)
        fn = lambda: torch.matmul(a, b)  # noqa: E731
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = kind == "tf32"
    try:
        t = benchmark(fn, warmup=3, iterations=iterations)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    return 2.0 * n**3 / (t.median_ms * 1e-3) / 1e12


def calibrate(kinds: Iterable[str] = ("fp16_tc", "bf16_tc", "fp32", "tf32", "int8_tc"), progress=None) -> dict:
    """Measure the current GPU's copy bandwidth and matmul rates; returns the record to cache."""
    if not torch.cuda.is_available():
        raise RuntimeError("llm-speed calibrate needs a CUDA GPU (torch.cuda.is_available() is False)")
    name = torch.cuda.get_device_name()
    rec: dict = {"gpu": name, "torch": torch.__version__, "cuda": torch.version.cuda,
                 "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if progress:
        progress("copy bandwidth (1 GiB device-to-device)")
    rec["copy_tbps"] = measure_copy_tbps()
    rec["matmul_tflops"] = {}
    for k in kinds:
        if progress:
            progress(f"matmul {k}")
        try:
            rec["matmul_tflops"][k] = measure_matmul_tflops(k, n=4096 if k == "fp32" else 8192)
        except RuntimeError as exc:  # e.g. int8 matmul unsupported on this GPU
            rec["matmul_tflops"][k] = None
            rec.setdefault("errors", {})[k] = str(exc).splitlines()[0]
    return rec


# --------------------------------------------------------------------------- ceilings


@dataclass
class Ceilings:
    """The two roofs a roofline uses on one GPU."""

    gpu: str
    bandwidth_tbps: float
    bandwidth_source: str
    peak_tflops: dict[str, float] = field(default_factory=dict)
    compute_source: str = "datasheet (dense)"

    def peak(self, compute: str) -> float:
        """Peak TFLOP/s (TOPS for int8) of a compute kind; tf32 falls back to fp32 (a GPU without
        TF32 runs it as fp32; `calibrate` measures tf32 itself) and so on."""
        if compute not in COMPUTE_KINDS:
            raise ValueError(f"compute must be one of {COMPUTE_KINDS}, got {compute!r}")
        if compute == "tf32x3":
            return self.peak("tf32") / 3.0
        for k in (compute, {"bf16_tc": "fp16_tc", "fp16_tc": "bf16_tc", "tf32": "fp32"}.get(compute)):
            if k and self.peak_tflops.get(k):
                return float(self.peak_tflops[k])
        raise ValueError(f"no {compute} peak known for {self.gpu}; run `llm-speed calibrate` on it")

    def ridge(self, compute: str) -> float:
        """Arithmetic intensity (FLOP/byte) where the compute and memory roofs meet."""
        return self.peak(compute) / self.bandwidth_tbps

    def as_record(self) -> dict:
        """The ceilings as a bench record stores them (`roofline`): which roofs its % is against."""
        return {"gpu": self.gpu, "bandwidth_tbps": self.bandwidth_tbps, "bandwidth_source": self.bandwidth_source,
                "peak_tflops": {k: v for k, v in self.peak_tflops.items() if v},
                "compute_source": self.compute_source}

    def describe(self) -> str:
        roofs = ", ".join(f"{k} {v:g}" for k, v in self.peak_tflops.items() if v)
        return (f"{self.gpu}: memory {self.bandwidth_tbps:.2f} TB/s ({self.bandwidth_source}); "
                f"compute TFLOP/s [{self.compute_source}]: {roofs}")


def ceilings_for(gpu: str | None = None, calibrations: dict[str, dict] | None = None) -> Ceilings:
    """Ceilings for `gpu` (a --gpu key or torch device name; None: the visible GPU, else H100 SXM).

    Raises ValueError for a GPU that is neither in `DEVICES` nor calibrated.
    """
    if gpu is None:
        gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "h100"
    spec = find_device(gpu)
    if calibrations is None:
        calibrations = load_calibrations()
    cal = calibrations.get(gpu)
    if cal is None and spec is not None:  # a calibration stored under the torch name of this model
        cal = next((c for n, c in calibrations.items() if find_device(n) is spec), None)
    if spec is None and cal is None:
        raise ValueError(f"unknown GPU {gpu!r}: not in the ceilings table ({', '.join(device_keys())}) and "
                         "not calibrated; run `llm-speed calibrate` on it")
    label = spec.name if spec else gpu
    if cal and cal.get("copy_tbps"):
        bw, bw_src = float(cal["copy_tbps"]), f"calibrated copy, {cal.get('timestamp', '?')}"
    elif spec and spec.copy_tbps:
        bw, bw_src = spec.copy_tbps, "measured copy on this model (table)"
    else:
        bw, bw_src = spec.hbm_tbps, "datasheet HBM"
    if spec:
        peaks, src = dict(spec.peak_tflops), "datasheet (dense)"
    else:
        mm = {k: v for k, v in (cal.get("matmul_tflops") or {}).items() if v}
        peaks, src = mm, "calibrated library matmul (GPU not in table)"
    return Ceilings(label, bw, bw_src, peaks, src)


# --------------------------------------------------------------------------- classification


@dataclass
class Roofline:
    """Where one call of an op sits on a device's roofline."""

    flops: float
    bytes: float
    intensity: float  # FLOP/byte
    ridge: float  # FLOP/byte of the compute unit used
    compute_floor_s: float
    memory_floor_s: float
    floor_s: float  # max of the two floors: no implementation runs faster
    bound: str  # analytical: "compute_bound" or "memory_bound"
    time_s: float | None = None
    pct_of_roofline: float | None = None  # floor / time, in percent
    bottleneck: Bottleneck | None = None  # with time: may be LATENCY_BOUND

    def as_dict(self) -> dict:
        d = asdict(self)
        d["bottleneck"] = self.bottleneck.value if self.bottleneck else None
        return d


def classify(intensity: float, ridge: float, time_s: float | None = None, floor_s: float | None = None,
             latency_factor: float = LATENCY_FACTOR) -> Bottleneck:
    """COMPUTE_BOUND at/above the ridge point, MEMORY_BOUND below; LATENCY_BOUND when the
    measured time exceeds `latency_factor` x the roofline time."""
    if time_s is not None and floor_s is not None and floor_s > 0 and time_s > latency_factor * floor_s:
        return Bottleneck.LATENCY_BOUND
    return Bottleneck.COMPUTE_BOUND if intensity >= ridge else Bottleneck.MEMORY_BOUND


def analyze(flops: float, nbytes: float, ceilings: Ceilings, compute: str, time_s: float | None = None,
            latency_factor: float = LATENCY_FACTOR) -> Roofline:
    """Floors, ridge and bottleneck of one call (`time_s` measured, or None for floors only)."""
    if flops < 0 or nbytes <= 0:
        raise ValueError(f"need flops >= 0 and bytes > 0, got flops={flops}, bytes={nbytes}")
    peak = ceilings.peak(compute) * 1e12
    bw = ceilings.bandwidth_tbps * 1e12
    tc, tm = flops / peak, nbytes / bw
    floor = max(tc, tm)
    ai = flops / nbytes
    ridge = peak / bw
    bound = (Bottleneck.COMPUTE_BOUND if ai >= ridge else Bottleneck.MEMORY_BOUND).value
    r = Roofline(flops, nbytes, ai, ridge, tc, tm, floor, bound)
    if time_s is not None:
        if time_s <= 0 or not math.isfinite(time_s):
            raise ValueError(f"time_s must be a positive finite number, got {time_s}")
        r.time_s = time_s
        r.pct_of_roofline = 100.0 * floor / time_s
        r.bottleneck = classify(ai, ridge, time_s, floor, latency_factor)
    else:
        r.bottleneck = classify(ai, ridge)
    return r


def compute_kind(dtype: torch.dtype, tensor_cores: bool = True) -> str:
    """The compute kind an op in `dtype` runs on (fp32 on CUDA cores, TF32 off)."""
    if dtype in (torch.float16,):
        return "fp16_tc" if tensor_cores else "fp32"
    if dtype == torch.bfloat16:
        return "bf16_tc" if tensor_cores else "fp32"
    if dtype == torch.int8:
        return "int8_tc"
    if dtype == torch.float32:
        return "fp32"
    raise ValueError(f"no compute kind for dtype {dtype}")


def attention_compute_kind(dtype: torch.dtype) -> str:
    """The compute kind of prefill attention in `dtype`: fp32 runs as 3xTF32 on the tensor
    cores (our flash kernel and SDPA's mem-efficient one alike), 16-bit on the tensor cores."""
    return "tf32x3" if dtype == torch.float32 else compute_kind(dtype)


# --------------------------------------------------------------------------- FLOP/byte models


@dataclass(frozen=True)
class Work:
    flops: float
    bytes: float

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes


def visible_pairs(seq_q: int, seq_k: int, causal: bool) -> int:
    """(query, key) pairs attention computes. Causal, aligned bottom-right (query i sees key
    j <= i + seq_k - seq_q): N(N+1)/2 for seq_q == seq_k, the "causal half" plus the diagonal."""
    if seq_q < 0 or seq_k < 0:
        raise ValueError(f"sequence lengths must be >= 0, got {seq_q}, {seq_k}")
    if not causal:
        return seq_q * seq_k
    off = seq_k - seq_q
    if off >= 0:
        return seq_q * (off + 1) + seq_q * (seq_q - 1) // 2
    return seq_k * (seq_k + 1) // 2  # the first -off queries see nothing


def attention_prefill_work(batch: int, heads_q: int, heads_kv: int, seq_q: int, seq_k: int, head_dim: int,
                           causal: bool = False, elem_bytes: int = 2) -> Work:
    """softmax(q k^T) v: 2 FLOPs per multiply-add in q k^T and in p v over the visible pairs
    (softmax's exp/max/sum are not counted, as FlashAttention's papers do). Bytes: q, k, v read
    once and o written once; GQA's k/v are read once per KV head."""
    pairs = visible_pairs(seq_q, seq_k, causal)
    flops = 4.0 * batch * heads_q * pairs * head_dim
    nbytes = elem_bytes * (2.0 * batch * heads_q * seq_q * head_dim + 2.0 * batch * heads_kv * seq_k * head_dim)
    return Work(flops, nbytes)


def _lens(seq_lens, batch: int | None) -> list[int]:
    if isinstance(seq_lens, int):
        if batch is None:
            raise ValueError("batch is needed when seq_lens is one int")
        return [seq_lens] * batch
    return [int(x) for x in seq_lens]


def decode_attention_work(batch: int, heads_q: int, heads_kv: int, seq_lens, head_dim: int,
                          elem_bytes: int = 2, seq_len_q: int = 1, kv_elem_bytes: int | None = None) -> Work:
    """`seq_len_q` new query tokens per sequence (1: decode) against a KV cache: 4 * Hq * D
    FLOPs per cached token and query (the causal triangle among the new tokens ignored);
    bytes = K and V read once (per KV head, `kv_elem_bytes` each: 1 for an FP8 cache;
    default `elem_bytes`) + q read + o written (`elem_bytes` each)."""
    lens = _lens(seq_lens, batch)
    total = float(sum(lens))
    flops = 4.0 * heads_q * head_dim * total * seq_len_q
    kv_bytes = elem_bytes if kv_elem_bytes is None else kv_elem_bytes
    nbytes = (kv_bytes * 2.0 * heads_kv * head_dim * total
              + elem_bytes * 2.0 * len(lens) * heads_q * head_dim * seq_len_q)
    return Work(flops, nbytes)


def mla_decode_work(batch: int, heads_q: int, seq_lens, head_dim_qk: int = 576, head_dim_v: int = 512,
                    elem_bytes: int = 2) -> Work:
    """MLA decode (absorbed form, `paged_mla_attention`): every query head against each cached
    latent row, `2 * Hq * (Dqk + Dv)` FLOPs per key and sequence; bytes = the rows read once
    (Dqk wide, shared by all heads) + q read + out written."""
    lens = _lens(seq_lens, batch)
    total = float(sum(lens))
    flops = 2.0 * heads_q * (head_dim_qk + head_dim_v) * total
    nbytes = elem_bytes * (head_dim_qk * total + len(lens) * heads_q * (head_dim_qk + head_dim_v))
    return Work(flops, nbytes)


def paged_decode_work(batch: int | None, heads_q: int, heads_kv: int, seq_lens, head_dim: int,
                      block_size: int, elem_bytes: int = 2, include_tables: bool = True) -> Work:
    """Decode attention through a block table: the contiguous model plus the int32 block-table
    entries the sequences use and `seq_lens` (negligible next to the KV bytes; off with
    `include_tables=False`)."""
    lens = _lens(seq_lens, batch)
    w = decode_attention_work(len(lens), heads_q, heads_kv, lens, head_dim, elem_bytes)
    extra = 4.0 * (sum(math.ceil(n / block_size) for n in lens) + len(lens)) if include_tables else 0.0
    return Work(w.flops, w.bytes + extra)


def paged_kv_append_work(tokens: int, heads_kv: int, head_dim: int, elem_bytes: int = 2,
                         slot_bytes: int = 8) -> Work:
    """Writing T new tokens' K and V rows into a paged cache (vLLM's reshape_and_cache): a
    pure copy, no FLOPs; bytes = K and V read + the same written + the slot indices."""
    rows = 2.0 * tokens * heads_kv * head_dim * elem_bytes
    return Work(0.0, 2.0 * rows + slot_bytes * tokens)


def fused_decode_block_work(batch: int, hidden: int, heads_q: int, heads_kv: int, head_dim: int, seq_len,
                            elem_bytes: int = 2) -> Work:
    """One decode step of an attention block in one call (`fused_decode_block`): QKV projection,
    rotary embedding, KV-cache append, attention over `seq_len` keys (the new token included; an
    int, or one per sequence) and output projection. FLOPs: 2 B hidden (Hq + 2 Hkv) D for qkv,
    4 Hq D per key and sequence for attention, 2 B Hq D hidden for o_proj (rope and softmax not
    counted). Bytes: both weights read once + the seq_len - 1 cached tokens' K and V read once
    per sequence + the new k, v written + x read + out written (the rotary tables, block table
    and seq_lens, kilobytes, not counted, as in `decode_attention_work`)."""
    lens = _lens(seq_len, batch)
    b, qkv_rows = len(lens), (heads_q + 2 * heads_kv) * head_dim
    flops = (2.0 * b * hidden * qkv_rows + 4.0 * heads_q * head_dim * sum(lens)
             + 2.0 * b * heads_q * head_dim * hidden)
    kv_row = 2.0 * heads_kv * head_dim  # one token's K and V
    nbytes = elem_bytes * (float(qkv_rows) * hidden + float(hidden) * heads_q * head_dim
                           + kv_row * sum(n - 1 for n in lens) + kv_row * b + 2.0 * b * hidden)
    return Work(flops, nbytes)


def gemm_work(M: int, N: int, K: int, in_bytes: int = 2, out_bytes: int | None = None,
              reads_c: bool = False) -> Work:
    """C = A @ B: 2MNK FLOPs; bytes = A and B read once + C written once (+ C read when
    `reads_c`, i.e. beta != 0 with a given c). `out_bytes` defaults to `in_bytes`."""
    out_bytes = in_bytes if out_bytes is None else out_bytes
    nbytes = in_bytes * (float(M) * K + float(K) * N) + out_bytes * float(M) * N * (2 if reads_c else 1)
    return Work(2.0 * M * N * K, nbytes)


def gemm_int8_work(M: int, N: int, K: int) -> Work:
    """int8 A, B -> int32 C: 2MNK integer operations, 1-byte inputs, 4-byte output."""
    return gemm_work(M, N, K, in_bytes=1, out_bytes=4)


def lightning_decode_work(batch: int, heads: int, n: int, d: int, e: int, elem_bytes: int = 2,
                          state_bytes: int = 4) -> Work:
    """Lightning (linear) attention, n tokens: per token and head kv = exp(-slope) kv + k^T v
    (3 d e FLOPs: decay multiply, product, add) and o = q kv (2 d e). Bytes: the fp32 state
    read and written once (2 b h d e 4) + q, k, v read, o written, slope read."""
    flops = 5.0 * batch * heads * n * d * e
    nbytes = (2.0 * batch * heads * d * e * state_bytes
              + elem_bytes * float(batch) * heads * n * (2 * d + 2 * e) + 4.0 * heads)
    return Work(flops, nbytes)
