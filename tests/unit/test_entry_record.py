"""scripts/entry_record.py: an entry point's run as one JSON line, its backend as the run's
own stacks recorded it."""
from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT

SCRIPT = f"{ROOT}/scripts/entry_record.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          cwd=ROOT)


def test_the_backend_is_what_the_runs_stacks_wrote(tmp_path):
    for k, backend in enumerate(("containernet", "containernet")):
        (tmp_path / f"policy{k}" / "run1").mkdir(parents=True)
        (tmp_path / f"policy{k}" / "run1" / "testbed.json").write_text(
            json.dumps({"backend": backend, "datapath": "user"}))
    done = run("fault suite", str(tmp_path), "95", "0", "experiments.faults", "--seconds", "20")
    assert done.returncode == 0, done.stderr
    line = json.loads(done.stdout)
    assert line["entry"] == "fault suite" and line["seconds"] == 95
    assert line["exit_status"] == 0 and line["stacks"] == 2
    assert (line["backend"], line["datapath"]) == ("containernet", "user")
    assert line["command"] == "python -m experiments.faults --seconds 20"


def test_a_run_that_recorded_no_testbed_says_so(tmp_path):
    line = json.loads(run("SLO loop", str(tmp_path), "3", "1", "experiments.slo_energy").stdout)
    assert line["backend"] == "none recorded" and line["exit_status"] == 1


def test_bad_arguments_exit_2_with_the_usage():
    done = run("x", "/nowhere", "soon")
    assert done.returncode == 2 and "entry_record.py NAME" in done.stderr
