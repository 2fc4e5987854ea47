#!/usr/bin/env bash
# Build scripts/decode_stream_probe.cu with the decode kernels (no torch): every decode
# source compiled in parallel, then linked. ARCH (default 90a), OUT_BIN (default
# /tmp/decode_probe), DEFS (extra nvcc flags, e.g. dev macros).
set -euo pipefail
cd "$(dirname "$0")/.."
ARCH=${ARCH:-90a}
OUT_BIN=${OUT_BIN:-/tmp/decode_probe}
obj=$(mktemp -d)
flags=(-std=c++20 -O3 --expt-relaxed-constexpr -I csrc/include -I csrc -gencode=arch=compute_${ARCH},code=sm_${ARCH} ${DEFS:-})
pids=()
for src in scripts/decode_stream_probe.cu csrc/decode/decode_*.cu; do
  nvcc "${flags[@]}" -c "$src" -o "$obj/$(basename "$src").o" & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
nvcc "${flags[@]}" "$obj"/*.o -o "$OUT_BIN"
echo "built $OUT_BIN ${DEFS:-}"
