"""MALB: microservice-aware load balancing, as a Ryu or os-ken application (OpenFlow 1.3).

    .venv/bin/malb-controller                          # configs/paper.yaml or $MALB_CONFIG
    MALB_POLICY=srr .venv/bin/malb-controller
    .venv/bin/malb-controller --malb-config my.yaml    # os-ken (ryu_apps/launcher.py)
    .venv-ryu/bin/ryu-manager --user-flags ryu_apps/flags.py ryu_apps/malb.py    # Ryu

The thin shell around the controller core (ryu_apps/core.py): events decoded into plain
arguments, the clock read, the core's timer loops stepped, HTTP to the profiler and the
agents (ryu_apps/peers.py), the REST server (ryu_apps/rest.py) run; what the core returns is
sent, counted and logged here (docs/controller.md). The framework's objects come from
ryu_apps/framework.py.

- MalbController: the app: its event handlers, hub threads and the REST API's actions.
"""
from __future__ import annotations

import functools
import gc
import os
import sys
import time
from typing import NoReturn

from oslo_config.cfg import NoSuchOptError

from common.config import POLICIES, ConfigError, check_deployable, load_config
from common.metrics import series
from ryu_apps import framework, lazy_parse, listeners, rest
from ryu_apps.controller_metrics import ControllerMetrics
from ryu_apps.core import ControllerCore, FlowStat, PortStat
from ryu_apps.loop_stalls import LoopStalls
from ryu_apps.framework import CONFIG_DISPATCHER, DEAD_DISPATCHER, MAIN_DISPATCHER, App, cfg, \
    hub, ofp_event, ofproto_v1_3, set_ev_cls
from ryu_apps.peers import PeerExchanges
from ryu_apps.core_result import CoreResult
from ryu_apps.roles import SUPERSEDED
from ryu_apps.standby import Standby, roles_of

CONF = cfg.CONF


def _conf(name: str):
    try:
        return getattr(CONF, name)
    except NoSuchOptError:  # ryu_apps/flags.py not loaded
        return None


def _exit(message: str) -> NoReturn:
    """One clear line on stderr and exit code 2 (a bad configuration, as every other entry
    point does), not a traceback from inside ryu-manager."""
    print(message, file=sys.stderr, flush=True)
    raise SystemExit(2)


def _listen_defaults(config) -> tuple[str, int]:
    """The REST address: the configured one (loopback by default) unless --wsapi-host/
    -port say otherwise (ryu-manager's options, which ryu_apps/osken_manager.py has
    too); OpenFlow on the configured port unless --ofp-tcp-listen-port says otherwise."""
    c = config.controller
    given = " ".join(sys.argv)
    if "--ofp-tcp-listen-port" not in given:
        CONF.set_override("ofp_tcp_listen_port", c.ofp_port)
    host = _conf("wsapi_host") if "--wsapi-host" in given else c.rest_host
    port = _conf("wsapi_port") if "--wsapi-port" in given else c.rest_port
    return host or c.rest_host, c.rest_port if port is None else port


def _when_master(handler):
    """A switch event a standby ignores: the master's to act on (the switches send a slave
    little beyond port changes, and what comes before its role request is the master's)."""
    @functools.wraps(handler)
    def gated(self, ev):
        if self.roles.active:
            return handler(self, ev)
        return None
    return gated


