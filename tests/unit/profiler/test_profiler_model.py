import pytest

from common.config import ACTIVE_FLOW_TTL_S, parse_config
from profiler.model import ProfilerModel, instance_usage
from profiler.predictors import RollingMean, Arma
from tests.lib.profiler_samples import CAP, cfg, sample

def test_instance_use_is_relative_to_its_servers_capacity():
    u = instance_usage({"cpu_percent": 25.0, "memory_bytes": 50, "rx_bytes_per_s": 100,
                        "tx_bytes_per_s": 150}, CAP)
    assert u == {"cpu": 50.0, "mem": 25.0, "net": 15.0}    # busier direction: 150 of 1000
    assert instance_usage({"cpu_percent": None, "memory_bytes": None}, CAP) == \
        {"cpu": None, "mem": None, "net": None}


def test_step_averages_instances_predicts_and_weighs():
    m = ProfilerModel(cfg(), lambda: RollingMean(10))
    for _k, t in enumerate((100.0, 103.0)):
        m.ingest_agent("srv1", sample("srv1", t), None, t)
        m.ingest_agent("srv2", sample("srv2", t, cpu=(30, 20, 50)), None, t)
        m.step(t)
    p = m.profiles(103.0)["microservices"]
    # video: cpu 10 and 30 % of one core on 0.5-core servers -> 20 % and 60 % of the server
    assert p["video"]["measured"]["cpu"] == pytest.approx(40.0)
    assert p["video"]["measured"]["mem"] == pytest.approx(10.0)
    # backend: cpu (60 + 100) / 2 = 80 %, memory 10 %, network 50 of 1000 B/s each way = 5 %
    w = p["backend"]["weights"]
    assert (w["alpha"], w["beta"], w["gamma"]) == pytest.approx((80 / 95, 10 / 95, 5 / 95),
                                                                abs=1e-5)
    servers = m.servers_view(103.0)["servers"]
    assert servers["srv1"]["predicted"]["cpu"] == pytest.approx(120.0)
    assert not servers["srv1"]["stale"]
    assert servers["srv1"]["sample_window_s"] is None    # the sample did not say


def test_the_server_view_says_how_many_seconds_its_sample_measured():
    m = ProfilerModel(cfg(), lambda: RollingMean(10))
    for t, window in ((100.0, 2.98), (103.0, "3"), (106.0, -1.0), (109.0, 3.01)):
        m.ingest_agent("srv1", {**sample("srv1", t), "period_s": window}, None, t)
        m.step(t)
        got = m.servers_view(t)["servers"]["srv1"]["sample_window_s"]
        assert got == (window if isinstance(window, float) and window > 0 else None)


def test_the_server_view_carries_the_cpu_used_beside_the_containers():
    m = ProfilerModel(cfg(), lambda: RollingMean(10))
    for t, outside in ((100.0, 42.5), (103.0, None), (106.0, "7"), (109.0, -1.0),
                       (112.0, 3.0)):
        s = sample("srv1", t)
        if outside is not None:
            s["totals"]["outside_cpu_percent"] = outside
        m.ingest_agent("srv1", s, None, t)
        m.step(t)
        got = m.servers_view(t)["servers"]["srv1"]["outside_cpu"]
        assert got == (outside if isinstance(outside, float) and outside >= 0 else None)


def test_a_silent_or_late_agent_makes_its_server_stale_not_zero():
    m = ProfilerModel(cfg(), lambda: RollingMean(3))
    m.ingest_agent("srv1", sample("srv1", 100.0), None, 100.0)
    m.step(100.0)
    m.ingest_agent("srv1", None, "connection refused", 110.0)
    m.step(110.0)
    s = m.servers_view(110.0)["servers"]["srv1"]
    assert s["stale"] and s["predicted"] is None and s["error"] == "connection refused"
    assert s["cpu"] == pytest.approx(120.0) and s["age_s"] == pytest.approx(10.0)
    m.ingest_agent("srv1", sample("srv1", 100.0), None, 111.0)   # an old sample again
    assert "old" in m.servers["srv1"].error


def test_partial_totals_do_not_feed_the_server_predictor():
    m = ProfilerModel(cfg(), lambda: RollingMean(3))
    m.ingest_agent("srv1", sample("srv1", 100.0), None, 100.0)
    m.step(100.0)
    m.ingest_agent("srv1", sample("srv1", 103.0, complete=False), None, 103.0)
    m.step(103.0)
    assert m.servers["srv1"].predictor.samples == 1


def first_sample(server, t):
    """What an agent publishes before it has two readings of its containers (rates need a
    second one): every running container missing, the totals partial."""
    s = sample(server, t, complete=False)
    s["totals"].update(cpu_percent=None, memory_percent=None, network_percent=None,
                       missing=[c["name"] for c in s["containers"]])
    for c in s["containers"]:
        c.update(cpu_percent=None, rx_bytes_per_s=None, tx_bytes_per_s=None)
    return s


