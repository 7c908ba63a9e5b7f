#!/bin/bash
# Three more interleaved pairs of benchmarks.modes (new, old) for the round-robin rate.
set -u
OUT=/work/main/results/35-check
PY=/work/main/.venv/bin/python
run() {
    local tree=$1 label=$2; shift 2
    echo "=== $(date +%T) $label: $*"
    (cd "$tree" && PYTHONPATH="$tree" "$PY" -m "$@" --out "$OUT/$label") > "$OUT/$label.log" 2>&1
    echo "=== $(date +%T) $label: rc=$?"
}
for k in 3 4 5; do
    run /work/main modes-new-$k benchmarks.modes
    run /tmp/old-35 modes-old-$((k + 1)) benchmarks.modes
done
echo "=== $(date +%T) all done"
