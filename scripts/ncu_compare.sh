#!/usr/bin/env bash
# ncu on one fp16 shape: our kernel (variants through its dev knobs) against the peer's, clocks left
# as they are (compare SM cycles, which a clock change moves little). Reports go to
# $OUT/ncu_<op>_<variant>.txt; the key lines are printed.
#   VARIANTS="name:KNOB=V,KNOB=V ... cudnn" bash scripts/ncu_compare.sh attention B Hq Hkv N D causal
#   VARIANTS="ours cublas" bash scripts/ncu_compare.sh gemm M N K [nk]
#   VARIANTS="name:KNOB=V ... cudnn" bash scripts/ncu_compare.sh decode --batch B --context N --head-dim D [--splits S]
# attention: KNOB is a CUDA_LLM_OPS_FLASH_SM90_ knob without that prefix (e.g. SCHED=1), the peer
# SDPA-cuDNN; gemm: KNOB is a full environment name (e.g. CLO_GEMM_WGMMA_CLUSTER=2), the peer cuBLAS
# (torch.matmul); decode: KNOB a full environment name (e.g. CLO_TMA_L2_PROMOTION=0), the arguments
# those of scripts/probe_decode_once.py, the peer SDPA-cuDNN on the same keys. Default variants: "ours <peer>".
# NCU_SKIP=n profiles the kernel's (n+1)-th matching launch (gemm: with NCU_CALLS=n+1 calls in the script).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
op=$1; shift
case $op in
  attention) peer=cudnn; prefix=CUDA_LLM_OPS_FLASH_SM90_; kernels='flash_attention_fwd_sm90|fprop'
             script=scripts/ncu_one_attention.py ;;
  gemm) peer=cublas; prefix=; kernels='gemm_wgmma|nvjet|xmma|cutlass'; script=scripts/ncu_one_gemm.py ;;
  decode) peer=cudnn; prefix=; kernels='decode_attention|fprop'; script=scripts/probe_decode_once.py ;;
  *) echo "op: attention, gemm or decode, got '$op'" >&2; exit 2 ;;
esac
for spec in ${VARIANTS:-ours $peer}; do
  name=${spec%%:*}
  env=()
  if [ "$spec" != "$name" ]; then
    IFS=, read -ra kvs <<<"${spec#*:}"
    for kv in "${kvs[@]}"; do env+=("$prefix$kv"); done
  fi
  impl=ours
  [ "$name" = "$peer" ] && impl=$peer
  report="$OUT/ncu_${op}_$name.txt"
  impl_args=("$impl")
  [ "$op" = decode ] && impl_args=(--peer "$([ "$impl" = ours ] || echo sdpa-$impl)")
  env "${env[@]}" ncu --clock-control none -k regex:"$kernels" --launch-skip "${NCU_SKIP:-0}" -c 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section LaunchStats --section Occupancy \
    --metrics 'sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio,sm__cycles_elapsed.avg,smsp__inst_executed.sum,lts__t_bytes.sum,dram__bytes.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum' \
    python3 "$script" "$@" "${impl_args[@]}" >"$report" 2>&1
  echo "== $name ($spec) $*: $(grep -E '^\s+(sm__cycles_elapsed.avg|sm__pipe_tensor|smsp__inst_executed.sum|lts__t_bytes.sum|dram__bytes.sum|l1tex__data_pipe_lsu_wavefronts_mem_shared.sum|SM Frequency|Duration|Issued Warp|Registers Per|Block Size|Grid Size|Dynamic Shared)' \
    "$report" | awk '{print $1, $(NF-1), $NF}' | sed 's/.pct_of_peak_sustained_active//' | tr '\n' ' ')"
  grep -E "^\s+[a-zA-Z_0-9]+(<|\()|gemm_wgmma|nvjet|xmma|cutlass|flash_attention_fwd|fprop" "$report" | grep -v "==PROF==" | head -1
  echo "   stalls: $(grep -E 'issue_stalled' "$report" | awk '{sub(/smsp__average_warps_issue_stalled_/, "", $1); sub(/_per_issue_active.ratio/, "", $1); print $NF, $1}' | sort -g -r | head -6 | tr '\n' ' ')"
  grep -E "==ERROR==" "$report" | head -3
done
