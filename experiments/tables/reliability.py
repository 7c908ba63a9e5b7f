"""docs/reliability.md's results tables, from the runs committed under data/reliability/:
the fault suite's faults.json (written by `python -m experiments.faults`) and the soak's
summary.json (written by `python -m experiments.soak`).

- fault_table: one run of the fault suite, a row per fault: outage, requests in the fault's
  window and those failed, late flows to a dead instance, history rows lost, recovery;
- modes_table: several runs in per-flow and data-plane mode side by side, a row per fault
  and in each mode's cell every run's failed requests of its window and recovery;
- takeover_table: the standby's takeover, a row per run: the claim after the master's
  kill, the way back for clients, requests in the window and those failed;
- idle_table: every HTTP server's GETs alone and beside 2,000 idle or half-sent
  connections (benchmarks.idle_clients);
- soak_table: the soak's figures, first and last sample, mean over the second half and
  growth per hour, the agents' (and the processes') figures gathered in one row;
- BLOCKS: where they go.
"""
from __future__ import annotations

import fnmatch
import re
from functools import partial

from common.markdown import number, table
from experiments.tables.block import Block

DOC = "docs/reliability.md"

# ------------------------------------------------------------------ the fault suite
# what the page calls each fault (the suite's own "what was done" is a sentence); the Docker
# engine's pause is read from the run's options
FAULT_LABELS = {"agent": "agent (SIGKILL, restart)",
                "profiler": "profiler (SIGKILL while writing, restart)",
                "controller": "controller (stop, start)",
                "container": "container (docker kill, stays dead)",
                "hung": "hung (docker pause: port up, nothing answers)",
                "starved": "starved (CPU quota cut: port up, answers after seconds)",
                "switch": "switch (controller connection dropped, flows wiped)",
                "docker": "docker (dockerd stopped {docker_pause:g} s)"}
# the page's names of the controller's modes, in its order: a run's options say which
# (dataplane: the select group; tracker: the connection tracker; neither: per flow)
MODES = ("per-flow", "tracker", "data-plane")
TARGET_NAMES = {"late_flows": "late flows", "rows_lost": "history rows lost",
                "recovery": "recovery"}


def fault_label(fault: str, run: dict) -> str:
    """The page's name for a fault, its figures (the Docker pause) from the run's options."""
    return FAULT_LABELS.get(fault, fault).format(**run.get("options", {}))


def _dash_or(value, digits: int | None = None) -> str:
    """A count or a duration; an en dash where the suite measured nothing (None: no instance
    was dead, or the fault was not injected)."""
    if value is None:
        return "–"
    return str(value) if digits is None else number(value, digits)


def _recovery(fault: dict) -> str:
    """Seconds to recover, or why there is no figure."""
    if fault.get("error"):
        return "not injected"
    return "not recovered" if fault.get("recovery_s") is None else number(fault["recovery_s"])


def _missed(run: dict) -> list[str]:
    """'fault: target' for every target a run's faults missed (not injected counts)."""
    return [f"{f['fault']}: {TARGET_NAMES.get(t, t)}" for f in run["faults"]
            for t, ok in f.get("targets", {}).items() if not ok]


def _targets_text(runs: list[dict]) -> str:
    """The issue's targets as the runs set them, and whether every fault met them."""
    first = runs[0]
    missed = [m for r in runs for m in _missed(r)]
    head = (f"targets: no new flow to a dead instance later than {first['grace_s']:g} s after "
            f"it died, no committed history row lost, recovery within "
            f"{first['recovery_target_s']:g} s")
    return f"{head}: {'missed: ' + '; '.join(missed) if missed else 'every one met'}"


def fault_table(run: dict) -> str:
    """One run of the fault suite, a row per fault in the order they ran."""
    rows = []
    for f in run["faults"]:
        q = f.get("requests") or {}
        rows.append([fault_label(f["fault"], run), _dash_or(f.get("outage_s"), 1),
                     _dash_or(q.get("requests")), _dash_or(q.get("failed")),
                     _dash_or(f.get("late_flows")), _dash_or(f.get("rows_lost_total")),
                     _recovery(f)])
    caption = (f"One run; requests: {run['requests']['planned']:,} planned, "
               f"{run['requests']['recorded']:,} recorded, {run['requests']['failed']:,} "
               f"failed in all; "
               f"{_targets_text([run])}; code at {run['commit']} ({run['when'][:10]}).")
    return table(["fault", "outage s", "requests in window", "failed",
                  "late flows to a dead instance", "history rows lost", "recovery s"],
                 rows, "lrrrrrr", compact=True) + "\n" + caption + "\n"


