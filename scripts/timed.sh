#!/usr/bin/env bash
# `timed.sh NAME COMMAND...`: runs the command and says how long it took, and whether it
# passed, on stderr; the same line is added to the file $MALB_TIMES names, when set (.ci/run
# prints them together at the end: where CI's time went). Exits with the command's code.
name=$1
shift
start=$(date +%s)
"$@"
rc=$?
secs=$(( $(date +%s) - start ))
if [ "$rc" -eq 0 ]; then verdict=ok; else verdict="FAILED (exit $rc)"; fi
line=$(printf '%-20s %5d s  %s' "$name" "$secs" "$verdict")
echo "[time] $line" >&2
if [ -n "${MALB_TIMES:-}" ]; then echo "$line" >> "$MALB_TIMES"; fi
exit "$rc"
