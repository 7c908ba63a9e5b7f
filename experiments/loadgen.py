"""Open-loop HTTP workload for the MALB services, run on a client host.

    python experiments/loadgen.py --spec spec.json --client 0 --clients 2 --out requests.csv

The spec (JSON, written by the experiment) lists request classes and the rate profile:

    {"seed": 1, "phases": [{"name": "increasing", "seconds": 60, "from": 0.2, "to": 1.0},
                           {"name": "stable", "seconds": 60, "from": 1.0, "to": 1.0},
                           {"name": "decreasing", "seconds": 60, "from": 1.0, "to": 0.2}],
     "classes": [{"name": "ui-light", "host": "10.0.0.100", "port": 8002, "weight": 0.3,
                  "path": "/object?size=1000000"}, ...],
     "arrivals": "poisson"}

Rates are requests per second for all clients together; each request class gets its
``weight`` share of them. Client k of n takes every n-th arrival, so together the clients
follow the profile exactly.

A class may draw part of its path per request: placeholders in the path, each with a
``draw`` of that name (heavy-tailed job lengths, experiments/scenarios.py):

    {"name": "backend-heavy", ..., "path": "/job?seconds={seconds}&cpu=0.08&mode=work",
     "draw": {"seconds": {"dist": "bounded-pareto", "alpha": 1.1, "low": 12.3, "high": 120}}}

Every client draws for every request of the schedule from the spec's seed, on a random
stream of its own, so all clients (and experiments/lb_model.py, which plays `schedule` too)
see the same values, and a spec without draws plays exactly the requests it always did.
The spec may also carry ``antagonists`` (CPU antagonists the experiment starts and stops;
experiments/antagonist.py): checked here, played by the experiment, not by the clients.

Open loop: every request has an intended start time fixed in advance by the schedule, and
is sent at that time whether or not earlier ones have finished (asynchronously); response
time is measured from the *intended* start, so a slow server cannot hide its delay by
slowing the arrivals down (no coordinated omission). Every request is recorded: class,
phase, intended start, actual start, connection made (the TCP handshake done), first byte,
end, bytes, HTTP status, the instance that served it (X-Served-By), and the error if any.
For streams the throughput in kB/s is bytes over (end - first byte).

Standard library only: it runs in a Mininet host's namespace with any Python 3.9+.
"""
from __future__ import annotations

import argparse
import asyncio
import csv
import json
import math
import random
import re
import sys
import time

FIELDS = ["seq", "client", "class", "phase", "intended", "started", "connected", "first_byte",
          "ended",
          "latency_s", "bytes", "status", "served_by", "throughput_kB_s", "error"]


def arrival_times(phases: list[dict], arrivals: str, seed: int) -> list[tuple[float, str]]:
    """(time offset, phase name) of every arrival, for the whole profile (all clients).

    The rate ramps linearly within each phase. 'uniform' places arrival k where the
    cumulative expected count reaches k + 1/2; 'poisson' draws a non-homogeneous Poisson
    process by thinning, with the given seed."""
    out = []
    start = 0.0
    rng = random.Random(seed)
    for ph in phases:
        T, r0, r1 = float(ph["seconds"]), float(ph["from"]), float(ph["to"])
        if T <= 0 or r0 < 0 or r1 < 0:
            raise ValueError(f"phase {ph.get('name')}: seconds > 0 and rates >= 0 required")
        if arrivals == "uniform":
            # cumulative count N(t) = r0 t + (r1 - r0) t^2 / (2T); solve N(t) = k + 1/2
            total = (r0 + r1) * T / 2
            k = 0
            while k + 0.5 <= total + 1e-9:
                target = k + 0.5
                a = (r1 - r0) / (2 * T)
                if abs(a) < 1e-12:
                    t = target / r0
                else:
                    t = (-r0 + math.sqrt(r0 * r0 + 4 * a * target)) / (2 * a)
                out.append((start + t, ph["name"]))
                k += 1
        elif arrivals == "poisson":
            peak = max(r0, r1)
            t = 0.0
            while peak > 0:
                t += rng.expovariate(peak)
                if t >= T:
                    break
                if rng.random() <= (r0 + (r1 - r0) * t / T) / peak:
                    out.append((start + t, ph["name"]))
        else:
            raise ValueError(f"arrivals: 'uniform' or 'poisson', got {arrivals!r}")
        start += T
    return out


PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)\}")
DISTRIBUTIONS = ("bounded-pareto",)


def bounded_pareto(u: float, alpha: float, low: float, high: float) -> float:
    """The bounded Pareto value at quantile u in [0, 1) (inverse of its CDF)."""
    return low / (1.0 - u * (1.0 - (low / high) ** alpha)) ** (1.0 / alpha)


def draw_value(draw: dict, rng: random.Random) -> float:
    """One value of a draw, from rng.random() alone (its sequence is the same on every
    Python), rounded to a millisecond so the path and the model read the same number."""
    return round(bounded_pareto(rng.random(), float(draw["alpha"]), float(draw["low"]),
                                float(draw["high"])), 3)


def _decimal(x: float) -> str:
    """12.5 -> '12.5', 120.0 -> '120': exact to the millisecond the value was rounded to."""
    return f"{x:.3f}".rstrip("0").rstrip(".")


def resolve_draws(cls: dict, rng: random.Random) -> dict:
    """The class with its placeholders filled by fresh draws (the values in "drawn")."""
    drawn = {name: draw_value(d, rng) for name, d in sorted(cls["draw"].items())}
    path = PLACEHOLDER.sub(lambda m: _decimal(drawn[m.group(1)]), cls["path"])
    return {**{k: v for k, v in cls.items() if k != "draw"}, "path": path, "drawn": drawn}


def schedule(spec: dict, client: int, clients: int) -> list[dict]:
    """This client's requests: intended offset, phase and class, in time order. A class
    with draws comes as a copy with its path filled for that request."""
    times = arrival_times(spec["phases"], spec.get("arrivals", "poisson"), spec.get("seed", 1))
    classes = spec["classes"]
    weights = [float(c["weight"]) for c in classes]
    if not classes or sum(weights) <= 0:
        raise ValueError("classes: at least one class with a positive weight")
    rng = random.Random(spec.get("seed", 1) * 7919 + 1)
    # the draws' own stream: the arrivals and the mix stay those of the same spec without
    draws = random.Random(spec.get("seed", 1) * 7919 + 2)
    plan = []
    for seq, (t, phase) in enumerate(times):
        cls = rng.choices(classes, weights)[0]   # same draw on every client: same mix
        if "draw" in cls:
            cls = resolve_draws(cls, draws)      # every client draws every request
        if seq % clients == client:
            plan.append({"seq": seq, "offset": t, "phase": phase, "class": cls})
    return plan


