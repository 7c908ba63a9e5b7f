"""data/README.md is current and every folder of data/ says what made it
(scripts/data_index.py)."""
from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT


def test_every_data_folder_says_what_made_it_and_the_index_is_current():
    res = subprocess.run([sys.executable, "scripts/data_index.py", "--check"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
