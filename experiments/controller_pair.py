"""A standby pair of controllers for the stack (docs/controller.md, "A standby controller"):
one on the configuration's OpenFlow and REST ports, one on the next ones, each told the
other's REST address; which of the two is master, and the swap when the standby takes
over. The stack (experiments/stack.py) starts, stops and asks them.

- ControllerPair: master_ports, standby_ports, service, promote, connect_both.
"""
from __future__ import annotations

import os
import subprocess

from common.procs import Service, controller_service


class ControllerPair:
    def __init__(self, cfg, config_path: str, policy: str | None, run_dir: str):
        self.cfg, self.config_path, self.policy, self.run_dir = cfg, config_path, policy, run_dir
        c = cfg.controller
        self.first = (c.ofp_port, c.rest_port)
        self.master_ports = self.first        # (OpenFlow, REST) of the master

    def standby_ports(self) -> tuple[int, int]:
        """The standby's ports: those of the pair's other slot."""
        ofp, rest = self.first
        return (ofp + 1, rest + 1) if self.master_ports == self.first else self.first

    def service(self, role: str) -> Service:
        """The master's or the standby's process, on its slot's ports, told the other's
        REST address; named by slot (a PID file per process, whichever its role)."""
        ports, other = (self.master_ports, self.standby_ports()) if role == "master" else \
            (self.standby_ports(), self.master_ports)
        slot = "" if ports == self.first else "-b"
        return controller_service(
            self.config_path, self.policy, os.path.join(self.run_dir, f"controller{slot}.log"),
            ports[1], f"controller{slot}", ofp_port=ports[0], role=role,
            peer=f"http://127.0.0.1:{other[1]}")

    def promote(self) -> None:
        """The standby took over: its slot is the master's from now on."""
        self.master_ports = self.standby_ports()

    def connect_both(self) -> None:
        """Every switch given both controllers."""
        host = (self.cfg.testbed.controller or "127.0.0.1:0").rsplit(":", 1)[0]
        ofp = self.first[0]
        for sw in self.cfg.testbed.switches:
            subprocess.run(["ovs-vsctl", "set-controller", sw.name, f"tcp:{host}:{ofp}",
                            f"tcp:{host}:{ofp + 1}"], check=True, timeout=30)
