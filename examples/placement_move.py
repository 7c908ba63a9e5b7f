"""A placement move, live: the ui service moves from one server to another on the
two-switch testbed while a client keeps requesting it; the controller adds the new instance,
drains the old one and removes it when its flows are done (docs/placement.md, "A move,
live").

    sudo .venv/bin/python examples/placement_move.py
"""
import sys
import tempfile

from common.config import DEFAULT_MICROSERVICES
from experiments.stack import Stack
from placement.apply import ControllerClient, InProcessTestbed, apply_moves
from placement.problem import Move

CONFIG = {
    "testbed": {"switches": 2, "clients": 1},
    # two ui instances (srv2, srv3), one video and one backend on every server
    "microservices": [dict(m, replicas=2) if m["name"] == "ui" else m
                      for m in DEFAULT_MICROSERVICES],
    "controller": {"idle_timeout_s": 5, "health": {"interval_s": 1, "timeout_s": 0.5}},
}


def served(client, url: str, n: int) -> list[str]:
    out = client.cmd(f"for i in $(seq {n}); do curl -s -D - -o /dev/null --max-time 10 "
                     f"'{url}' | grep -i x-served-by || echo 'x-served-by: FAILED'; done")
    return [line.split(":", 1)[1].strip() for line in out.splitlines() if ":" in line]


def main() -> int:
    with Stack(CONFIG, tempfile.mkdtemp(prefix="malb-example-"), policy="srr",
               agents=False, profiler=False) as stack:
        cfg, client = stack.cfg, stack.testbed.node("cli1")
        url = f"http://{cfg.microservice('ui').vip}:8002/bytes?n=1000"
        controller = ControllerClient(stack.controller_url(""))
        print("before:", controller.layout()["ui"], served(client, url, 4))
        client.cmd(f"for i in $(seq 40); do curl -s -o /dev/null -w '%{{http_code}}\\n' "
                   f"--max-time 10 '{url}'; sleep 0.1; done > /tmp/during.txt 2>&1 &")
        (result,) = apply_moves(cfg, [Move("ui", "srv2", "srv4")], controller,
                                InProcessTestbed(stack.testbed))
        print("move:", result.as_dict())
        client.cmd("wait")
        codes = client.cmd("sort /tmp/during.txt | uniq -c").strip()
        print("during the move, HTTP status counts:", codes.replace("\n", ", "))
        after = served(client, url, 4)
        print("after:", controller.layout()["ui"], after)
        return 0 if controller.layout()["ui"] == ["srv3", "srv4"] and "FAILED" not in after \
            else 1


if __name__ == "__main__":
    sys.exit(main())
