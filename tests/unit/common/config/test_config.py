import pytest

import glob
import os

from common.config import DEFAULT_MICROSERVICES, ConfigError, callgraph_spec, \
    check_deployable, load_config, parse_config, parse_size_mb
from tests.conftest import ROOT, run_module


def test_default_file_is_the_paper_testbed():
    cfg = load_config()
    assert [s.name for s in cfg.servers] == ["srv1", "srv2", "srv3", "srv4"]
    assert [m.name for m in cfg.microservices] == ["video", "ui", "backend"]
    assert len(cfg.instances) == 12
    assert len(cfg.testbed.switches) == 1 and not cfg.testbed.trunks
    assert cfg.controller.policy == "malb"
    assert cfg.controller.monitoring_period_s == 3.0
    assert cfg.profiler.window == 10 and cfg.profiler.predictor == "rm"
    # the agents measure the whole profiler period, whatever it is, unless told otherwise
    assert cfg.profiler.agent_window_s == 3.0
    assert parse_config({"profiler": {"period_s": 5}}).profiler.agent_window_s == 5.0
    assert parse_config({"profiler": {"agent_window_s": 0}}).profiler.agent_window_s == 0.0


def test_naming_and_addressing_are_derived_consistently():
    cfg = parse_config({"servers": {"count": 2}, "testbed": {"clients": 3}})
    inst = {i.name: i for i in cfg.instances}
    assert inst["srv2-be"].ip == "10.0.2.3"
    assert inst["srv2-be"].mac == "02:00:00:01:02:03"
    assert inst["srv1-vid"].switch_port == 1 and inst["srv2-be"].switch_port == 6
    clients = cfg.testbed.clients
    assert [c.ip for c in clients] == ["10.0.200.1", "10.0.200.2", "10.0.200.3"]
    assert [c.switch_port for c in clients] == [7, 8, 9]
    assert cfg.servers[1].agent_url == "http://127.0.0.1:9102"
    # every address and port unique
    assert len({i.ip for i in cfg.instances}) == len(cfg.instances)
    assert len({(i.switch, i.switch_port) for i in cfg.instances}) == len(cfg.instances)


@pytest.mark.parametrize("switches", [1, 3])
def test_the_proxy_host_is_derived_outside_the_clients_block_and_numbers_last(switches):
    base = {"testbed": {"clients": 3, "switches": switches}, "servers": {"count": 4}}
    off = parse_config(base)
    on = parse_config({**base, "testbed": {**base["testbed"], "proxy": True}})
    assert off.testbed.proxy is None
    p = on.testbed.proxy
    assert (p.name, p.ip, p.mac, p.switch, p.dpid) == ("prx1", "10.0.201.1",
                                                         "02:00:00:03:00:01", "s1", 1)
    # every other port keeps its number; the proxy takes the next one on s1
    assert on.slots == off.slots and on.testbed.clients == off.testbed.clients
    assert on.testbed.trunks == off.testbed.trunks
    s1 = [i.switch_port for i in on.slots if i.switch == "s1"] + \
        [c.switch_port for c in on.testbed.clients] + \
        [t.a_port for t in on.testbed.trunks if t.a == "s1"]
    assert p.switch_port == max(s1) + 1
    assert p.ip not in {c.ip for c in on.testbed.clients} | {i.ip for i in on.slots}
    assert p.mac not in {c.mac for c in on.testbed.clients} | {i.mac for i in on.slots}


def test_multiswitch_chain_spreads_servers_and_numbers_trunks():
    cfg = parse_config({"testbed": {"switches": 3, "trunk_bw_mbit": 20},
                        "servers": {"count": 4}})
    assert [s.switch for s in cfg.servers] == ["s1", "s2", "s3", "s1"]
    assert [(t.a, t.b) for t in cfg.testbed.trunks] == [("s1", "s2"), ("s2", "s3")]
    t12, t23 = cfg.testbed.trunks
    assert t12.bw_mbit == 20
    # s2 has srv2's 3 instances on ports 1-3, then the trunk to s1 (4) and to s3 (5)
    assert (t12.b_port, t23.a_port) == (4, 5)
    used = {}
    for i in cfg.instances:
        used.setdefault(i.switch, []).append(i.switch_port)
    for c in cfg.testbed.clients:
        used.setdefault(c.switch, []).append(c.switch_port)
    for t in cfg.testbed.trunks:
        used[t.a].append(t.a_port)
        used[t.b].append(t.b_port)
    for ports in used.values():
        assert sorted(ports) == list(range(1, len(ports) + 1))


