"""experiments/tables/backends.py: the entry points' table is each recorded run as written."""
import json

from experiments.tables import backends


def _line(entry, seconds, status=0, backend="containernet"):
    return json.dumps({"entry": entry, "command": f"python -m experiments.{entry}",
                       "seconds": seconds, "exit_status": status, "backend": backend,
                       "datapath": "user", "stacks": 1, "commit": "abc1234",
                       "when": "2026-12-07T10:20:00"})


def test_a_row_per_run_with_its_backend_time_and_exit():
    md = backends.entry_points_table("\n".join([_line("faults", 185), _line("slo", 42, 1)]))
    rows = [r.split(" | ") for r in md.splitlines() if r.startswith("| faults")
            or r.startswith("| slo")]
    assert rows[0][2:6] == ["containernet", "user", "3 min 05 s", "passed"]
    assert rows[1][4:6] == ["42 s", "failed (1)"]
    assert "2 entry points, one run each, on 2026-12-07" in md
