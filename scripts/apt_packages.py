"""The distribution's names for the packages setup installs, chosen by what apt knows.

    python3 scripts/apt_packages.py chromium chromium-driver nginx ...   # the names to install

Debian and Ubuntu name a few packages differently, and Ubuntu ships Chromium only as a snap:
its `chromium-browser` and `chromium-chromedriver` are transitional packages that install
snapd. For each wanted package, the first of its alternatives (ALTERNATIVES) that apt knows
and that is not such a wrapper is printed, one per line; a package with none is left out
when it is OPTIONAL (the reason goes to stderr and, with --skipped FILE, into that file for
the tests to read), and kept as asked otherwise, so that apt-get names it when it fails.
A package no alternative of which apt knows (no package lists yet) is kept as asked too.

- choose(wanted, show): (names to install, {package: why it was left out}); plain Python,
  `show` answers apt's fields for a name or None (a unit test passes a fake one);
- apt_show: `apt-cache show` for one name; main.

Only the system's python3 and the standard library: setup runs it before any virtualenv.
"""
from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

# wanted name -> the names to try, in order (Debian's first)
ALTERNATIVES: dict[str, tuple[str, ...]] = {
    "chromium": ("chromium", "chromium-browser"),
    "chromium-driver": ("chromium-driver", "chromium-chromedriver"),
}
# packages the platform runs without, and what is lost then
OPTIONAL: dict[str, str] = {
    "chromium": "no Chromium outside a snap: the live view's browser test is skipped",
    "chromium-driver": "no chromedriver outside a snap: the live view's browser test is "
                       "skipped",
}


def is_snap_wrapper(fields: dict[str, str]) -> bool:
    """A package that only installs a snap: it depends on snapd."""
    depends = fields.get("Depends", "") + "," + fields.get("Pre-Depends", "")
    return any(part.strip().split(" ")[0] == "snapd"
               for alternative in depends.split(",") for part in alternative.split("|"))


def choose(wanted: list[str], show: Callable[[str], dict[str, str] | None]
           ) -> tuple[list[str], dict[str, str]]:
    """The names to install for `wanted`, and those left out with why."""
    chosen, left_out = [], {}
    for name in wanted:
        candidates = ALTERNATIVES.get(name, (name,))
        known = {c: show(c) for c in candidates}
        usable = [c for c in candidates if known[c] is not None and not is_snap_wrapper(known[c])]
        if usable:
            chosen.append(usable[0])
        elif any(fields is not None for fields in known.values()) and name in OPTIONAL:
            left_out[name] = OPTIONAL[name]
        else:                # apt knows none of them (no lists yet), or it is required
            chosen.append(name)
    return chosen, left_out


def apt_show(name: str) -> dict[str, str] | None:
    """apt's fields for the candidate version of `name`, None when apt does not know it."""
    try:
        res = subprocess.run(["apt-cache", "show", "--no-all-versions", name],
                             capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if res.returncode != 0 or not res.stdout.strip():
        return None
    fields: dict[str, str] = {}
    for line in res.stdout.split("\n\n")[0].splitlines():
        key, sep, value = line.partition(":")
        if sep and not line.startswith(" "):
            fields[key] = value.strip()
    return fields


def main(argv: list[str]) -> int:
    skipped_file = None
    if argv[:1] == ["--skipped"]:
        if len(argv) < 2:
            print("--skipped: expected a file", file=sys.stderr)
            return 2
        skipped_file, argv = argv[1], argv[2:]
    chosen, left_out = choose(argv, apt_show)
    for name in chosen:
        print(name)
    for name, why in left_out.items():
        print(f"[setup]   left out {name}: {why}", file=sys.stderr)
    if skipped_file:
        with open(skipped_file, "w") as fh:
            fh.writelines(f"{name}: {why}\n" for name, why in left_out.items())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
