#!/usr/bin/env bash
# Check the project on real Containernet, which is not on PyPI and cannot be a dependency:
#
#   sudo bash scripts/check-containernet.sh [--tier] PATH-TO-CONTAINERNET-SOURCE [pytest args...]
#
# PATH: a checkout of github.com/containernet/containernet (CI unpacks the vendored
# ../shared/vendor/containernet-<commit>.tar.gz). It is put, unchanged, first on the path of
# a scratch virtualenv beside the project's (.venv-containernet, which sees the packages of
# the project's .venv but not Debian's Mininet; never the system Python), where the
# topologies then pick it automatically.
#
# Without --tier: `topologies check`, the whole integration suite (the Containernet-only
# tests included) and a short comparison (results/containernet-check/).
# --tier, the Containernet tier of CI (.ci/run, a few minutes): `topologies check`; the
# integration tests of the testbed (those that need Containernet fail here instead of
# skipping), of the examples/ scripts and of `mn --custom` (Containernet's own `mn`); the
# integration test's short comparison of malb in per-flow mode beside HAProxy through the
# proxy host; then malb in tracker and in data-plane mode (results/containernet-check/).
# --entry-points: `topologies check`, then each experiment entry point once, short: the
# load-balancing comparison (malb beside HAProxy leastconn), the placement run end to end,
# the SLO loop and the fault suite; each one's time, exit status and the backend its stack
# recorded go to results/containernet-check/entry-points.jsonl (docs/testbed.md's table).
#
# Everything it made is removed at the end, results apart. Exit status: 0 when every step
# passed, else that of the first that failed; 2 for a bad argument.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCRATCH="$ROOT/.venv-containernet"
RESULTS="$ROOT/results/containernet-check"
say() { echo "[containernet-check] $*"; }
# bytecode in the tests' one cache, as make's tiers keep it (Makefile: PYTHONPYCACHEPREFIX)
export PYTHONPYCACHEPREFIX="${PYTHONPYCACHEPREFIX:-/var/cache/malb/pycache}"
unset PYTHONDONTWRITEBYTECODE

