"""common/lab.py: the scaffolding every experiment and benchmark shares."""
import json
import os
import re
import sys

from common import lab
from common.procs import ROOT


def test_results_go_where_asked_or_to_a_dated_folder_under_results(tmp_path, monkeypatch):
    asked = tmp_path / "out" / "deeper"
    assert lab.results_dir(str(asked)) == str(asked) and asked.is_dir()
    monkeypatch.setattr(lab, "ROOT", str(tmp_path))
    made = lab.results_dir(None, "faults-")
    assert os.path.dirname(made) == str(tmp_path / "results")
    assert re.fullmatch(r"faults-\d{8}-\d{6}", os.path.basename(made)) and os.path.isdir(made)


def test_the_invocation_is_the_command_a_user_would_type_again():
    python = os.path.relpath(sys.executable, ROOT)
    assert lab.invocation("experiments.faults", ["--seconds", "30"]) == \
        f"sudo {python} -m experiments.faults --seconds 30"
    assert lab.invocation("benchmarks.placement", [], sudo=False) == \
        f"{python} -m benchmarks.placement"


def test_a_stamp_names_the_command_commit_and_time():
    s = lab.stamp("python -m x")
    assert s["command"] == "python -m x" and s["commit"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", s["when"])


def test_results_are_json_and_markdown_and_the_report_is_echoed(tmp_path, capsys):
    lab.write_results(str(tmp_path), "run", {"a": 1, "path": tmp_path}, "# Report\n")
    assert json.loads((tmp_path / "run.json").read_text()) == {"a": 1, "path": str(tmp_path)}
    assert (tmp_path / "run.md").read_text() == "# Report\n"
    assert "# Report" in capsys.readouterr().out
    lab.write_results(str(tmp_path), "quiet", {"b": 2}, "text", echo=False)
    assert capsys.readouterr().out == ""
    lab.write_results(str(tmp_path), "data-only", {"c": 3})
    assert not (tmp_path / "data-only.md").exists()
