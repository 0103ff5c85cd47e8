#!/bin/bash
# Runs run_batch.sh on every name listed in $RUNS/queue.txt not yet claimed, one after another,
# until $RUNS/queue.stop exists. Several workers can share the queue: a name is claimed by
# mkdir (atomic) of $RUNS/claim/NAME; $RUNS/done/NAME marks it finished.
runs=${RUNS:-/tmp/runs}
mkdir -p "$runs/done" "$runs/claim"
here=$(cd "$(dirname "$0")" && pwd)
while [ ! -e "$runs/queue.stop" ]; do
  next=""
  while read -r name; do
    [ -n "$name" ] && mkdir "$runs/claim/$name" 2>/dev/null && { next=$name; break; }
  done < "$runs/queue.txt"
  if [ -z "$next" ]; then sleep 3; continue; fi
  "$here/run_batch.sh" "$next" >> "$runs/queue.out" 2>&1
  touch "$runs/done/$next"
done
