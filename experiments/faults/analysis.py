"""The fault suite's figures from plain data (the load generators' records, the controller's
decisions, history snapshots, recovery polls):

- error_kind, requests_in_window, late_flows, rows_lost, recovery_seconds, merge_decisions,
  targets_met, analyse: per fault, what failed and how long recovery took, against the
  targets;
- read_requests: the load generators' records of a run;
- markdown_table, summary_markdown: the report (faults.md).
"""
from __future__ import annotations

import csv
import glob
import math
import os
from collections import Counter

from common.markdown import number

RECOVERY_TARGET_PERIODS = 5      # target: recovery within this many monitoring periods
GRACE_HEALTH_INTERVALS = 2       # target: no new flow to a dead instance after this many
                                 # health intervals
SAMPLE_TABLES = ("container_samples", "server_samples", "microservice_samples",
                 "edge_samples")
FLOW_TABLE = "flows"             # one row per flow (upserted): compared by flow_id


def _float(value) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def error_kind(error: str) -> str:
    """A short name for a load generator's error ("timeout after 10 s without data",
    "ConnectionResetError: [Errno 104] ...", "HTTP 503") to count them by."""
    if error.startswith("timeout"):
        return "timeout"
    return error.split(":", 1)[0].strip()[:40]


def requests_in_window(rows: list[dict], t0: float, t1: float) -> dict:
    """The load generators' records (rows of their CSVs) against a window [t0, t1):
    requests whose intended start falls in it and how many of them failed (by class and
    kind of error), and requests intended before t0 still running at t0 that failed (a
    stream cut by the fault)."""
    sent = failed = in_flight_failed = 0
    by_class: Counter = Counter()
    kinds: Counter = Counter()
    for r in rows:
        intended = _float(r.get("intended"))
        if intended is None:
            continue
        error = r.get("error") or ""
        if t0 <= intended < t1:
            sent += 1
            if error:
                failed += 1
                by_class[r.get("class") or "?"] += 1
                kinds[error_kind(error)] += 1
        elif intended < t0 and error:
            ended = _float(r.get("ended"))
            if ended is not None and ended >= t0:
                in_flight_failed += 1
    return {"requests": sent, "failed": failed, "in_flight_failed": in_flight_failed,
            "failed_by_class": dict(sorted(by_class.items())),
            "errors": dict(kinds.most_common())}


def late_flows(decisions: list[dict], dead: dict[str, float], grace_s: float,
               since: float | None = None, until: float | None = None) -> list[dict]:
    """The controller's decisions (GET /malb/decisions items) that sent a new flow to an
    instance of ``dead`` ({instance: when it died}) more than grace_s after it died,
    optionally only those decided in [since, until)."""
    out = []
    for d in decisions:
        t = _float(d.get("time"))
        died = dead.get(d.get("instance"))
        if t is None or died is None or t <= died + grace_s:
            continue
        if (since is not None and t < since) or (until is not None and t >= until):
            continue
        out.append(d)
    return out


def rows_lost(before: dict, after: dict) -> dict:
    """History rows committed before a fault and missing after it.

    before/after: {"counts": {table: rows with t <= the same cut-off}, "flow_ids": set of
    the flows table's ids}. Sample tables only grow, so fewer rows up to the cut-off after
    than before is a loss; the flows table holds one row per flow whose t moves on when the
    flow is recorded again, so its rows are compared by id."""
    lost = {}
    for table, n in before.get("counts", {}).items():
        lost[table] = max(0, n - after.get("counts", {}).get(table, 0))
    if "flow_ids" in before:
        lost[FLOW_TABLE] = len(set(before["flow_ids"]) - set(after.get("flow_ids", ())))
    return {"tables": lost, "total": sum(lost.values())}


def recovery_seconds(observations: list[tuple[float, bool]], since: float) -> float | None:
    """Seconds from `since` to the first observation (time, everything works) at or after
    it that found everything working; None when none did."""
    for t, ok in sorted(observations):
        if ok and t >= since:
            return round(t - since, 3)
    return None


def decision_key(d: dict) -> tuple:
    return (d.get("time"), d.get("client"), d.get("switch"), d.get("instance"))


def merge_decisions(known: dict, batch: list[dict]) -> tuple[int, bool]:
    """Add a poll's decisions to `known` (by time, client, switch and instance); returns
    (how many were new, whether the batch overlapped what was known)."""
    new, overlap = 0, False
    for d in batch:
        key = decision_key(d)
        if key in known:
            overlap = True
        else:
            known[key] = d
            new += 1
    return new, overlap


