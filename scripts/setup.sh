#!/usr/bin/env bash
# Sets up everything the project needs on a Debian or Ubuntu machine, idempotently:
# each step says what it does, is skipped when already satisfied, and a failing step stops
# the run with its name and the reason. Run as root: `make setup`.
#
#   setup.sh                       everything
#   setup.sh --python              only what `make check` needs: the Debian packages the
#                                  unit tier uses and the virtualenvs
#   setup.sh --python --is-current exit 0 when that has nothing to do (no root needed)
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
RYU_VENV="$ROOT/.venv-ryu"
UV="$VENV/bin/uv"
# the Pythons beside the system one whose virtualenvs `make test` uses where they exist
NEWER_PYTHONS=(3.12 3.13)
LOG_DIR=/var/log/malb
STEP=""
ONLY_PYTHON=0
IS_CURRENT=0
for arg in "$@"; do
  case "$arg" in
    --python) ONLY_PYTHON=1 ;;
    --is-current) IS_CURRENT=1 ;;
    *) echo "[setup] unknown option: $arg (known: --python, --is-current)" >&2; exit 2 ;;
  esac
done

# what the virtualenvs and the unit tier need (Mininet's module, HAProxy's config check)
PYTHON_APT_PACKAGES=(python3 python3-venv python3-dev build-essential ca-certificates mininet
                     haproxy)
APT_PACKAGES=("${PYTHON_APT_PACKAGES[@]}" openvswitch-switch docker.io debootstrap iperf3
              ethtool iproute2 iputils-ping curl procps psmisc util-linux net-tools tcpdump
              prometheus chromium chromium-driver nginx libnginx-mod-stream)
SYS_PY=/usr/bin/python3

step() { STEP="$1"; echo "[setup] $1"; }
skip() { echo "[setup]   ok: $1"; }
fail() { echo "[setup] FAILED at step '$STEP': $1" >&2; exit 1; }

missing_packages() {     # those of the named array not installed, one per line
  local -n wanted=$1
  for p in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
  # Ubuntu needs Debian's keyring to debootstrap the Debian base image.
  if [ "$1" = APT_PACKAGES ] && ! grep -qi '^ID=debian' /etc/os-release 2>/dev/null; then
    dpkg-query -W -f='${Status}' debian-archive-keyring 2>/dev/null | grep -q "install ok installed" \
      || echo debian-archive-keyring
  fi
}
# a virtualenv is current when its lock, pyproject.toml and this script are as it was built from
venv_hash() { cat "$ROOT/locks/$1.txt" "$ROOT/pyproject.toml" "$ROOT/scripts/setup.sh" | sha256sum | cut -c1-16; }
# an interpreter of that version: on the PATH, else pyenv's build (its shims refuse until a
# version is chosen, so each is asked for its version)
find_python() {
  local candidate root
  root="$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")"
  for candidate in "$(command -v "python$1" 2>/dev/null)" "$root"/versions/"$1".*/bin/python"$1"; do
    [ -x "$candidate" ] || continue
    [ "$("$candidate" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" = "$1" ] \
      && { echo "$candidate"; return; }
  done
}

if [ "$IS_CURRENT" -eq 1 ]; then
  [ -z "$(missing_packages PYTHON_APT_PACKAGES)" ] \
    && [ "$(cat "$VENV/.malb-lock" 2>/dev/null)" = "$(venv_hash main)" ] || exit 1
  if [ "$($SYS_PY -c 'import sys; print(sys.version_info[:2] == (3, 11))')" = True ]; then
    [ "$(cat "$RYU_VENV/.malb-lock" 2>/dev/null)" = "$(venv_hash ryu)" ] || exit 1
  fi
  for version in "${NEWER_PYTHONS[@]}"; do
    [ -z "$(find_python "$version")" ] \
      || [ "$(cat "$ROOT/.venv-$version/.malb-lock" 2>/dev/null)" = "$(venv_hash main)" ] || exit 1
  done
  exit 0
fi

