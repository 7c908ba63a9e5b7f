"""The lab floor: what every experiment and benchmark does around its measurement, one way.

- results_dir(): where a run writes: --out, or results/<prefix><date-time>, created;
- invocation(): how the run was started, as its user would type it again;
- stamp(), images(): the command, the commit of the code that ran and when (and the
  containers' images), for its result file;
- write_results(): <name>.json (the data) and <name>.md (the report), the report echoed;
- resumable_stamp(): stamp() for an experiment that --resume continues, its options kept
  at its start and checked on resuming (resume_problem(): what stands in the way of
  resuming, before anything starts); set_aside(): the directory of a part cut off,
  moved out of the resumed experiment's way;
- rotated(): round k's order of the variants of interleaved rounds;
- terminate_unwinds(), restore_terminate(): SIGTERM raising KeyboardInterrupt while a
  testbed is up, so that it comes down as after ^C.
"""
from __future__ import annotations

import datetime
import json
import os
import signal
import sys
import threading
from collections.abc import Callable

from common.paths import ROOT, WORK
from common.procs import git_commit


def results_dir(out: str | None, prefix: str = "", root: str | None = None) -> str:
    """`out` (the --out flag), or results/<prefix><YYYYmmdd-HHMMSS> under the checkout (an
    installed package's: the working directory; `root` if given, "" for a path relative to
    the working directory); created if missing."""
    path = out or os.path.join(WORK if root is None else root, "results",
                               prefix + datetime.datetime.now().strftime("%Y%m%d-%H%M%S"))
    os.makedirs(path, exist_ok=True)
    return path


def invocation(module: str, argv: list[str] | None = None, sudo: bool = True) -> str:
    """`sudo .venv/bin/python -m <module> <flags>`: the command that ran, with the
    interpreter relative to the repository (argv: the flags; default this process's)."""
    flags = argv if argv is not None else sys.argv[1:]
    python = os.path.relpath(sys.executable, ROOT)
    return " ".join([*(["sudo"] if sudo else []), python, "-m", module, *flags])


# the images whose code runs in the testbed's containers, and the label that says which
IMAGES = (("malb/service:latest", "malb.context"), ("malb/base:latest", "malb.recipe"))


def images() -> dict[str, str | None]:
    """The containers' images as they are tagged now: their content hashes (the labels
    scripts/images.py gives them; `python scripts/images.py status` says whether they are
    this checkout's), None where Docker cannot say. The services run the image's code, not
    the checkout's: a run from another worktree may differ here."""
    import subprocess
    out: dict[str, str | None] = {}
    for name, label in IMAGES:
        try:
            res = subprocess.run(["docker", "image", "inspect", "--format",
                                  f"{{{{index .Config.Labels \"{label}\"}}}}", name],
                                 capture_output=True, text=True, timeout=20)
            out[name] = res.stdout.strip() or None if res.returncode == 0 else None
        except (OSError, subprocess.TimeoutExpired):
            out[name] = None
    return out


def stamp(command: str, with_images: bool = False) -> dict:
    """What every result file starts with: the command, the commit and the time, and with
    with_images (runs on the testbed) the containers' images; taken when the run starts (a
    commit landing during a long run is not the code it ran)."""
    out = {"command": command, "commit": git_commit(),
           "when": datetime.datetime.now().isoformat(timespec="seconds")}
    if with_images:
        out["images"] = images()
    return out


# Options that may differ between an experiment's start and its resumption: where it goes
# and how it reports progress. Any other would make the resumed part another experiment.
RESUME_FREE_OPTIONS = frozenset({"out", "progress", "resume"})


def resume_problem(out: str | None) -> str | None:
    """Why --resume cannot go on with an experiment in `out` (the --out flag), or None;
    asked before anything starts."""
    if not out:
        return "--resume continues the experiment in --out DIRECTORY: give it"
    if not os.path.exists(os.path.join(out, "started.json")):
        return f"--resume: {out} holds no experiment to resume (no started.json)"
    return None