def targets_met(result: dict, target_s: float) -> dict[str, bool]:
    """The issue's targets for one fault: no flow to a dead instance after the grace time,
    no committed history row lost, recovery within target_s."""
    rec = result.get("recovery_s")
    return {"late_flows": not result.get("late_flows"),
            "rows_lost": result.get("rows_lost_total") == 0,
            "recovery": rec is not None and rec <= target_s}


def analyse(records: list[dict], requests: list[dict], decisions: list[dict],
            grace_s: float, target_s: float) -> list[dict]:
    """One result per fault from what the run recorded.

    records: per fault, in order: fault, what, segment_start (its load began), start
    (injection), end (the fault was lifted: restart, SIGCONT; the kill for a container),
    recovered_at (None: not within the timeout), window_end (used when not recovered), dead
    ({instance: died} dead during its segment), rows_lost ({"tables", "total"} or None),
    error (None, or why the fault could not be injected); anything else is kept."""
    out = []
    for k, rec in enumerate(records):
        res = dict(rec)
        seg0 = rec["segment_start"]
        seg1 = records[k + 1]["segment_start"] if k + 1 < len(records) else None
        if rec.get("error") or rec.get("start") is None:
            res.update(requests={}, late_flows=None, recovery_s=None, outage_s=None,
                       window_s=None, rows_lost_total=None, failed_before_fault=None)
            res["targets"] = {"late_flows": False, "rows_lost": False, "recovery": False}
            res["met"] = False
            out.append(res)
            continue
        t0 = rec["start"]
        t1 = rec["recovered_at"] if rec.get("recovered_at") is not None else rec["window_end"]
        res["window_s"] = round(t1 - t0, 3)
        res["outage_s"] = round(rec["end"] - t0, 3)
        res["recovery_s"] = None if rec.get("recovered_at") is None else \
            round(rec["recovered_at"] - rec["end"], 3)
        res["requests"] = requests_in_window(requests, t0, t1)
        res["failed_before_fault"] = requests_in_window(requests, seg0, t0)["failed"]
        dead = rec.get("dead") or {}
        if dead:
            late = late_flows(decisions, dead, grace_s, seg0, seg1)
            res["late_flows"] = len(late)
            res["late_flow_examples"] = [
                {"time": d["time"], "instance": d["instance"], "client": d.get("client"),
                 "after_death_s": round(d["time"] - dead[d["instance"]], 3)}
                for d in late[:10]]
        else:
            res["late_flows"] = None          # no instance was dead: nothing to measure
        lost = rec.get("rows_lost")
        res["rows_lost_total"] = None if lost is None else lost["total"]
        res["targets"] = targets_met(res, target_s)
        res["met"] = all(res["targets"].values())
        out.append(res)
    return out


