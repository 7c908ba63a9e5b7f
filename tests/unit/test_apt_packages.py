"""The distribution's package names setup installs (scripts/apt_packages.py): Debian's,
Ubuntu's, and Chromium left out where it is only a snap."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

from tests.conftest import ROOT

SPEC = importlib.util.spec_from_file_location(
    "apt_packages", os.path.join(ROOT, "scripts", "apt_packages.py"))
apt_packages = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(apt_packages)

WANTED = ["chromium", "chromium-driver", "nginx", "mininet"]
PLAIN = {"Depends": "libc6 (>= 2.35), libnss3"}
SNAP = {"Depends": "debconf (>= 0.5) | debconf-2.0, snapd", "Description": "Transitional package"}


def fake(known: dict):
    return lambda name: known.get(name)


def test_debian_gets_its_own_names():
    known = {n: PLAIN for n in WANTED}
    assert apt_packages.choose(WANTED, fake(known)) == (WANTED, {})


def test_ubuntu_s_snap_chromium_is_left_out_with_the_reason():
    # Ubuntu 22.04 and 24.04: chromium-browser and chromium-chromedriver install the snap
    known = {"chromium-browser": SNAP, "chromium-chromedriver": SNAP, "nginx": PLAIN,
             "mininet": PLAIN}
    chosen, left_out = apt_packages.choose(WANTED, fake(known))
    assert chosen == ["nginx", "mininet"]
    assert set(left_out) == {"chromium", "chromium-driver"}
    assert "snap" in left_out["chromium"] and "skipped" in left_out["chromium"]


def test_an_alternative_name_outside_a_snap_is_taken():
    known = {"chromium-browser": PLAIN, "chromium-chromedriver": PLAIN, "nginx": PLAIN,
             "mininet": PLAIN}
    assert apt_packages.choose(WANTED, fake(known))[0] == \
        ["chromium-browser", "chromium-chromedriver", "nginx", "mininet"]


def test_names_apt_does_not_know_are_kept_for_apt_get_to_name():
    # no package lists yet, or a required package missing: apt-get's error says which
    assert apt_packages.choose(WANTED, fake({})) == (WANTED, {})
    assert apt_packages.choose(["mininet"], fake({"chromium": PLAIN})) == (["mininet"], {})


def test_a_snap_dependency_among_alternatives_counts():
    assert apt_packages.is_snap_wrapper({"Depends": "foo | snapd (>= 2.0)"})
    assert apt_packages.is_snap_wrapper({"Pre-Depends": "snapd"})
    assert not apt_packages.is_snap_wrapper({"Depends": "snapd-glib, libc6"})


def test_the_command_line_writes_what_it_left_out(tmp_path):
    skipped = tmp_path / "skipped"
    res = subprocess.run([sys.executable, "scripts/apt_packages.py", "--skipped", str(skipped),
                          "no-such-package-anywhere"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0 and res.stdout.split() == ["no-such-package-anywhere"]
    assert skipped.read_text() == ""
    res = subprocess.run([sys.executable, "scripts/apt_packages.py", "--skipped"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "--skipped" in res.stderr