def _run_cell(run: dict, fault: str) -> str:
    """'failed of requests / recovery s' of one fault in one run."""
    f = next((x for x in run["faults"] if x["fault"] == fault), None)
    if f is None:
        return "–"
    if f.get("error"):
        return "not injected"
    q = f["requests"]
    return f"{q['failed']} of {q['requests']} / {_recovery(f)}"


def _by_mode(runs: tuple[dict, ...]) -> dict[str, list[dict]]:
    """The runs per mode, the page's order of modes, each mode's runs in the order given."""
    out: dict[str, list[dict]] = {}
    for name in MODES:
        mine = [r for r in runs if mode_of(r) == name]
        if mine:
            out[name] = mine
    return out


def mode_of(run: dict) -> str:
    """The controller's mode a fault-suite run had, by the page's name."""
    options = run["options"]
    if options.get("dataplane"):
        return "data-plane"
    return "tracker" if options.get("tracker") else "per-flow"


def _totals(runs: tuple[dict, ...], key: str) -> int:
    """A count summed over every fault of every run (None, nothing measured, as 0)."""
    return sum(f.get(key) or 0 for r in runs for f in r["faults"])


def modes_table(*runs: dict) -> str:
    """Per fault, every run's failed requests of its window and recovery, per mode."""
    modes = _by_mode(runs)
    faults = list(dict.fromkeys(f["fault"] for r in runs for f in r["faults"]))
    rows = [[fault_label(fault, runs[0]),
             *("; ".join(_run_cell(r, fault) for r in mine) for mine in modes.values())]
            for fault in faults]
    commits = "; ".join(f"{mode} {', '.join(r['commit'] for r in mine)}"
                        for mode, mine in modes.items())
    planned = sorted({r["requests"]["planned"] for r in runs})
    caption = (f"Failed requests of those in each fault's window / recovery s, runs "
               f"separated by \";\"; {len(runs)} runs of "
               f"{' or '.join(f'{n:,}' for n in planned)} requests planned, "
               f"{sum(r['requests']['recorded'] for r in runs):,} of "
               f"{sum(r['requests']['planned'] for r in runs):,} recorded; late flows to a "
               f"dead instance: {_totals(runs, 'late_flows')}, history rows lost: "
               f"{_totals(runs, 'rows_lost_total')} in all; {_targets_text(list(runs))}; "
               f"the commit each run stamped: {commits}.")
    return table(["fault", *modes], rows, "l" + "r" * len(modes), compact=True) + \
        "\n" + caption + "\n"


# ------------------------------------------------------------------ the standby
TAKEOVER_AIM = 0.01     # issue 66: a takeover fails fewer than 1 % of new connections


def failing_share_bound(failed: int, requests: int) -> float:
    """The one-sided 95 % upper bound of the share that fails, `failed` of `requests`
    seen (Clopper-Pearson; with none failed, 1 - 0.05 ** (1 / requests))."""
    if requests <= 0:
        return 1.0
    if failed >= requests:
        return 1.0
    from scipy.stats import beta    # 1.5 s to import: only where a bound is drawn
    return float(beta.ppf(0.95, failed + 1, requests - failed))


def takeover_table(*runs: dict) -> str:
    """Per run of the takeover fault: how long the standby took to claim the master role
    after the master's SIGKILL (the suite polls its role every 50 ms), when requests went
    through the VIPs again (recovery), and the window's requests and failures."""
    rows, failed, requests = [], 0, 0
    for i, run in enumerate(runs, 1):
        fault = next(f for f in run["faults"] if f["fault"] == "takeover")
        claim = (fault.get("details") or {}).get("takeover_s")
        window = fault["requests"]
        failed += window["failed"]
        requests += window["requests"]
        rows.append([str(i), run["commit"], "–" if claim is None else number(claim, 2),
                     "–" if fault["recovery_s"] is None else number(fault["recovery_s"], 1),
                     f"{window['requests']:,}", f"{window['failed']:,}",
                     "met" if fault["met"] else "missed"])
    bound = failing_share_bound(failed, requests)
    caption = (f"{failed:,} of {requests:,} requests in the takeover windows failed over "
               f"{len(runs)} runs: the share that fails is below {number(100 * bound, 2)} % "
               f"(95 %, one-sided Clopper-Pearson), against the 1 % aimed at: "
               f"{'met' if bound < TAKEOVER_AIM else 'not met'}; "
               f"claim: from the kill until the standby answered as master; "
               f"recovery: until requests went through the VIPs again; targets: the suite's "
               f"(late flows, history rows, recovery within "
               f"{number(runs[0]['recovery_target_s'], 0)} s).")
    return table(["run", "commit", "claim s", "recovery s", "requests in window", "failed",
                  "targets"], rows, "llrrrrl") + "\n" + caption + "\n"


