"""The examples/ scripts and `mn --custom topologies/mn_topos.py`, run as a user runs them:
as separate processes, as root, on this machine's Mininet and Open vSwitch."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import pytest
import yaml

from common.config import load_config
from common.procs import ROOT, controller_service
from topologies import backend as backends
from topologies.clean import clean_testbed

pytestmark = pytest.mark.integration


def services_left() -> list[int]:
    """Processes of ours running a service module (`python -m services.*` from this
    checkout) that nothing stopped."""
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if argv[:1] == [sys.executable.encode()] and b"-m" in argv and cwd == ROOT and \
                any(a.startswith(b"services.") for a in argv):
            left.append(int(pid))
    return left


def mn_command() -> list[str]:
    """`mn` of the backend the topologies use: Debian's, or Containernet's (its bin/mn beside
    its source, or the script a pip install put beside this interpreter), run by this
    interpreter so that it imports the same Mininet."""
    if backends.resolve_backend() != "containernet":
        return ["mn"]
    import mininet       # deferred: whichever Mininet this interpreter has is Containernet
    source = os.path.join(os.path.dirname(os.path.dirname(mininet.__file__)), "bin", "mn")
    installed = os.path.join(os.path.dirname(sys.executable), "mn")
    return [sys.executable, source if os.path.exists(source) else installed]


def run_example(name: str, *args: str, timeout_s: float = 300) -> str:
    """Run an example as under nohup: hangups ignored, so what it started has to be stopped
    by the example itself, not by the hangup Mininet sends its hosts' shells."""
    res = subprocess.run([sys.executable, os.path.join(ROOT, "examples", name), *args],
                         cwd=ROOT, capture_output=True, text=True, timeout=timeout_s,
                         preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    assert res.returncode == 0, f"{name}: rc {res.returncode}\n{res.stdout}\n{res.stderr}"
    return res.stdout


def test_the_controller_on_mininets_own_linear_topology(clean_machine):
    out = run_example("controller_on_mininet.py")
    assert re.search(r"links: \[\{'a': '0000000000000001', 'a_port': \d+, "
                     r"'b': '0000000000000002'", out), out
    assert "(learned)" in out and "served by: {" in out, out
    # the services it started in Mininet's hosts are gone with them (they used to outlive
    # the example: it stopped the subshell around each, not the service)
    left = services_left()
    assert left == [], {pid: _state(pid) for pid in left}


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return " ".join(x for x in fh.read().splitlines() if x.startswith(("State", "PPid")))
    except OSError:
        return "gone"


def test_the_paper_testbed_from_a_script(clean_machine):
    out = run_example("paper_testbed.py")
    for ms, _port in (("video", 8001), ("ui", 8002), ("backend", 8003)):
        line = next(x for x in out.splitlines() if x.startswith(f"{ms} "))
        # round robin over the four servers, two requests each
        assert line.endswith("served by: {" + ", ".join(
            f"'srv{i}-{ms[:3] if ms != 'backend' else 'be'}': 2" for i in range(1, 5)) + "}"), out


def test_a_placement_move_while_a_client_requests(clean_machine):
    out = run_example("placement_move.py")
    assert "before: ['srv2', 'srv3']" in out and "after: ['srv3', 'srv4']" in out, out
    during = next(x for x in out.splitlines() if x.startswith("during the move"))
    assert re.fullmatch(r"during the move, HTTP status counts: 40 200", during), out


# run by mn's CLI (`sh`): until the controller at URL holds every instance of SERVICE
# healthy with its last probe answered (exit 0: an instance is healthy before its first
# probe, and a service still starting refuses one), or SECONDS pass (exit 1); says which in
# mn's output either way
WAIT_HEALTHY = """
import json, sys, time, urllib.request
url, service, deadline = sys.argv[1], sys.argv[2], time.time() + float(sys.argv[3])
seen = None
while time.time() < deadline:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            servers = json.load(answer)["servers"]
        seen = {n: i["healthy"] and "SYN-ACK" in (i["health"] or "")
                for s in servers.values() for n, i in s["instances"].items()
                if i["microservice"] == service}
        if seen and all(seen.values()):
            print(f"[wait] every {service} instance answered: {sorted(seen)}", flush=True)
            sys.exit(0)
    except OSError:
        pass
    time.sleep(0.5)
print(f"[wait] not every {service} instance answered in time: {seen}", flush=True)
sys.exit(1)
"""


@pytest.mark.parametrize("switches", [1, 2])
def test_mn_custom_brings_a_testbed_up_under_the_controller(clean_machine, tmp_path, switches):
    """The paper testbed (malb-paper), and the chain of two switches from a configuration
    file both the controller and `mn` read (malb,config=FILE)."""
    paper = os.path.join(ROOT, "configs", "paper.yaml")
    if switches == 1:
        config, topo = paper, "malb-paper"
    else:
        data = yaml.safe_load(open(paper))
        data["testbed"]["switches"] = switches
        data["profiler"]["history_path"] = str(tmp_path / "history.sqlite")
        config = str(tmp_path / "chain.yaml")
        with open(config, "w") as fh:
            yaml.safe_dump(data, fh)
        topo = f"malb,config={config}"
    cfg = load_config(config)
    waiter, post = tmp_path / "wait_healthy.py", tmp_path / "post.cli"
    waiter.write_text(WAIT_HEALTHY)
    # mn's CLI script once the network is up: wait (in the root namespace, `sh`) until the
    # controller holds every ui instance healthy, then requests through the ui VIP: round
    # robin over the four only once none is left out
    status_url = f"http://127.0.0.1:{cfg.controller.rest_port}/malb/status"
    post.write_text(f"sh {sys.executable} {waiter} {status_url} ui 60\n" + "".join(
        f"cli1 curl -s -D - -o /dev/null --max-time 10 http://{cfg.microservice('ui').vip}:8002"
        f"/bytes?n=100 | grep -i x-served-by\n" for _ in range(4)))
    with controller_service(config, "srr", str(tmp_path / "controller.log"),
                            cfg.controller.rest_port):
        res = subprocess.run([*mn_command(), "--custom",
                              os.path.join(ROOT, "topologies", "mn_topos.py"),
                              "--topo", topo, "--controller",
                              "remote,ip=127.0.0.1,port=6653", "--post", str(post),
                              "--test", "none"], capture_output=True, text=True, timeout=300)
    clean_testbed(quiet=True)
    assert res.returncode == 0, res.stdout + res.stderr
    # mn's CLI writes its commands' output to its log (stderr)
    served = sorted(m.group(1) for m in re.finditer(r"(?i)x-served-by: (\S+)",
                                                     res.stdout + res.stderr))
    assert served == ["srv1-ui", "srv2-ui", "srv3-ui", "srv4-ui"], res.stdout + res.stderr
