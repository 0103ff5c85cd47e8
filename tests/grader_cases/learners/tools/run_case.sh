#!/bin/bash
# Usage: run_case.sh SCRIPT LOG_DIR OUTPUT [EXTRA ARGS...]
# Runs SCRIPT under probe.py on 2 workers with the small settings, output to OUTPUT; then lists
# the files in LOG_DIR. Env PROBE_KEYED/PROBE_GPUS pass through; DATA overrides the data dir.
# Stops the run TIMEOUT s after its start (default 1200: the machine may be shared), or
# STALL_GRACE s (default 240) after Horovod's stall warning (ranks waiting for the others
# for 60 s), which then says HANG in the output.
script=$1; logdir=$2; out=$3; shift 3
here=$(cd "$(dirname "$0")" && pwd)
data=${DATA:-data/sample}
start=$(date +%s.%N)
timeout -k 5 ${TIMEOUT:-1200} horovodrun -np 2 -H localhost:2 python "$here/probe.py" "$script" \
  --data-dir "$data" --train-images 512 --test-images 128 --depth 4 --width 1 --preset cpu \
  --log-dir "$logdir" "$@" > "$out" 2>&1 &
job=$!
stalled=""
while kill -0 $job 2>/dev/null; do
  if [ -z "$stalled" ] && grep -q "waiting for remainder of ranks" "$out" 2>/dev/null; then
    stalled=$(date +%s)
  fi
  if [ -n "$stalled" ] && [ $(( $(date +%s) - stalled )) -ge ${STALL_GRACE:-240} ]; then
    echo "HANG: Horovod's stall warning, still waiting ${STALL_GRACE:-240} s later; stopped" >> "$out"
    kill -TERM $job 2>/dev/null  # timeout passes it on to horovodrun, which stops its workers
    sleep 10
    kill -KILL $job 2>/dev/null
    break
  fi
  sleep 2
done
wait $job
rc=$?
end=$(date +%s.%N)
echo "EXIT $rc SECONDS $(echo "$end - $start" | bc)" >> "$out"
echo "FILES $(cd "$logdir" 2>/dev/null && find . -type f | sort | tr '\n' ' ')" >> "$out"
