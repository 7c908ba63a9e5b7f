#!/bin/bash
# Two more benchmarks.modes runs, new then old, for the noise of the SYN-latency figures.
set -u
OUT=/work/main/results/35-check
PY=/work/main/.venv/bin/python
run() {
    local tree=$1 label=$2; shift 2
    echo "=== $(date +%T) $label: $*"
    (cd "$tree" && PYTHONPATH="$tree" "$PY" -m "$@" --out "$OUT/$label") > "$OUT/$label.log" 2>&1
    echo "=== $(date +%T) $label: rc=$?"
}
run /work/main modes-new-2 benchmarks.modes
run /tmp/old-35 modes-old-3 benchmarks.modes
echo "=== $(date +%T) all done"
