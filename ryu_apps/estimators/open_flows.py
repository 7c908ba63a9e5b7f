"""Flows whose end the controller sees (their FIN, or their rules idling out), counted
exactly (plain Python):

- InstanceFlows: open flows per instance, by start time (least connections; `malb`'s
  short flows at their expected remaining lives);
- OpenFlows: open flows per server and microservice, each with what its server's samples
  measured it to use, and the durations of alike flows that ended (`malb`'s long flows).
"""
from __future__ import annotations

import bisect
import math
from collections import deque

from ryu_apps.estimators.carried_seconds import CarriedSeconds
from ryu_apps.estimators.running_flows import DEFAULT_MAX_AGE_S
from ryu_apps.estimators.survival import Survival

# OpenFlows.shortfall: the ended flows kept per microservice, (cost, duration) each; flows
# measured within SIMILAR_COST of each other are alike (the back-end's two job sizes differ
# by 2.1x); fewer than MIN_ALIKE alike flows that outlived a flow's age say nothing
HISTORY_FLOWS = 200
SIMILAR_COST = 1.25
MIN_ALIKE = 3
# only flows measured at WEIGHTY_PCT of their server or more are looked at one by one: they
# measured what the server used, so at most a few hundred of them run at once, however many
# flows a flood opens (the flood's share a sample's use between them)
WEIGHTY_PCT = 0.5
# InstanceFlows.flow_seconds is exact this far back from an instance's latest change
CARRIED_KEEP_S = 60.0
# ended flows are kept in the order of their ends; a walk back from the newest stops this
# far before the time it looks at, so a clock stepped back by less misses none
END_ORDER_SLACK_S = 5.0


