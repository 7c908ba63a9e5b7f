"""The results tables of README.md and docs/, generated from the summaries committed under
data/ (the evaluations' data/eval-N/suite.json, written by `python -m experiments.suite
--tabulate`; each part's own summaries), so that no figure in a generated block is typed
by hand.

    .venv/bin/python -m experiments.standing            # rewrite the generated blocks
    .venv/bin/python -m experiments.standing --check    # exit 1 when one is out of date

Holds Block (one generated block: the file, its name, the data/ files it reads and how it
renders them) and BLOCKS (the evaluations' blocks here, each part's from
experiments/tables/), cpu_table (every policy's CPU STDEV per scenario, the lowest in
bold), aims_table (evaluation 4's pre-registered aims, each judged by its rule),
standing_table (ours against round robin and against the best practical baseline, on
balance and on what the clients saw), and the splicing of a block between its markers.
A unit test runs --check, so `make check` fails on a stale table.
"""
from __future__ import annotations

import json
import os
import sys

from common.cli import ArgumentParser
from common.markdown import number, table
from common.procs import ROOT
from experiments import report, significance, tables
from experiments.tables import Block

COMMAND = "python -m experiments.standing"
NAMES = report.POLICY_NAMES
# shorter column heads where a table names every policy
SHORT = {"least connections": "LC", "power of two choices": "P2C",
         "probe-based (Prequal)": "Prequal", "HAProxy leastconn + agent weights":
         "HAProxy leastconn + CPU agent", "MALB (paper's rule)": "MALB-paper",
         "MALB (ours)": "MALB"}


def load(source: str):
    """data/<source>: parsed JSON for a .json file, text otherwise."""
    with open(os.path.join(ROOT, "data", source), encoding="utf-8") as fh:
        return json.load(fh) if source.endswith(".json") else fh.read()


def _commits(suite: dict) -> str:
    """Which code the summaries describe: each distinct commit and the scenarios run at it."""
    by: dict[str, list[str]] = {}
    for scenario, s in suite["scenarios"].items():
        by.setdefault(s["commit"], []).append(scenario)
    if len(by) == 1:
        return f"code at {next(iter(by))}"
    return "code at " + "; ".join(f"{c} ({', '.join(sc)})" for c, sc in by.items())


def _seeds(suite: dict) -> str:
    text = "; ".join(sorted({s["seeds"] for s in suite["scenarios"].values()}))
    return text[:1].upper() + text[1:]


def cpu_table(suite: dict, policies: tuple[str, ...] | None = None) -> str:
    """CPU STDEV across servers (%), mean ± 95 % interval, a row per scenario and a column per
    policy (policies: these, in this order; default every one that ran), the lowest mean in
    bold; then the policies left out, and what the figures are from."""
    scenarios = suite["scenarios"]
    ran = list(dict.fromkeys(p for s in scenarios.values() for p in s["cpu_stdev"]["policies"]))
    shown = [p for p in (policies or ran) if p in ran]
    rows, left_out = [], []
    for name, s in scenarios.items():
        stats = s["cpu_stdev"]["policies"]
        means = {p: v["mean"] for p, v in stats.items() if v["mean"] is not None}
        lowest = min(means, key=means.get) if means else None
        cells = []
        for p in shown:
            text = significance.mean_ci_text(stats.get(p))
            cells.append(f"**{text}**" if p == lowest else text)
        rows.append([name, *cells])
        extra = [f"{NAMES.get(p, p)} {significance.mean_ci_text(stats[p])}"
                 for p in stats if p not in shown]
        if extra:
            left_out.append(f"{name}: {', '.join(extra)}")
    heads = [SHORT.get(NAMES.get(p, p), NAMES.get(p, p)) for p in shown]
    out = [table(["scenario", *heads], rows, "l" + "r" * len(shown)).rstrip("\n"), ""]
    note = ("CPU STDEV across servers (%) over the load phases, mean ± 95 % interval, "
            f"the lowest in bold. {_seeds(suite)}; {_commits(suite)}.")
    if left_out:
        note += " Also ran: " + "; ".join(left_out) + "."
    out.append(note)
    return "\n".join(out) + "\n"


def _p_text(v: dict) -> str:
    """p and its Holm-corrected value; a dagger where p < 0.05 and the correction does not
    hold it."""
    p, holm = v.get("p"), v.get("p_holm")
    if p is None:
        return "–"
    mark = "†" if p < significance.ALPHA and (holm is None or holm >= significance.ALPHA) \
        else ""
    return f"{_p(p)}{mark} ({_p(holm)})"


