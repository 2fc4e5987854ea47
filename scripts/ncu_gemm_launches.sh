#!/usr/bin/env bash
# Every kernel one fp16 gemm call launches, ours and cuBLAS's (torch.matmul), under ncu with cold
# L2 (ncu's default cache flush): name, grid, block, cluster, time, L2 and DRAM bytes. Where the
# peer's tile, cluster shape and split-K come from.
#   bash scripts/ncu_gemm_launches.sh "M N K [nk]" ["M N K [nk]" ...]
# Our dev knobs pass through the environment (CLO_GEMM_SKINNY_WGMMA defaults to 1 here, the
# library's default, not ncu_one_gemm.py's 2). Reports: $OUT/ncu_launches_<impl>_<shape>.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
export CLO_GEMM_SKINNY_WGMMA=${CLO_GEMM_SKINNY_WGMMA:-1}
for shape in "$@"; do
  for impl in ours cublas; do
    report="$OUT/ncu_launches_${impl}_${shape// /x}.txt"
    ncu --clock-control none -k regex:'gemm|nvjet|xmma|cutlass|splitK|reduce|sm90|sm80' -c 4 \
      --section LaunchStats \
      --metrics gpu__time_duration.sum,lts__t_bytes.sum,dram__bytes.sum,launch__cluster_dim_x,launch__cluster_dim_y \
      python3 scripts/ncu_one_gemm.py $shape "$impl" >"$report" 2>&1
    echo "== $impl $shape"
    grep -E '^  [a-zA-Z_][^ ]*.*\(.*\)x\(|gpu__time_duration.sum|lts__t_bytes.sum|dram__bytes.sum|launch__cluster_dim_[xy]|^ +(Grid|Block) Size|^ +Registers Per' "$report" \
      | sed -E 's/^  ([^ (]{0,90})[^ (]*.*\)x\(([^)]*)\).*/  \1 block(\2)/; s/ {2,}/ /g' | head -40
    grep -E "==ERROR==" "$report" | head -3
  done
done
