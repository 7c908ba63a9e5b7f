"""Health of instances from data-plane probes and from their services' own answers (plain
Python; the Ryu app sends the probes, the host agents read the services).

An instance turns unhealthy after ``unhealthy_after`` failed probes in a row (a TCP reset,
or no answer within the timeout) and healthy again after ``healthy_after`` answered ones.
A second verdict, from the service itself (``service_result``: its process stopped, or no
answer to a request within the timeout, as its host agent saw it), counts the same way; an
instance is healthy only while both are good. A SYN is answered by the kernel of a
container whose process is frozen or stuck: only the service's own answer tells those
apart.

An instance its service's readings took out is back only when they have all been good for
``readmit_s`` (and ``healthy_after`` of them): a process starved of CPU answers some readings
in time and misses others, and one good reading would put it back into its pool while still
starved. Taken out again within ``FLAP_MEMORY`` holds of being back, its hold doubles (up to
``2 ** MAX_DOUBLINGS`` times), as Envoy's outlier detection lengthens an ejection each time
a host is ejected again.
"""
from __future__ import annotations

from dataclasses import dataclass, field

FLAP_MEMORY = 16       # holds: taken out again sooner after being back is a flap
MAX_DOUBLINGS = 4


@dataclass
class _Verdict:
    """One source's verdict on an instance, from its results in a row."""
    ok: bool = True
    successes: int = 0
    failures: int = 0
    last_result: str = "not judged yet"
    good_since: float | None = None      # the first good result of those in a row

    def count(self, ok: bool, detail: str, unhealthy_after: int, healthy_after: int,
              certain: bool = False, now: float | None = None, hold_s: float = 0.0) -> None:
        """One result; `certain`: a failure that needs no second one; back only when the
        good results in a row have lasted `hold_s` by `now`."""
        self.last_result = detail
        if ok:
            if self.successes == 0:
                self.good_since = now
            self.successes, self.failures = self.successes + 1, 0
            held = now is None or self.good_since is None or now - self.good_since >= hold_s
            if not self.ok and self.successes >= healthy_after and held:
                self.ok = True
        else:
            self.failures, self.successes = self.failures + 1, 0
            if certain:
                self.failures = max(self.failures, unhealthy_after)
            if self.ok and self.failures >= unhealthy_after:
                self.ok = False


@dataclass
class _ServiceVerdict(_Verdict):
    """The service's verdict, whose re-admission is held (the module's docstring)."""
    takeouts: int = 0                    # in a row, each within FLAP_MEMORY holds of the last
    back_at: float | None = None

    def hold_s(self, readmit_s: float) -> float:
        return readmit_s * 2 ** min(max(self.takeouts - 1, 0), MAX_DOUBLINGS)

    def judge(self, ok: bool, detail: str, unhealthy_after: int, healthy_after: int,
              certain: bool, now: float, readmit_s: float) -> None:
        was_ok, hold = self.ok, self.hold_s(readmit_s)
        self.count(ok, detail, unhealthy_after, healthy_after, certain, now, hold)
        if was_ok and not self.ok:
            flapped = self.back_at is not None and now - self.back_at < FLAP_MEMORY * hold
            self.takeouts = self.takeouts + 1 if flapped else 1
        elif self.ok and not was_ok:
            self.back_at = now
            if self.good_since is not None:
                self.last_result = f"answered for {now - self.good_since:.1f} s in a row"


@dataclass
class _State:
    healthy: bool = True          # both verdicts good
    last_change: float | None = None
    probe: _Verdict = field(default_factory=lambda: _Verdict(last_result="not probed yet"))
    service: _ServiceVerdict = field(default_factory=_ServiceVerdict)   # good until judged

    @property
    def last_result(self) -> str:
        return self.probe.last_result

    @last_result.setter
    def last_result(self, text: str) -> None:
        self.probe.last_result = text


