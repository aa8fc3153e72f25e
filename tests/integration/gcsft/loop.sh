#!/usr/bin/env bash
# Runs the GCS fault-tolerance suite's process scenarios (TestProcess) N times in a row, as
# issue 44 asked of its flake: each run's outcome and time on a line of LOG, the pytest output
# of a failed run kept beside it (its Ray logs go to artifacts/gcsft-logs/ from the test).
#   tests/integration/gcsft/loop.sh [N] [LOG]     (root; make gcsft-loop)
set -uo pipefail
cd "$(dirname "$0")/../../.."
runs=${1:-20}
log=${2:-artifacts/gcsft-loop.log}
mkdir -p "$(dirname "$log")"
echo "# $(date -u +%FT%TZ) commit $(git rev-parse --short HEAD) runs $runs load $(cut -d' ' -f1-3 /proc/loadavg)" >>"$log"
passed=0
for i in $(seq 1 "$runs"); do
  start=$(date +%s)
  out=$(mktemp)
  .venv/bin/pytest -q -p no:cacheprovider tests/integration/gcsft -k TestProcess >"$out" 2>&1
  rc=$?
  took=$(($(date +%s) - start))
  if [ "$rc" -eq 0 ]; then
    passed=$((passed + 1))
    echo "run $i: pass ${took}s" >>"$log"
    rm -f "$out"
  else
    kept="${log%.log}-run$i.txt"
    mv "$out" "$kept"
    echo "run $i: FAIL rc=$rc ${took}s ($kept: $(grep -m1 -E '^FAILED' "$kept"))" >>"$log"
  fi
done
echo "# $passed of $runs passed" >>"$log"
[ "$passed" -eq "$runs" ]