def resumable_stamp(out_dir: str, command: str, options: dict, resume: bool,
                    defaults: dict | None = None) -> dict:
    """stamp() (with the images) for an experiment that can be resumed: its options (but
    RESUME_FREE_OPTIONS) and stamp are kept in out_dir/started.json at its start. With
    `resume`, that record must be there with the same options, else ValueError naming
    what differs; an option the record lacks (one the program gained after the start)
    counts as its value in `defaults`. The stamp is the start's, its commit "<start's>,
    resumed at <now's>" when the code changed in between."""
    path = os.path.join(out_dir, "started.json")
    # as JSON has them, so that a tuple and the list it was read back as are one value
    mine = json.loads(json.dumps({k: v for k, v in options.items()
                                  if k not in RESUME_FREE_OPTIONS}, default=str))
    now = stamp(command, with_images=True)
    if not resume:
        with open(path, "w") as fh:
            json.dump({"options": mine, "stamp": now}, fh, indent=1)
        return now
    try:
        with open(path) as fh:
            record = json.load(fh)
        theirs, started = record["options"], record["stamp"]
        theirs = {**json.loads(json.dumps({k: v for k, v in (defaults or {}).items()
                                           if k in mine}, default=str)), **theirs}
    except FileNotFoundError:
        raise ValueError(f"{out_dir} holds no experiment to resume (no started.json)") \
            from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"the record {path} cannot be read ({exc})") from None
    differ = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
    if differ:
        raise ValueError(f"{out_dir} started with other options ({', '.join(differ)}); "
                         "give the same ones, or another --out")
    if started["commit"] != now["commit"]:
        started = {**started, "commit": f"{started['commit']}, resumed at {now['commit']}"}
    if started.get("images") != now["images"]:
        print(f"[lab] warning: the containers' images are {now['images']}, the experiment "
              f"started with {started.get('images')}", file=sys.stderr)
    return started


def set_aside(path: str, why: str = "interrupted") -> str:
    """Move the directory `path` to <path>.<why> (or <path>.<why>-2, ...: none is
    overwritten), kept for its logs but out of the way of the part played again; returns
    where it went."""
    aside, n = f"{path}.{why}", 1
    while os.path.exists(aside):
        n += 1
        aside = f"{path}.{why}-{n}"
    os.rename(path, aside)
    return aside


def write_results(out_dir: str, name: str, doc: dict,
                  markdown: str | Callable[[], str] | None = None, echo: bool = True,
                  indent: int = 1, default: Callable | None = str) -> str | None:
    """<name>.json (indent 1; values JSON does not know written as text, or with
    default=None a TypeError, as json.dump) and, with a report, <name>.md, printed too
    unless echo is False; returns the report. The report may be a function that renders
    it: called once the JSON is written, so a report that fails leaves the data there."""
    with open(os.path.join(out_dir, f"{name}.json"), "w") as fh:
        json.dump(doc, fh, indent=indent, default=default)
    if markdown is None:
        return None
    text = markdown() if callable(markdown) else markdown
    with open(os.path.join(out_dir, f"{name}.md"), "w") as fh:
        fh.write(text)
    if echo:
        print(text)
    return text


def rotated(names: list, k: int) -> list:
    """Round k's order of names, each round starting one further on, so that in interleaved
    rounds every variant takes every place (and no one always runs first, or after the same
    neighbour) equally often."""
    k %= len(names) or 1
    return names[k:] + names[:k]



def _interrupt(signum, frame):
    raise KeyboardInterrupt


def terminate_unwinds():
    """Make SIGTERM raise KeyboardInterrupt, so that `finally` and `with` blocks tear down
    what the run started (Python's default ends the process there and then, leaving the
    controller, agents and profiler running). Only where SIGTERM has its default handling
    and in the main thread; the previous handling to give to restore_terminate(), or None
    when nothing was changed."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return None
    return signal.signal(signal.SIGTERM, _interrupt)


def restore_terminate(previous) -> None:
    """Undo terminate_unwinds() (None: nothing to undo)."""
    if previous is not None and threading.current_thread() is threading.main_thread() \
            and signal.getsignal(signal.SIGTERM) is _interrupt:
        signal.signal(signal.SIGTERM, previous)