class InstanceFlows:
    """Open flows per instance, counted in buckets of their start time: the short flows
    whose end the controller sees (their FIN, or their rules idling out), for `malb`'s
    least-remaining choice. What an instance still has to send is estimated from its
    flows' ages (Survival.expected_remaining, on the bucket's age to `bucket_s`): summed
    over the buckets within the longest duration seen once per step of `bucket_s`, whatever
    the number of flows (a SYN flood's half-open flows too), and kept up to date within the
    step as flows start and end, so that the decisions of one step (a hundred at 1,000 new
    flows/s) do not each walk the buckets. A flow whose end is never seen stops counting
    once older than any flow seen, and is dropped after `max_age_s`."""

    def __init__(self, bucket_s: float = 0.1, max_age_s: float = DEFAULT_MAX_AGE_S):
        if not bucket_s > 0 or not max_age_s > 0:
            raise ValueError("bucket_s and max_age_s must be > 0")
        self.bucket_s, self.max_age_s = bucket_s, max_age_s
        self._open: dict = {}           # key -> (instance, bucket, start), start order
        self._keys: dict[str, deque] = {}       # instance -> its buckets, ascending
        self._counts: dict[str, dict[int, int]] = {}    # instance -> bucket -> open flows
        self._total: dict[str, int] = {}
        self._carried: dict[str, CarriedSeconds] = {}
        self._latest: dict[str, float] = {}     # instance -> the time of its latest change
        # instance -> [step, survival, its remaining at that step]: remaining()'s sum
        self._sums: dict[str, list] = {}

    def __len__(self) -> int:
        return len(self._open)

    def __contains__(self, key) -> bool:
        return key in self._open

    def add(self, key, instance: str, t: float) -> None:
        """A flow started (a second add of an open key changes nothing)."""
        if key in self._open:
            return
        self.expire(t)
        k = math.floor(t / self.bucket_s)
        keys = self._keys.setdefault(instance, deque())
        counts = self._counts.setdefault(instance, {})
        if keys and keys[-1] >= k:
            k = keys[-1]        # the same bucket (or the clock stepped back: the latest)
        else:
            keys.append(k)
        counts[k] = counts.get(k, 0) + 1
        self._adjust(instance, k, 1)
        t = self._carry(instance, t, +1)
        self._total[instance] = self._total.get(instance, 0) + 1
        self._open[key] = (instance, k, t)

    def end(self, key, t: float | None = None, quiet_since: float | None = None) -> bool:
        """The flow ended (at t: when unsaid, the instance's latest event); False if it was
        not open. `quiet_since`: it was seen to end at t but carried nothing after this
        (its rules idled out): its seconds from then to t are taken back."""
        where = self._open.get(key)
        if where is None:
            return False
        instance, k, start = where
        self._carry(instance, t, -1, None if quiet_since is None else max(quiet_since, start))
        del self._open[key]
        counts = self._counts[instance]
        counts[k] -= 1
        self._adjust(instance, k, -1)
        if not counts[k]:
            del counts[k]
            keys = self._keys[instance]
            while keys and keys[0] not in counts:
                keys.popleft()
        self._total[instance] -= 1
        return True

    def expire(self, now: float) -> int:
        n = 0
        oldest = math.floor((now - self.max_age_s) / self.bucket_s)
        while self._open:
            key, (_instance, k, _start) = next(iter(self._open.items()))
            if k >= oldest:
                break
            self.end(key)
            n += 1
        return n

    def open_count(self, instance: str) -> int:
        return self._total.get(instance, 0)

    def _carry(self, instance: str, t: float | None, delta: int,
               back_to: float | None = None) -> float:
        """The instance's count changes by delta at t (None, or a clock stepped back: at its
        latest change); an end may be dated back to `back_to`. Returns the time used."""
        latest = self._latest.get(instance)
        if t is None or (latest is not None and t < latest):
            t = latest if latest is not None else 0.0
        self._latest[instance] = t
        carried = self._carried.get(instance)
        if carried is None:
            carried = self._carried[instance] = CarriedSeconds(CARRIED_KEEP_S)
        carried.change(t if back_to is None else min(t, back_to), delta)
        return t

    def flow_seconds(self, instance: str, t: float) -> float:
        """Seconds of flow the instance carried from the start up to t (its open flows
        integrated over time), exact for t within the last CARRIED_KEEP_S of its changes;
        a flow that idled out counts up to its last traffic."""
        carried = self._carried.get(instance)
        return 0.0 if carried is None else carried.at(t)

    def instance_of(self, key) -> str | None:
        """The instance an open flow went to (None: not open)."""
        where = self._open.get(key)
        return None if where is None else where[0]

    def remaining(self, instance: str, now: float, survival: Survival | None) -> float:
        """The seconds of flow the instance is expected still to carry: each open flow's
        expected remaining life at its age; without durations, one per open flow (least
        connections)."""
        if survival is None:
            return float(self.open_count(instance))
        if not self._total.get(instance):
            return 0.0
        step = math.floor(now / self.bucket_s + 1e-9)
        kept = self._sums.get(instance)
        if kept is None or kept[0] != step or kept[1] is not survival:
            kept = self._sums[instance] = [step, survival,
                                           self.remaining_summed(instance, step, survival)]
        return kept[2]

    def remaining_summed(self, instance: str, step: int, survival: Survival) -> float:
        """remaining() at `step`, summed over the instance's buckets."""
        counts = self._counts.get(instance, {})
        total = 0.0
        for k in reversed(self._keys.get(instance, ())):
            steps = max(0, step - k)        # from its start
            if steps * self.bucket_s >= survival.longest:
                break
            n = counts.get(k)
            if n:
                total += n * survival.remaining_at_step(steps, self.bucket_s)
        return total

    def _adjust(self, instance: str, k: int, n: int) -> None:
        """n flows more in bucket k: the instance's kept sum follows."""
        kept = self._sums.get(instance)
        if kept is not None:
            steps = max(0, kept[0] - k)
            survival = kept[1]
            if steps * self.bucket_s < survival.longest:
                kept[2] += n * survival.remaining_at_step(steps, self.bucket_s)


def _flow(server: str, ms: str, start: float) -> dict:
    """A watched flow, and what it was measured to use on its server (None: not yet; samples:
    how many samples' worth its figures rest on). A dict of strings and numbers, which the
    garbage collector does not track: at 1,000 flows/s, keep_s of ended ones are 120,000
    flows, and an object of a class (slots or not) is tracked, so every full collection
    walked each of them (docs/controller.md, the least-load tail)."""
    return {"server": server, "ms": ms, "start": start, "end": None, "cpu": None,
            "net": None, "samples": 0.0}


