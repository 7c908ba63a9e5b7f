"""The agent's measurement over a window (GET /stats?window_s=W): each container's CPU and
traffic from the raw counters it kept W seconds back, against a fake Docker client whose
counters advance by a known amount per sample."""
import pytest

from agents import agent as agent_module
from agents.agent import Agent, Selector
from agents.dockerstats import Capacity, RawSample, window_base
from common.metrics import render
from tests.lib.metrics import convention_problems, value


class FakeContainer:
    def __init__(self, name):
        self.name, self.id, self.status, self.labels = name, name * 8, "running", {}


class FakeDocker:
    """containers.list() and api.stats(): each container's counters advance by the CPU
    (core-seconds) and bytes given for the step; the host's by 1 s of one CPU."""

    def __init__(self, names):
        self.containers, self.api = self, self
        self.running = [FakeContainer(n) for n in names]
        self.cpu_ns = {c.id: 0 for c in self.running}
        self.tx = {c.id: 0 for c in self.running}
        self.step = 0

    def list(self, all=True, filters=None):
        return list(self.running)

    def stats(self, cid, stream=False, one_shot=True):
        return {"cpu_stats": {"cpu_usage": {"total_usage": self.cpu_ns[cid]},
                              "system_cpu_usage": self.step * 10 ** 9, "online_cpus": 1},
                "memory_stats": {"usage": 50 << 20, "stats": {}},
                "networks": {"eth0": {"rx_bytes": 0, "tx_bytes": self.tx[cid]}}}

    def advance(self, cores: dict, tx: dict):
        self.step += 1
        for c in self.running:
            self.cpu_ns[c.id] += int(cores.get(c.name, 0) * 10 ** 9)
            self.tx[c.id] += tx.get(c.name, 0)


@pytest.fixture
def sampled(monkeypatch):
    """An agent sampling a fake engine once a (fake) second: `sample(cores, tx)` advances
    the counters by one second's use, then samples."""
    clock = {"t": 100.0}
    monkeypatch.setattr(agent_module.time, "monotonic", lambda: clock["t"])
    docker = FakeDocker(["srv1-be", "srv1-ui"])
    agent = Agent("srv1", Selector(), lambda: Capacity(0.5, 1 << 30, 1e6, "config"),
                  period_s=1.0, client=docker)

    def sample(cores=None, tx=None):
        docker.advance(cores or {}, tx or {})
        clock["t"] += 1.0
        return agent.sample_once()
    sample.agent, sample.docker = agent, docker
    yield sample
    agent.pool.shutdown()


def by_name(s):
    return {c["name"]: c for c in s["containers"]}


def test_a_window_measures_every_second_of_it_where_the_latest_sample_sees_one(sampled):
    sampled()                                               # counters to start from
    for be in (0.1, 0.4, 0.1):                              # a job's burst in the middle
        latest = sampled({"srv1-be": be, "srv1-ui": 0.05}, {"srv1-ui": 300_000})
    assert by_name(latest)["srv1-be"]["cpu_percent"] == pytest.approx(10.0)
    window = sampled.agent.over_window(3.0)
    c = by_name(window)
    assert c["srv1-be"]["cpu_percent"] == pytest.approx(20.0)         # 0.6 core-s over 3 s
    assert c["srv1-ui"]["tx_bytes_per_s"] == pytest.approx(300_000)
    assert window["period_s"] == pytest.approx(3.0) and window["window_s"] == 3.0
    assert window["time"] == latest["time"]                 # the window ends at the latest
    # server totals over the window, relative to the 0.5-core share: (0.6 + 0.15) / 3 / 0.5
    assert window["totals"]["cpu_percent"] == pytest.approx(50.0)
    assert window["totals"]["complete"]
    assert sampled.agent.latest() is latest                 # the latest is left as it was


def test_a_window_longer_than_the_history_measures_what_there_is(sampled):
    sampled()
    sampled({"srv1-be": 0.2})
    sampled({"srv1-be": 0.4})
    window = sampled.agent.over_window(30.0)
    assert window["period_s"] == pytest.approx(2.0)
    assert by_name(window)["srv1-be"]["cpu_percent"] == pytest.approx(30.0)


def test_a_container_that_went_away_leaves_no_counters_and_a_new_one_has_no_rate_yet(sampled):
    sampled()
    sampled({"srv1-be": 0.2})
    sampled.docker.running = [c for c in sampled.docker.running if c.name != "srv1-ui"]
    sampled({"srv1-be": 0.2})
    assert set(sampled.agent._raws) == {"srv1-be"}
    sampled.docker.running.append(FakeContainer("srv1-vid"))
    sampled.docker.cpu_ns["srv1-vid" * 8] = sampled.docker.tx["srv1-vid" * 8] = 0
    sampled({"srv1-be": 0.2})
    window = sampled.agent.over_window(3.0)
    assert by_name(window)["srv1-vid"]["cpu_percent"] is None       # one sample: no rate
    assert not window["totals"]["complete"]                          # and it says so