class MalbController(App):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        try:
            self.cfg = load_config(_conf("malb_config") or None)
            check_deployable(self.cfg)
        except ConfigError as exc:
            _exit(f"malb: bad configuration: {exc}")
        c = self.cfg.controller
        # the shared token (security.token or $MALB_TOKEN): REST writes need it, and the
        # flow reports to the profiler carry it
        self.token = self.cfg.security.token
        policy = _conf("malb_policy") or os.environ.get("MALB_POLICY") or c.policy
        if policy not in POLICIES:
            _exit(f"malb: policy {policy!r} (from --malb-policy, MALB_POLICY or "
                  f"controller.policy) is not one of {', '.join(POLICIES)}")
        self.roles = roles_of(_conf("malb_role") or os.environ.get("MALB_ROLE") or None,
                              _conf("malb_peer") or os.environ.get("MALB_PEER") or None,
                              c.failover.takeover_after_s, time.time(), _exit)
        rest_host, rest_port = _listen_defaults(self.cfg)
        # a second controller on the same ports stops here instead of sharing the switches
        # (ryu_apps/listeners.py); the REST socket is bound below, without SO_REUSEPORT
        if not (_conf("ctl_privkey") and _conf("ctl_cert")):    # TLS listens elsewhere
            try:
                listeners.check_free({"OpenFlow (controller.ofp_port)": (
                    _conf("ofp_listen_host") or "0.0.0.0", CONF.ofp_tcp_listen_port)})
            except listeners.PortInUse as exc:
                _exit(f"malb: cannot listen: {exc}")

        # flow-removed and flow-statistics matches parsed on first access: a quarter of the
        # controller's time at 1,000 new flows/s went to parsing what it never reads
        if not (_conf("malb_eager_parse") or os.environ.get("MALB_EAGER_PARSE")):
            lazy_parse.install()

        # ---- the pure controller core (ryu_apps/core.py); the shell keeps the datapaths
        self.datapaths = {}
        self._start_core(policy)

        # ---- metrics (ryu_apps/controller_metrics.py); REST renders the registry
        self.controller_metrics = ControllerMetrics()
        self.metrics = self.controller_metrics.registry
        self.controller_metrics.role.set(1 if self.roles.active else 0)

        try:
            self.rest = rest.server(self, rest_host, rest_port)
        except OSError as exc:
            what = "REST API (controller.rest_host:rest_port)"
            _exit(f"malb: cannot listen: {listeners.refusal(what, rest_host, rest_port, exc)}")
        self.logger.info("MALB on %s %s: %d microservices, %d instances on %d servers, "
                         "policy %s, config %s, REST on %s:%d", framework.NAME,
                         framework.VERSION, len(self.cfg.microservices), len(self.instances),
                         len(self.cfg.servers), policy, self.cfg.source,
                         *self.rest.server_address)
        # the HTTP exchanges with the profiler and the agents (ryu_apps/peers.py)
        self.peers = PeerExchanges(self.core, self.cfg, self.controller_metrics, self._apply,
                                   self.token, self.logger, active=lambda: self.roles.active)
        self.stalls = LoopStalls(self.controller_metrics)
        self.threads = [hub.spawn(self.rest.serve_forever), hub.spawn(self._monitor_loop),
                        hub.spawn(self.peers.profiler_loop), hub.spawn(self.stalls.lag_loop)]
        if self.core.discovering:     # the user's own network: links between switches found
            self.threads.append(hub.spawn(self._discovery_loop))
        # Ryu and this app allocate a few hundred thousand long-lived objects at start-up;
        # frozen, they stay out of every later full collection (a 70 ms pause otherwise).
        gc.freeze()
        gc.callbacks.append(self.stalls.gc_watch)     # its pauses, as long as it runs
        if self.core.dataplane.counting:
            self.threads.append(hub.spawn(self._connections_loop))
        if c.health.method != "none":
            self.threads.append(hub.spawn(self._health_loop))
        # one per agent, idle while the policy reads no probes: a slow agent delays its own
        # readings only
        self.threads += [hub.spawn(self.peers.probe_loop, srv.name) for srv in self.cfg.servers]
        # a standby pair: the peer's role polled, takeovers and step-downs (ryu_apps/standby.py)
        self.standby = Standby(self)
        if self.roles.asks_roles:
            self.threads.append(hub.spawn(self.standby.peer_loop))

    def stop(self):
        """Unloaded by the app manager: Ryu's own parsers back for the rest of the process."""
        lazy_parse.uninstall()
        super().stop()

    def _start_core(self, policy: str) -> None:
        """A controller core as at a start: at the start, and again when this controller
        steps down to standby (what it knew is the new master's to know)."""
        self.core = ControllerCore(self.cfg, policy, xid=self._xid, started=time.time(),
                                  timer=time.perf_counter)
        # what REST (ryu_apps/rest.py) reads: the policy core, flows, decisions, instances
        self.policy_core, self.flows = self.core.policy_core, self.core.flows
        self.decisions = self.core.decisions
        self.instances = self.core.plan.instances
        if hasattr(self, "peers"):
            self.peers.core = self.core

    # ================================================================ sending
    def _xid(self, dpid: int) -> int:
        """Transaction ids from the datapath's own counter, as send_msg() would assign them."""
        dp = self.datapaths.get(dpid)
        if dp is None:
            return 0      # a switch gone since: what is built for it is not sent
        dp.xid = (dp.xid + 1) & dp.ofproto.MAX_XID
        return dp.xid

    def _apply(self, result: CoreResult) -> None:
        """Send, count and log what the core returned."""
        for dpid, messages in result.sends:
            target = self.datapaths.get(dpid)
            if target is not None and messages:
                target.send(messages)
        for kind in result.kinds:
            self.controller_metrics.packet_in.labels(kind).inc()
        for op, name, labels, value in result.metrics:
            metric = series(self.controller_metrics.by_name[name], *labels)
            if op == "set":
                metric.set(value)
            else:
                metric.inc(value)
        for text in result.infos:
            self.logger.info("%s", text)
        for text in result.warnings:
            self.logger.warning("%s", text)
        if result.no_backend:
            self.controller_metrics.no_backend.labels(result.no_backend).inc()
        d = result.decision
        if d is not None:
            if result.choose_s is not None:
                self.controller_metrics.choose.labels(d.algorithm).observe(result.choose_s)
            self.controller_metrics.decisions.labels(d.microservice, d.server, d.policy,
                                                     d.algorithm).inc()

    # ================================================================ switch events
    @set_ev_cls(ofp_event.EventOFPStateChange, [MAIN_DISPATCHER, DEAD_DISPATCHER])
    def _state_change(self, ev):
        dp = ev.datapath
        if ev.state == MAIN_DISPATCHER:
            self.datapaths[dp.id] = dp
        elif ev.state == DEAD_DISPATCHER and self.datapaths.get(dp.id) is dp:
            del self.datapaths[dp.id]
            if self.roles.active:
                self._apply(self.core.switch_gone(dp.id, time.time()))

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def _switch_features(self, ev):
        dp = ev.msg.datapath
        # known from now on, not only from MAIN_DISPATCHER: the rules sent now (NAT rules
        # restored on reconnection among them) take their transaction ids from it
        self.datapaths[dp.id] = dp
        # with a peer, the role first (a new connection is EQUAL): a standby's slave
        # request, or the master's claim again ahead of its rules
        ask = self.roles.on_connect(self._xid(dp.id))
        if ask:
            dp.send(ask)
        if self.roles.active:
            self._apply(self.core.switch_connected(dp.id, time.time()))

    @set_ev_cls(ofp_event.EventOFPMeterFeaturesStatsReply, MAIN_DISPATCHER)
    @_when_master
    def _meter_features(self, ev):
        f = ev.msg.body[0] if isinstance(ev.msg.body, list) else ev.msg.body
        self._apply(self.core.meter_features(ev.msg.datapath.id, f.max_meter, f.band_types,
                                            f.capabilities, time.time()))

    @set_ev_cls(ofp_event.EventOFPGroupFeaturesStatsReply, MAIN_DISPATCHER)
    @_when_master
    def _group_features(self, ev):
        body, ofp = ev.msg.body, ev.msg.datapath.ofproto
        self._apply(self.core.group_features(ev.msg.datapath.id, body.types,
                                            body.max_groups[ofp.OFPGT_SELECT], time.time()))

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    @_when_master
    def _packet_in(self, ev):
        started = time.perf_counter()
        msg = ev.msg
        result = self.core.packet_in(msg.datapath.id, msg.match["in_port"], msg.data,
                                    time.time(), msg.cookie)
        self._apply(result)
        took = time.perf_counter() - started
        if result.latency:
            self.controller_metrics.latency.observe(took)
        self.controller_metrics.handler.labels("packet_in").observe(took)

    @set_ev_cls(ofp_event.EventOFPFlowRemoved, MAIN_DISPATCHER)
    @_when_master
    def _flow_removed(self, ev):
        started = time.perf_counter()
        m = ev.msg
        self._apply(self.core.flow_removed(m.datapath.id, m.cookie,
                                          m.duration_sec + m.duration_nsec / 1e9,
                                          m.byte_count, m.packet_count, m.reason, time.time()))
        self.controller_metrics.handler.labels("flow_removed").observe(
            time.perf_counter() - started)

    @set_ev_cls(ofp_event.EventOFPFlowStatsReply, MAIN_DISPATCHER)
    @_when_master
    def _flow_stats(self, ev):
        started = time.perf_counter()
        # match and output ports parsed only if the core reads them (lazy_parse.py)
        entries = [FlowStat(st.cookie, st.duration_sec + st.duration_nsec / 1e9, st.byte_count,
                            st.packet_count, lazy_parse.MatchView(st), lazy_parse.OutPorts(st))
                   for st in ev.msg.body]
        msg = ev.msg
        self._apply(self.core.flow_stats(msg.datapath.id, entries, time.time(), msg.xid,
                                        bool(msg.flags & ofproto_v1_3.OFPMPF_REPLY_MORE)))
        self.controller_metrics.handler.labels("flow_stats").observe(time.perf_counter() - started)

    @set_ev_cls(ofp_event.EventOFPEchoReply, MAIN_DISPATCHER)
    @_when_master
    def _echo_reply(self, ev):
        self._apply(self.core.echo_reply(ev.msg.datapath.id, ev.msg.xid, time.time()))

    @set_ev_cls(ofp_event.EventOFPPortStatus, MAIN_DISPATCHER)
    @_when_master
    def _port_status(self, ev):
        m = ev.msg
        self._apply(self.core.port_status(m.datapath.id, m.desc.port_no, m.reason, m.desc.state,
                                         time.time()))

    @set_ev_cls(ofp_event.EventOFPPortStatsReply, MAIN_DISPATCHER)
    @_when_master
    def _port_stats(self, ev):
        started = time.perf_counter()
        entries = [PortStat(st.port_no, st.rx_bytes, st.tx_bytes) for st in ev.msg.body]
        self._apply(self.core.port_stats(ev.msg.datapath.id, entries, time.time()))
        self.controller_metrics.handler.labels("port_stats").observe(time.perf_counter() - started)

    @set_ev_cls(ofp_event.EventOFPErrorMsg, [CONFIG_DISPATCHER, MAIN_DISPATCHER])
    def _error(self, ev):
        """A switch's error saying another controller is master: this one steps down (with a
        peer)."""
        m = ev.msg
        why = SUPERSEDED.get((m.type, m.code))
        if why is not None:          # the framework logs every error at debug level
            self.standby.step_down(f"switch {m.datapath.id:016x}: {why}")

    # ================================================================ loops
    def _monitor_loop(self):
        """Flow statistics in slices (ControllerCore.poll_stats says when the next is due)."""
        delay = self.cfg.controller.monitoring_period_s
        while True:
            hub.sleep(delay)
            if not self.roles.active:
                delay = self.cfg.controller.monitoring_period_s
                continue
            started = time.perf_counter()
            result = self.core.poll_stats(time.time())
            self._apply(result)
            self.controller_metrics.handler.labels("poll_stats").observe(
                time.perf_counter() - started)
            delay = result.next_in_s

    def _connections_loop(self):
        """Data-plane mode: the switches' connection counts, every connection_poll_s (the
        groups follow each complete reply)."""
        period = self.cfg.controller.dataplane.connection_poll_s
        while True:
            hub.sleep(period)
            if self.roles.active:
                self._apply(self.core.poll_connections(time.time()))

    def _discovery_loop(self):
        """LLDP out of every switch port each monitoring period (ControllerCore.discover_links)."""
        while True:
            hub.sleep(self.cfg.controller.monitoring_period_s)
            if self.roles.active:
                self._apply(self.core.discover_links(time.time()))

    def _health_loop(self):
        interval = self.cfg.controller.health.interval_s
        while True:
            if self.roles.active:
                self._apply(self.core.probe_health(time.time()))
            hub.sleep(interval)
            if self.roles.active:
                self._apply(self.core.health_marker(time.time()))

    # ================================================================ REST
    def set_policy(self, policy: str) -> None:
        self._apply(self.core.set_policy(policy, time.time()))

    def set_weights(self, weights: dict) -> None:
        self._apply(self.core.set_weights(weights, time.time()))

    def add_instance(self, name: str) -> None:
        self._apply(self.core.add_instance(name, time.time()))

    def set_draining(self, name: str, draining: bool) -> None:
        self._apply(self.core.set_draining(name, draining, time.time()))

    def remove_instance(self, name: str) -> None:
        self._apply(self.core.remove_instance(name, time.time()))

    def active_flows_of(self) -> dict[str, int]:
        return self.core.active_flows_of()

    def instances_view(self) -> dict:
        return self.core.instances_view()

    def status(self) -> dict:
        return {**self.core.status(), "role": self.role_status()}

    def role_status(self) -> dict:
        return {**self.roles.status(time.time()), "policy": self.policy_core.policy}
