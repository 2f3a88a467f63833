#!/bin/bash
# The shipped per-degree shape benchmarks (cost/data/h200_shape_bench_sp.csv for Wan 2.1
# 1.3B's block, h200_shape_bench_14b_sp.csv for 14B's) on one GPU, as planner/README.md gives
# them. Usage: dev/sp_shape_bench.sh OUT [extra shape_bench.py arguments]
# Writes OUT/h200_shape_bench_sp.csv, OUT/h200_shape_bench_14b_sp.csv and their logs.
set -euo pipefail
out=${1:?usage: dev/sp_shape_bench.sh OUT [shape_bench.py arguments]}
shift
mkdir -p "$out"
here=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python3}
seqs=256,512,1024,2048,4096,8192,16384,32760,65520,131040,262080
common=(--depth 1 --seqs "$seqs" --warmup 2 --iters 15 --target-ms 100 --min-iters 2 --fill "$@")
t0=$(date +%s)
"$PY" "$here/examples/shape_bench.py" "${common[@]}" --sp-degrees 1,2,4,8 --max-tokens 131072 \
  -o "$out/h200_shape_bench_sp.csv" 2>"$out/h200_shape_bench_sp.log"
t1=$(date +%s)
"$PY" "$here/examples/shape_bench.py" "${common[@]}" --dim 5120 --heads 40 --ffn 13824 --sp-degrees 8,4,2,1 \
  --max-tokens 65536 -o "$out/h200_shape_bench_14b_sp.csv" 2>"$out/h200_shape_bench_14b_sp.log"
t2=$(date +%s)
echo "1.3B: $((t1 - t0)) s, $(($(wc -l <"$out/h200_shape_bench_sp.csv") - 2)) rows;" \
  "14B: $((t2 - t1)) s, $(($(wc -l <"$out/h200_shape_bench_14b_sp.csv") - 2)) rows"