@dataclass
class InstanceHealth:
    instances: list[str]
    unhealthy_after: int
    healthy_after: int
    timeout_s: float
    readmit_s: float = 0.0
    state: dict[str, _State] = field(default_factory=dict)
    # token -> (instance, sent)
    outstanding: dict[object, tuple[str, float]] = field(default_factory=dict)

    def __post_init__(self):
        self.state = {i: _State() for i in self.instances}

    def add(self, instance: str, healthy: bool = False) -> None:
        """Probe a new instance too (unhealthy until it answers, unless told otherwise)."""
        self.state[instance] = _State(healthy=healthy, probe=_Verdict(
            ok=healthy, last_result="added, not probed yet"))

    def remove(self, instance: str) -> None:
        self.state.pop(instance, None)
        self.forget({instance})

    def sent(self, token, instance: str, now: float) -> tuple[str, bool] | None:
        """A probe went out. An earlier probe with the same token still unanswered is a
        failure (its answer could no longer be told apart); returns a state change then."""
        earlier = self.outstanding.get(token)
        self.outstanding[token] = (instance, now)
        if earlier is not None:
            return self._result(earlier[0], False, now,
                                "no answer before the next probe")
        return None

    def answered(self, token, ok: bool, now: float, detail: str = "") -> tuple[str, bool] | None:
        """A probe was answered (ok: the service accepted). Returns (instance, healthy) when
        the instance's state changes."""
        entry = self.outstanding.pop(token, None)
        if entry is None:
            return None
        return self._result(entry[0], ok, now, detail or ("answered" if ok else "refused"))

    def record(self, instance: str, ok: bool, now: float, detail: str = ""
               ) -> tuple[str, bool] | None:
        """A result known without a probe token (the caller judged it)."""
        return self._result(instance, ok, now, detail or ("answered" if ok else "refused"))

    def expire(self, now: float, instances=None) -> list[tuple[str, bool]]:
        """Probes older than the timeout at ``now`` count as failures (only those of
        ``instances`` when given)."""
        changes = []
        for token, (inst, sent) in list(self.outstanding.items()):
            if now - sent > self.timeout_s and (instances is None or inst in instances):
                del self.outstanding[token]
                change = self._result(inst, False, now, f"no answer within {self.timeout_s} s")
                if change:
                    changes.append(change)
        return changes

    def forget(self, instances) -> None:
        """Their probes can no longer be answered (their switch went away): neither answer
        nor failure will be counted for them."""
        self.outstanding = {t: v for t, v in self.outstanding.items() if v[0] not in instances}

    def outstanding_for(self, instance: str) -> bool:
        return any(v[0] == instance for v in self.outstanding.values())

    def link_down(self, instance: str, now: float, detail: str = "switch port down"
                  ) -> tuple[str, bool] | None:
        """The instance's switch port went down or away (its container died): unhealthy at
        once, without waiting for probes to fail; healthy again only after
        ``healthy_after`` answered probes, as any unhealthy instance."""
        st = self.state.get(instance)
        if st is None:
            return None
        st.probe.count(False, detail, self.unhealthy_after, self.healthy_after, certain=True)
        return self._combine(instance, st, now)

    def service_result(self, instance: str, ok: bool, now: float, detail: str,
                       certain: bool = False) -> tuple[str, bool] | None:
        """The service's own verdict for one round (its host agent read it): counted as the
        probes are. `certain`: a failure that needs no second look (its process is stopped
        or gone), out at once as with a port down."""
        st = self.state.get(instance)
        if st is None:
            return None
        st.service.judge(ok, detail, self.unhealthy_after, self.healthy_after, certain, now,
                         self.readmit_s)
        return self._combine(instance, st, now)

    def service_unknown(self, instance: str, now: float) -> tuple[str, bool] | None:
        """Nothing is known of the service any more (its host agent fell silent): its
        verdict is good again, and the probes judge alone."""
        st = self.state.get(instance)
        if st is None:
            return None
        st.service = _ServiceVerdict(last_result="no readings of late: the probes judge alone")
        return self._combine(instance, st, now)

    @staticmethod
    def _combine(instance: str, st: _State, now: float) -> tuple[str, bool] | None:
        healthy = st.probe.ok and st.service.ok
        if healthy == st.healthy:
            return None
        st.healthy, st.last_change = healthy, now
        return instance, healthy

    def _result(self, inst: str, ok: bool, now: float, detail: str) -> tuple[str, bool] | None:
        st = self.state.get(inst)
        if st is None:        # removed while a probe was out
            return None
        st.probe.count(ok, detail, self.unhealthy_after, self.healthy_after)
        return self._combine(inst, st, now)

    def status(self) -> dict:
        return {i: {"healthy": s.healthy, "last_result": s.probe.last_result,
                    "consecutive_failures": s.probe.failures, "last_change": s.last_change,
                    "service": {"ok": s.service.ok, "last_result": s.service.last_result,
                                "consecutive_failures": s.service.failures,
                                "readmit_after_s": s.service.hold_s(self.readmit_s)}}
                for i, s in self.state.items()}
