"""common/lab.py: the scaffolding every experiment and benchmark shares."""
import json
import os
import re
import sys

import pytest

from common import lab
from common.procs import ROOT


def test_results_go_where_asked_or_to_a_dated_folder_under_results(tmp_path, monkeypatch):
    asked = tmp_path / "out" / "deeper"
    assert lab.results_dir(str(asked)) == str(asked) and asked.is_dir()
    monkeypatch.setattr(lab, "WORK", str(tmp_path))
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


def test_a_dated_folder_may_be_relative_to_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    made = lab.results_dir(None, "model-", root="")
    assert re.fullmatch(r"results/model-\d{8}-\d{6}", made) and (tmp_path / made).is_dir()


def test_the_json_can_keep_its_own_indent_and_refuse_what_it_does_not_know(tmp_path):
    lab.write_results(str(tmp_path), "two", {"a": [1]}, indent=2)
    assert (tmp_path / "two.json").read_text() == '{\n  "a": [\n    1\n  ]\n}'
    with pytest.raises(TypeError):        # default=None: only what JSON knows, as json.dump
        lab.write_results(str(tmp_path), "strict", {"p": tmp_path}, default=None)


def test_a_report_rendered_after_the_data_is_written_and_returned(tmp_path, capsys):
    def failing():
        assert (tmp_path / "late.json").exists()       # the data is already there
        raise RuntimeError("report bug")
    with pytest.raises(RuntimeError):
        lab.write_results(str(tmp_path), "late", {"a": 1}, failing)
    assert json.loads((tmp_path / "late.json").read_text()) == {"a": 1}
    assert not (tmp_path / "late.md").exists()
    text = lab.write_results(str(tmp_path), "ok", {"a": 1}, lambda: "# Rendered\n",
                             echo=False)
    assert text == "# Rendered\n" and (tmp_path / "ok.md").read_text() == text
    assert capsys.readouterr().out == ""
    assert lab.write_results(str(tmp_path), "plain", {"a": 1}, "# Given\n") == "# Given\n"


TERMINATED = """
import os, signal, sys
from common import lab
previous = lab.terminate_unwinds()
assert previous is signal.SIG_DFL
try:
    os.kill(os.getpid(), signal.SIGTERM)
    import time; time.sleep(5)
    print("not interrupted")
except KeyboardInterrupt:
    print("unwound")
finally:
    lab.restore_terminate(previous)
print(signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))     # another's handling: left alone
print(lab.terminate_unwinds() is None)
"""


def test_a_termination_unwinds_like_an_interrupt_and_the_default_comes_back():
    import subprocess
    res = subprocess.run([sys.executable, "-c", TERMINATED], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split() == ["unwound", "True", "True"], res.stdout


def test_a_resumed_experiment_keeps_its_start_and_refuses_other_options(tmp_path, monkeypatch):
    out, code = str(tmp_path), {"commit": "aaa"}
    monkeypatch.setattr(lab, "git_commit", lambda: code["commit"])
    monkeypatch.setattr(lab, "images", lambda: {"malb/service:latest": "c1"})
    options = {"seed": 300, "loads": [(20.0, 50.0)], "out": out, "resume": False}
    start = lab.resumable_stamp(out, "python -m x --seed 300", options, resume=False)
    assert start["commit"] == "aaa" and start["images"] == {"malb/service:latest": "c1"}
    # resumed at the same code: the start's stamp; where it goes and --resume may differ
    same = lab.resumable_stamp(out, "python -m x --resume", {**options, "resume": True,
                                                              "out": "elsewhere"}, True)
    assert same == start
    code["commit"] = "bbb"
    assert lab.resumable_stamp(out, "x", {**options, "resume": True}, True)["commit"] == \
        "aaa, resumed at bbb"
    with pytest.raises(ValueError, match=r"other options \(loads, seed\)"):
        lab.resumable_stamp(out, "x", {**options, "seed": 301, "loads": [(20, 60)]}, True)
    # nothing to resume, or a record that cannot be read: said, and nothing written
    with pytest.raises(ValueError, match="no experiment to resume"):
        lab.resumable_stamp(str(tmp_path / "empty"), "x", options, True)
    (tmp_path / "started.json").write_text("{")
    with pytest.raises(ValueError, match="cannot be read"):
        lab.resumable_stamp(out, "x", options, True)
    assert (tmp_path / "started.json").read_text() == "{"


def test_an_option_added_after_the_start_counts_as_its_default_on_resuming(tmp_path,
                                                                         monkeypatch):
    out = str(tmp_path)
    monkeypatch.setattr(lab, "git_commit", lambda: "aaa")
    monkeypatch.setattr(lab, "images", lambda: {})
    lab.resumable_stamp(out, "x", {"seed": 300}, resume=False)
    # the program gained --short-flows (default controller) after this experiment started
    now = {"seed": 300, "short_flows": "controller"}
    defaults = {"seed": 1, "short_flows": "controller"}
    assert lab.resumable_stamp(out, "x", now, True, defaults)["commit"] == "aaa"
    with pytest.raises(ValueError, match=r"other options \(short_flows\)"):
        lab.resumable_stamp(out, "x", {**now, "short_flows": "tracker"}, True, defaults)
    with pytest.raises(ValueError, match=r"other options \(short_flows\)"):
        lab.resumable_stamp(out, "x", now, True)          # no default given: it differs


def test_a_part_cut_off_is_set_aside_without_overwriting_another(tmp_path):
    for n in range(3):
        (tmp_path / "run1").mkdir()
        (tmp_path / "run1" / "log").write_text(str(n))
        lab.set_aside(str(tmp_path / "run1"))
    assert sorted(p.name for p in tmp_path.iterdir()) == \
        ["run1.interrupted", "run1.interrupted-2", "run1.interrupted-3"]
    assert (tmp_path / "run1.interrupted-3" / "log").read_text() == "2"
