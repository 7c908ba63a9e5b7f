"""`make setup` on a machine that is already set up: it changes nothing, and says so step by
step; the Python-only part (`make check`'s) knows, without root, that it has nothing to do."""
import subprocess

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.integration


def setup(*args):
    res = subprocess.run(["bash", "scripts/setup.sh", *args], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    return res.stdout


def did_nothing(out: str) -> None:
    for doing in ("installing", "starting", "pip install", "uv pip", "debootstrap", "building"):
        assert doing not in out, f"a second setup did work ({doing!r}):\n{out}"


def test_second_setup_changes_nothing():
    out = setup()
    did_nothing(out)
    # two package steps, the four virtualenvs (each made or left out, saying why), Open
    # vSwitch, Docker; the two images
    assert out.count("ok:") == 8 and out.count("skipped") == 2, out


def test_the_python_part_alone_changes_nothing_and_knows_it_without_root():
    out = setup("--python")
    did_nothing(out)
    assert out.count("ok:") == 5 and "Python only" in out, out
    res = subprocess.run(["bash", "scripts/unprivileged.sh", "bash", "scripts/setup.sh",
                          "--python", "--is-current"], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0 and res.stdout == "", res.stdout + res.stderr
    res = subprocess.run(["bash", "scripts/setup.sh", "--frobnicate"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "unknown option: --frobnicate" in res.stderr
