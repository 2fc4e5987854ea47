"""Did a change move the machine code? Compiles CUDA sources as they are in the working tree
and as they were at a git revision, for each arch, and compares every kernel's .text section
byte for byte (the anonymous-namespace hashes nvcc derives from the file path stripped from the
names; kernels found on one side only are paired by their bytes, so a reordered or renamed
template argument reads `same code, renamed`). A refactor whose kernels all read `same` (or
`same code, renamed`) needs no GPU run to show it changed nothing; one that reads `diff` does.
With `nvdisasm` on the PATH (CUDA toolkit, or the PyPI wheel
nvidia-cuda-nvdisasm) it also counts each side's local-memory loads and stores (LDL / STL:
spills) and the stack frame, so a fold that costs registers shows here first.

    python3 scripts/kernel_diff.py HEAD csrc/decode/mla_decode_attention.cu [more .cu ...]
    python3 scripts/kernel_diff.py HEAD~3 --arch 90a --arch 80 csrc/attention/flash_attention_mma_d64.cu
    python3 scripts/kernel_diff.py --spills csrc/*/*.cu      # the working tree only: kernels with LDL/STL

No GPU needed; nvcc only. Exit code 1 when a kernel differs, 2 when a compile fails.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLAGS = ["-std=c++20", "-O3", "--expt-relaxed-constexpr", "-I", "csrc/include", "-I", "csrc"]
# nvcc names a file's anonymous namespace and internal symbols after a hash of its path.
_HASHED = [(re.compile(r"_INTERNAL_[0-9a-f]+_\d+_\w+?_cu_[0-9a-f]+_\d+"), "INTERNAL"),
           (re.compile(r"_GLOBAL__N__[0-9a-f]+_\d+_\w+?_cu_[0-9a-f]+"), "GLOBAL_N")]


def text_sections(cubin: str) -> dict[str, bytes]:
    """The .text.<kernel> sections of an ELF cubin, by normalised name."""
    with open(cubin, "rb") as f:
        d = f.read()
    shoff = struct.unpack_from("<Q", d, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", d, 0x3A)
    hdrs = [struct.unpack_from("<IIQQQQIIQQ", d, shoff + i * shentsize) for i in range(shnum)]
    strtab = hdrs[shstrndx][4]
    out = {}
    for h in hdrs:
        name = d[strtab + h[0]:d.index(b"\0", strtab + h[0])].decode()
        if name.startswith(".text."):
            for pat, rep in _HASHED:
                name = pat.sub(rep, name)
            out[name[len(".text."):]] = d[h[4]:h[4] + h[5]]
    return out


def sass_stats(cubin: str) -> dict[str, tuple[int, int, int]] | None:
    """Per kernel: (LDL, STL, stack bytes) from nvdisasm, or None without it."""
    if shutil.which("nvdisasm") is None:
        return None
    res = subprocess.run(["nvdisasm", "-c", cubin], capture_output=True, text=True)
    if res.returncode:
        return None
    stats, cur = {}, None
    for line in res.stdout.splitlines():
        m = re.match(r"\s*\.text\.(\S+):", line)
        if m:
            cur = m.group(1)
            for pat, rep in _HASHED:
                cur = pat.sub(rep, cur)
            stats[cur] = [0, 0, 0]
            continue
        if cur is None:
            continue
        if re.search(r"\bLDL\b", line):
            stats[cur][0] += 1
        if re.search(r"\bSTL\b", line):
            stats[cur][1] += 1
        m = re.search(r"IADD3? R1, R1, -0x([0-9a-f]+)|VIADD R1, R1, 0x(f{2,}[0-9a-f]+)", line)
        if m:
            stats[cur][2] = max(stats[cur][2], int(m.group(1), 16) if m.group(1) else (1 << 32) - int(m.group(2), 16))
    return {k: tuple(v) for k, v in stats.items()}


def compile_cubin(tree: str, src: str, arch: str, out: str) -> str | None:
    cmd = ["nvcc", *FLAGS, f"-gencode=arch=compute_{arch},code=sm_{arch}", "-cubin", "-o", out, src]
    res = subprocess.run(cmd, cwd=tree, capture_output=True, text=True)
    return None if res.returncode == 0 else res.stderr[-2000:]


def list_spills(sources: list[str], archs: list[str], jobs: int) -> int:
    if shutil.which("nvdisasm") is None:
        print("--spills needs nvdisasm on the PATH (CUDA toolkit, or pip's nvidia-cuda-nvdisasm)", file=sys.stderr)
        return 2
    work = tempfile.mkdtemp(prefix="kernel_spills_")
    with cf.ThreadPoolExecutor(jobs) as pool:
        outs = {(src, arch): os.path.join(work, f"{os.path.basename(src)}.{arch}.cubin")
                for src in sources for arch in archs}
        futs = {key: pool.submit(compile_cubin, ROOT, key[0], key[1], out) for key, out in outs.items()}
    rc = 0
    for key, fut in futs.items():
        if fut.result() is not None:
            print(f"compile failed: {key}:\n{fut.result()}", file=sys.stderr)
            rc = 2
            continue
        for name, (ldl, stl, stack) in sorted((sass_stats(outs[key]) or {}).items()):
            if ldl or stl or stack:
                print(f"{key[0]} sm_{key[1]}: LDL {ldl:3d} STL {stl:3d} stack {stack:4d} B  {name[:110]}")
    shutil.rmtree(work, ignore_errors=True)
    return rc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rev", nargs="?", help="the git revision to compare the working tree with")
    ap.add_argument("sources", nargs="+", help=".cu files, relative to the repository root")
    ap.add_argument("--spills", action="store_true",
                    help="no comparison: compile the working tree and list the kernels that use local memory "
                         "(LDL / STL, the stack frame; needs nvdisasm)")
    ap.add_argument("--arch", action="append", default=None, help="90a, 80, ... (default: 90a and 80)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()
    archs = args.arch or ["90a", "80"]
    if args.spills:
        return list_spills(args.sources if args.rev is None else [args.rev, *args.sources], archs, args.jobs)
    if args.rev is None:
        ap.error("give the revision to compare with, or --spills")
    work = tempfile.mkdtemp(prefix="kernel_diff_")
    old_tree = os.path.join(work, "old")
    os.makedirs(old_tree)
    archive = subprocess.run(["git", "archive", args.rev, "csrc"], cwd=ROOT, capture_output=True)
    if archive.returncode:
        print(archive.stderr.decode(), file=sys.stderr)
        return 2
    subprocess.run(["tar", "-x", "-C", old_tree], input=archive.stdout, check=True)
    jobs = {}
    with cf.ThreadPoolExecutor(args.jobs) as pool:
        for src in args.sources:
            for arch in archs:
                for side, tree in (("old", old_tree), ("new", ROOT)):
                    out = os.path.join(work, f"{side}_{os.path.basename(src)}.{arch}.cubin")
                    jobs[(src, arch, side)] = (out, pool.submit(compile_cubin, tree, src, arch, out))
    failed = False
    for key, (_, fut) in jobs.items():
        if fut.result() is not None:
            print(f"compile failed: {key}:\n{fut.result()}", file=sys.stderr)
            failed = True
    if failed:
        return 2
    differs = False
    for src in args.sources:
        for arch in archs:
            old_c, new_c = jobs[(src, arch, "old")][0], jobs[(src, arch, "new")][0]
            old, new = text_sections(old_c), text_sections(new_c)
            old_s, new_s = sass_stats(old_c), sass_stats(new_c)
            print(f"{src} sm_{arch}:")
            # A kernel whose template arguments were renamed or reordered keeps its code: pair
            # the kernels found on one side only by their bytes.
            only_new = {new[n]: n for n in set(new) - set(old)}
            renamed = {n: only_new[old[n]] for n in set(old) - set(new) if old[n] in only_new}
            for name in sorted((set(old) | set(new)) - set(renamed.values())):  # a renamed one under its old name
                new_name = renamed.get(name, name)
                a, b = old.get(name), new.get(new_name)
                label = name if new_name == name else f"{name[:60]} -> {new_name[:60]}"
                if a == b:
                    verdict = "same" if new_name == name else "same code, renamed"
                elif a is None or b is None:
                    verdict = "only in " + ("new" if a is None else args.rev)
                else:
                    verdict = f"diff ({len(a)} -> {len(b)} bytes)"
                differs |= not verdict.startswith("same")
                extra = ""
                if old_s is not None and new_s is not None and verdict != "same":
                    o, n = old_s.get(name), new_s.get(new_name)
                    extra = f"  LDL/STL/stack {o} -> {n}"
                print(f"  {verdict:28s} {label[:110]}{extra}")
    shutil.rmtree(work, ignore_errors=True)
    return 1 if differs else 0


if __name__ == "__main__":
    raise SystemExit(main())
