#!/usr/bin/env bash
# `unprivileged.sh COMMAND...`: runs the command without root. Run by root, it runs it as
# the user `nobody` (a home of its own in a scratch folder), so that a unit test that needs
# root fails rather than passes by accident; where nobody cannot read the checkout (a clone
# under /root) or run the command (an interpreter under /root, as pyenv's), it says so and
# runs it as root. Anyone else runs it as themselves.
set -u
if [ "$(id -u)" -ne 0 ]; then
  exec "$@"
fi
as_nobody=(setpriv --reuid=nobody --regid="$(id -g nobody 2>/dev/null)" --clear-groups)
if ! id nobody >/dev/null 2>&1 || ! "${as_nobody[@]}" test -r pytest.ini; then
  echo "[unprivileged] the user nobody cannot read $PWD: running as root" >&2
  exec "$@"
fi
if ! "${as_nobody[@]}" "$1" --version >/dev/null 2>&1; then
  echo "[unprivileged] the user nobody cannot run $1: running as root" >&2
  exec "$@"
fi
home=$(mktemp -d /tmp/malb-nobody.XXXXXX)
chown nobody "$home"
echo "[unprivileged] as the user nobody" >&2
# its bytecode cache in its scratch home: the one make names (Makefile) is root's
if [ -n "${PYTHONPYCACHEPREFIX:-}" ]; then export PYTHONPYCACHEPREFIX="$home/pycache"; fi
HOME=$home "${as_nobody[@]}" "$@"
rc=$?
rm -rf "$home"
exit "$rc"
