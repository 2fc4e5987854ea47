#!/usr/bin/env bash
# Build scripts/skinny_stream_probe.cu with the GEMM sources (no torch), CLO_DEV_STAMPS on so the
# skinny tile records its timeline: every source compiled in parallel (JOBS, default nproc),
# then linked into build/probe/skinny_probe. Only objects older than their source (or than a
# header under csrc/) are rebuilt. SRC_ROOT (default: this tree) takes csrc/ from another
# tree, e.g. an exported earlier commit, into build/probe_<its basename>/ to compare kernels.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC_ROOT=${SRC_ROOT:-.}
dir=build/probe
[ "$SRC_ROOT" = . ] || dir=build/probe_$(basename "$SRC_ROOT")
mkdir -p "$dir"
flags=(-std=c++20 -O3 --expt-relaxed-constexpr -DCLO_DEV_STAMPS -I "$SRC_ROOT/csrc/include" -I "$SRC_ROOT/csrc" -gencode=arch=compute_90a,code=sm_90a)
newest_header=$(find "$SRC_ROOT/csrc" -name '*.h' -o -name '*.cuh' | xargs ls -t | head -1)
jobs_max=${JOBS:-$(nproc)}
pids=()
for src in scripts/skinny_stream_probe.cu "$SRC_ROOT"/csrc/gemm/*.cu; do
  obj=$dir/$(basename "$src").o
  if [ "$obj" -nt "$src" ] && [ "$obj" -nt "$newest_header" ]; then continue; fi
  nvcc "${flags[@]}" -c "$src" -o "$obj" & pids+=($!)
  while [ "$(jobs -r | wc -l)" -ge "$jobs_max" ]; do sleep 1; done
done
for p in "${pids[@]}"; do wait "$p"; done  # set -e: a failed compile stops here
nvcc "${flags[@]}" "$dir"/*.o -o "$dir"/skinny_probe
echo "built $dir/skinny_probe"
