#!/usr/bin/env bash
# Nsight Compute counters of one kernel of adaln_bench, at the GPU's own clocks (ncu's default
# locks the SM clock at base, ~1.44 GHz on the H200, which makes these kernels compute-bound):
# time, clock, DRAM throughput, instructions, issue-slot use, and the warp stall reasons per
# issued instruction (docs/kernels-notes.md, v9). On the GPU machine, from the repository root,
# with .devbuild/ staged as the top of dev/kernels_device_run.sh says:
#   dev/ncu_metrics.sh OUTFILE KERNEL_REGEX [adaln_bench args...]
#   e.g. dev/ncu_metrics.sh $OUT/bwd.txt adaln_bwd_tile --shape 1,32760,1536 --iters 20
# Profiles the 11th and 12th matching launches (past the warm-up).
set -u
out=${1:?OUTFILE}; k=${2:?KERNEL_REGEX}; shift 2
M=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes.sum,sm__inst_issued.avg.pct_of_peak_sustained_active,sm__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__warps_active.avg.per_cycle_active,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum
S=""
for r in long_scoreboard short_scoreboard lg_throttle mio_throttle barrier wait math_pipe_throttle not_selected selected no_instruction drain membar dispatch_stall tex_throttle branch_resolving imc_miss misc sleeping; do S="$S,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"; done
timeout 200 ncu --clock-control none -k regex:"$k" --launch-skip 10 --launch-count 2 --metrics "$M$S" .devbuild/adaln_bench "$@" > "$out" 2>&1
echo "ncu $k rc=$?"
