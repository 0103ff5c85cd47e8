#!/bin/bash
# Usage: run_batch.sh NAME... (script names in tests/grader_cases/learners/truth.json)
# For each: run 1 on the keyed data with 2 fake GPUs, 3 epochs (lr drop at epoch 2, 1 warmup
# epoch when the script has --warmup-epochs); run 2 in the same log dir with --epochs 4 (resume).
# Outputs: $RUNS/NAME.1.log, NAME.2.log (default RUNS=/tmp/runs).
cd "$(dirname "$0")/../../../.."
export PATH=$PWD/.venv/bin:$PATH
runs=${RUNS:-/tmp/runs}
mkdir -p "$runs"
for name in "$@"; do
  # the script built from its base in solutions/ and its deviation (authoring/learners.py)
  python -m authoring.learners build "$runs/scripts" "$name" > /dev/null || exit 1
  script=$runs/scripts/$name
  extra=(--lr-drops 2)
  grep -q -- "--warmup-epochs" "$script" && extra+=(--warmup-epochs 1)
  logdir=$runs/logs/${name%.py}
  rm -rf "$logdir"
  PROBE_KEYED=1 PROBE_GPUS=2 DATA=/tmp/keyed tests/grader_cases/learners/tools/run_case.sh \
    "$script" "$logdir" "$runs/${name%.py}.1.log" --epochs 3 "${extra[@]}"
  # run 2 (resume) only for scripts that broadcast an epoch (step 8 begun)
  if grep -q "broadcast(\|broadcast_object(" "$script" || [[ $name == *resume* ]]; then
    PROBE_GPUS=2 DATA=/tmp/keyed tests/grader_cases/learners/tools/run_case.sh \
      "$script" "$logdir" "$runs/${name%.py}.2.log" --epochs 4 "${extra[@]}"
  fi
  echo "$name $(tail -2 "$runs/${name%.py}.1.log" | head -1) / $(tail -2 "$runs/${name%.py}.2.log" | head -1)"
done