@pytest.mark.parametrize("data, field", [
    ({"servers": {"count": 0}}, "servers.count"),
    ({"servers": [{"cpu": -1}]}, "servers[0].cpu"),
    ({"servers": [{"memory": "lots"}]}, "servers[0].memory"),
    ({"servers": [{"name": "a"}, {"name": "a"}]}, "servers[1].name"),
    ({"servers": [{"switch": "s9"}]}, "servers[0].switch"),
    ({"microservices": [{"name": "video", "port": 70000}]}, "microservices[0].port"),
    ({"microservices": [{"name": "video", "port": 80, "flow_class": "medium"}]},
     "microservices[0].flow_class"),
    ({"microservices": [{"name": "a", "port": 80}, {"name": "b", "port": 80}]},
     "microservices[1].port"),
    ({"microservices": [{"name": "video", "port": 80, "vip": "10.0.0.300"}]},
     "microservices[0].vip"),
    ({"microservices": [{"name": "video", "port": 80, "vip": "10.0.1.1"}]},
     "microservices[0].vip"),
    ({"testbed": {"switches": 5}}, "testbed.switches"),
    ({"testbed": {"datapath": "fast"}}, "testbed.datapath"),
    ({"testbed": {"controller": "localhost"}}, "testbed.controller"),
    ({"controller": {"policy": "random"}}, "controller.policy"),
    ({"controller": {"monitoring_period_s": "3s"}}, "controller.monitoring_period_s"),
    ({"controller": {"health": {"method": "icmp"}}}, "controller.health.method"),
    ({"profiler": {"arma_order": [0, 0]}}, "profiler.arma_order"),
    ({"profiler": {"predictor": "lstm"}}, "profiler.predictor"),
    ({"profiler": {"agent_window_s": -1}}, "profiler.agent_window_s: must be >= 0"),
    ({"profiler": {"agent_window_s": 601}}, "profiler.agent_window_s: must be <= 600"),
    ({"testbed": {"colour": "blue"}}, "testbed.colour"),
    ({"microservices": [{"name": "video", "port": 80, "vip": "192.168.1.10"}]},
     "microservices[0].vip"),
    ({"microservices": [{"name": "video", "port": 80, "command": "serve --port {prot}"}]},
     "microservices[0].command"),
    ({"microservices": [{"name": "video", "port": 80, "command": "awk '{print}'"}]},
     "microservices[0].command"),
    ({"controller": {"health": {"interval_s": 1, "timeout_s": 1}}},
     "controller.health.timeout_s"),
    ({"controller": {"idle_timeout_s": 0, "hard_timeout_s": 0}}, "controller.idle_timeout_s"),
    ({"controller": {"dataplane": {"short_flows": "nic"}}}, "controller.dataplane.short_flows"),
    ({"controller": {"dataplane": {"table_size": 59}}}, "controller.dataplane.table_size"),
    ({"controller": {"dataplane": {"table_size": 261}}}, "controller.dataplane.table_size"),
    ({"controller": {"dataplane": {"slots": 257}}}, "controller.dataplane.slots"),
    ({"controller": {"packet_in_limit_per_s": -1}}, "controller.packet_in_limit_per_s"),
    ({"controller": {"max_active_flows": 0}}, "controller.max_active_flows"),
    ({"servers": [{}] * 100}, "servers"),
    ({"extra": 1}, "extra"),
    ({"testbed": {"proxy": "yes"}}, "testbed.proxy: expected true or false, got 'yes'"),
    ({"testbed": {"proxy": 1}}, "testbed.proxy: expected true or false, got 1"),
    ({"testbed": {"proxy": True}, "microservices": [{"name": "video", "port": 80,
                                                     "vip": "10.0.201.1"}]},
     "microservices[0].vip: 10.0.201.1 collides with a host address"),
])
def test_bad_values_name_their_field(data, field):
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    assert str(err.value).startswith(field), str(err.value)


def test_node_names_must_fit_linux_interface_names():
    with pytest.raises(ConfigError, match="too long"):
        parse_config({"servers": [{"name": "averyverylongserver"}]})


def test_size_parsing():
    assert parse_size_mb("256m", "x") == 256
    assert parse_size_mb("1g", "x") == 1024
    assert parse_size_mb(512, "x") == 512
    with pytest.raises(ConfigError):
        parse_size_mb("2m", "x")  # below Docker's minimum