# ------------------------------------------------------------------ idle connections
def _ms(seconds: float | None) -> str:
    return "–" if seconds is None else number(1000 * seconds, 1)


def idle_table(bench: dict) -> str:
    """benchmarks.idle_clients: each server's GETs alone and beside the held idle or
    half-sent connections, per state over every round, and the target's verdict."""
    rows = []
    for s in bench["summary"]:
        for state in ("alone", "beside"):
            r = s[state]
            beside = state == "beside"
            rows.append([s["server"] if not beside else "", state, f"{r['requests']:,}",
                         f"{r['failed']:,}", _ms(r["p50_s"]), _ms(r["p99_s"]),
                         _ms(r["max_s"]),
                         ", ".join(number(x, 2) for x in s["median_ratio_per_round"])
                         if beside else "",
                         ", ".join(f"{n:,}" for n in s["closed_by_server"]) if beside else ""])
    controller = next(s for s in bench["summary"] if s["server"] == "controller REST")
    slowest = controller["beside"]["max_s"]
    caption = (f"{bench['held']:,} connections held from {bench['sources']} loopback "
               f"addresses, half idle and half with a request half sent, "
               f"{len(bench['rounds']) // len(bench['summary'])} rounds, the states' order "
               f"alternating; target: every GET /malb/status beside them within "
               f"{number(1000 * bench['target_s'], 0)} ms: "
               f"{'met' if bench['met'] else 'not met'} (slowest {_ms(slowest)} ms, "
               f"{controller['beside']['failed']} failed); code at {bench['commit']}.")
    return table(["server", "state", "requests", "failed", "p50 ms", "p99 ms", "slowest ms",
                  "median beside / alone, per round", "held closed by the server"],
                 rows, "llrrrrrll", compact=True) + "\n" + caption + "\n"


# ------------------------------------------------------------------ the soak
# the page's rows: a label and the figures it gathers (fnmatch patterns on the summary's
# figure names, process.kind), one group per pattern, the groups' texts joined by ", ";
# a group of several figures (every agent) is shown as its range
SOAK_ROWS = (
    ("controller resident memory (MB)", ("controller.rss_mb",)),
    ("profiler resident memory (MB)", ("profiler.rss_mb",)),
    ("each agent's resident memory (MB)", ("agent-*.rss_mb",)),
    ("descriptors: controller, profiler, each agent",
     ("controller.fds", "profiler.fds", "agent-*.fds")),
    ("threads: controller, profiler, each agent",
     ("controller.threads", "profiler.threads", "agent-*.threads")),
    ("controller's flow records", ("controller.flow_records",)),
    ("controller's active flows", ("controller.active_flows",)),
    ("rules on {}", ("*.rules",)),                  # a row per switch
    ("profiler's period (s)", ("profiler.period_s",)),
    ("history database (MB)", ("profiler.history_mb",)),
)
# decimals of a figure of each kind (growth per hour: at least one); counts are whole
DIGITS = {"rss_mb": 1, "fds": 0, "threads": 0, "flow_records": 0, "active_flows": 0,
          "rules": 0, "period_s": 2, "history_mb": 1}


def _signed(value: float, digits: int) -> str:
    """A growth: signed, and 0 without a sign when it rounds to nothing."""
    if round(value, digits) == 0:
        return number(0.0, digits)
    return f"{value:+,.{digits}f}"


def _span(values: list[float], text) -> str:
    """One figure, or the range of a group's (as text() writes each end)."""
    low, high = text(min(values)), text(max(values))
    if low == high:
        return low
    return f"{low} to {high}" if min(values) < 0 or high.startswith("+") else f"{low}-{high}"


def _group_text(figures: list[dict], key: str) -> str:
    """A group's figure under key: its value, or its range over the group."""
    values = [f[key] for f in figures if f.get(key) is not None]
    if not values:
        return "–"
    digits = DIGITS.get(figures[0]["kind"], 1)
    if key == "growth_per_hour":
        return _span(values, partial(_signed, digits=max(digits, 1)))
    return _span(values, partial(number, digits=digits))


def _matching(summary: dict, pattern: str) -> list[dict]:
    return [f for f in summary["figures"] if fnmatch.fnmatchcase(f["figure"], pattern)]


