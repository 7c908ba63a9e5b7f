#!/usr/bin/env bash
# Check the project on real Containernet, which is not on PyPI and cannot be a dependency:
#
#   sudo bash scripts/check-containernet.sh PATH-TO-CONTAINERNET-SOURCE [pytest args...]
#
# Containernet (a checkout of github.com/containernet/containernet) is installed into a
# scratch virtualenv beside the project's (.venv-containernet, with the same requirements;
# never into the system Python), where the topologies then pick it automatically. There it
# runs `topologies check`, the integration suite (the Containernet-only test included) and a
# short Scenario 2 comparison (results/containernet-check/). Everything it made is removed
# at the end, results apart. Exit status: 0 when every step passed, else that of the first
# that failed; 2 for a bad argument.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SCRATCH="$ROOT/.venv-containernet"
say() { echo "[containernet-check] $*"; }

if [ $# -lt 1 ] || [ ! -f "$1/mininet/net.py" ] || ! grep -q "class Containernet" "$1/mininet/net.py"; then
  echo "usage: sudo bash scripts/check-containernet.sh PATH-TO-CONTAINERNET-SOURCE [pytest args...]" >&2
  echo "  (a checkout of github.com/containernet/containernet: its mininet/net.py defines Containernet)" >&2
  exit 2
fi
SRC="$(cd "$1" && pwd)"; shift
[ "$(id -u)" -eq 0 ] || { echo "[containernet-check] needs root (sudo)" >&2; exit 1; }

BUILD="$(mktemp -d)"
cleanup() {
  "$ROOT/.venv/bin/python" -m topologies clean >/dev/null 2>&1
  rm -rf "$SCRATCH" "$BUILD"
}
trap cleanup EXIT

say "make setup (Open vSwitch, Docker, the project's virtualenv and images)"
bash "$ROOT/scripts/setup.sh" || exit $?

say "scratch virtualenv $SCRATCH with the project's requirements"
rm -rf "$SCRATCH"
/usr/bin/python3 -m venv "$SCRATCH" || exit 1
"$SCRATCH/bin/pip" install -q "setuptools<68" wheel || exit 1
"$SCRATCH/bin/pip" install -q -r "$ROOT/requirements.txt" || exit 1
# Containernet's setup.py imports its own mininet.net (and with it docker), so it is built
# without isolation; --no-deps: its pins (docker<=6.0.1 and others) are not needed by the
# project, whose Docker SDK works with it. Built from a copy: the checkout stays untouched.
say "installing Containernet from $SRC"
cp -a "$SRC/." "$BUILD/" || exit 1
"$SCRATCH/bin/pip" install -q --no-deps --no-build-isolation "$BUILD" || exit 1
site="$("$SCRATCH/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$ROOT" > "$site/malb-project.pth"
"$SCRATCH/bin/python" -c 'from mininet.net import Containernet' || { say "Containernet does not import"; exit 1; }
backend="$(cd "$ROOT" && "$SCRATCH/bin/python" -c 'from topologies.backend import resolve_backend; print(resolve_backend())')"
[ "$backend" = "containernet" ] || { say "the topologies would use $backend, not containernet"; exit 1; }

status=0
step() {
  say "$1"; shift
  (cd "$ROOT" && "$@")
  local rc=$?
  [ $rc -eq 0 ] || { say "FAILED ($rc): $*"; [ $status -ne 0 ] || status=$rc; }
}
step "topologies check (12 instances)" "$SCRATCH/bin/python" -m topologies check
step "integration suite" "$SCRATCH/bin/python" -m pytest -m integration -p no:cacheprovider "$@"
step "short comparison (results/containernet-check)" "$SCRATCH/bin/python" \
  -m experiments.lb_comparison --phase-seconds 10 --peak-rate 2 --duration-scale 0.2 \
  --video-seconds 10 --period 1 --progress 10 --out "$ROOT/results/containernet-check"
if [ $status -eq 0 ]; then say "all steps passed on Containernet"; else say "some steps failed"; fi
exit $status
