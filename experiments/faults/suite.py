"""The suite's course (FaultSuite): before each fault the stack steady; a segment of load; the
fault (experiments/faults/injection.py) injected a few seconds into it; its checks awaited;
the profiler's history compared before and after; the rest of the load finished. And the
load of a segment (workload_spec).
"""
from __future__ import annotations

import json
import os
import time

from experiments.faults.analysis import rows_lost
from experiments.faults.injection import Faults
from experiments.faults.probing import await_checks, log_lines_since, short, snapshot

VIDEO_SECONDS = 15               # a video stream of the workload lasts this long
REQUEST_TIMEOUT_S = 10           # a request fails after this long without data
LEAD_S = 10                      # load before the fault (at most a quarter of --seconds)


class FaultSuite:
    """The faults, run one after another on a running stack under load."""

    def __init__(self, st, opts, log):
        self.stack, self.opts, self.log = st, opts, log
        self.cfg = st.cfg
        self.faults = Faults(st, opts, log)
        self.probe, self.recorder = self.faults.probe, self.faults.recorder
        # the stack's sampling period: the report's unit of recovery time
        self.period = max(self.cfg.controller.monitoring_period_s, self.cfg.profiler.period_s)

    # ------------------------------------------------------------ the steady state
    def steady_checks(self) -> list:
        p = self.probe
        return [("controller answers", p.controller_up), ("switches connected", p.switches),
                ("controller reaches the profiler", p.controller_profiler),
                ("profiler fresh", p.profiler_fresh), ("agents answer", p.agents)]

    # ------------------------------------------------------------ one fault under load
    def run_fault(self, k: int, fault: str) -> dict:
        o, st = self.opts, self.stack
        rec = {"fault": fault, "what": self.faults.what(fault), "tag": f"{k + 1}-{fault}",
               "error": None, "start": None, "end": None, "recovered_at": None}
        spec_path = os.path.join(st.run_dir, f"spec-{rec['tag']}.json")
        with open(spec_path, "w") as fh:
            json.dump(workload_spec(self.cfg, o, o.seed + k, fault), fh, indent=1)
        lead = min(LEAD_S, o.seconds / 4)
        seg0 = time.time() + 2
        rec["segment_start"] = seg0
        st.start_loadgen(spec_path, seg0, tag=rec["tag"], timeout_s=REQUEST_TIMEOUT_S)
        time.sleep(max(0.0, seg0 + lead - time.time()))
        before = snapshot(st.history_path, time.time(), self.log)
        injected = None
        try:
            injected = getattr(self.faults, f"fault_{fault}")()
        except Exception as exc:        # noqa: BLE001 -- recorded; the next fault still runs
            rec["error"] = short(exc)
            self.log(f"[faults] {fault}: NOT INJECTED: {rec['error']}")
        if injected is not None:
            rec.update(start=injected["start"], end=injected["end"],
                       details=injected.get("details", {}))
            rec["start_offset_s"] = round(injected["start"] - seg0, 2)
            got = await_checks(injected["checks"], injected["end"], o.recovery_timeout)
            rec.update(recovered_at=got["recovered_at"], milestones=got["milestones"],
                       last_failure=got["last_failure"],
                       window_end=injected["end"] + o.recovery_timeout)
            base = injected.get("history_before") or before
            after = None if base is None else snapshot(st.history_path, base["until"],
                                                        self.log)
            if base is not None and after is not None:
                # the same cut-off: rows with t up to it, before and after the fault
                rec["rows_lost"] = rows_lost(base, after)
                rec["history_rows_checked"] = sum(base["counts"].values()) + \
                    len(base["flow_ids"])
            else:
                rec["rows_lost"] = None
            if fault == "switch":
                rec["details"]["nat_restored"] = log_lines_since(
                    st.controller.log_path, rec["details"].pop("controller_log_offset"),
                    "NAT flows restored")
            lost = rec["rows_lost"]["total"] if rec["rows_lost"] else "not measured"
            if got["recovered_at"] is None:
                self.log(f"[faults] {fault}: NOT recovered within {o.recovery_timeout:g} s "
                         f"({got['last_failure']})")
            else:
                steps = ", ".join(f"{n} {s:g} s" for n, s in got["milestones"].items())
                self.log(f"[faults] {fault}: recovered {got['recovery_s']:.1f} s after the "
                         f"fault ended ({steps}); history rows lost: {lost}")
        rec["dead"] = dict(self.faults.dead)
        # the rest of the segment's load, then every request of it finished
        try:
            self._finish_segment(rec, seg0, fault)
        finally:
            if injected is not None and injected.get("after"):
                injected["after"]()
        return rec

    def _finish_segment(self, rec: dict, seg0: float, fault: str) -> None:
        o, st = self.opts, self.stack
        clients = len(self.cfg.testbed.clients)
        st.wait_for(lambda: len(st.loadgen_summaries(rec["tag"])) == clients,
                    max(0.0, seg0 + o.seconds - time.time()) + VIDEO_SECONDS +
                    REQUEST_TIMEOUT_S + 60, f"load of {fault}", interval_s=1.0)
        summaries = st.loadgen_summaries(rec["tag"])
        rec["planned"] = sum(s["planned"] for s in summaries)
        rec["failed_in_segment"] = sum(s["failed"] for s in summaries)
        self.log(f"[faults] {fault}: load done, {rec['planned']} requests, "
                 f"{rec['failed_in_segment']} failed")

    def run(self, faults: list[str]) -> list[dict]:
        records = []
        self.recorder.start()
        try:
            for k, fault in enumerate(faults):
                steady = await_checks(self.steady_checks(), time.time(), self.opts.recovery_timeout)
                if steady["recovered_at"] is None:
                    why = f"the stack was not working before it ({steady['last_failure']})"
                    self.log(f"[faults] {fault}: skipped: {why}; the remaining faults too")
                    for rest in faults[k:]:
                        records.append({"fault": rest, "what": self.faults.what(rest),
                                        "segment_start": time.time(), "error": why,
                                        "start": None})
                    break
                self.log(f"[faults] {k + 1}/{len(faults)} {fault}: {self.faults.what(fault)}")
                records.append(self.run_fault(k, fault))
        finally:
            self.recorder.stop()
        return records


def workload_spec(cfg, opts, seed: int, phase: str) -> dict:
    """One segment of open-loop load: short ui objects and back-end jobs, a few long video
    streams, opts.rate requests per second in all, opts.seconds long."""
    paths = {"ui": ("ui-object", 0.47, "/object?size=100000"),
             "backend": ("backend-job", 0.47, "/job?seconds=1&cpu=0.1&mode=work"),
             "video": ("video-stream", 0.06, f"/stream?rate=200&seconds={VIDEO_SECONDS}")}
    classes = []
    for ms_name, (name, weight, path) in paths.items():
        ms = cfg.microservice(ms_name)
        classes.append({"name": name, "host": ms.vip, "port": ms.port, "weight": weight,
                        "path": path})
    return {"seed": seed, "arrivals": "poisson", "classes": classes,
            "phases": [{"name": phase, "seconds": opts.seconds, "from": opts.rate,
                        "to": opts.rate}]}