def test_a_container_whose_counters_start_again_is_measured_from_its_restart(sampled):
    sampled()
    sampled({"srv1-be": 0.2})
    sampled({"srv1-be": 0.2})
    sampled.docker.cpu_ns["srv1-be" * 8] = 0            # restarted: its cgroup is new
    sampled({"srv1-be": 0.3})
    window = sampled.agent.over_window(3.0)
    assert by_name(window)["srv1-be"]["cpu_percent"] is None      # one sample since
    sampled({"srv1-be": 0.1})
    window = sampled.agent.over_window(3.0)
    assert by_name(window)["srv1-be"]["cpu_percent"] == pytest.approx(10.0)
    assert window["totals"]["complete"]


def test_window_base_picks_the_sample_nearest_the_window_back():
    raws = [RawSample(t, 0, 0, 1, None, None, None, None) for t in (0.0, 1.0, 2.25, 3.0)]
    assert window_base(raws, 3.1).time == 0.0
    assert window_base(raws, 1.0).time == 2.25
    assert window_base(raws, 1.375).time == 1.0      # 2 s and 0.75 s back: a tie, the older
    assert window_base(raws, 99).time == 0.0
    assert window_base(raws[:1], 3.0) is None


def test_the_whole_servers_counter_shows_what_runs_beside_the_containers(monkeypatch):
    """A process beside the containers in the server's cgroup: docker stats cannot see it;
    the whole server's CPU time, read with every sample, can (outside_cpu_percent), in the
    latest sample and over a window alike."""
    clock = {"t": 100.0}
    monkeypatch.setattr(agent_module.time, "monotonic", lambda: clock["t"])
    docker = FakeDocker(["srv1-be"])
    whole = {"s": 0.0}
    agent = Agent("srv1", Selector(), lambda: Capacity(0.5, 1 << 30, 1e6, "cgroup"),
                  period_s=1.0, client=docker, whole_cpu_fn=lambda: whole["s"])
    try:
        latest = None
        for be, beside in ((0.0, 0.0), (0.1, 0.2), (0.1, 0.2), (0.1, 0.0)):
            docker.advance({"srv1-be": be}, {})
            whole["s"] += be + beside
            clock["t"] += 1.0
            latest = agent.sample_once()
        assert latest["totals"]["cpu_percent"] == pytest.approx(20.0)
        assert latest["totals"]["outside_cpu_percent"] == pytest.approx(0.0)
        window = agent.over_window(3.0)          # 0.4 core-s beside them over 3 s of 0.5
        assert window["totals"]["outside_cpu_percent"] == pytest.approx(26.667, abs=0.01)
        whole["s"] = None                        # the group went away: unknown, not zero
        docker.advance({"srv1-be": 0.1}, {})
        clock["t"] += 1.0
        assert agent.sample_once()["totals"]["outside_cpu_percent"] is None
        assert agent.over_window(3.0)["totals"]["outside_cpu_percent"] is None
    finally:
        agent.pool.shutdown()


def test_host_cpu_seconds_counts_every_cpus_busy_time():
    line = "cpu  100 20 30 1000 50 5 5 10 0 0\n"    # user nice system idle iowait ... steal
    ticks = agent_module.os.sysconf("SC_CLK_TCK")
    assert agent_module.host_cpu_seconds(line) == pytest.approx(160 / ticks)
    with pytest.raises(ValueError):
        agent_module.host_cpu_seconds("intr 1 2 3")
    assert agent_module.host_cpu_seconds() > 0            # this machine's /proc/stat


def test_metrics_carry_dockers_counters_and_drop_a_container_that_went_away(sampled):
    sampled()
    sampled({"srv1-be": 0.2, "srv1-ui": 0.1}, {"srv1-be": 5000})
    text = render(sampled.agent.metrics)
    assert value(text, "malb_agent_container_cpu_seconds_total", container="srv1-be") == \
        pytest.approx(0.2)
    assert value(text, "malb_agent_container_network_transmit_bytes_total",
                 container="srv1-be") == 5000
    assert value(text, "malb_agent_container_memory_bytes", container="srv1-ui") == 50 << 20
    # 0.3 of a core on a 0.5-core server
    assert value(text, "malb_agent_server_utilization_ratio", server="srv1",
                 resource="cpu") == pytest.approx(0.6)
    assert value(text, "malb_build_info", process="agent") == 1
    sampled.docker.running = [c for c in sampled.docker.running if c.name != "srv1-ui"]
    sampled({"srv1-be": 0.2})
    text = render(sampled.agent.metrics)
    assert value(text, "malb_agent_container_cpu_seconds_total", container="srv1-ui") is None
    assert value(text, "malb_agent_container_cpu_seconds_total", container="srv1-be") == \
        pytest.approx(0.4)
    assert convention_problems(text) == []


def test_a_network_counter_that_falls_without_a_restart_only_takes_increases(sampled):
    """A container's bytes are a sum over its interfaces: one that goes away makes the sum
    fall, which Prometheus would read as a restart and a burst of traffic."""
    def sent():
        return value(render(sampled.agent.metrics),
                     "malb_agent_container_network_transmit_bytes_total", container="srv1-be")
    sampled()
    sampled(tx={"srv1-be": 5000})
    assert sent() == 5000
    sampled.docker.tx["srv1-be" * 8] -= 3000        # an interface and its bytes gone
    sampled(tx={"srv1-be": 100})
    assert sent() == 5000
    sampled(tx={"srv1-be": 700})
    assert sent() == 5700
