"""Least connections by idle CPU (lc-cpu): ryu_apps/policies/least_connections_cpu.py."""
from tests.lib.policy_core import SERVERS, make_core, measured, same_choices


def test_a_busy_server_takes_fewer_connections_in_proportion_to_its_idle_cpu():
    core = make_core("lc-cpu")
    measured(core, 99.0, srv1=80.0)            # srv1 20 % idle, the others 90 %
    picks = [core.choose("backend", 100.0, watched=k).server for k in range(19)]
    # (n + 1) / idle: srv1's first connection scores 5, the others' fifth 5.6
    assert [picks.count(s) for s in SERVERS] == [1, 6, 6, 6]
    d = core.choose("backend", 100.0, watched=99)
    assert d.algorithm == "least-connections-idle-cpu"


def test_without_fresh_samples_it_decides_as_least_connections():
    a, b = make_core("lc-cpu"), make_core("lc")
    measured(a, 0.0, srv1=95.0)                 # 100 s old: stale, full weight
    assert same_choices(a, b)


def test_an_instance_at_full_cpu_still_counts_one_percent():
    core = make_core("lc-cpu")
    measured(core, 99.0, srv1=100.0, srv2=100.0, srv3=100.0, srv4=100.0)
    picks = [core.choose("backend", 100.0, watched=k).server for k in range(8)]
    assert [picks.count(s) for s in SERVERS] == [2, 2, 2, 2]
