#!/usr/bin/env bash
# Builds of the extension compared in one GPU call: A is the tree as sent, B (C, ...) the same
# tree with CUDA_LLM_OPS_DEV_DEFINES set to each space-separated word of $AB_DEFINES (a dev macro,
# or a comma-separated set, that switches a kernel variant). Each is built once; then $AB_CMD
# runs A, B, ..., A, B, ... ($AB_ROUNDS rounds), the built .so swapped in before each run, so
# every build meets the same clocks and the same drift.
#   AB_DEFINES=CLO_DEV_Q_SMEM_WIDE CUDA_LLM_OPS_AREAS=attention,decode \
#     AB_CMD="python3 scripts/bench_decode_dev.py --iters 30 --build-ab" bash scripts/gpu_ab.sh
# Logs under $OUT (ab_build_{A,B,...}.log, ab_{A,B,...}{1,2,...}.log); each run's lines printed last.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
: "${AB_DEFINES:?set AB_DEFINES (the dev macro of build B)}" "${AB_CMD:?set AB_CMD (the command timed)}"
export PYTHONUNBUFFERED=1 MAX_JOBS=${MAX_JOBS:-16} TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0a}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader || true
store=$(mktemp -d)
read -r -a variants <<<"$AB_DEFINES"
defines_of=("" "${variants[@]}")
sides=(A B C D E F)
sides=("${sides[@]:0:${#defines_of[@]}}")
for i in "${!sides[@]}"; do
  side=${sides[$i]} defines=${defines_of[$i]}
  find csrc -type f -exec touch {} +  # build from what was sent (see gpu_check.sh)
  t0=$(date +%s)
  CUDA_LLM_OPS_DEV_DEFINES=$defines python3 -m pip install --no-build-isolation --no-deps -v -e . \
    >"$OUT/ab_build_$side.log" 2>&1 || { echo "build $side failed"; grep -E "error" "$OUT/ab_build_$side.log" | head -20; exit 1; }
  echo "build $side (defines '$defines'): $(( $(date +%s) - t0 )) s"
  cp cuda_llm_ops/_C*.so "$store/$side.so"
done
so=$(ls cuda_llm_ops/_C*.so)
for r in $(seq 1 "${AB_ROUNDS:-2}"); do
  for side in "${sides[@]}"; do
    cp "$store/$side.so" "$so"
    bash -c "$AB_CMD" >"$OUT/ab_$side$r.log" 2>&1
    echo "---- $side$r (rc $?) ----"
    grep -E "\|" "$OUT/ab_$side$r.log" | sed -E 's/ \(sets [0-9]+\)//'
  done
done
