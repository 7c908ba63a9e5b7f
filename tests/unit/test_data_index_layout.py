"""scripts/data_index.py on a data/ folder of its own: runs found inside subject folders,
each subject's page written, and the layout's problems named."""
import importlib.util
import os

from tests.conftest import ROOT


def _index(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location(
        "data_index_copy", os.path.join(ROOT, "scripts", "data_index.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setattr(module, "DATA", str(data))
    monkeypatch.setattr(module, "INDEX", str(data / "README.md"))
    monkeypatch.setattr(module, "SUBJECTS", {"model": "The fluid model"})
    monkeypatch.setattr(module, "commits", lambda tokens: list(tokens[:1]))
    return module, data


def _run(folder, title="A run"):
    folder.mkdir(parents=True)
    (folder / "README.md").write_text(f"# {title}\n\n    python -m x --out y\n\nat abc1234\n")


def test_runs_inside_subjects_are_listed_and_each_subject_gets_its_page(tmp_path, monkeypatch):
    module, data = _index(tmp_path, monkeypatch)
    _run(data / "bench", "Benchmarks")
    _run(data / "model" / "drain", "The drain")
    assert module.folders() == ["bench", "model/drain"]
    assert module.main([]) == 0
    index = (data / "README.md").read_text()
    assert "| [bench/](bench/README.md) | Benchmarks | `python -m x --out y` | abc1234 |" in index
    assert "| [model/drain/](model/drain/README.md) | The drain |" in index
    page = (data / "model" / "README.md").read_text()
    assert page.startswith("# The fluid model") and "| [drain/](drain/README.md) |" in page
    assert module.main(["--check"]) == 0


def test_the_layout_problems_are_named(tmp_path, monkeypatch):
    module, data = _index(tmp_path, monkeypatch)
    (data / "model").mkdir()
    (data / "stray.csv").write_text("x")
    (data / "newsubject" / "run").mkdir(parents=True)
    monkeypatch.setattr(module, "MAX_TOP_LEVEL", 1)
    found = "\n".join(module.problems())
    assert "data/ has 2 top-level folders (at most 1)" in found
    assert "data/model: a subject folder with no runs" in found
    assert "data/stray.csv: a file at the top of data/" in found
    assert "data/newsubject: no README.md (a run's README.md, or a subject: add it to " \
           "SUBJECTS" in found
