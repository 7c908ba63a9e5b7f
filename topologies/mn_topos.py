"""The project's testbeds for Mininet's own command line (`mn --custom`). Start the
controller first (`.venv/bin/malb-controller`, or `MALB_CONFIG=... malb-controller`), then:

    sudo mn --custom topologies/mn_topos.py --topo malb-paper \\
        --controller remote,ip=127.0.0.1,port=6653
    sudo mn --custom topologies/mn_topos.py --topo malb-chain,3 --controller remote,...
    sudo mn --custom topologies/mn_topos.py --topo malb-callgraph --controller remote,...
    sudo mn --custom topologies/mn_topos.py --topo malb,config=configs/bookinfo.yaml ...

Topologies (each a topologies.topo.TestbedTopo of a configuration, with every container's
service started and TX offload off where the datapath needs it):

- malb-paper: configs/paper.yaml, the MALB paper's testbed (one switch, four servers);
- malb-chain,N: the same servers over a chain of N switches (2-4) joined by trunks;
- malb-callgraph[,config=FILE]: a call-graph application (configs/callgraph-lb.yaml);
- malb[,config=FILE]: any configuration ($MALB_CONFIG, else configs/paper.yaml).

The controller must read the same configuration (MALB_CONFIG) as the topology: for
malb-chain,N, a copy of configs/paper.yaml with testbed.switches: N (or use
malb,config=FILE with that file for both). `mn`'s own
host, switch and link options do not apply: the nodes are the project's (containers from
the images `make setup` builds, Open vSwitch on the datapath this machine has).
`--controller remote` is Mininet's RemoteController with its start-up check made over a
socket (topologies.backend.remote_controller_class).
"""
import glob
import inspect
import os
import sys

# `mn` is Debian's, on the system Python, and runs this file with exec(): no __file__, and
# neither the project nor its virtualenv on the path
_HERE = os.path.dirname(os.path.abspath(inspect.currentframe().f_code.co_filename))
_ROOT = os.path.dirname(_HERE)
for _path in (_ROOT, *glob.glob(os.path.join(_ROOT, ".venv", "lib", "python3*",
                                             "site-packages"))):
    if _path not in sys.path:
        sys.path.append(_path)

from common.config import load_config  # noqa: E402
from topologies.backend import remote_controller_class  # noqa: E402
from topologies.topo import TestbedTopo  # noqa: E402


def _path(config):
    return config if os.path.isabs(config) else os.path.join(_ROOT, config)


def malb(config=None):
    """Any configuration's testbed ($MALB_CONFIG, else configs/paper.yaml)."""
    return TestbedTopo(load_config(_path(config) if config else None), self_start=True)


def malb_paper():
    return malb("configs/paper.yaml")


def malb_chain(switches=2):
    """The paper's servers over a chain of switches."""
    return TestbedTopo(load_config(_path("configs/paper.yaml"),
                                   overrides={"testbed": {"switches": int(switches)}}),
                       self_start=True)


def malb_callgraph(config="configs/callgraph-lb.yaml"):
    return malb(config)


topos = {"malb": malb, "malb-paper": malb_paper, "malb-chain": malb_chain,
         "malb-callgraph": malb_callgraph}
# `--controller remote` checks the controller's port over a socket: Mininet's own check
# telnets to it and decodes the binary OpenFlow HELLO as UTF-8, which can end mn at start
controllers = {"remote": remote_controller_class()}