def test_a_server_with_only_partial_samples_is_stale_never_a_fresh_zero():
    m = ProfilerModel(cfg(), lambda: RollingMean(3))
    for t in (100.0, 101.0):
        m.ingest_agent("srv2", first_sample("srv2", t), None, t)
        m.step(t)
    s = m.servers_view(101.0)["servers"]["srv2"]
    assert s["stale"] and s["predicted"] is None and not s["complete"]
    assert s["cpu"] is None and s["mem"] is None and s["sample_time"] is None
    assert "partial" in s["error"] and "mn.srv2-vid" in s["error"]
    assert m.servers["srv2"].predictor.samples == 0
    # the first complete sample makes it fresh
    m.ingest_agent("srv2", sample("srv2", 102.0), None, 102.0)
    m.step(102.0)
    s = m.servers_view(102.0)["servers"]["srv2"]
    assert not s["stale"] and s["complete"] and s["cpu"] == pytest.approx(120.0)
    assert s["error"] is None


def test_a_partial_sample_keeps_the_last_complete_totals_with_their_age():
    m = ProfilerModel(cfg(), lambda: RollingMean(3))
    m.ingest_agent("srv1", sample("srv1", 100.0), None, 100.0)
    m.step(100.0)
    m.ingest_agent("srv1", first_sample("srv1", 103.0), None, 103.0)
    m.step(103.0)
    s = m.servers_view(103.0)["servers"]["srv1"]
    assert s["cpu"] == pytest.approx(120.0) and s["sample_time"] == 100.0
    assert s["age_s"] == pytest.approx(3.0) and not s["complete"] and not s["stale"]
    m.ingest_agent("srv1", first_sample("srv1", 110.0), None, 110.0)
    m.step(110.0)
    s = m.servers_view(110.0)["servers"]["srv1"]   # only partial for longer than 9 s
    assert s["stale"] and s["predicted"] is None and s["cpu"] == pytest.approx(120.0)


class Negative:
    """A predictor that extrapolates below zero, as ARMA can on a near-idle series."""
    name = "neg"

    def update(self, value):
        pass

    def predict(self):
        return -0.03


def test_negative_forecasts_are_clipped_and_do_not_break_the_period():
    m = ProfilerModel(cfg(), Negative)
    m.ingest_agent("srv1", sample("srv1", 100.0), None, 100.0)
    m.step(100.0)
    p = m.profiles(100.0)["microservices"]["video"]
    assert p["predicted"] == {"cpu": 0.0, "mem": 0.0, "net": 0.0}
    assert p["weights"]["alpha"] == pytest.approx(1 / 3, abs=1e-5)


def done(fid, ms, duration):
    return {"flow_id": fid, "microservice": ms, "duration_s": duration, "active": False}


def test_flow_classes_and_running_flows_as_evidence():
    m = ProfilerModel(cfg(flow_threshold_s=3), lambda: RollingMean(3))
    m.ingest_flows([{"flow_id": f"v{k}", "microservice": "video", "duration_s": 12.0 + k,
                     "active": True} for k in range(5)] +
                   [{"flow_id": "v9", "microservice": "video", "duration_s": 1.0,
                     "active": True}], [], now=99.0)        # not long yet: no evidence
    completed = m.ingest_flows([done(f"u{k}", "ui", d) for k, d in
                                enumerate((0.2, 0.3, 0.1, 0.4, 0.2))], None, now=99.5)
    assert len(completed) == 5
    m.step(100.0)
    p = m.profiles(100.0)["microservices"]
    assert p["ui"]["flow_class"] == "short" and p["ui"]["flows"]["count"] == 5
    assert p["video"]["flow_class"] == "long"       # configured long anyway
    assert p["video"]["flows"]["count"] == 5        # from the running streams past 3 s
    assert not m.flows.changed
    m.step(103.0)                                    # nothing new: classes kept
    assert m.profiles(103.0)["microservices"]["ui"]["flow_class"] == "short"
    # a stream that ends moves from the running evidence to the completed
    m.ingest_flows([done("v0", "video", 40.0)], None, now=104.0)
    m.step(106.0)
    assert m.profiles(106.0)["microservices"]["video"]["flows"]["count"] == 5
    assert m.flows.count["video"] == 5


def test_completed_flows_leave_the_classification_window():
    m = ProfilerModel(cfg(flow_threshold_s=3), lambda: RollingMean(3))
    m.add_completed([(100.0 - 700, "ui", 0.1)] + [(96.0 + k, "ui", 0.2) for k in range(5)],
                    now=100.0)            # as a restarted profiler reads its history
    m.step(100.0)
    assert m.profiles(100.0)["microservices"]["ui"]["flows"]["count"] == 5
    for k in range(1, 20):               # no new flows: the periodic full reclassification
        m.step(100.0 + 30 * k)
    assert m.profiles(670.0)["microservices"]["ui"]["flows"]["count"] == 5
    m.step(698.5)                        # every RECLASSIFY_EVERY periods: some left
    assert m.profiles(698.5)["microservices"]["ui"]["flows"]["count"] == 2


