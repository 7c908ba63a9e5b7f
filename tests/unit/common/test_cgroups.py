"""Server groups on cgroup v1 and v2, against a fake cgroup tree (the layout of each is
what the kernel shows; the real v1 tree is exercised by the integration tests)."""
from __future__ import annotations

import pytest

from common import cgroups
from common.cgroups import CgroupLayout


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setattr(cgroups, "CGROUP_ROOT", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("version", [1, 2])
def test_limits_and_cpu_time_read_back_on_both_cgroup_versions(root, version):
    layout = CgroupLayout(version, "cgroupfs")
    if version == 1:
        (root / "cpu").mkdir()
        (root / "memory").mkdir()
        (root / "cpuacct").mkdir()
    parent = cgroups.apply_server_limits(layout, "srv1", 0.3, 200)
    assert parent == "/malb/srv1"
    assert cgroups.read_server_limits(layout, "srv1") == (pytest.approx(0.3), 200 << 20)
    assert cgroups.read_server_cpu_seconds(layout, "srv1") is None   # nothing accounted yet
    if version == 1:
        (root / "cpuacct/malb/srv1/cpuacct.usage").write_text("2500000000\n")
    else:
        assert (root / "malb/srv1/cpu.max").read_text() == "30000 100000"
        (root / "malb/srv1/cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\n"
                                                 "system_usec 500000\n")
    assert cgroups.read_server_cpu_seconds(layout, "srv1") == pytest.approx(2.5)
    assert cgroups.read_server_cpu_seconds(layout, "srv9") is None
