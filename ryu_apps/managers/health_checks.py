"""HealthChecks: the controller's view of each pooled instance's health. A round of probes
(a TCP SYN from the VIP, else an ARP request), their answers, an echo request to every
switch as the marker that judges the probes still out, an instance's port going down, and
the services' own answers (their host agents' readings, service_reading, each counted
as it comes); the verdicts (ryu_apps/health.py's tracker) go to the policy core and to
every manager as a pools change. Also each switch's channel lag (the marker's round
trip)."""
from __future__ import annotations

from collections.abc import Callable

from ryu_apps import ofwire
from ryu_apps.health import InstanceHealth
from ryu_apps.managers.base import Manager, controller_packet_out
from ryu_apps.core_result import CoreResult

# outside Linux's default ephemeral range (32768-60999): never a client; one masked match
# (tcp_dst 0xF000/0xFC00) sends their answers to the controller past the packet-in meter
PROBE_PORTS = (0xF000, 0xF3FF)
PROBE_MASK = 0xFC00
# rounds without a reading of a service after which its verdict is forgotten
SERVICE_SILENT_ROUNDS = 5


class HealthChecks(Manager):
    def __init__(self, cfg, plan, xid, policy_core, health: InstanceHealth, path,
                 switches: set[int], rng, pools_changed: Callable[[float, CoreResult], object],
                 edge_ports: Callable[[int], set[int] | None] = lambda dpid: None):
        self.cfg, self.plan, self.xid, self.policy_core = cfg, plan, xid, policy_core
        self.health, self.path, self.switches, self.rng = health, path, switches, rng
        self.pools_changed_everywhere = pools_changed
        self.edge_ports = edge_ports   # a switch's ports towards hosts (None: not known yet)
        # the echo requests out (dpid, xid) -> when sent; per switch, the last echo's round
        # trip (how far the switch's messages queue behind ours)
        self.markers: dict[tuple[int, int], float] = {}
        self.channel_lag: dict[int, float] = {}
        self.next_probe_port = PROBE_PORTS[0]
        # instance -> [when its service last answered, when a reading last failed, why]
        self.service_seen: dict[str, list] = {}

    def switch_down(self, dpid: int, now: float) -> None:
        self.channel_lag.pop(dpid, None)
        self.markers = {k: v for k, v in self.markers.items() if k[0] != dpid}
        self.health.forget(self.plan.instances_on(dpid))

    def _judged_by(self, dpid: int) -> set[str]:
        """The instances whose probes a switch's marker judges: those on it, and those not
        located yet (probed out of every switch)."""
        return self.plan.instances_on(dpid) | set(self.plan.locations.unlocated())

    @staticmethod
    def is_probe_answer(f, instance_ips) -> bool:
        """A TCP segment from an instance to one of the probes' ports (packet_in asks)."""
        return (f.ip_proto == ofwire.IPPROTO_TCP and f.ip_src in instance_ips
                and PROBE_PORTS[0] <= f.dst_port <= PROBE_PORTS[1])

    def probe_health(self, now: float) -> CoreResult:
        """One round of probes (the health loop's first step): a TCP SYN from the VIP to
        every pooled instance of a TCP service, else an ARP request. An instance whose last
        probe is still out gets none: that one waits for health_marker's verdict."""
        out = CoreResult()
        h = self.cfg.controller.health
        vip_mac = self.cfg.controller.vip_mac
        self._forget_silent_services(out, now)
        for inst in [self.plan.instances[b.name] for pool in self.policy_core.pools.values()
                     for b in pool]:
            at = self.plan.locations.where(inst.name)
            if (at is not None and at[0] not in self.switches) or not self.switches or \
                    self.health.outstanding_for(inst.name):
                continue
            ms = self.cfg.microservice(inst.microservice)
            if h.method == "tcp" and ms.protocol == "tcp":
                port = self.next_probe_port
                token: tuple = ("tcp", inst.ip, port)
                frame = ofwire.tcp_frame(inst.mac, vip_mac, ms.vip, inst.ip, port, ms.port,
                                         self.rng.getrandbits(32), flags=ofwire.TCP_SYN,
                                         window=1024)
                self.next_probe_port = PROBE_PORTS[0] + (port + 1 - PROBE_PORTS[0]) % \
                    (PROBE_PORTS[1] - PROBE_PORTS[0] + 1)
            else:
                token = ("arp", inst.ip)
                frame = ofwire.arp_frame(ofwire.ARP_REQUEST, vip_mac, ms.vip,
                                         "00:00:00:00:00:00", inst.ip,
                                         eth_dst="ff:ff:ff:ff:ff:ff")
            if at is not None:
                out.sends.append((at[0], controller_packet_out(self.xid(at[0]), frame, at[1])))
            else:
                out.sends += self._everywhere(frame)
            change = self.health.sent(token, inst.name, now)
            if change:
                self._apply(out, *change, now)
        return out

    def service_reading(self, out: CoreResult, instance: str, alive: bool | None, detail: str,
                        now: float, certain: bool = False) -> None:
        """A host agent's reading of the instance's service, counted at once: it answered
        (alive), did not (not alive: `unhealthy_after` such readings in a row take it out,
        about one health interval apart at two readings per interval), or nothing can be
        told (None). `certain`: its process is stopped or gone, out at once."""
        if alive is None or instance not in self.health.state or \
                not self.cfg.controller.health.service:
            return
        seen = self.service_seen.setdefault(instance, [None, None, ""])
        if alive:
            seen[0] = now
        else:
            seen[1], seen[2] = now, detail
        change = self.health.service_result(instance, alive, now,
                                            "answered" if alive else detail, certain)
        if change:
            self._apply(out, *change, now)

    def _forget_silent_services(self, out: CoreResult, now: float) -> None:
        """A service with no reading for SERVICE_SILENT_ROUNDS health intervals (its agent
        is down, or no longer asked): the probes judge alone, rather than its last word
        keeping it out."""
        silent_after = SERVICE_SILENT_ROUNDS * self.cfg.controller.health.interval_s
        for instance, (alive, failed, _) in list(self.service_seen.items()):
            if now - max(alive or -1e18, failed or -1e18) > silent_after:
                del self.service_seen[instance]
                change = self.health.service_unknown(instance, now)
                if change:
                    self._apply(out, *change, now)

    def _everywhere(self, frame: bytes) -> list[tuple[int, bytes]]:
        """An instance not located yet: its probe out of every switch's edge ports (before a
        switch's ports are known, flooded: links may carry a copy to another switch, which
        its answer does not mind)."""
        sends = []
        for dpid in sorted(self.switches):
            ports = self.edge_ports(dpid)
            actions = ofwire.action_output(ofwire.OFPP_FLOOD) if ports is None else \
                b"".join(ofwire.action_output(p) for p in sorted(ports))
            if actions:
                sends.append((dpid, ofwire.packet_out(self.xid(dpid), ofwire.OFPP_CONTROLLER,
                                                      actions, frame)))
        return sends

    def health_marker(self, now: float) -> CoreResult:
        """The health loop's second step: an echo request to every switch. Probes are judged
        when its reply comes back (echo_reply), not by the controller's clock alone: the
        reply queues behind every packet-in the switch sent before it, probe answers among
        them, so a controller that falls behind a flood of packet-ins does not count the
        answers still waiting in its queue as missing. A switch whose last marker is still
        out gets none (at most one per switch is kept)."""
        out = CoreResult()
        waiting = {dpid for dpid, _ in self.markers}
        for dpid in sorted(self.switches - waiting):
            xid = self.xid(dpid)
            self.markers[(dpid, xid)] = now
            out.sends.append((dpid, ofwire.echo_request(xid, b"malb-health")))
        return out

    def echo_reply(self, dpid: int, xid: int, now: float) -> CoreResult:
        """A health marker came back: the probes on this switch that were out longer than
        the timeout when it was sent, and are still unanswered, are failures."""
        out = CoreResult()
        sent = self.markers.pop((dpid, xid), None)
        if sent is None:          # not ours (Ryu's keep-alive) or its switch went away
            return out
        self.channel_lag[dpid] = now - sent
        out.metrics.append(("set", "malb_switch_channel_lag_seconds", (f"{dpid:016x}",),
                            now - sent))
        for change in self.health.expire(sent, self._judged_by(dpid)):
            self._apply(out, *change, now)
        return out

    def port_status(self, dpid: int, port_no: int, reason: int, state: int,
                    now: float) -> CoreResult:
        """An instance's port deleted or its link down (the container died): out of its pool
        at once, not two or three probe intervals later; the probes bring it back."""
        out = CoreResult()
        gone = reason == ofwire.OFPPR_DELETE or bool(state & ofwire.OFPPS_LINK_DOWN)
        owner = self.plan.port_owner(dpid, port_no)
        if not gone or owner is None or owner.name not in self.health.state:
            return out
        detail = "switch port deleted" if reason == ofwire.OFPPR_DELETE else "switch link down"
        change = self.health.link_down(owner.name, now, detail)
        if change:
            self._apply(out, *change, now)
        return out

    def health_result(self, instance: str, ok: bool, detail: str, now: float) -> CoreResult:
        """A probe's result known by other means than a probe answer."""
        out = CoreResult()
        change = self.health.record(instance, ok, now, detail)
        if change:
            self._apply(out, *change, now)
        return out

    def tcp_probe_answer(self, out: CoreResult, dpid: int, in_port: int, f, now: float) -> None:
        ok = bool(f.tcp_flags & ofwire.TCP_SYN) and bool(f.tcp_flags & ofwire.TCP_ACK)
        refused = bool(f.tcp_flags & ofwire.TCP_RST)
        if ok:   # close the half-open connection
            out.sends.append((dpid, self.path.tcp_reset(dpid, in_port, f)))
        if ok or refused:
            self.answered(out, ("tcp", f.ip_src, f.dst_port), ok,
                          "TCP SYN-ACK" if ok else "TCP reset (port closed)", now)

    def answered(self, out: CoreResult, token, ok: bool, detail: str, now: float) -> None:
        change = self.health.answered(token, ok, now, detail)
        if change:
            self._apply(out, *change, now)

    def _apply(self, out: CoreResult, instance: str, healthy: bool, now: float) -> None:
        self.policy_core.set_health(instance, healthy)
        if not healthy and self.plan.locations.forget(instance):
            # a learned location is not trusted any more: probed everywhere until it answers
            out.infos.append(f"instance {instance}: its location is looked for again")
        out.metrics.append(("set", "malb_instance_healthy", (instance,), 1 if healthy else 0))
        st = self.health.state[instance]
        if healthy:      # both verdicts good: each said, the one that changed last may be either
            why = f"{st.probe.last_result}; its service: {st.service.last_result}"
        else:
            why = st.probe.last_result if not st.probe.ok else \
                "its service: " + st.service.last_result
        text = "instance %s is %s (%s)" % (instance,
                                           "healthy again" if healthy else "DOWN: no new flows",
                                           why)
        (out.infos if healthy else out.warnings).append(text)
        self.pools_changed_everywhere(now, out)