class OpenFlows:
    """Flows whose end the controller sees (long TCP flows: the instance's FIN), counted
    exactly. The flows running on a server at time x are those started by x less those
    ended by x: both are running totals per server and microservice, with the last
    `keep_s` of starts and ends in buckets of `bucket_s`, so a count at a recent time costs
    the buckets after it, whatever the number of flows. A flow that never shows its end is
    dropped (counted as ended) after `max_age_s`.

    Each flow also gets what it uses on its server (`attribute`): when a sample of a server
    splits its use by microservice, the part that the flows measured before do not explain
    goes to the flows that ran through that sample for the first time. A back-end port
    takes jobs of two sizes, and the controller cannot tell them apart at the first packet;
    the first sample a job runs through can. `costs` gives, per
    microservice, the flows running and what those already measured use: now from running
    sums (a decision costs the same at any number of flows), at a recent time by walking
    the server's flows."""

    def __init__(self, bucket_s: float = 0.1, keep_s: float = 120.0,
                 max_age_s: float = DEFAULT_MAX_AGE_S, cores: dict[str, float] | None = None):
        if not bucket_s > 0 or not keep_s > 0 or not max_age_s > 0:
            raise ValueError("bucket_s, keep_s and max_age_s must be > 0")
        self.bucket_s, self.keep_s, self.max_age_s = bucket_s, keep_s, max_age_s
        # server -> its CPU cores: flows are alike by what they use in cores, not in % of
        # servers of different sizes (1 for a server not in it)
        self.cores = {s: c for s, c in (cores or {}).items() if c > 0}
        self._open: dict = {}          # key -> its flow (_flow), start order
        self._totals: dict[tuple[str, str], list[int]] = {}     # (server, ms) -> [starts, ends]
        self._recent: dict[tuple[str, str], deque] = {}         # -> [bucket, starts, ends]
        self._on: dict[str, dict] = {}              # server -> {key: flow}, the open ones
        # server -> its ended flows of the last keep_s, in end order: a sample's walk goes
        # back from the newest, over the flows that ended within it, not over all of them
        self._ended: dict[str, deque] = {}
        # (server, ms) -> [open flows not measured yet, measured ones, their CPU, network]
        self._sums: dict[tuple[str, str], list] = {}
        self._latest = float("-inf")                # the latest start, end or expiry
        # server -> {id(flow): flow}, its open flows measured at WEIGHTY_PCT or more, in
        # order (flows are dicts: not hashable)
        self._weighty: dict[str, dict] = {}
        # ms -> (CPU, duration) of its last ended flows that had been measured
        self._history: dict[str, deque] = {}

    def __len__(self) -> int:
        return len(self._open)

    def __contains__(self, key) -> bool:
        return key in self._open

    def _event(self, server: str, ms: str, t: float, start: int, end: int) -> None:
        self._latest = max(self._latest, t)
        where = (server, ms)
        tot = self._totals.setdefault(where, [0, 0])
        tot[0] += start
        tot[1] += end
        k = math.floor(t / self.bucket_s)
        q = self._recent.setdefault(where, deque())
        if q and q[-1][0] >= k:        # same bucket (or the clock stepped back: the last)
            q[-1][1] += start
            q[-1][2] += end
        else:
            q.append([k, start, end])
        oldest = math.floor((t - self.keep_s) / self.bucket_s)
        while q and q[0][0] < oldest:
            q.popleft()
        for ended in self._ended.values():
            while ended and ended[0]["end"] < t - self.keep_s:
                ended.popleft()

    def _count(self, f: dict, sign: int) -> None:
        acc = self._sums.setdefault((f["server"], f["ms"]), [0, 0, 0.0, 0.0])
        if f["cpu"] is None:
            acc[0] += sign
        else:
            acc[1] += sign
            acc[2] += sign * f["cpu"]
            acc[3] += sign * f["net"]
        if acc[0] == 0 and acc[1] == 0:
            acc[2] = acc[3] = 0.0       # no float residue once the last one ends
        if sign < 0:
            self._weighty.get(f["server"], {}).pop(id(f), None)
        elif f["cpu"] is not None and f["cpu"] >= WEIGHTY_PCT:
            self._weighty.setdefault(f["server"], {})[id(f)] = f

    def add(self, key, server: str, microservice: str, t: float) -> None:
        """A flow started (a second add of an open key changes nothing)."""
        if key in self._open:
            return
        self.expire(t)
        f = self._open[key] = _flow(server, microservice, t)
        self._on.setdefault(server, {})[key] = f
        self._count(f, 1)
        self._event(server, microservice, t, 1, 0)

    def _close(self, key, t: float) -> dict:
        f = self._open.pop(key)
        del self._on[f["server"]][key]
        self._count(f, -1)
        f["end"] = t
        self._ended.setdefault(f["server"], deque()).append(f)
        self._event(f["server"], f["ms"], t, 0, 1)
        return f

    def end(self, key, t: float) -> bool:
        """The flow ended at t; False if it was not open (unknown, or already ended)."""
        if key not in self._open:
            return False
        f = self._close(key, t)
        if f["cpu"] is not None:          # what its cost says about how long such flows run
            self._history.setdefault(f["ms"], deque(maxlen=HISTORY_FLOWS)).append(
                (f["cpu"] * self.cores.get(f["server"], 1.0), t - f["start"]))
        return True

    def expire(self, now: float) -> int:
        n = 0
        while self._open:
            key, f = next(iter(self._open.items()))
            if now - f["start"] <= self.max_age_s:
                break
            self._close(key, now)
            n += 1
        return n

    def running(self, server: str, at: float) -> dict[str, int]:
        """Per microservice, its flows on the server running at `at` (within keep_s of the
        latest event; earlier times count as the oldest kept)."""
        out = {}
        for (srv, ms), (starts, ends) in self._totals.items():
            if srv != server:
                continue
            for k, s, e in reversed(self._recent.get((srv, ms), ())):
                if (k + 0.5) * self.bucket_s <= at:
                    break
                starts, ends = starts - s, ends - e
            if starts - ends > 0:
                out[ms] = starts - ends
        return out

    def _flows_in(self, server: str, t0: float, t1: float):
        """The server's flows that ran between t0 and t1 (open ones, and those ended since
        keep_s)."""
        for f in self._on.get(server, {}).values():
            if f["start"] < t1:
                yield f
        recent = []
        for f in reversed(self._ended.get(server, ())):
            if f["end"] <= t0 - END_ORDER_SLACK_S:
                break
            recent.append(f)
        for f in reversed(recent):          # in end order, as they ended
            if f["start"] < t1 and f["end"] > t0:
                yield f

    def attribute(self, server: str, parts: dict[str, tuple[float, float]], t0: float,
                  t1: float, unmeasured: dict[str, tuple[float, float]] | None = None,
                  whole: float = 0.9) -> None:
        """A sample of the server over [t0, t1]: per microservice, its (CPU, network) there.
        What the flows measured before do not explain goes to the flows not measured yet
        that ran through (`whole` of) the sample, as the same use per flow. Flows that ran
        in part of it count at `unmeasured` (per microservice, the profile's use of a
        flow; 0 without) and wait for the next sample: a sample's window is not exactly
        [t0, t1] (an agent reads its containers after it stamps the time), and a flow
        that ran a quarter of it would be charged that error four times over (on the
        testbed, several times a job's size)."""
        span = t1 - t0
        if not span > 0:
            return
        known: dict[str, list] = {}
        new: dict[str, list] = {}
        for f in self._flows_in(server, t0, t1):
            if f["ms"] not in parts:
                continue
            ran = (min(t1, f["end"] if f["end"] is not None else t1) - max(t0, f["start"])) / span
            if ran <= 0:
                continue
            if f["cpu"] is None:
                new.setdefault(f["ms"], []).append((f, ran))
            else:
                acc = known.setdefault(f["ms"], [0.0, 0.0, []])
                acc[0] += f["cpu"] * ran
                acc[1] += f["net"] * ran
                acc[2].append((f, ran))
        for ms, (cpu, net) in parts.items():
            seen = known.get(ms, [0.0, 0.0, []])
            flows = [(f, ran) for f, ran in new.get(ms, []) if ran >= whole]
            part = sum(ran for f, ran in new.get(ms, []) if ran < whole)
            guess = (unmeasured or {}).get(ms, (0.0, 0.0))
            weight = sum(r for _, r in flows)
            if flows:
                per = (max(0.0, cpu - seen[0] - part * guess[0]) / weight,
                       max(0.0, net - seen[1] - part * guess[1]) / weight)
                for f, ran in flows:
                    self._measure(f, per, ran)
            elif seen[2] and not part:
                # only flows measured before ran: the sample scales them all alike (they
                # share a server whose other load comes and goes); each keeps its mean
                # (all of them at zero: alike)
                ran_all = sum(r for _, r in seen[2])
                for f, ran in seen[2]:
                    self._measure(f, (f["cpu"] * cpu / seen[0] if seen[0] > 0 else cpu / ran_all,
                                      f["net"] * net / seen[1] if seen[1] > 0 else net / ran_all),
                                  ran)

    def _measure(self, f: dict, use: tuple[float, float], weight: float) -> None:
        """One more sample's figures for the flow: its figures are their mean, each sample
        weighted by the part of it the flow ran in."""
        if f["end"] is None:
            self._count(f, -1)
        n = f["samples"] + weight
        if f["cpu"] is None:
            f["cpu"], f["net"] = use
        else:
            f["cpu"] += (use[0] - f["cpu"]) * weight / n
            f["net"] += (use[1] - f["net"]) * weight / n
        f["samples"] = n
        if f["end"] is None:
            self._count(f, 1)

    def costs(self, server: str, at: float) -> dict[str, tuple[int, int, float, float]]:
        """Per microservice, of its flows on the server running at `at`: (how many have no
        measured use yet, how many have, the CPU and network those use). At or after the
        latest start or end, from the running sums; earlier, by walking the flows."""
        if at >= self._latest:
            return {ms: (a[0], a[1], a[2], a[3]) for (srv, ms), a in self._sums.items()
                    if srv == server and (a[0] or a[1])}
        out: dict[str, list] = {}
        for f in self._flows_in(server, at, at):
            if f["start"] <= at and (f["end"] is None or f["end"] > at):
                acc = out.setdefault(f["ms"], [0, 0, 0.0, 0.0])
                if f["cpu"] is None:
                    acc[0] += 1
                else:
                    acc[1] += 1
                    acc[2] += f["cpu"]
                    acc[3] += f["net"]
        return {ms: tuple(a) for ms, a in out.items()}

    def _alike(self, ms: str) -> tuple[list[float], list[float]]:
        """The microservice's ended flows' costs (CPU % x the server's cores), ascending,
        and their durations."""
        pairs = sorted(self._history.get(ms, ()))
        return [c for c, _ in pairs], [d for _, d in pairs]

    def ahead_share(self, ms: str, cost: float, age: float, horizon: float,
                    alike: tuple[list[float], list[float]] | None = None) -> float:
        """The part of the next `horizon` seconds that a flow of `ms`, measured at `cost`
        (CPU % x its server's cores) and running for `age` seconds, is expected still to
        run: over the ended flows of its microservice measured within SIMILAR_COST of it
        that lasted longer than `age`,
        the mean of min(duration - age, horizon), over the horizon. 1 when fewer than
        MIN_ALIKE of them did: nothing says that it ends soon."""
        costs, durations = alike if alike is not None else self._alike(ms)
        lo = bisect.bisect_left(costs, cost / SIMILAR_COST)
        hi = bisect.bisect_right(costs, cost * SIMILAR_COST)
        left = [d - age for d in durations[lo:hi] if d > age]
        if len(left) < MIN_ALIKE or not horizon > 0:
            return 1.0
        return sum(min(x, horizon) for x in left) / len(left) / horizon

    def shortfall(self, server: str, now: float, horizon: float
                  ) -> dict[str, tuple[float, float]]:
        """Per microservice, the (CPU, network) by which the server's measured flows
        running now will bring it less than they use now over the next `horizon` seconds,
        as they end (ahead_share): a job about to end is not the load that a new flow will
        share the server with (the fluid model's oracle-ahead shows what knowing a job's
        remaining work is worth). Only flows measured at WEIGHTY_PCT or
        more: the cost stays bounded under a flood of flows."""
        out: dict[str, list[float]] = {}
        alike: dict[str, tuple] = {}
        for f in self._weighty.get(server, {}).values():
            if f["start"] > now:
                continue
            if f["ms"] not in alike:
                alike[f["ms"]] = self._alike(f["ms"])
            gone = 1.0 - self.ahead_share(f["ms"], f["cpu"] * self.cores.get(server, 1.0),
                                          now - f["start"], horizon, alike[f["ms"]])
            if gone > 0:
                acc = out.setdefault(f["ms"], [0.0, 0.0])
                acc[0] += f["cpu"] * gone
                acc[1] += f["net"] * gone
        return {ms: (c, n) for ms, (c, n) in out.items()}