def _p(p: float | None) -> str:
    return "–" if p is None else "< 0.001" if p < 0.001 else number(p, 3)


def _vs_text(v: dict | None) -> str:
    """"-37.7 % (-5.1 ± 1.4)": the ratio and the paired difference with its 95 % interval."""
    if not v or v.get("ratio") is None:
        return "–"
    return f"{100 * v['ratio']:+.1f} % ({v['diff']:+.1f} ± {number(v['ci'])})"


CLIENT_ITEMS = 4      # figures named per side in a cell; the others counted
FIRST = ("all requests", "balancing CPU")       # named before the classes


def _client_text(s: dict, against: str, most: int = CLIENT_ITEMS) -> str:
    """What clients saw that is significantly worse, or better, with ours than with
    `against` (paired, uncorrected): each class's and all requests' p50, p95 and p99
    response time, throughput and failed requests, and the balancing parts' CPU. At most
    `most` named a side, end to end and the balancing CPU first, the others counted."""
    sides: dict[str, list[str]] = {"significantly worse": [], "significantly better": []}
    for e in s["classes"].values():
        if against not in e["vs"] or e["vs"][against].get("ratio") is None:
            continue
        label = e["label"].replace(" RT ", " ").replace(" mean throughput", " throughput")
        label = label.split(" (")[0]
        if label.startswith("balancing CPU"):
            label = "balancing CPU"
        if e["vs"][against]["verdict"] in sides:
            sides[e["vs"][against]["verdict"]].append(
                f"{label} {100 * e['vs'][against]['ratio']:+.0f} %")
    parts = []
    for name, verdict in (("worse", "significantly worse"), ("better", "significantly better")):
        items = sorted(sides[verdict], key=lambda text: not text.startswith(FIRST))
        if items:
            more = len(items) - most
            parts.append(f"{name}: " + ", ".join(items[:most])
                         + (f" and {more} more" if more > 0 else ""))
    return "; ".join(parts) or "level"


# what clients see is set against the balancer practitioners deploy by default, which runs in
# every scenario (the best baseline on CPU balance need not answer fastest)
CLIENT_BASELINE = "haproxy-leastconn"


def standing_table(suite: dict) -> str:
    """Per scenario: ours' CPU STDEV, against round robin, against the best practical baseline
    (the practical policy of lowest mean), and the classes whose response times are
    significantly different from CLIENT_BASELINE's."""
    rows = []
    for name, s in suite["scenarios"].items():
        best = s["best_practical"]
        ours = s["cpu_stdev"]["policies"].get(significance.CANDIDATE)
        vs_srr, vs_best = s["vs"].get("srr"), s["vs"].get(best) if best else None
        best_text = "–" if not best else \
            f"{NAMES.get(best, best)} {significance.mean_ci_text(s['cpu_stdev']['policies'][best])}"
        rows.append([name, significance.mean_ci_text(ours), _vs_text(vs_srr),
                     _p_text(vs_srr or {}), best_text, _vs_text(vs_best), _p_text(vs_best or {}),
                     _client_text(s, CLIENT_BASELINE)])
    heads = ["scenario", "MALB (ours)", "vs round robin", "p (Holm)",
             "best practical baseline", "vs it", "p (Holm)",
             f"clients vs {NAMES[CLIENT_BASELINE]}"]
    out = [table(heads, rows, "lrrrlrrl").rstrip("\n"), "",
           "CPU STDEV across servers (%), mean ± 95 % interval; \"vs\": the paired difference "
           "as a ratio, then in points ± its 95 % interval; p from the paired t-test, in "
           "brackets Holm-corrected over the scenario's comparisons, † where p < 0.05 and "
           "the correction does not hold it. Clients: each class's and all requests' p50, p95 "
           "and p99 response time, throughput and failed requests, and the balancing parts' "
           "CPU per 1,000 requests, where ours differs significantly (p < 0.05, uncorrected); "
           f"at most {CLIENT_ITEMS} named a side, end to end first, the others counted (each "
           f"in its cell's summary). {_seeds(suite)}; {_commits(suite)}."]
    return "\n".join(out) + "\n"


