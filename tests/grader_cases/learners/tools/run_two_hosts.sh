#!/bin/bash
# Usage: run_two_hosts.sh NAME...  Step 2 as on 2 hosts with 1 GPU each: PROBE_GPUS=1 and
# PROBE_TWO_HOSTS=1 (local rank 0 on both workers), 1 epoch. Output: $RUNS/NAME.hosts.log.
cd "$(dirname "$0")/../../../.."
export PATH=$PWD/.venv/bin:$PATH
runs=${RUNS:-/tmp/runs}
for name in "$@"; do
  script=solutions/$name  # a reference, or a corpus script built from its deviation
  if [ -f "tests/grader_cases/learners/${name%.py}.patch" ]; then
    python -m authoring.learners build "$runs/scripts" "$name" > /dev/null || exit 1
    script=$runs/scripts/$name
  fi
  extra=(--lr-drops 2)
  grep -q -- "--warmup-epochs" "$script" && extra+=(--warmup-epochs 1)
  PROBE_GPUS=1 PROBE_TWO_HOSTS=1 tests/grader_cases/learners/tools/run_case.sh "$script" \
    "$runs/logs/${name%.py}-hosts" "$runs/${name%.py}.hosts.log" --epochs 1 "${extra[@]}"
  echo "$name $(grep EXIT "$runs/${name%.py}.hosts.log")"
done
