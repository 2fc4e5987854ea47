#!/usr/bin/env bash
# ncu on one fp16 prefill shape, our Hopper kernel (variants through its dev knobs) and SDPA-cuDNN, clocks
# left as they are (compare SM cycles, which a clock change moves little). Reports go to
# $OUT/ncu_<variant>.txt; the key lines are printed.
#   VARIANTS="name:KNOB=V,KNOB=V ... cudnn" bash scripts/ncu_attention_compare.sh B Hq Hkv N D causal
# KNOB is a CUDA_LLM_OPS_FLASH_SM90_ knob without that prefix (e.g. SCHED=1). Default: "ours cudnn".
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
for spec in ${VARIANTS:-ours cudnn}; do
  name=${spec%%:*}
  env=()
  if [ "$spec" != "$name" ]; then
    IFS=, read -ra kvs <<<"${spec#*:}"
    for kv in "${kvs[@]}"; do env+=("CUDA_LLM_OPS_FLASH_SM90_$kv"); done
  fi
  impl=ours
  [ "$name" = cudnn ] && impl=cudnn
  env "${env[@]}" ncu --clock-control none -k regex:'flash_attention_fwd_sm90|fprop' -c 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section LaunchStats \
    --metrics 'sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio,sm__cycles_elapsed.avg,smsp__inst_executed.sum' \
    python3 scripts/ncu_one_attention.py "$@" "$impl" >"$OUT/ncu_$name.txt" 2>&1
  echo "== $name ($spec) $*: $(grep -E '^\s+(sm__cycles_elapsed.avg|sm__pipe_tensor|smsp__inst_executed.sum|SM Frequency|Duration|Issued Warp)' \
    "$OUT/ncu_$name.txt" | awk '{print $1, $NF}' | sed 's/.pct_of_peak_sustained_active//' | tr '\n' ' ')"
  echo "   stalls: $(grep -E 'issue_stalled' "$OUT/ncu_$name.txt" | awk '{sub(/smsp__average_warps_issue_stalled_/, "", $1); sub(/_per_issue_active.ratio/, "", $1); print $NF, $1}' | sort -g -r | head -6 | tr '\n' ' ')"
  grep -E "==ERROR==" "$OUT/ncu_$name.txt" | head -3
done
