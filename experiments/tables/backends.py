"""docs/testbed.md's table of which entry point ran on which backend, from the lines
`scripts/check-containernet.sh --entry-points` wrote (data/testbed/entry-points/).

- entry_points_table: a row per entry point run: its command, the backend and datapath its
  stacks recorded, how long it took, its exit status and the commit.
"""
from __future__ import annotations

import json

from common.markdown import table
from experiments.tables.block import Block

DOC = "docs/testbed.md"


def _minutes(seconds: int) -> str:
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"


def entry_points_table(lines: str) -> str:
    runs = [json.loads(line) for line in lines.splitlines() if line.strip()]
    rows = [[r["entry"], f"`{r['command']}`", r["backend"], r["datapath"] or "–",
             _minutes(r["seconds"]), "passed" if r["exit_status"] == 0 else
             f"failed ({r['exit_status']})", r["commit"]] for r in runs]
    days = sorted({r["when"][:10] for r in runs})
    caption = (f"{len(runs)} entry points, one run each, on {', '.join(days)}; backend and "
               f"datapath as each run's stacks recorded them (testbed.json); time: the whole "
               f"command, testbed start and teardown included.")
    return table(["entry point", "command", "backend", "datapath", "took", "exit", "commit"],
                 rows, "lllllll") + "\n" + caption + "\n"


BLOCKS = (
    Block(DOC, "entry points on Containernet", ("testbed/entry-points/entry-points.jsonl",),
          entry_points_table),
)
