"""`make setup` on a machine that is already set up: fast, and it changes nothing."""
import subprocess
import time

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.integration


def test_second_setup_is_fast_and_changes_nothing():
    started = time.monotonic()
    res = subprocess.run(["bash", "scripts/setup.sh"], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    took = time.monotonic() - started
    assert res.returncode == 0, res.stdout + res.stderr
    assert took < 60, f"a second setup took {took:.0f} s"
    out = res.stdout
    for doing in ("installing", "starting", "pip install", "debootstrap", "building"):
        assert doing not in out, f"second setup did work ({doing!r}):\n{out}"
    assert out.count("ok:") == 5 and out.count("skipped") == 2, out
