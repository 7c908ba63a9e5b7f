"""`pip install .` as a user on Python 3.12 does it: a fresh virtualenv, pip's own resolution
from PyPI (not locks/), no checkout on the path. Every console script answers --help under
its own name, and malb-controller starts under os-ken with the configuration and API
description the wheel ships, and answers its REST API. Skipped where `make setup` found no
Python 3.12 (its .venv-3.12 names the interpreter). A few minutes: `make test-e2e`."""
import configparser
import os
import subprocess
import time
import urllib.request

import pytest
import yaml

from tests.conftest import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

REST, OFP, PROFILER, AGENTS = 18280, 16753, 19280, 19281


def python_312() -> str:
    cfg = os.path.join(ROOT, ".venv-3.12", "pyvenv.cfg")
    if not os.path.isfile(cfg):
        pytest.skip("no Python 3.12 here (`make setup` builds .venv-3.12 where it finds one)")
    parser = configparser.ConfigParser()
    with open(cfg, encoding="utf-8") as fh:
        parser.read_string("[venv]\n" + fh.read())
    return parser["venv"]["executable"]


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    venv = tmp_path_factory.mktemp("pip-install") / "venv"
    subprocess.run([python_312(), "-m", "venv", str(venv)], check=True)
    res = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", ROOT], cwd=venv.parent,
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    return venv


SCRIPTS = ("malb-agent", "malb-bench", "malb-controller", "malb-experiments", "malb-placement",
           "malb-profiler", "malb-testbed")


@pytest.mark.parametrize("script", SCRIPTS)
def test_each_console_script_answers_help_under_its_own_name(installed, script):
    res = subprocess.run([str(installed / "bin" / script), "--help"], capture_output=True,
                         text=True, timeout=120, cwd=installed.parent)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.startswith(f"usage: {script}"), res.stdout[:200]
    assert "Traceback" not in res.stderr and "Warning" not in res.stderr, res.stderr[-2000:]


def test_the_installed_controller_starts_on_python_312_and_answers(installed, tmp_path):
    site = subprocess.run([str(installed / "bin" / "python"), "-c",
                           "import common.paths as p; print(p.ROOT, p.IN_CHECKOUT)"],
                          capture_output=True, text=True, cwd=tmp_path, check=True).stdout
    assert site.split()[1] == "False" and ROOT not in site
    with open(os.path.join(ROOT, "configs", "paper.yaml")) as fh:
        data = yaml.safe_load(fh)
    data["controller"].update(rest_port=REST, health={"method": "none"})
    data["testbed"]["controller"] = f"127.0.0.1:{OFP}"
    data["profiler"].update(listen_port=PROFILER)
    data["agents"]["base_port"] = AGENTS
    config = tmp_path / "mine.yaml"
    config.write_text(yaml.safe_dump(data))
    log = open(tmp_path / "controller.log", "w")
    proc = subprocess.Popen([str(installed / "bin" / "malb-controller"), "--ofp-tcp-listen-port",
                             str(OFP), "--wsapi-port", str(REST), "--malb-config", str(config)],
                            stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path,
                            start_new_session=True)
    try:
        status = None
        for _ in range(120):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{REST}/malb/status",
                                            timeout=2) as r:
                    status = r.read().decode()
                break
            except OSError:
                assert proc.poll() is None, (tmp_path / "controller.log").read_text()[-3000:]
                time.sleep(0.5)
        assert status and '"policy": "malb"' in status, (tmp_path / "controller.log").read_text()
        with urllib.request.urlopen(f"http://127.0.0.1:{REST}/openapi.json", timeout=5) as r:
            assert b'"MALB controller REST API"' in r.read()
        text = (tmp_path / "controller.log").read_text()
        assert "os-ken 4." in text and "Python 3.12" in text, text[-2000:]
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()