def markdown_table(results: list[dict]) -> str:
    lines = ["| fault | what was done | outage s | requests in window | failed | "
             "failed in flight | late flows to a dead instance | history rows lost | "
             "recovery s | targets |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in results:
        if r.get("error"):
            lines.append(f"| {r['fault']} | NOT INJECTED: {r['error']} | – | – | – | – | "
                         f"– | – | – | missed |")
            continue
        q = r["requests"]
        missed = [k.replace("_", " ") for k, ok in r["targets"].items() if not ok]
        recovery = number(r["recovery_s"], 1) if r["recovery_s"] is not None else \
            "not recovered"
        lines.append(
            f"| {r['fault']} | {r['what']} | {number(r['outage_s'], 1)} | {q['requests']} | "
            f"{q['failed']} | {q['in_flight_failed']} | "
            f"{'–' if r['late_flows'] is None else r['late_flows']} | "
            f"{'–' if r['rows_lost_total'] is None else r['rows_lost_total']} | {recovery} | "
            f"{'met' if not missed else 'MISSED: ' + ', '.join(missed)} |")
    return "\n".join(lines) + "\n"


def read_requests(run_dir: str) -> list[dict]:
    rows = []
    for path in sorted(glob.glob(os.path.join(run_dir, "requests-*.csv"))):
        with open(path, newline="") as fh:
            rows += list(csv.DictReader(fh))
    return rows


def summary_markdown(doc: dict) -> str:
    h = doc["health"]
    lines = [
        "# Fault suite", "",
        f"Command: `{doc['command']}`  ", f"Commit: {doc['commit']}; {doc['when']}  ",
        f"Testbed: {doc['testbed']['backend']}, {doc['testbed']['datapath']} datapath; "
        f"policy {doc['options']['policy']}; monitoring and profiler period "
        f"{doc['period_s']:g} s; health probes ({h['method']}) every {h['interval_s']:g} s, "
        f"down after {h['unhealthy_after']} failed; load {doc['options']['rate']:g} "
        f"requests/s for {doc['options']['seconds']:g} s around each fault.", "",
        markdown_table(doc["faults"]),
        f"Targets: no new flow to a dead instance later than "
        f"{GRACE_HEALTH_INTERVALS} health intervals ({doc['grace_s']:g} s) after it died; no "
        f"history row committed before a fault lost; recovery within "
        f"{RECOVERY_TARGET_PERIODS} monitoring periods ({doc['recovery_target_s']:g} s) of the "
        f"fault's end.", "",
        "Columns: *outage*: from the injection until the fault was lifted (restart, "
        "reconnection, SIGCONT; 0 for the killed container, which stays dead, and for the "
        "frozen one, which counts as dead until its segment ends); *requests in window*, "
        "*failed*: requests whose intended start falls between the injection and recovery, "
        "and those of them that failed; *failed in flight*: requests started before the "
        "injection that failed after it; *late flows*: new flows the controller sent to a "
        "killed or frozen instance more than the grace time after it stopped, during the "
        "fault's segment "
        "of load (– when no instance was dead); *history rows lost*: rows committed before "
        "the fault (before the kill, for the profiler) missing after recovery; *recovery*: "
        "from the fault's end until every check passed.", "",
        f"Requests: {doc['requests']['planned']} planned, {doc['requests']['recorded']} "
        f"recorded, {doc['requests']['failed']} failed in all. Decisions recorded: "
        f"{doc['decisions']['recorded']} ({doc['decisions']['possible_gaps']} possible gaps).",
        "", "## Per fault", ""]
    for r in doc["faults"]:
        lines.append(f"- **{r['fault']}**: {r['what']}.")
        if r.get("error"):
            lines.append(f"  Not injected: {r['error']}.")
            continue
        steps = ", ".join(f"{n} at {s:g} s" for n, s in (r.get("milestones") or {}).items())
        lines.append(f"  Checks passed (seconds after the fault's end): {steps or 'none'}"
                     + (f"; last failure: {r['last_failure']}" if r.get("last_failure") else "")
                     + ".")
        q = r["requests"]
        if q.get("errors"):
            lines.append(f"  Errors in the window: "
                         f"{', '.join(f'{k} {v}' for k, v in q['errors'].items())}; by class: "
                         f"{', '.join(f'{k} {v}' for k, v in q['failed_by_class'].items())}.")
        for ex in r.get("late_flow_examples") or []:
            lines.append(f"  Late flow: {ex['client']} -> {ex['instance']}, "
                         f"{ex['after_death_s']:g} s after the kill.")
        d = r.get("details") or {}
        if r["fault"] == "profiler":
            lines.append(f"  Killed while writing the history: "
                         f"{d.get('killed_while_writing')}; rows checked: "
                         f"{r.get('history_rows_checked')}.")
        if r["fault"] == "docker" and d.get("dockerd"):
            dd = d["dockerd"]
            lines.append(f"  dockerd pid {dd['pid']} ({dd.get('cmdline', '?')}), proven to "
                         f"serve {dd['socket']}"
                         f"{' and named in ' + dd['pidfile'] if dd.get('pidfile') else ''}; "
                         f"state while paused: {dd.get('state_when_paused')}.")
        if r["fault"] == "switch" and d.get("nat_restored"):
            lines.append(f"  Controller: {d['nat_restored'][-1]}")
        if r["fault"] == "takeover":
            took = d.get("takeover_s")
            lines.append(f"  The standby claimed the master role "
                         f"{f'{took:g} s after the kill' if took is not None else 'not at all'}"
                         f"; the old master back as standby: "
                         f"{d.get('restart_error') or 'yes'}.")
        if r["fault"] == "ovs":
            lines.append(f"  ovs-vswitchd pid {d.get('pid_before')} -> {d.get('pid_after')}, "
                         f"restarted in {d.get('restart_s')} s.")
    return "\n".join(lines) + "\n"

