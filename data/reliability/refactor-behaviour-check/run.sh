#!/bin/bash
# The fault suite and benchmarks.modes, the code before issue 35's refactor (6c1a22a) and
# after it (main), interleaved in one sitting: old, new, old.
set -u
OUT=/work/main/results/35-check
PY=/work/main/.venv/bin/python
run() {  # tree label module args...
    local tree=$1 label=$2; shift 2
    echo "=== $(date +%T) $label: $*"
    (cd "$tree" && PYTHONPATH="$tree" "$PY" -m "$@" --out "$OUT/$label") > "$OUT/$label.log" 2>&1
    echo "=== $(date +%T) $label: rc=$?"
}
run /tmp/old-35 modes-old-1 benchmarks.modes
run /work/main modes-new-1 benchmarks.modes
run /tmp/old-35 modes-old-2 benchmarks.modes
run /tmp/old-35 faults-old-1 experiments.faults
run /work/main faults-new-1 experiments.faults
run /tmp/old-35 faults-old-2 experiments.faults
echo "=== $(date +%T) all done"
