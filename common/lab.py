"""The lab floor: what every experiment and benchmark does around its measurement, one way.

- results_dir(): where a run writes: --out, or results/<prefix><date-time>, created;
- invocation(): how the run was started, as its user would type it again;
- stamp(): the command, the commit of the code that ran and when, for its result file;
- write_results(): <name>.json (the data) and <name>.md (the report), the report echoed.
"""
from __future__ import annotations

import datetime
import json
import os
import sys

from common.procs import ROOT, git_commit


def results_dir(out: str | None, prefix: str = "") -> str:
    """`out` (the --out flag), or results/<prefix><YYYYmmdd-HHMMSS> under the repository;
    created if missing."""
    path = out or os.path.join(ROOT, "results",
                               prefix + datetime.datetime.now().strftime("%Y%m%d-%H%M%S"))
    os.makedirs(path, exist_ok=True)
    return path


def invocation(module: str, argv: list[str] | None = None, sudo: bool = True) -> str:
    """`sudo .venv/bin/python -m <module> <flags>`: the command that ran, with the
    interpreter relative to the repository (argv: the flags; default this process's)."""
    flags = argv if argv is not None else sys.argv[1:]
    python = os.path.relpath(sys.executable, ROOT)
    return " ".join([*(["sudo"] if sudo else []), python, "-m", module, *flags])


def stamp(command: str) -> dict:
    """What every result file starts with: the command, the commit and the time."""
    return {"command": command, "commit": git_commit(),
            "when": datetime.datetime.now().isoformat(timespec="seconds")}


def write_results(out_dir: str, name: str, doc: dict, markdown: str | None = None,
                  echo: bool = True) -> None:
    """<name>.json (indent 1; values JSON does not know written as text) and, with a
    report, <name>.md, printed too unless echo is False."""
    with open(os.path.join(out_dir, f"{name}.json"), "w") as fh:
        json.dump(doc, fh, indent=1, default=str)
    if markdown is None:
        return
    with open(os.path.join(out_dir, f"{name}.md"), "w") as fh:
        fh.write(markdown)
    if echo:
        print(markdown)
