"""topologies/mn_topos.py as Mininet's `mn --custom` reads it: compiled and run with exec()
in a namespace of its own, without __file__ (mininet/examples' custom files and
`mn`'s parseCustomFile do exactly this)."""
from __future__ import annotations

import os

from common.procs import ROOT

PATH = os.path.join(ROOT, "topologies", "mn_topos.py")


def test_mn_finds_the_topologies_without_file_or_the_project_on_its_path():
    namespace: dict = {}
    with open(PATH) as fh:
        exec(compile(fh.read(), PATH, "exec"), namespace, namespace)
    assert "__file__" not in namespace
    assert sorted(namespace["topos"]) == ["malb", "malb-callgraph", "malb-chain", "malb-paper"]
    assert all(callable(f) for f in namespace["topos"].values())