# Evaluation 4's aims, as its ledger row in docs/evaluation.md set them before the run: in the
# DeathStarBench data-plane cells, ours' end-to-end p50 and p99 within WITHIN of HAProxy
# leastconn's (the upper end of the paired difference's 95 % interval at most WITHIN of its
# mean), CPU STDEV significantly below the best practical baseline's (Holm) and balancing CPU
# per 1,000 requests significantly below HAProxy leastconn's; in paper and unequal, the CPU
# STDEV aim and no class's p95 significantly worse than that baseline's (uncorrected).
WITHIN = 0.10
EVAL4_CELLS = ("hotel-dataplane", "social-dataplane", "paper", "unequal", "hotel-tracker",
               "social-tracker", "antagonist", "heavy-tail")
CLIENT_AIM_CELLS = ("hotel-dataplane", "social-dataplane")
P95_AIM_CELLS = ("paper", "unequal")


def _verdict(met: bool | None) -> str:
    return "no data" if met is None else "**met**" if met else "not met"


def _within_aim(entry: dict, against: str) -> tuple[str, bool | None]:
    """Ours' figure within WITHIN of `against`'s or better: (what the data shows, met)."""
    v, base = entry["vs"].get(against), entry["policies"].get(against)
    ours = entry["policies"].get(significance.CANDIDATE)
    if not v or v.get("ci") is None or not base or base["mean"] is None:
        return "–", None
    upper, allowed = v["diff"] + v["ci"], WITHIN * base["mean"]
    return (f"{significance.mean_ci_text(ours, 0)} against "
            f"{significance.mean_ci_text(base, 0)}; difference {v['diff']:+,.0f} "
            f"({v['diff'] - v['ci']:+,.0f} to {upper:+,.0f}), at most {allowed:+,.0f} allowed",
            upper <= allowed)


def _below_aim(entry: dict, against: str, p_key: str) -> tuple[str, bool | None]:
    """Ours' figure significantly below `against`'s (paired t-test's p under `p_key`)."""
    v, base = entry["vs"].get(against), entry["policies"].get(against)
    ours = entry["policies"].get(significance.CANDIDATE)
    if not v or v.get(p_key) is None or not base:
        return "–", None
    gone = entry.get("runs_left_out")
    return (f"{significance.mean_ci_text(ours, 2)} against "
            f"{significance.mean_ci_text(base, 2)}; {_vs_text(v)}, p "
            f"{'(Holm) ' if p_key == 'p_holm' else ''}{_p(v[p_key])}"
            + (f"; over {v['n']} runs (run {', '.join(map(str, gone))} not measured in "
               f"every policy)" if gone else ""),
            v["diff"] < 0 and v[p_key] < significance.ALPHA)


def _p95_aim(s: dict, against: str) -> tuple[str, bool | None]:
    """No class's p95 significantly worse than `against`'s (paired, uncorrected)."""
    worse, tested = [], 0
    for key, e in s["classes"].items():
        if not key.endswith("_rt_p95") or key.startswith("all_"):
            continue
        v = e["vs"].get(against) or {}
        if v.get("p") is None:
            continue
        tested += 1
        if v["verdict"] == "significantly worse":
            worse.append(f"{e['label'].split(' RT ')[0]} {100 * v['ratio']:+.0f} %")
    if not tested:
        return "–", None
    return ("worse: " + ", ".join(worse) if worse else f"none of {tested} worse"), not worse


def aims_table(suite: dict) -> str:
    """Evaluation 4's pre-registered aims, a row each, with what the data shows and whether
    it is met; the cells still to run named below."""
    rows = []
    scenarios = suite["scenarios"]
    for cell in EVAL4_CELLS:
        s = scenarios.get(cell)
        if s is None or cell not in CLIENT_AIM_CELLS + P95_AIM_CELLS:
            continue
        best = s["best_practical"]
        best_name = NAMES.get(best, best)
        cpu = {"policies": s["cpu_stdev"]["policies"], "vs": s["vs"]}
        aims = []
        if cell in CLIENT_AIM_CELLS:
            for q in ("p50", "p99"):
                aims.append((f"end-to-end {q} (ms) within {100 * WITHIN:.0f} % of "
                             f"{NAMES[CLIENT_BASELINE]}'s or better",
                             *_within_aim(s["classes"][f"all_rt_{q}"], CLIENT_BASELINE)))
        aims.append((f"CPU STDEV (%) below the best practical baseline's ({best_name})",
                     *_below_aim(cpu, best, "p_holm")))
        if cell in CLIENT_AIM_CELLS:
            aims.append((f"balancing CPU (s per 1,000 requests) below "
                         f"{NAMES[CLIENT_BASELINE]}'s",
                         *_below_aim(s["classes"]["balancing_cpu"], CLIENT_BASELINE, "p")))
        else:
            aims.append((f"no class's p95 significantly worse than the best practical "
                         f"baseline's ({best_name})",
                         *_p95_aim(s, best)))
        rows += [[cell, aim, text, _verdict(met)] for aim, text, met in aims]
    to_run = [c for c in EVAL4_CELLS if c not in scenarios]
    out = [table(["cell", "aim", "MALB (ours) against it: mean ± 95 % interval; paired "
                  "difference (its 95 % interval)", "verdict"], rows, "llll").rstrip("\n"),
           "", "Aims as the ledger row set them before the run; p from the paired t-test "
           "(Holm-corrected over the cell's policies for CPU STDEV). "
           f"{_seeds(suite)}; {_commits(suite)}."
           + (f" Still to run: {', '.join(to_run)}." if to_run else "")]
    return "\n".join(out) + "\n"


