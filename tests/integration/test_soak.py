"""A short soak (experiments/soak.py) on the real stack: minutes are too short for a growth
per hour, so this version fails on growth that shows in minutes: flow records, rules and
active flows that keep piling up, memory, descriptors or threads climbing through the run.
Three minutes, in `make test-e2e` only (kept out of `make test` for CI's time). The
hour-long soak's figures are in docs/reliability.md."""
from __future__ import annotations

import csv
import json

import pytest

from experiments.soak import main
from ryu_apps.flows import FlowTable

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("clean_machine")]
# kind -> (allowed factor, allowed absolute slack) of the last quarter's mean over the
# second quarter's
ALLOWED = {"active_flows": (1.5, 30), "rules": (1.5, 60),
           "rss_mb": (1.0, 30), "fds": (1.0, 10), "threads": (1.0, 4)}
# not the history's size: the profiler prunes every 100 periods (5 minutes at 3 s) and
# SQLite reuses freed pages without shrinking the file, so 3 minutes show only its growth;
# the hour's soak (retention 15 min) judges it


@pytest.mark.e2e
def test_a_short_soak_shows_nothing_piling_up(tmp_path):
    soak(tmp_path, minutes=3, sample_s=5)


def soak(tmp_path, minutes: float, sample_s: float):
    code = main(["--minutes", str(minutes), "--rate", "10", "--sample-s", str(sample_s),
                 "--history-retention-min", "1", "--policy", "malb", "--out", str(tmp_path)])
    assert code in (0, 1)        # an hour's verdicts from 3 minutes are not the test
    with open(tmp_path / "samples.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) >= 0.8 * minutes * 60 / sample_s
    q = len(rows) // 4
    for name in rows[0]:
        kind = name.rsplit(".", 1)[-1]
        if kind not in ALLOWED:
            continue
        values = [float(r[name]) for r in rows if r[name] not in ("", "None")]
        second = values[q:2 * q]
        last = values[3 * q:]
        factor, slack = ALLOWED[kind]
        assert sum(last) / len(last) <= factor * sum(second) / len(second) + slack, \
            (name, second, last)
    # the controller keeps the newest keep_ended ended flows (GET /malb/flows) by design:
    # bounded by that and the active ones, not by what three minutes show
    records = [float(r["controller.flow_records"]) for r in rows]
    active = [float(r["controller.active_flows"]) for r in rows]
    assert max(records) <= FlowTable.keep_ended + 2 * max(active) + 50, (records, active)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert {x["figure"] for x in summary["figures"]} >= {"controller.rss_mb",
                                                         "controller.flow_records", "s1.rules",
                                                         "profiler.history_mb"}
    assert (tmp_path / "growth.png").stat().st_size > 0