def _soak_row(label: str, groups: list[list[dict]]) -> list[str]:
    keys = ("first", "last", "mean_second_half", "growth_per_hour")
    return [label, *(", ".join(_group_text(g, k) for g in groups) for k in keys)]


def _soak_rows(summary: dict) -> list[list[str]]:
    """The page's rows of what the summary holds; a label with {} becomes a row per
    figure (named by its process); rows with nothing in the summary are left out."""
    rows = []
    for label, patterns in SOAK_ROWS:
        groups = [_matching(summary, p) for p in patterns]
        if "{}" in label:
            rows += [_soak_row(label.format(f["figure"].rsplit(".", 1)[0]), [[f]])
                     for g in groups for f in g]
        elif all(groups):
            rows.append(_soak_row(label, groups))
    return rows


# the README the run's directory holds names the commit when the summary does not (the
# soak stamped its summary only from a later commit)
README_COMMIT = re.compile(r"Commit ([0-9a-f]{7,40}), (\d{4}-\d{2}-\d{2})")


def _soak_code(summary: dict, readme: str) -> str:
    """Which code the run was: the summary's stamp, else its README's "Commit <sha>, <day>"."""
    if summary.get("commit"):
        return f"code at {summary['commit']} ({summary.get('when', '')[:10]})"
    found = README_COMMIT.search(readme)
    return f"code at {found.group(1)} ({found.group(2)})" if found else "commit not recorded"


def soak_table(summary: dict, readme: str, short_flows: str = "controller") -> str:
    """The soak's figures, gathered as the page shows them, with the run's verdict;
    `short_flows`: who handled short flows, where the summary does not say (a soak
    recorded it from a later commit)."""
    # soak.verdict's words: "levels off", "grows", or "too few samples" to judge
    by = {v: [f["figure"] for f in summary["figures"] if f["verdict"] == v]
          for v in dict.fromkeys(f["verdict"] for f in summary["figures"])}
    judged_not = {v: names for v, names in by.items() if v != "levels off"}
    verdict = "every figure levels off" if not judged_not else "; ".join(
        f"{'not levelling off' if v == 'grows' else v}: {', '.join(names)}"
        for v, names in judged_not.items())
    mode = MODE_NAMES[summary.get("short_flows", short_flows)]
    caption = (f"{summary['minutes']:g} minutes at {summary['rate']:g} requests/s, policy "
               f"{summary['policy']}, {mode}; growth per hour: the least-squares "
               f"slope over the second half; a figure levels off when that is at most "
               f"{100 * summary['level_share']:g} % of its mean per hour or below its kind's "
               f"floor: {verdict}; {_soak_code(summary, readme)}.")
    return table(["figure", "start", "end", "mean, second half", "growth per hour"],
                 _soak_rows(summary), "lrrrr") + "\n" + caption + "\n"


# controller.dataplane.short_flows, as the captions name it
MODE_NAMES = {"controller": "per-flow mode", "tracker": "tracker mode",
              "switch": "data-plane mode"}


# ------------------------------------------------------------------ where they go
CURRENT_RUNS = ("pf-3", "pf-4", "pf-5", "tr-1", "tr-2", "tr-3", "dp-3", "dp-4", "dp-5")
BLOCKS = (
    Block(DOC, "fault suite, first run", ("reliability/faults-first/faults.json",),
          fault_table),
    Block(DOC, "fault suite, the three modes",
          tuple(f"reliability/faults-current/{r}/faults.json" for r in CURRENT_RUNS),
          modes_table),
    Block(DOC, "fault suite, starved and ovs in tracker mode",
          tuple(f"reliability/faults-tracker-extra/run-{i}/faults.json" for i in (1, 2, 3)),
          modes_table),
    Block(DOC, "fault suite, starved in tracker mode, re-admission held",
          tuple(f"reliability/faults-starved-held/run-{i}/faults.json" for i in (1, 2, 3)),
          modes_table),
    Block(DOC, "fault suite, takeover",
          tuple(f"reliability/faults-takeover/run-{i}/faults.json" for i in range(1, 13)),
          takeover_table),
    Block(DOC, "servers beside idle connections", ("reliability/idle-clients/idle_clients.json",),
          idle_table),
    Block(DOC, "soak, the hour",
          ("reliability/soak-60/summary.json", "reliability/soak-60/README.md"), soak_table),
    Block(DOC, "soak, the hour in tracker mode",
          ("reliability/soak-60-tracker/summary.json", "reliability/soak-60-tracker/README.md"),
          partial(soak_table, short_flows="tracker")),
)
