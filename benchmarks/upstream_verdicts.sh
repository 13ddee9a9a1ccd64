#!/usr/bin/env bash
# The verdicts of docs/guide.md "Upstream Ascend code on the simulator": each scenario of
# tests/upstream_scenarios under 20 pct seeds, the race check, and 5 free-schedule runs.
# Usage: bash benchmarks/upstream_verdicts.sh   (takes a few minutes on 2 cores)
set -u
cd "$(dirname "$0")/.."
for spec in "my_pe 2" "symm_at 2" "wait_notify 2" "signal_op 2" "put_get 2" "barrier_ops 2" "barrier_ops 4"; do
  set -- $spec
  s=tests/upstream_scenarios/$1.py
  echo "=== $1 n=$2"
  timeout 900 .venv/bin/triton-dist explore -n $2 --shmem-compat --schedule pct --seeds 20 --timeout 120 $s 2>/dev/null | head -8
  out=$(mktemp); timeout 300 .venv/bin/triton-dist run -n $2 --shmem-compat --race-check --timeout 120 $s > "$out" 2>&1; echo "race-check rc=$?"; grep -m3 -E "race|Race" "$out" | cut -c1-200; rm -f "$out"
  ok=0; for i in 1 2 3 4 5; do timeout 300 .venv/bin/triton-dist run -n $2 --shmem-compat --timeout 120 $s >/dev/null 2>&1 && ok=$((ok+1)); done; echo "free: $ok/5 pass"
done