tier=0
entry_points=0
if [ "${1:-}" = "--tier" ]; then tier=1; shift; fi
if [ "${1:-}" = "--entry-points" ]; then entry_points=1; shift; fi
if [ $# -lt 1 ] || [ ! -f "$1/mininet/net.py" ] || ! grep -q "class Containernet" "$1/mininet/net.py"; then
  echo "usage: sudo bash scripts/check-containernet.sh [--tier | --entry-points] PATH-TO-CONTAINERNET-SOURCE [pytest args...]" >&2
  echo "  (a checkout of github.com/containernet/containernet: its mininet/net.py defines Containernet)" >&2
  exit 2
fi
SRC="$(cd "$1" && pwd)"; shift
[ "$(id -u)" -eq 0 ] || { echo "[containernet-check] needs root (sudo)" >&2; exit 1; }

cleanup() {
  "$ROOT/.venv/bin/python" -m topologies clean >/dev/null 2>&1
  rm -rf "$SCRATCH"
}
trap cleanup EXIT

say "make setup (Open vSwitch, Docker, the project's virtualenv and images)"
bash "$ROOT/scripts/setup.sh" || exit $?

# The project's packages through a path line, not a second install of its requirements
# (which took two minutes): a path line's own .pth files are not read, so the project's
# link to Debian's Mininet stays out and Containernet's source, first, is `mininet`.
say "scratch virtualenv $SCRATCH: Containernet from $SRC, then the project's packages"
rm -rf "$SCRATCH"
/usr/bin/python3 -m venv "$SCRATCH" || exit 1
PY="$SCRATCH/bin/python"
site="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
project_site="$("$ROOT/.venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
printf '%s\n' "$SRC" "$project_site" "$ROOT" > "$site/malb-containernet.pth"
# Containernet's one requirement the project does not have (its `mn` cleans with it)
"$PY" -m pip install -q --disable-pip-version-check python-iptables || exit 1
# the project's commands beside this interpreter, as the stack finds them (the controller
# runs on this interpreter: it imports no Mininet)
for cmd in "$ROOT"/.venv/bin/*; do
  case "$(basename "$cmd")" in python*|pip*|activate*|Activate*) continue ;; esac
  [ -e "$SCRATCH/bin/$(basename "$cmd")" ] || ln -s "$cmd" "$SCRATCH/bin/"
done
"$PY" -c 'from mininet.net import Containernet' || { say "Containernet does not import"; exit 1; }
backend="$(cd "$ROOT" && "$PY" -c 'from topologies.backend import resolve_backend; print(resolve_backend())')"
[ "$backend" = "containernet" ] || { say "the topologies would use $backend, not containernet"; exit 1; }

status=0
passed=0
step() {
  local name=$1; shift
  say "$name"
  local start=$SECONDS
  (cd "$ROOT" && "$@")
  local rc=$?
  if [ $rc -eq 0 ]; then
    passed=$((passed + 1)); say "ok in $((SECONDS - start)) s: $name"
  else
    say "FAILED ($rc) in $((SECONDS - start)) s: $*"; [ $status -ne 0 ] || status=$rc
  fi
  "$ROOT/.venv/bin/python" -m topologies clean >/dev/null 2>&1
  return $rc
}
# A short comparison: 3 phases of a few seconds, one run per policy.
compare() {
  local out=$1; shift
  "$PY" -m experiments.lb_comparison --phase-seconds 6 --peak-rate 2 --duration-scale 0.1 \
    --video-seconds 10 --period 1 --progress 10 --runs 1 --out "$RESULTS/$out" "$@"
}
# An entry point run once: its time, exit status and the backend its stack recorded
# (testbed.json in its results), one JSON line each.
entry() {
  local name=$1 out=$2; shift 2
  local start=$SECONDS
  step "$name" "$PY" -m "$@" --out "$RESULTS/$out"
  local rc=$?
  "$PY" "$ROOT/scripts/entry_record.py" "$name" "$RESULTS/$out" "$((SECONDS - start))" "$rc" \
    "$@" >> "$RESULTS/entry-points.jsonl"
}
rm -rf "$RESULTS"

step "topologies check (12 instances)" "$PY" -m topologies check
if [ $entry_points -eq 1 ]; then
  entry "load-balancing comparison" lb experiments.lb_comparison \
    --policies malb,haproxy-leastconn --phase-seconds 20 --runs 1
  entry "placement, end to end" placement experiments.placement_comparison \
    --methods spread,ours --runs 1 --warmup 30 --phase 30 --settle 10
  entry "SLO loop" slo experiments.slo_energy --policies max,slo-client --profiles step \
    --seconds 60 --warmup 15 --runs 1 --no-progress
  entry "fault suite" faults experiments.faults --faults agent,controller,container \
    --seconds 20
elif [ $tier -eq 1 ]; then
  # the testbed's, the examples' and `mn --custom`'s integration tests, on Containernet
  step "the tests of the testbed, the examples and mn --custom" \
    env MALB_REQUIRE_CONTAINERNET=1 "$PY" -m pytest -m "integration and not e2e" \
    -p no:cacheprovider -q tests/integration/test_testbed.py \
    tests/integration/test_examples.py "$@"
  # malb per flow beside HAProxy (CPU-fed agent weights) through the proxy host, with the
  # integration test's checks of what it wrote (CI runs it here instead of on Mininet)
  step "comparison: malb per flow beside HAProxy, checked" \
    env MALB_REQUIRE_CONTAINERNET=1 "$PY" -m pytest -m "integration and not e2e" \
    -p no:cacheprovider -q \
    tests/integration/test_experiments.py::test_a_short_comparison_of_malb_and_haproxy "$@"
  step "comparison: malb in tracker mode" compare tracker --policies malb --tracker
  step "comparison: malb in data-plane mode" compare dataplane --policies malb --dataplane
else
  step "integration suite" env MALB_REQUIRE_CONTAINERNET=1 \
    "$PY" -m pytest -m integration -p no:cacheprovider "$@"
  step "short comparison (results/containernet-check)" compare per-flow
fi
if [ $status -eq 0 ]; then
  say "all $passed steps passed on Containernet"
else
  say "some steps failed ($passed passed)"
fi
exit $status
