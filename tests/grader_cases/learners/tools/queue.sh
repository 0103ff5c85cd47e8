#!/bin/bash
# Runs run_one.sh on each line "NAME RUN" of $RUNS/jobs.txt not yet claimed, in order, until
# $RUNS/jobs.stop exists. Several workers can share it: a job is claimed by mkdir (atomic) of
# $RUNS/claim2/NAME.RUN; a run 2 waits for its run 1 to finish ($RUNS/done2/NAME.1).
runs=${RUNS:-/tmp/runs}
mkdir -p "$runs/claim2" "$runs/done2"
here=$(cd "$(dirname "$0")" && pwd)
while [ ! -e "$runs/jobs.stop" ]; do
  next=""
  while read -r name run; do
    [ -n "$name" ] || continue
    [ "$run" = 2 ] && [ ! -e "$runs/done2/$name.1" ] && continue
    mkdir "$runs/claim2/$name.$run" 2>/dev/null && { next="$name $run"; break; }
  done < "$runs/jobs.txt"
  if [ -z "$next" ]; then sleep 3; continue; fi
  "$here/run_one.sh" $next >> "$runs/jobs.out" 2>&1
  touch "$runs/done2/${next/ /.}"
done
