#!/usr/bin/env bash
# Compile-check every CUDA source (kernels and device headers, no torch) with
# nvcc for sm_80 and sm_90a: -c, no link. Used by CI, which has no GPU and only
# a CPU build of torch, so the torch binding (csrc/bindings) is checked by the
# GPU build instead.
set -euo pipefail
cd "$(dirname "$0")/.."
NVCC=${NVCC:-nvcc}
command -v "$NVCC" >/dev/null || { echo "check_cuda_sources: nvcc not found" >&2; exit 1; }
mapfile -t SOURCES < <(find csrc -name '*.cu' | sort)
[ ${#SOURCES[@]} -gt 0 ] || { echo "check_cuda_sources: no .cu files found" >&2; exit 1; }
jobs=()
for src in "${SOURCES[@]}"; do
  for arch in 80 90a; do jobs+=("$src $arch"); done
done
printf '%s\n' "${jobs[@]}" | xargs -P "${JOBS:-2}" -L 1 bash -c '
  src=$0; arch=$1
  if "'"$NVCC"'" -std=c++20 -O3 --expt-relaxed-constexpr -I csrc/include -I csrc \
       -gencode=arch=compute_${arch},code=sm_${arch} -c "$src" -o /dev/null 2>/tmp/nvcc_err.$$; then
    echo "ok    sm_${arch}  $src"
  else
    echo "FAIL  sm_${arch}  $src"; cat /tmp/nvcc_err.$$; exit 255
  fi'
echo "check_cuda_sources: ${#SOURCES[@]} sources compiled for sm_80 and sm_90a"
