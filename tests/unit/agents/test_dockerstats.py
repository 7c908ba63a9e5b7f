import pytest

from agents.dockerstats import Capacity, CpuReading, RawSample, cpu_percent, parse_stats, \
    proc_net_dev, rates, server_totals, whole_cores


def doc(total, system, online=2, usage=50_000_000, inactive=10_000_000, networks=None):
    d = {"cpu_stats": {"cpu_usage": {"total_usage": total}, "system_cpu_usage": system,
                       "online_cpus": online},
         "memory_stats": {"usage": usage, "limit": 1 << 30,
                          "stats": {"total_inactive_file": inactive}}}
    if networks:
        d["networks"] = networks
    return d


def test_cpu_percent_is_computed_like_docker_stats():
    # half of one core on a 2-core host: container +0.5 s while the host clock moves 2 s
    a = parse_stats(doc(1_000_000_000, 100_000_000_000), 0.0)
    b = parse_stats(doc(1_500_000_000, 102_000_000_000), 1.0)
    assert cpu_percent(a, b) == pytest.approx(50.0)
    assert cpu_percent(b, b) is None          # host clock did not move


def test_memory_excludes_inactive_page_cache_like_the_cli():
    s = parse_stats(doc(1, 1, usage=80_000_000, inactive=30_000_000), 0.0)
    assert s.memory_bytes == 50_000_000
    v2 = {"cpu_stats": {"cpu_usage": {"total_usage": 1}, "system_cpu_usage": 1},
          "memory_stats": {"usage": 9, "stats": {"inactive_file": 4}}}
    assert parse_stats(v2, 0.0).memory_bytes == 5


def test_a_container_that_does_not_run_has_no_counters():
    # what Docker answers for a created or exited container
    with pytest.raises(ValueError, match="no CPU counters"):
        parse_stats({"cpu_stats": {"cpu_usage": {"total_usage": 0}}, "memory_stats": {}}, 0.0)


def test_network_from_docker_or_from_the_namespace():
    nets = {"eth0": {"rx_bytes": 100, "tx_bytes": 50}, "eth1": {"rx_bytes": 1, "tx_bytes": 2}}
    s = parse_stats(doc(1, 1, networks=nets), 0.0, net=(999, 999))
    assert (s.rx_bytes, s.tx_bytes) == (101, 52)
    s = parse_stats(doc(1, 1), 0.0, net=(7, 8))
    assert (s.rx_bytes, s.tx_bytes) == (7, 8)
    text = ("Inter-|   Receive  |  Transmit\n face |bytes packets errs|bytes packets\n"
            "    lo: 500 5 0 0 0 0 0 0 500 5 0 0 0 0 0 0\n"
            "srv1-vid-eth0: 1000 10 0 0 0 0 0 0 2000 20 0 0 0 0 0 0\n")
    assert proc_net_dev(text) == (1000, 2000)
    a = RawSample(0.0, 0, 0, 1, 0, None, 0, 0)
    b = RawSample(2.0, 0, 0, 1, 0, None, 1000, 4000)
    assert rates(a, b) == (500.0, 2000.0)


def test_server_totals_relative_to_capacity_and_partial_when_unreadable():
    cap = Capacity(cpu_cores=0.5, memory_bytes=100, network_bytes_per_s=1000, source="test")
    containers = [
        {"name": "a", "readable": True, "cpu_percent": 20.0, "memory_bytes": 10,
         "rx_bytes_per_s": 100, "tx_bytes_per_s": 100},
        {"name": "b", "readable": True, "cpu_percent": 5.0, "memory_bytes": 15,
         "rx_bytes_per_s": 0, "tx_bytes_per_s": 50},
    ]
    t = server_totals(containers, cap)
    assert t["cpu_percent"] == pytest.approx(50.0)       # 0.25 cores of 0.5
    assert t["memory_percent"] == pytest.approx(25.0)
    assert t["network_percent"] == pytest.approx(15.0)     # busier direction: 150 of 1000
    assert t["complete"] and t["missing"] == []
    broken = containers + [{"name": "c", "readable": False, "cpu_percent": None,
                            "memory_bytes": None}]
    t = server_totals(broken, cap)
    assert not t["complete"] and t["missing"] == ["c"]
    # what c leaves unknown is unknown, not the sum of the others (a drop in load)
    assert t["cpu_percent"] is None and t["memory_percent"] is None
    assert t["network_percent"] is None and t["cpu_cores"] is None
    stopped = containers + [{"name": "d", "state": "exited", "readable": False,
                             "cpu_percent": None, "memory_bytes": None}]
    assert server_totals(stopped, cap)["complete"]
    no_net = containers + [{"name": "e", "readable": True, "cpu_percent": 1.0,
                            "memory_bytes": 1, "rx_bytes_per_s": None, "tx_bytes_per_s": None}]
    t = server_totals(no_net, cap)       # traffic it could not read is not zero traffic
    assert not t["complete"] and t["missing"] == ["e (network)"]
    assert t["network_percent"] is None and t["cpu_percent"] == pytest.approx(52.0)
    # no running container (a placement emptied the server): it uses nothing
    t = server_totals([], cap)
    assert t["complete"] and t["cpu_percent"] == 0.0


def test_the_use_beside_the_containers_is_the_whole_servers_less_theirs():
    cap = Capacity(cpu_cores=0.5, memory_bytes=100, network_bytes_per_s=1000, source="test")
    containers = [{"name": "a", "readable": True, "cpu_percent": 20.0, "memory_bytes": 10,
                   "rx_bytes_per_s": 0, "tx_bytes_per_s": 0}]
    assert server_totals(containers, cap)["outside_cpu_percent"] is None     # not read
    t = server_totals(containers, cap, whole_cpu_cores=0.45)
    assert t["cpu_percent"] == pytest.approx(40.0)       # the containers' view is unchanged
    assert t["outside_cpu_percent"] == pytest.approx(50.0)     # 0.25 cores of 0.5
    # the two are read a moment apart: a whole below the containers' sum is no use beside
    assert server_totals(containers, cap, 0.15)["outside_cpu_percent"] == 0.0
    broken = containers + [{"name": "c", "readable": False, "cpu_percent": None,
                            "memory_bytes": None}]
    assert server_totals(broken, cap, 0.45)["outside_cpu_percent"] is None


def test_whole_cores_between_two_readings():
    assert whole_cores(CpuReading(10.0, 5.0), CpuReading(12.0, 6.0)) == pytest.approx(0.5)
    assert whole_cores(None, CpuReading(12.0, 6.0)) is None
    assert whole_cores(CpuReading(10.0, 5.0), CpuReading(10.0, 6.0)) is None
    assert whole_cores(CpuReading(10.0, 5.0), CpuReading(12.0, 1.0)) is None    # made again
