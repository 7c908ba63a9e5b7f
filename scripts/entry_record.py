"""One JSON line for an entry point's run (scripts/check-containernet.sh --entry-points):

    python scripts/entry_record.py NAME RESULTS_DIR SECONDS EXIT_STATUS MODULE [ARGS...]

The backend and datapath are what the run's own stack recorded (every testbed.json under
RESULTS_DIR; "none recorded" when it wrote none), the commit the checkout's."""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def recorded_testbeds(results: str) -> list[dict]:
    found = []
    for path in sorted(glob.glob(os.path.join(results, "**", "testbed.json"), recursive=True)):
        try:
            with open(path, encoding="utf-8") as fh:
                found.append(json.load(fh))
        except (OSError, ValueError):
            continue
    return found


def record(name: str, results: str, seconds: int, status: int, argv: list[str]) -> dict:
    testbeds = recorded_testbeds(results)
    backends = sorted({t.get("backend", "?") for t in testbeds}) or ["none recorded"]
    datapaths = sorted({t.get("datapath", "?") for t in testbeds})
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    return {"entry": name, "command": "python -m " + " ".join(argv), "seconds": seconds,
            "exit_status": status, "backend": ", ".join(backends),
            "datapath": ", ".join(datapaths), "stacks": len(testbeds), "commit": commit,
            "when": time.strftime("%Y-%m-%dT%H:%M:%S")}


def main(argv: list[str]) -> int:
    if len(argv) < 5 or not argv[2].isdigit() or not argv[3].lstrip("-").isdigit():
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    print(json.dumps(record(argv[0], argv[1], int(argv[2]), int(argv[3]), argv[4:])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