def test_arma_refit_offsets_spread_the_fits():
    a = Arma((1, 0), window=20, refit_every=10, refit_offset=0)
    b = Arma((1, 0), window=20, refit_every=10, refit_offset=4)
    first = {}
    for k in range(12):
        for name, p in (("a", a), ("b", b)):
            p.update(float(k % 3))
            if p.fits and name not in first:
                first[name] = k
    assert first == {"a": 4, "b": 8}


def test_per_flow_use_and_prediction_lag():
    m = ProfilerModel(cfg(window=10), lambda: RollingMean(3))
    m.ingest_agent("srv1", sample("srv1", 100.0), None, 100.0)
    m.ingest_agent("srv2", sample("srv2", 100.0, cpu=(30, 20, 50)), None, 100.0)
    m.ingest_flows([{"flow_id": f"b{k}", "microservice": "backend", "duration_s": 1.0,
                     "active": True} for k in range(4)], [])
    m.step(100.0)
    p = m.profiles(100.0)
    assert p["prediction_lag_s"] == 30.0                     # w = 10 samples of 3 s
    # backend: cpu (60 + 100) / 2 = 80 % per instance, 2 instances, 4 flows: 40 % per flow
    # and in absolute figures (servers of different sizes): cores and bytes/s per flow
    assert p["microservices"]["backend"]["per_flow"] == {"cpu": 40.0, "net": 2.5, "mem": 0.0,
                                                         "cores": 0.2, "net_bytes_per_s": 25.0}
    assert p["microservices"]["video"]["per_flow"] is None  # no active flows
    # one flow on two busy instances is charged one instance's use, not both
    m.ingest_flows([done(f"b{k}", "backend", 1.0) for k in (1, 2, 3)], None, now=101.0)
    m.step(103.0)
    assert m.profiles(103.0)["microservices"]["backend"]["per_flow"]["cpu"] == 80.0


def test_an_agent_sample_feeds_the_predictor_once():
    m = ProfilerModel(cfg(), lambda: RollingMean(3))
    m.ingest_agent("srv1", sample("srv1", 100.0), None, 100.0)
    m.step(100.0)
    m.step(103.0)                 # the agent missed a period: same sample, not fed again
    assert m.servers["srv1"].predictor.samples == 1
    assert m.microservices["video"].predictor.samples == 1   # nor to the weights
    m.ingest_agent("srv1", sample("srv1", 103.5), None, 104.0)
    m.step(106.0)
    assert m.servers["srv1"].predictor.samples == 2


def test_ports_stay_when_a_report_has_none_and_silent_flows_expire():
    m = ProfilerModel(cfg(), lambda: RollingMean(3))
    assert m.active_flow_ttl_s == ACTIVE_FLOW_TTL_S     # 10 s idle timeout: the floor
    slow = parse_config({"controller": {"idle_timeout_s": 0, "hard_timeout_s": 900}})
    assert ProfilerModel(slow, lambda: RollingMean(3)).active_flow_ttl_s == 909.0
    flow = {"flow_id": "a.1:1", "microservice": "ui", "duration_s": 1.0, "active": True}
    m.ingest_flows([flow], [{"port": 1}], now=100.0)
    m.ingest_flows([], None, now=101.0)                 # a later chunk of the same report
    assert m.ports == [{"port": 1}] and "a.1:1" in m.flows.seen
    m.step(100.0 + ACTIVE_FLOW_TTL_S - 1)
    assert "a.1:1" in m.flows.seen and m.flows.count["ui"] == 1
    m.step(100.0 + ACTIVE_FLOW_TTL_S + 1)          # its controller went away
    assert len(m.flows) == 0 and m.flows.count["ui"] == 0 and not m.flows.ms_of


def test_servers_view_splits_each_server_by_microservice_with_a_window_mean():
    m = ProfilerModel(cfg(window=3), lambda: RollingMean(3))
    for k, t in enumerate((100.0, 103.0, 106.0, 109.0)):
        m.ingest_agent("srv1", sample("srv1", t, cpu=(10, 10 * k, 30), net=(0, 0, 100 * k)),
                       None, t)
        m.step(t)
    parts = m.servers_view(109.0)["servers"]["srv1"]["by_microservice"]
    # ui: 30 % of one core on a 0.5-core server: 60 %; the mean of k = 1, 2, 3: 40 %
    assert parts["ui"] == pytest.approx({"cpu": 60.0, "net": 0.0, "cpu_mean": 40.0,
                                         "net_mean": 0.0})
    # backend: 150 B/s each way of 1000 B/s: 15 %; the mean of 5, 10, 15 %: 10 %
    assert parts["backend"]["net"] == pytest.approx(15.0)
    assert parts["backend"]["net_mean"] == pytest.approx(10.0)
    assert parts["video"]["cpu"] == pytest.approx(20.0)
    # a partial sample changes nothing; a stale server has no parts
    m.ingest_agent("srv1", sample("srv1", 112.0, cpu=(90, 90, 90), complete=False), None, 112.0)
    m.step(112.0)
    assert m.servers_view(112.0)["servers"]["srv1"]["by_microservice"]["ui"]["cpu"] == \
        pytest.approx(60.0)
    assert m.servers_view(130.0)["servers"]["srv1"]["by_microservice"] is None
