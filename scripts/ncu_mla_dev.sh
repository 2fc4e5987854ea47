#!/usr/bin/env bash
# ncu on MLA decode shapes (scripts/ncu_one_mla.py): cycles, tensor-pipe activity, issue rate and the top stall
# reasons per shape. Reports to $OUT/ncu_B_N_Hq_splits.txt.  NCU_SHAPES="B N Hq splits;B N Hq splits" picks shapes.
set -u
IFS=";" read -ra shapes <<<"${NCU_SHAPES:-64 4096 16 1;16 4096 128 1;1 16384 16 32}"
for args in "${shapes[@]}"; do
  ncu --clock-control none -k regex:mla_decode -c 1 --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    --metrics 'sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio,sm__cycles_elapsed.avg,smsp__inst_executed.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,smsp__inst_executed_op_ldgsts.sum' \
    python3 scripts/ncu_one_mla.py $args > $OUT/ncu_${args// /_}.txt 2>&1
  echo "== $args: $(grep -E '^\s+(sm__cycles_elapsed.avg|sm__pipe_tensor|smsp__inst_executed.sum|Duration|Issued Warp|Memory Throughput|DRAM Throughput|L2 Cache Throughput|l1tex__data_bank|smsp__inst_executed_op_ldgsts)' $OUT/ncu_${args// /_}.txt | awk '{print $1, $NF}' | tr '\n' ' ')"
  echo "   stalls: $(grep -E 'issue_stalled' $OUT/ncu_${args// /_}.txt | awk '{sub(/smsp__average_warps_issue_stalled_/, "", $1); sub(/_per_issue_active.ratio/, "", $1); print $NF, $1}' | sort -g -r | head -7 | tr '\n' ' ')"
done