async def one_request(req: dict, t0: float, client: int, timeout: float, record) -> None:
    cls = req["class"]
    intended = t0 + req["offset"]
    delay = intended - time.time()
    if delay > 0:
        await asyncio.sleep(delay)
    row = {"seq": req["seq"], "client": client, "class": cls["name"], "phase": req["phase"],
           "intended": round(intended, 6), "started": round(time.time(), 6),
           "connected": "", "first_byte": "", "ended": "", "latency_s": "", "bytes": 0,
           "status": "",
           "served_by": "", "throughput_kB_s": "", "error": ""}
    writer = None
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(cls["host"], int(cls["port"])), timeout)
        # the handshake done: through the switch (and the controller, for a new flow) and
        # the server's kernel, before the service reads anything
        row["connected"] = round(time.time(), 6)
        writer.write(f"GET {cls['path']} HTTP/1.1\r\nHost: {cls['host']}\r\n"
                     f"Connection: close\r\n\r\n".encode())
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), timeout)
        row["first_byte"] = round(time.time(), 6)
        parts = status_line.decode(errors="replace").split()
        row["status"] = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        while True:
            line = await asyncio.wait_for(reader.readline(), timeout)
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode(errors="replace").partition(":")
            if name.strip().lower() == "x-served-by":
                row["served_by"] = value.strip()
        total = 0
        while True:
            chunk = await asyncio.wait_for(reader.read(65536), timeout)
            if not chunk:
                break
            total += len(chunk)
        row["bytes"] = total
    except TimeoutError:
        row["error"] = f"timeout after {timeout} s without data"
    except OSError as exc:
        row["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        if writer is not None:
            writer.close()
    end = time.time()
    row["ended"] = round(end, 6)
    row["latency_s"] = round(end - intended, 6)
    if row["first_byte"] and row["bytes"] and end > row["first_byte"]:
        row["throughput_kB_s"] = round(row["bytes"] / 1000 / (end - row["first_byte"]), 3)
    if not row["error"] and row["status"] != 200:
        row["error"] = f"HTTP {row['status']}"
    record(row)


async def run(spec: dict, client: int, clients: int, out, start_at: float, timeout: float,
              progress_every: float) -> dict:
    plan = schedule(spec, client, clients)
    writer = csv.DictWriter(out, fieldnames=FIELDS)
    writer.writeheader()
    done = {"ok": 0, "failed": 0}

    def record(row):
        writer.writerow(row)
        out.flush()   # the experiment counts finished requests for its progress lines
        done["ok" if not row["error"] else "failed"] += 1

    t0 = start_at if start_at > 0 else time.time() + 0.5
    total_s = sum(float(p["seconds"]) for p in spec["phases"])

    async def progress():
        while True:
            await asyncio.sleep(progress_every)
            elapsed = time.time() - t0
            print(f"[loadgen {client}] {elapsed:5.0f}/{total_s:.0f} s: {done['ok']} ok, "
                  f"{done['failed']} failed of {len(plan)}", file=sys.stderr, flush=True)

    ticker = asyncio.ensure_future(progress()) if progress_every > 0 else None
    await asyncio.gather(*(one_request(r, t0, client, timeout, record) for r in plan))
    if ticker:
        ticker.cancel()
    out.flush()
    return {"client": client, "planned": len(plan), **done}


def _finite(value, where: str, lo: float = 0.0, lo_open: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or (value <= lo if lo_open else value < lo):
        raise ValueError(f"{where}: expected a finite number {'>' if lo_open else '>='} "
                         f"{lo:g}, got {str(value)[:40]!r}")
    return float(value)


def validate_spec(spec) -> None:
    """Check a workload spec completely (ValueError naming the field) before any request."""
    if not isinstance(spec, dict):
        raise ValueError("spec: expected a JSON object with phases and classes")
    unknown = set(spec) - {"seed", "arrivals", "phases", "classes", "antagonists"}
    if unknown:
        raise ValueError(f"{sorted(unknown)[0]}: unknown field")
    if spec.get("arrivals", "poisson") not in ("poisson", "uniform"):
        raise ValueError(f"arrivals: 'uniform' or 'poisson', got {spec['arrivals']!r}")
    if not isinstance(spec.get("seed", 1), int):
        raise ValueError(f"seed: expected an integer, got {spec['seed']!r}")
    phases, classes = spec.get("phases"), spec.get("classes")
    if not isinstance(phases, list) or not phases:
        raise ValueError("phases: expected a non-empty list")
    for k, ph in enumerate(phases):
        if not isinstance(ph, dict) or not isinstance(ph.get("name"), str):
            raise ValueError(f"phases[{k}]: expected an object with a name")
        _finite(ph.get("seconds"), f"phases[{k}].seconds", lo_open=True)
        for key in ("from", "to"):
            _finite(ph.get(key), f"phases[{k}].{key}")
    if not isinstance(classes, list) or not classes:
        raise ValueError("classes: expected a non-empty list")
    for k, c in enumerate(classes):
        if not isinstance(c, dict):
            raise ValueError(f"classes[{k}]: expected an object")
        for key in ("name", "host", "path"):
            if not isinstance(c.get(key), str) or not c[key]:
                raise ValueError(f"classes[{k}].{key}: expected a non-empty string")
        if not c["path"].startswith("/") or any(ch in c["path"] for ch in "\r\n "):
            raise ValueError(f"classes[{k}].path: expected an absolute path without spaces")
        port = c.get("port")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
            raise ValueError(f"classes[{k}].port: expected a port number, got {port!r}")
        _finite(c.get("weight"), f"classes[{k}].weight")
        _validate_draws(c, f"classes[{k}]")
    if sum(float(c["weight"]) for c in classes) <= 0:
        raise ValueError("classes: at least one class with a positive weight")
    _validate_antagonists(spec.get("antagonists", []))


def _validate_draws(c: dict, where: str) -> None:
    """Every placeholder of the path has a draw of its name and every draw a placeholder;
    each draw a distribution this generator knows, with sound parameters."""
    unknown = set(c) - {"name", "host", "port", "path", "weight", "draw"}
    if unknown:
        raise ValueError(f"{where}.{sorted(unknown)[0]}: unknown field")
    draws = c.get("draw", {})
    if not isinstance(draws, dict) or ("draw" in c and not draws):
        raise ValueError(f"{where}.draw: expected an object of named draws")
    names = PLACEHOLDER.findall(c["path"])
    if set(names) != set(draws) or len(names) != len(set(names)):
        raise ValueError(f"{where}.draw: the path's placeholders ({', '.join(names) or 'none'})"
                         f" and the draws ({', '.join(sorted(draws)) or 'none'}) must match, "
                         f"each once")
    if "{" in PLACEHOLDER.sub("", c["path"]) or "}" in PLACEHOLDER.sub("", c["path"]):
        raise ValueError(f"{where}.path: a brace outside a {{name}} placeholder")
    for name, d in draws.items():
        at = f"{where}.draw.{name}"
        if not isinstance(d, dict) or d.get("dist") not in DISTRIBUTIONS:
            raise ValueError(f"{at}.dist: expected one of {', '.join(DISTRIBUTIONS)}")
        if set(d) != {"dist", "alpha", "low", "high"}:
            raise ValueError(f"{at}: a bounded-pareto draw has exactly alpha, low and high")
        _finite(d["alpha"], f"{at}.alpha", lo_open=True)
        low = _finite(d["low"], f"{at}.low", lo_open=True)
        if _finite(d["high"], f"{at}.high", lo_open=True) <= low:
            raise ValueError(f"{at}.high: must be above low ({low:g})")


def _validate_antagonists(items) -> None:
    if not isinstance(items, list):
        raise ValueError("antagonists: expected a list")
    for k, a in enumerate(items):
        where = f"antagonists[{k}]"
        if not isinstance(a, dict):
            raise ValueError(f"{where}: expected an object")
        unknown = set(a) - {"name", "server", "where", "container", "microservice",
                            "start_s", "stop_s", "cores"}
        if unknown:
            raise ValueError(f"{where}.{sorted(unknown)[0]}: unknown field")
        for key in ("name", "server"):
            if not isinstance(a.get(key), str) or not a[key]:
                raise ValueError(f"{where}.{key}: expected a non-empty string")
        if a.get("where") not in ("container", "beside"):
            raise ValueError(f"{where}.where: 'container' or 'beside', got {a.get('where')!r}")
        inside = a["where"] == "container"
        for key in ("container", "microservice"):
            if inside and (not isinstance(a.get(key), str) or not a[key]):
                raise ValueError(f"{where}.{key}: expected a non-empty string (where: "
                                 f"container)")
            if not inside and key in a:
                raise ValueError(f"{where}.{key}: only for where: container")
        start = _finite(a.get("start_s"), f"{where}.start_s")
        if _finite(a.get("stop_s"), f"{where}.stop_s") <= start:
            raise ValueError(f"{where}.stop_s: must be after start_s ({start:g})")
        if _finite(a.get("cores"), f"{where}.cores", lo_open=True) > 1:
            raise ValueError(f"{where}.cores: one thread, at most 1 core")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--spec", required=True)
    p.add_argument("--client", type=int, default=0)
    p.add_argument("--clients", type=int, default=1)
    p.add_argument("--out", required=True)
    p.add_argument("--start-at", type=float, default=0.0, help="common start (epoch seconds)")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds without any data before a request fails")
    p.add_argument("--progress", type=float, default=10.0)
    args = p.parse_args(argv)
    if args.clients < 1 or not 0 <= args.client < args.clients:
        p.error("--client must be in [0, --clients) and --clients at least 1")
    for flag, value, lo_open in (("--start-at", args.start_at, False),
                                 ("--timeout", args.timeout, True),
                                 ("--progress", args.progress, False)):
        try:
            _finite(value, flag, lo_open=lo_open)
        except ValueError as exc:
            p.error(str(exc))
    try:
        with open(args.spec) as fh:
            spec = json.load(fh)
        validate_spec(spec)
    except OSError as exc:
        p.error(f"--spec {args.spec}: {exc.strerror}")
    except ValueError as exc:     # JSON errors too
        p.error(f"--spec {args.spec}: {exc}")
    with open(args.out, "w", newline="") as out:
        summary = asyncio.run(run(spec, args.client, args.clients, out, args.start_at,
                                  args.timeout, args.progress))
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
