"""Connectivity check: a client reaches every instance container by ping and by a real
TCP transfer (an HTTP download from the instance's service)."""
from __future__ import annotations

import re
from dataclasses import dataclass

TRANSFER_BYTES = 1_000_000


@dataclass
class Reach:
    instance: str
    ip: str
    ping_ok: bool
    rtt_ms: float | None
    tcp_ok: bool
    tcp_bytes: int
    tcp_mbit_s: float | None
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.ping_ok and self.tcp_ok


def check_reach(client, ip: str, port: int, instance: str,
                nbytes: int = TRANSFER_BYTES, ping_count: int = 2) -> Reach:
    out = client.cmd(f"ping -c {ping_count} -W 2 -i 0.2 {ip}")
    m = re.search(r"= [\d.]+/([\d.]+)/", out)
    ping_ok = f"{ping_count} received" in out or bool(m)
    rtt = float(m.group(1)) if m else None
    out = client.cmd(f"curl -s -o /dev/null --max-time 20 -w '%{{http_code}} %{{size_download}} "
                     f"%{{time_total}}' http://{ip}:{port}/bytes?n={nbytes}").strip()
    parts = out.split()
    tcp_ok, got, rate, error = False, 0, None, ""
    if len(parts) == 3 and parts[0] == "200":
        got = int(float(parts[1]))
        seconds = float(parts[2])
        tcp_ok = got == nbytes
        rate = got * 8 / seconds / 1e6 if seconds > 0 else None
        if not tcp_ok:
            error = f"received {got} of {nbytes} bytes"
    else:
        error = f"HTTP transfer failed: {out!r}"
    if not ping_ok:
        error = (error + "; " if error else "") + "no ping reply"
    return Reach(instance, ip, ping_ok, rtt, tcp_ok, got, rate, error)


def check_testbed(testbed, client_name: str | None = None) -> list[Reach]:
    cfg = testbed.cfg
    client = testbed.node(client_name or cfg.testbed.clients[0].name)
    return [check_reach(client, inst.ip, cfg.microservice(inst.microservice).port, inst.name)
            for inst in cfg.instances]


def format_reach(results: list[Reach]) -> str:
    lines = [f"{'instance':<12} {'ip':<12} {'ping':>5} {'rtt ms':>7} {'tcp':>4} {'Mbit/s':>8}"]
    for r in results:
        lines.append(f"{r.instance:<12} {r.ip:<12} {'ok' if r.ping_ok else 'FAIL':>5} "
                     f"{(f'{r.rtt_ms:.2f}' if r.rtt_ms is not None else '-'):>7} "
                     f"{'ok' if r.tcp_ok else 'FAIL':>4} "
                     f"{(f'{r.tcp_mbit_s:.1f}' if r.tcp_mbit_s else '-'):>8}"
                     + (f"  {r.error}" if r.error else ""))
    return "\n".join(lines)
