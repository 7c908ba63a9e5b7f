"""common/procs.py: the commit a result names."""
import subprocess

from common.procs import git_commit


def git(root, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root,
                   check=True, capture_output=True)


def test_a_result_names_its_commit_and_says_when_the_code_differs_from_it(tmp_path):
    assert git_commit(str(tmp_path)) == "unknown"
    git(tmp_path, "init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    git(tmp_path, "add", "a.py")
    git(tmp_path, "commit", "-q", "-m", "a")
    clean = git_commit(str(tmp_path))
    assert len(clean) >= 7 and not clean.endswith("-dirty")
    (tmp_path / "results.csv").write_text("untracked output\n")     # outputs do not count
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "summary.md").write_text("old\n")
    git(tmp_path, "add", "data")
    git(tmp_path, "commit", "-q", "-m", "data")
    clean = git_commit(str(tmp_path))
    (tmp_path / "data" / "summary.md").write_text("a rerun\n")      # nor committed results
    assert git_commit(str(tmp_path)) == clean
    (tmp_path / "a.py").write_text("x = 2\n")
    assert git_commit(str(tmp_path)) == clean + "-dirty"
