"""Agent samples for the profiler's unit tests: CAP (a server's capacity), cfg (a two-server
configuration with profiler settings) and sample (one agent answer of three instances)."""
from common.config import parse_config

CAP = {"cpu_cores": 0.5, "memory_bytes": 200, "network_bytes_per_s": 1000}


def cfg(**profiler):
    return parse_config({"servers": {"count": 2}, "profiler": {"period_s": 3, **profiler}})


def sample(server, t, cpu=(10, 20, 30), mem=(20, 20, 20), net=(0, 0, 100), complete=True):
    names = ("vid", "ui", "be")
    ms = ("video", "ui", "backend")
    containers = [{"name": f"mn.{server}-{a}", "instance": f"{server}-{a}", "microservice": m,
                   "readable": True, "cpu_percent": c, "memory_bytes": mm,
                   "rx_bytes_per_s": n / 2, "tx_bytes_per_s": n / 2}
                  for a, m, c, mm, n in zip(names, ms, cpu, mem, net)]
    return {"server": server, "time": t, "capacity": CAP, "containers": containers,
            "totals": {"cpu_percent": sum(cpu) / 100 / 0.5 * 100, "memory_percent": 30.0,
                       "network_percent": 10.0, "complete": complete,
                       "missing": [] if complete else ["x"]}}