[ "$(id -u)" -eq 0 ] || { echo "[setup] needs root (Open vSwitch, Docker, network namespaces): sudo make setup" >&2; exit 1; }
command -v apt-get >/dev/null || { echo "[setup] needs a Debian or Ubuntu machine (apt-get not found)" >&2; exit 1; }
mkdir -p "$LOG_DIR"
# The daemons started below live on after this script: they must not inherit its open files
# beyond stdin, stdout and stderr. A lock the caller holds (`flock LOCK make test`) would
# otherwise stay held by dockerd and ovs-vswitchd for as long as they run.
for fd in /proc/$$/fd/*; do
  fd=${fd##*/}
  [ "$fd" -gt 2 ] 2>/dev/null && [ "$fd" != 255 ] && eval "exec $fd>&-"   # 255: bash's own
done

APT_UPDATED=0
apt_update_once() {
  if [ "$APT_UPDATED" -eq 0 ]; then
    apt-get update -qq >>"$LOG_DIR/apt.log" 2>&1 || fail "apt-get update failed (see $LOG_DIR/apt.log)"
    APT_UPDATED=1
  fi
}
install_packages() {     # the named array's packages that are missing
  local missing
  mapfile -t missing < <(missing_packages "$1")
  if [ ${#missing[@]} -eq 0 ]; then
    local -n all=$1
    skip "all ${#all[@]} packages installed"
    return
  fi
  echo "[setup]   installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt_update_once
  # the packages' own daemons (nginx on port 80, Prometheus, HAProxy) are not started: the
  # project starts what it uses, where it uses it. A policy-rc.d already there stays.
  local guard=0 rc=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\n# scripts/setup.sh: no daemon starts while it installs\nexit 101\n' \
      > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && guard=1
  fi
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >>"$LOG_DIR/apt.log" 2>&1 \
    || rc=$?
  [ "$guard" -eq 0 ] || rm -f /usr/sbin/policy-rc.d
  [ "$rc" -eq 0 ] || fail "apt-get install failed (see $LOG_DIR/apt.log)"
}

# ---------------------------------------------------------------- Debian packages
step "Debian packages for Python"
install_packages PYTHON_APT_PACKAGES

# ---------------------------------------------------------------- Python virtualenvs
# Every virtualenv installs a lock of locks/ (exact versions with hashes, written by uv from
# pyproject.toml: `make locks`), then this checkout, editable, without dependencies (its
# console scripts; the checkout on the path). uv installs, from .venv, where the lock puts it.
install_lock() {     # install_lock VENV LOCK LOG: the lock, then the checkout
  local venv=$1 lock=$2 log=$3
  echo "[setup]   uv pip sync $(basename "$lock") (log: $log)"
  "$UV" pip sync --quiet --require-hashes --python "$venv/bin/python" "$lock" >"$log" 2>&1 \
    || fail "uv pip sync $lock failed (see $log)"
  "$UV" pip install --quiet --no-deps --python "$venv/bin/python" \
    --config-settings editable_mode=compat -e "$ROOT" >>"$log" 2>&1 \
    || fail "the checkout does not install into $venv (see $log)"
}
# The virtualenv sees the system's Mininet (Debian's package, or Containernet where a user
# installed it system-wide) through a path holding only that module; a Containernet
# installed into the virtualenv itself (docs/testbed.md) comes first. Refreshed on every
# run, so a Mininet or Containernet installed later is picked up.
link_mininet() {     # link_mininet VENV
  local mnpath site
  mnpath="$($SYS_PY -c 'import mininet, os; print(os.path.dirname(mininet.__file__))' 2>/dev/null)" \
    || fail "the system Python has no mininet module (apt-get install mininet)"
  mkdir -p "$1/mininet-path"
  ln -sfn "$mnpath" "$1/mininet-path/mininet"
  site="$("$1/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  # the resolved path: a virtualenv reached through a link (a worktree's) keeps working
  # when the link goes
  echo "$(cd "$1/mininet-path" && pwd -P)" > "$site/malb-mininet.pth"
}
# the controller's imports started for real: the launcher's, with its framework's app manager
controller_imports() {     # controller_imports PYTHON MODULE
  "$1" -c "import $2, ryu_apps.malb" 2>/dev/null
}

step "Python virtualenv ($VENV, os-ken)"
if [ -x "$VENV/bin/python" ] && [ "$(cat "$VENV/.malb-lock" 2>/dev/null)" = "$(venv_hash main)" ]; then
  skip "locks/main.txt unchanged since the last install"
else
  [ -x "$VENV/bin/python" ] || { $SYS_PY -m venv "$VENV" || fail "python3 -m venv failed"; }
  # uv itself, at the lock's version and hashes, by pip
  echo "[setup]   pip install uv (log: $LOG_DIR/pip.log)"
  awk '/^uv==/{on=1} on{print} on && !/\\$/{exit}' "$ROOT/locks/main.txt" > "$VENV/uv-lock.txt"
  "$VENV/bin/pip" install -q --require-hashes -r "$VENV/uv-lock.txt" >"$LOG_DIR/pip.log" 2>&1 \
    || fail "pip could not install uv (see $LOG_DIR/pip.log)"
  install_lock "$VENV" "$ROOT/locks/main.txt" "$LOG_DIR/uv.log"
  controller_imports "$VENV/bin/python" ryu_apps.osken_manager \
    || fail "the virtualenv cannot start the controller's imports under os-ken"
  "$VENV/bin/python" -c 'import docker, statsmodels, numpy, pymetis, highspy, matplotlib, pytest' \
    || fail "the virtualenv cannot import its packages"
  venv_hash main > "$VENV/.malb-lock"
fi
link_mininet "$VENV"

step "Ryu virtualenv ($RYU_VENV)"
rm -rf "$ROOT/.venv-osken"      # os-ken's own virtualenv before os-ken became the default
# the controller under Ryu (ryu-manager), beside os-ken's in $VENV: Python 3.11 only
if [ "$($SYS_PY -c 'import sys; print(sys.version_info[:2] == (3, 11))')" != True ]; then
  skip "left out: Ryu runs on Python 3.11 only and $SYS_PY is $($SYS_PY -V 2>&1) (docs/setup.md, \"Frameworks\")"
elif [ -x "$RYU_VENV/bin/python" ] && [ "$(cat "$RYU_VENV/.malb-lock" 2>/dev/null)" = "$(venv_hash ryu)" ]; then
  skip "locks/ryu.txt unchanged since the last install"
else
  [ -x "$RYU_VENV/bin/python" ] || { $SYS_PY -m venv "$RYU_VENV" || fail "python3 -m venv failed"; }
  install_lock "$RYU_VENV" "$ROOT/locks/ryu.txt" "$LOG_DIR/uv-ryu.log"
  controller_imports "$RYU_VENV/bin/python" ryu.cmd.manager \
    || fail "the Ryu virtualenv cannot start the controller's imports under Ryu"
  venv_hash ryu > "$RYU_VENV/.malb-lock"
fi

# Newer Pythons: the lock is universal; the unit tier and the controller's tests run on each
# found here (`make test`), and are skipped, saying so, where one is not
for version in "${NEWER_PYTHONS[@]}"; do
  step "Python $version virtualenv ($ROOT/.venv-$version)"
  venv="$ROOT/.venv-$version"
  interpreter="$(find_python "$version")"
  if [ -z "$interpreter" ]; then
    rm -rf "$venv"
    skip "left out: no Python $version on this machine (PATH, pyenv)"
    continue
  fi
  if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.malb-lock" 2>/dev/null)" = "$(venv_hash main)" ]; then
    skip "locks/main.txt unchanged since the last install"
  else
    [ -x "$venv/bin/python" ] || { "$interpreter" -m venv "$venv" || fail "$interpreter -m venv failed"; }
    install_lock "$venv" "$ROOT/locks/main.txt" "$LOG_DIR/uv-$version.log"
    controller_imports "$venv/bin/python" ryu_apps.osken_manager \
      || fail "the Python $version virtualenv cannot start the controller's imports"
    venv_hash main > "$venv/.malb-lock"
  fi
  link_mininet "$venv"
done

if [ "$ONLY_PYTHON" -eq 1 ]; then
  echo "[setup] done (Python only)"
  exit 0
fi

step "Debian packages"
# the distribution's names, chosen by what apt knows (Ubuntu ships Chromium only as a snap:
# left out there, and the browser test says so); its package lists first, if any is missing
[ -z "$(missing_packages APT_PACKAGES)" ] || apt_update_once
mkdir -p /var/lib/malb
chosen="$($SYS_PY "$ROOT/scripts/apt_packages.py" --skipped /var/lib/malb/skipped-packages \
          "${APT_PACKAGES[@]}")" || fail "scripts/apt_packages.py could not choose the packages"
mapfile -t APT_PACKAGES <<< "$chosen"
install_packages APT_PACKAGES

# ---------------------------------------------------------------- Open vSwitch
step "Open vSwitch"
if ovs-vsctl --timeout=3 show >/dev/null 2>&1; then
  skip "ovs-vswitchd answers"
else
  echo "[setup]   starting Open vSwitch (ovs-ctl)"
  /usr/share/openvswitch/scripts/ovs-ctl start --system-id=random >"$LOG_DIR/ovs-ctl.log" 2>&1 \
    || fail "ovs-ctl start failed (see $LOG_DIR/ovs-ctl.log)"
  for _ in $(seq 1 30); do ovs-vsctl --timeout=2 show >/dev/null 2>&1 && break; sleep 1; done
  ovs-vsctl --timeout=3 show >/dev/null 2>&1 || fail "ovs-vswitchd does not answer after 30 s"
fi

# ---------------------------------------------------------------- Docker engine
step "Docker engine"
DOCKER=/usr/bin/docker; [ -x "$DOCKER" ] || DOCKER=docker
if $DOCKER info >/dev/null 2>&1; then
  skip "dockerd answers (left as it is)"
else
  if [ "$(cat /proc/1/comm 2>/dev/null)" = "systemd" ] && command -v systemctl >/dev/null; then
    echo "[setup]   starting docker with systemctl"
    systemctl start docker >"$LOG_DIR/docker-start.log" 2>&1 || fail "systemctl start docker failed"
  else
    # A socket file alone proves nothing: after a reboot of the sandbox (or a killed
    # containerd) /run keeps a stale socket, so ask containerd itself.
    containerd_answers() { timeout 5 ctr --address /run/containerd/containerd.sock version >/dev/null 2>&1; }
    if containerd_answers; then
      skip "containerd answers (left as it is)"
    else
      rm -f /run/containerd/containerd.sock /run/containerd/containerd.sock.ttrpc
      echo "[setup]   starting containerd (log: $LOG_DIR/containerd.log)"
      setsid nohup containerd >"$LOG_DIR/containerd.log" 2>&1 < /dev/null &
      for _ in $(seq 1 30); do containerd_answers && break; sleep 1; done
      containerd_answers || fail "containerd does not answer after 30 s (see $LOG_DIR/containerd.log)"
    fi
    # No docker0 bridge and no iptables rules: containers only get the topology's links.
    echo "[setup]   starting dockerd --bridge=none --iptables=false (log: $LOG_DIR/dockerd.log)"
    setsid nohup dockerd --bridge=none --iptables=false \
      --containerd=/run/containerd/containerd.sock >"$LOG_DIR/dockerd.log" 2>&1 < /dev/null &
  fi
  for _ in $(seq 1 60); do $DOCKER info >/dev/null 2>&1 && break; sleep 1; done
  $DOCKER info >/dev/null 2>&1 || fail "dockerd does not answer after 60 s (see $LOG_DIR/dockerd.log)"
fi

# ---------------------------------------------------------------- images
step "Docker images"
"$VENV/bin/python" "$ROOT/scripts/images.py" build || fail "image build failed"

echo "[setup] done"