CPU_COLUMNS = ("srr", "lc", "p2c", "prequal", "haproxy-leastconn", "haproxy-agent",
               "malb-paper", "malb")
CPU_COLUMNS_4 = (*CPU_COLUMNS[:-2], "nginx-leastconn", *CPU_COLUMNS[-2:])
EVALUATION_BLOCKS: tuple[Block, ...] = (
    Block("README.md", "where MALB stands", ("eval-4/suite.json",), standing_table),
    Block("docs/evaluation.md", "evaluation 4, aims", ("eval-4/suite.json",), aims_table),
    Block("docs/evaluation.md", "evaluation 4, CPU balance", ("eval-4/suite.json",),
          lambda s: cpu_table(s, CPU_COLUMNS_4)),
    Block("docs/evaluation.md", "evaluation 3, CPU balance", ("eval-3/suite.json",),
          lambda s: cpu_table(s, CPU_COLUMNS)),
    Block("docs/evaluation.md", "evaluation 2, CPU balance", ("eval-2/suite.json",),
          cpu_table),
)
BLOCKS: tuple[Block, ...] = EVALUATION_BLOCKS + tables.BLOCKS


def markers(name: str, sources: tuple[str, ...]) -> tuple[str, str]:
    where = ", ".join(f"data/{s}" for s in sources)
    return (f"<!-- generated by {COMMAND} from {where} ({name}): do not edit -->",
            f"<!-- end of the generated {name} -->")


def splice(doc: str, begin: str, end: str, body: str) -> str:
    """doc with the text between its begin and end lines replaced by body; ValueError when
    the markers are not there once each, in that order."""
    if doc.count(begin) != 1 or doc.count(end) != 1 or doc.index(begin) > doc.index(end):
        raise ValueError(f"no single block from {begin!r} to {end!r}")
    head, rest = doc.split(begin)
    _, tail = rest.split(end)
    return f"{head}{begin}\n{body}{end}{tail}"


def render(docs: dict[str, str]) -> dict[str, str]:
    """The docs (path -> text) with every block they hold generated anew."""
    out = dict(docs)
    for block in BLOCKS:
        if block.doc in out:
            begin, end = markers(block.name, block.sources)
            try:
                body = block.render(*(load(s) for s in block.sources))
            except (OSError, ValueError, LookupError, TypeError, ZeroDivisionError) as exc:
                where = ", ".join(f"data/{s}" for s in block.sources)
                raise ValueError(f"{block.doc} ({block.name}) from {where}: "
                                 f"{type(exc).__name__}: {exc}") from exc
            out[block.doc] = splice(out[block.doc], begin, end, body)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(
        prog=COMMAND, description="Write the results tables of README.md and docs/ from "
                                  "the summaries under data/.")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if a table is out of date")
    every = list(dict.fromkeys(b.doc for b in BLOCKS))
    parser.add_argument("--doc", action="append", choices=every, metavar="PATH",
                        help="only this page's tables (repeatable; default: every page: "
                             f"{', '.join(every)})")
    args = parser.parse_args(argv)
    docs = {}
    for path in args.doc or every:
        with open(os.path.join(ROOT, path), encoding="utf-8") as fh:
            docs[path] = fh.read()
    try:
        wanted = render(docs)
    except (OSError, ValueError, KeyError) as exc:
        print(f"{COMMAND}: {exc}", file=sys.stderr)
        return 2
    stale = [p for p in docs if docs[p] != wanted[p]]
    if args.check:
        if stale:
            print(f"out of date: {', '.join(stale)}; run {COMMAND}", file=sys.stderr)
            return 1
        return 0
    for path in stale:
        with open(os.path.join(ROOT, path), "w", encoding="utf-8") as fh:
            fh.write(wanted[path])
        print(f"[standing] wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
