#!/bin/bash
# Usage: run_one.sh NAME RUN   (RUN 1: 3 epochs on the keyed data, a fresh log dir; RUN 2:
# --epochs 4 in the same log dir, to resume). As run_batch.sh, one run at a time.
cd "$(dirname "$0")/../../../.."
export PATH=$PWD/.venv/bin:$PATH
runs=${RUNS:-/tmp/runs}
name=$1; run=$2
# the script built from its base in solutions/ and its deviation (authoring/learners.py)
python -m authoring.learners build "$runs/scripts" "$name" > /dev/null || exit 1
script=$runs/scripts/$name
extra=(--lr-drops 2)
grep -q -- "--warmup-epochs" "$script" && extra+=(--warmup-epochs 1)
logdir=$runs/logs/${name%.py}
if [ "$run" = 1 ]; then
  rm -rf "$logdir"
  PROBE_KEYED=1 PROBE_GPUS=2 DATA=/tmp/keyed tests/grader_cases/learners/tools/run_case.sh \
    "$script" "$logdir" "$runs/${name%.py}.1.log" --epochs 3 "${extra[@]}"
else
  PROBE_GPUS=2 DATA=/tmp/keyed tests/grader_cases/learners/tools/run_case.sh \
    "$script" "$logdir" "$runs/${name%.py}.2.log" --epochs 4 "${extra[@]}"
fi
echo "$name $run $(grep EXIT "$runs/${name%.py}.$run.log")"