def test_file_errors_name_the_file(tmp_path, config_file):
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match="nope.yaml: configuration file not found"):
        load_config(str(missing))
    bad = tmp_path / "bad.yaml"
    bad.write_text("testbed: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(str(bad))
    path = config_file({"servers": {"count": 2, "cpu": "a lot"}})
    with pytest.raises(ConfigError, match=r"malb.yaml: servers.cpu|servers\[0\].cpu"):
        load_config(path)


def test_overrides_merge_per_section(config_file):
    path = config_file({"testbed": {"clients": 3, "switches": 2},
                        "microservices": DEFAULT_MICROSERVICES})
    cfg = load_config(path, {"testbed": {"clients": 5}})
    assert len(cfg.testbed.clients) == 5 and len(cfg.testbed.switches) == 2


def test_health_timing_is_only_checked_when_probes_are_sent():
    cfg = parse_config({"controller": {"health": {"method": "none", "interval_s": 1,
                                                  "timeout_s": 1}}})
    assert cfg.controller.health.method == "none"


def test_profiler_scale_configurations_parse_but_do_not_deploy():
    many = [{"name": f"m{j}", "abbrev": f"m{j}", "port": 10000 + j} for j in range(300)]
    cfg = parse_config({"microservices": many})       # the profiler alone takes this
    with pytest.raises(ConfigError, match="at most 254 microservices"):
        check_deployable(cfg)
    check_deployable(parse_config({}))
    wide = parse_config({"servers": {"count": 99}, "microservices": many[:42]})
    with pytest.raises(ConfigError, match="at most 4095 instances"):
        check_deployable(wide)


def test_slots_for_every_server_and_microservice_and_instances_where_placed():
    cfg = parse_config({"testbed": {"switches": 2},
                        "servers": {"count": 3},
                        "microservices": [
                            {"name": "front", "abbrev": "fr", "port": 9001, "kind": "callgraph",
                             "servers": ["srv2"], "calls": [{"service": "back", "count": 2,
                                                             "request_bytes": 100,
                                                             "response_bytes": 5000}],
                             "cpu_ms": 3, "response_bytes": 20000},
                            {"name": "back", "abbrev": "bk", "port": 9002, "kind": "callgraph",
                             "replicas": 2}]})
    assert len(cfg.slots) == 6
    assert [i.name for i in cfg.instances] == ["srv2-fr", "srv2-bk", "srv3-bk"]
    # replicas spread round robin from the microservice's own offset (back is the second)
    assert cfg.microservice("back").servers == ("srv2", "srv3")
    slot = cfg.slot("srv3", "front")
    assert (slot.ip, slot.slot, slot.switch) == ("10.0.3.1", 4, "s1")
    # ports: every slot has its own, clients and trunks after them
    ports = sorted(i.switch_port for i in cfg.slots if i.switch == "s1")
    assert ports == [1, 2, 3, 4] and cfg.testbed.clients[0].switch_port == 5
    spec = callgraph_spec(cfg, cfg.microservice("front"))
    assert spec == {"service": "front", "cpu_ms": 3.0, "response_bytes": 20000, "callers": [],
                    "calls": [{"service": "back", "host": "10.0.0.100", "port": 9002,
                               "count": 2, "request_bytes": 100, "response_bytes": 5000}]}
    assert callgraph_spec(cfg, cfg.microservice("back"))["callers"] == ["front"]


def test_bad_call_graphs_are_refused_naming_the_field():
    base = {"name": "a", "abbrev": "a", "port": 9001, "kind": "callgraph"}
    with pytest.raises(ConfigError, match=r"calls\[0\].service: unknown microservice 'zz'"):
        parse_config({"microservices": [{**base, "calls": [{"service": "zz"}]}]})
    with pytest.raises(ConfigError, match="calls form a cycle: a -> b -> a"):
        parse_config({"microservices": [
            {**base, "calls": [{"service": "b"}]},
            {"name": "b", "abbrev": "b", "port": 9002, "kind": "callgraph",
             "calls": [{"service": "a"}]}]})
    with pytest.raises(ConfigError, match=r"microservices\[0\].calls: only for kind callgraph"):
        parse_config({"microservices": [{"name": "x", "port": 9001, "calls": []}]})
    with pytest.raises(ConfigError, match=r"servers: unknown server 'srv9'"):
        parse_config({"microservices": [{**base, "servers": ["srv9"]}]})
    with pytest.raises(ConfigError, match="replicas: 5 replicas for 4 servers"):
        parse_config({"microservices": [{**base, "replicas": 5}]})
    with pytest.raises(ConfigError, match="give servers or replicas, not both"):
        parse_config({"microservices": [{**base, "replicas": 1, "servers": ["srv1"]}]})


def _chain(**slos):
    """front -> mid -> leaf, each on a server of its own, with the given slo sections."""
    return {"servers": {"count": 3}, "microservices": [
        {"name": n, "port": 9001 + k, "kind": "callgraph", "servers": [f"srv{k + 1}"],
         "calls": [{"service": c}] if c else [], **({"slo": slos[n]} if n in slos else {})}
        for k, (n, c) in enumerate((("front", "mid"), ("mid", "leaf"), ("leaf", None)))]}


def test_an_end_to_end_objective_needs_a_loop_under_it_on_every_service_it_calls():
    e2e, own = {"target_ms": 50, "scope": "end-to-end"}, {"target_ms": 20}
    cfg = parse_config(_chain(front=e2e, mid=own, leaf=own))
    assert cfg.microservice("front").slo.scope == "end-to-end"
    assert cfg.microservice("leaf").slo.scope == "service"
    with pytest.raises(ConfigError, match=r"microservices\[0\].slo.scope: front's objective "
                                          r"is split .* and leaf has no slo"):
        parse_config(_chain(front=e2e, mid=own))
    with pytest.raises(ConfigError, match=r"microservices\[2\].slo.scope: end-to-end needs "
                                          r"calls .* leaf calls nothing"):
        parse_config(_chain(front=own, mid=own, leaf=e2e))
    with pytest.raises(ConfigError, match="mid, called by front, has an end-to-end objective"):
        parse_config(_chain(front=e2e, mid=e2e, leaf=own))
    with pytest.raises(ConfigError, match=r"slo.scope: must be one of service, end-to-end"):
        parse_config(_chain(front={"target_ms": 50, "scope": "e2e"}))
    priced = parse_config(_chain(front={**e2e, "split": "priced"}, mid=own, leaf=own))
    assert priced.microservice("front").slo.split == "priced"
    assert cfg.microservice("front").slo.split == "uniform"
    with pytest.raises(ConfigError, match=r"microservices\[1\].slo.split: only an end-to-end "
                                          r"objective is split"):
        parse_config(_chain(front=e2e, mid={**own, "split": "priced"}, leaf=own))


def test_a_service_under_two_end_to_end_objectives_is_refused():
    data = _chain(front={"target_ms": 50, "scope": "end-to-end"}, mid={"target_ms": 20},
                  leaf={"target_ms": 20})
    data["servers"]["count"] = 4
    data["microservices"].append({"name": "other", "port": 9010, "kind": "callgraph",
                                  "servers": ["srv4"], "calls": [{"service": "leaf"}],
                                  "slo": {"target_ms": 50, "scope": "end-to-end"}})
    with pytest.raises(ConfigError, match="leaf is under both front's and other's"):
        parse_config(data)


# ------------------------------------------------------------------ issue 14, item 4
def test_every_shipped_configuration_loads_and_deploys():
    paths = sorted(glob.glob(os.path.join(ROOT, "configs", "*.yaml")))
    assert len(paths) >= 4
    for path in paths:
        check_deployable(load_config(path))


def test_a_file_without_microservices_is_an_error_but_code_gets_the_default(config_file):
    with pytest.raises(ConfigError) as err:
        load_config(config_file({"servers": {"count": 2}}))
    assert str(err.value).endswith("malb.yaml: microservices: required: the list of "
                                   "microservices to balance, e.g. configs/paper.yaml's "
                                   "(docs/configuration.md)")
    with pytest.raises(ConfigError, match="microservices: required"):
        load_config(config_file({"microservices": None}))
    with pytest.raises(ConfigError, match="microservices: expected a non-empty list"):
        load_config(config_file({"microservices": []}))
    assert [m.name for m in parse_config({}).microservices] == ["video", "ui", "backend"]


YAML_NUMBERS = [
    ("profiler:\n  period_s: .nan\n", "profiler.period_s: expected a finite number, got nan"),
    ("profiler:\n  retention_s: .inf\n", "profiler.retention_s: expected a finite number, "
                                          "got inf"),
    ("controller:\n  rest_port: .inf\n", "controller.rest_port: expected a finite number"),
    ("controller:\n  idle_timeout_s: .nan\n", "controller.idle_timeout_s: expected a finite"),
    ("controller:\n  server_stale_after_s: -.inf\n", "controller.server_stale_after_s: "
                                                      "expected a finite number, got -inf"),
    ("servers:\n  count: 2\n  memory: .nan\n", "servers[0].memory: expected a finite size"),
    ("servers:\n  count: 2\n  memory: " + "9" * 400 + "g\n", "servers[0].memory: expected "
                                                            "a finite size"),
    ("servers:\n  count: 2\n  cpu: 1" + "0" * 400 + "\n", "servers[0].cpu: expected a finite "
                                                         "number, got 1000"),
    ("servers:\n  count: " + "9" * 5000 + "\n", "cannot be read: Exceeds the limit"),
    ("agents:\n  slo: {guard: .nan}\n", "agents.slo.guard: expected a finite number"),
    ("microservices:\n  - {name: a, port: 80, slo: {target_ms: .inf}}\n",
     "microservices[0].slo.target_ms: expected a finite number"),
]


@pytest.mark.parametrize("text, message", YAML_NUMBERS)
def test_every_number_must_be_finite(tmp_path, text, message):
    path = tmp_path / "c.yaml"
    if not text.startswith("microservices"):
        text += "microservices: [{name: a, port: 80}]\n"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(str(path))
    assert message in str(err.value) and "\n" not in str(err.value), str(err.value)


@pytest.mark.parametrize("data, message", [
    ({"controller": {"rest_host": "999.999.1.1"}},
     "controller.rest_host: not a valid IPv4 address: '999.999.1.1'"),
    ({"controller": {"rest_host": "my host"}},
     "controller.rest_host: not a valid host name or IPv4 address: 'my host'"),
    ({"controller": {"rest_host": "::g"}}, "controller.rest_host: expected an IPv4 address, "
                                           "an IPv6 address or a host name, got '::g'"),
    ({"controller": {"rest_host": 127}}, "controller.rest_host: expected an IPv4 address"),
    ({"profiler": {"listen_host": "::1"}}, "profiler.listen_host: expected an IPv4 address "
                                           "or a host name, got '::1'"),
    ({"profiler": {"listen_host": "-bad-.example"}}, "profiler.listen_host: not a valid host"),
    ({"agents": {"listen_host": "10.0.0.256"}}, "agents.listen_host: not a valid IPv4"),
    ({"profiler": {"url": "http://999.1.1.1:9200"}}, "profiler.url (host): not a valid IPv4"),
    ({"profiler": {"url": "http://127.0.0.1:99999"}}, "profiler.url: not a valid URL"),
    ({"profiler": {"url": "ftp://127.0.0.1:9200"}}, "profiler.url: expected an http URL"),
    ({"servers": [{"agent_url": "http://300.1.1.1:9101"}]},
     "servers[0].agent_url (host): not a valid IPv4 address: '300.1.1.1'"),
    ({"servers": [{"agent_url": "http://:9101"}]}, "servers[0].agent_url (host): expected"),
    ({"testbed": {"controller": "300.1.1.1:6653"}},
     "testbed.controller (host): not a valid IPv4 address"),
    ({"testbed": {"controller": "127.0.0.1:" + "0" * 30 + "6653"}},
     "testbed.controller: expected 'host:port'"),
])
def test_addresses_must_be_valid(data, message):
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    assert str(err.value).startswith(message), str(err.value)


def test_good_addresses_pass():
    cfg = parse_config({"controller": {"rest_host": "::1"},
                        "profiler": {"listen_host": "localhost",
                                     "url": "http://[::1]:9200/"},
                        "agents": {"listen_host": "0.0.0.0"},
                        "testbed": {"controller": "ctl.example.org:6653"}})
    assert cfg.controller.rest_host == "::1" and cfg.profiler.url == "http://[::1]:9200"
    assert cfg.servers[0].agent_url == "http://0.0.0.0:9101"


@pytest.mark.parametrize("data, message", [
    ({"controller": {"rest_port": 6653}},
     "controller.rest_port: 6653 is also controller.ofp_port (OpenFlow); the REST API needs "
     "a port of its own"),
    ({"controller": {"rest_port": 7000, "ofp_port": 7000}},
     "controller.rest_port: 7000 is also controller.ofp_port"),
    ({"profiler": {"listen_port": 8080}},
     "profiler.listen_port: port 8080 is also controller.rest_port's (127.0.0.1:8080); two "
     "services cannot listen on one port"),
    ({"profiler": {"listen_port": 9102}},
     "servers[1].agent_url: port 9102 is also profiler.listen_port's (127.0.0.1:9102)"),
    ({"agents": {"base_port": 9198}, "servers": {"count": 4}},
     "servers[2].agent_url: port 9200 is also profiler.listen_port's"),
    ({"testbed": {"control_port": 6653}},
     "testbed.control_port: port 6653 is also controller.ofp_port's (0.0.0.0:6653)"),
    ({"controller": {"rest_host": "0.0.0.0"}, "profiler": {"listen_host": "10.1.1.1",
                                                          "listen_port": 8080}},
     "profiler.listen_port: port 8080 is also controller.rest_port's (0.0.0.0:8080)"),
    ({"servers": [{"agent_url": "http://10.1.1.1:9101"}, {"agent_url": "http://10.1.1.1:9101"}]},
     "servers[1].agent_url: port 9101 is also servers[0].agent_url's (10.1.1.1:9101)"),
    ({"servers": [{"agent_url": "http://localhost:9200"}]},
     "servers[0].agent_url: port 9200 is also profiler.listen_port's (127.0.0.1:9200)"),
])
def test_no_two_services_on_one_port(data, message):
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    assert str(err.value) == message or str(err.value).startswith(message), str(err.value)


def test_agents_on_their_own_machines_may_share_a_port_number():
    cfg = parse_config({"servers": [{"agent_url": "http://10.1.1.1:9101"},
                                    {"agent_url": "http://10.1.1.2:9101"},
                                    {"agent_url": "http://10.1.1.3:9200"}]})
    assert len({s.agent_url for s in cfg.servers}) == 3


def test_a_history_that_is_not_sqlite_is_one_line_and_exit_2(tmp_path, config_file):
    """The profiler opens profiler.history_path before anything else (and before any
    socket): not a database, a directory, or a path under a file."""
    text = tmp_path / "notes.txt"
    text.write_text("not a database, but long enough to have a header's worth of bytes\n" * 4)
    for history, message in ((text, "not a history database (file is not a database)"),
                             (tmp_path, "a directory, not a history database"),
                             (text / "h.sqlite", "notes.txt is a file, not a directory")):
        path = config_file({"microservices": DEFAULT_MICROSERVICES,
                            "profiler": {"history_path": str(history)}})
        res = run_module("profiler", "--config", path, timeout=60)
        assert res.returncode == 2, res.stderr
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
        assert lines[0].startswith("error: configuration: profiler.history_path: ")
        assert message in lines[0], lines[0]


def test_calls_via_the_proxy_point_call_graph_services_at_it():
    data = {"testbed": {"proxy": True, "calls_via": "proxy"},
            "microservices": [{"name": "front", "port": 9001, "kind": "callgraph",
                               "calls": [{"service": "back"}]},
                              {"name": "back", "port": 9002, "kind": "callgraph"}]}
    cfg = parse_config(data, "test.yaml")
    call, = callgraph_spec(cfg, cfg.microservice("front"))["calls"]
    assert (call["host"], call["port"]) == (cfg.testbed.proxy.ip, 9002)
    data["testbed"]["calls_via"] = "vip"
    cfg = parse_config(data, "test.yaml")
    assert callgraph_spec(cfg, cfg.microservice("front"))["calls"][0]["host"] == \
        cfg.microservice("back").vip
    with pytest.raises(ConfigError, match=r"testbed.calls_via: proxy needs testbed.proxy"):
        parse_config({"testbed": {"calls_via": "proxy"}}, "test.yaml")


def test_transitions_in_the_switch_need_a_grace_period_the_tracker_outlasts():
    on = {"short_flows": "switch", "transitions": "switch"}
    assert parse_config({"controller": {"dataplane": on}}).controller.dataplane.transitions \
        == "switch"
    assert parse_config({}).controller.dataplane.transitions == "controller"
    with pytest.raises(ConfigError, match=r"controller.dataplane.transitions: switch needs a "
                                          r"grace period .* at most 25 s, got 30"):
        parse_config({"controller": {"dataplane": on, "idle_timeout_s": 30}})
    # per-flow control, or transitions through the controller: any grace period
    parse_config({"controller": {"dataplane": {"short_flows": "switch"}, "idle_timeout_s": 30}})
    parse_config({"controller": {"dataplane": {**on, "short_flows": "controller"},
                                 "idle_timeout_s": 30}})
