#!/usr/bin/env bash
# Build scripts/decode_stream_probe.cu with the decode kernels (no torch): every decode
# source compiled in parallel, then linked. ARCH (default 90a), OUT_BIN (default
# /tmp/decode_probe), DEFS (extra nvcc flags, e.g. dev macros), SRC_ROOT (the tree whose
# csrc/ is built, default this one: e.g. an exported earlier commit, to compare kernels).
set -euo pipefail
cd "$(dirname "$0")/.."
ARCH=${ARCH:-90a}
OUT_BIN=${OUT_BIN:-/tmp/decode_probe}
obj=$(mktemp -d)
SRC_ROOT=${SRC_ROOT:-.}
flags=(-std=c++20 -O3 --expt-relaxed-constexpr -I "$SRC_ROOT/csrc/include" -I "$SRC_ROOT/csrc" -gencode=arch=compute_${ARCH},code=sm_${ARCH} ${DEFS:-})
pids=()
for src in scripts/decode_stream_probe.cu "$SRC_ROOT"/csrc/decode/decode_*.cu; do
  nvcc "${flags[@]}" -c "$src" -o "$obj/$(basename "$src").o" & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
nvcc "${flags[@]}" "$obj"/*.o -o "$OUT_BIN"
echo "built $OUT_BIN ${DEFS:-}"
