#!/bin/bash
# Usage: run_case.sh SCRIPT LOG_DIR OUTPUT [EXTRA ARGS...]
# Runs SCRIPT under probe.py on 2 workers with the small settings, output to OUTPUT; then lists
# the files in LOG_DIR. Env PROBE_KEYED/PROBE_GPUS pass through; DATA overrides the data dir.
script=$1; logdir=$2; out=$3; shift 3
here=$(cd "$(dirname "$0")" && pwd)
data=${DATA:-data/sample}
start=$(date +%s.%N)
timeout -k 5 ${TIMEOUT:-90} horovodrun -np 2 -H localhost:2 python "$here/probe.py" "$script" \
  --data-dir "$data" --train-images 512 --test-images 128 --depth 4 --width 1 --preset cpu \
  --log-dir "$logdir" "$@" > "$out" 2>&1
rc=$?
end=$(date +%s.%N)
echo "EXIT $rc SECONDS $(echo "$end - $start" | bc)" >> "$out"
echo "FILES $(cd "$logdir" 2>/dev/null && find . -type f | sort | tr '\n' ' ')" >> "$out"
