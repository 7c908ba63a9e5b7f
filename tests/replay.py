"""Replay of the controller's output, to show that a refactoring changes no byte of it.

A pytest plugin and a command. As a plugin (``-p tests.replay``, with MALB_REPLAY_OUT set)
it records, per test, a digest of every OpenFlow byte the controller core and the new-flow
path return and of every decision the policy core makes; with MALB_REPLAY_POLICY set, every
ControllerCore the tests build runs that policy instead of the one the test names (the
fake-switch scenarios replayed under each policy: assertions may then fail, the record up
to that point is what counts). As a command it also plays the fluid model of Scenario 2
(experiments/lb_model.py: the real PolicyCore and profiler on thousands of decisions) and
records each run's decisions.

    .venv/bin/python -m tests.replay record before.json     # at the old commit
    .venv/bin/python -m tests.replay record after.json      # at the new one
    .venv/bin/python -m tests.replay compare before.json after.json
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

from common.config import config_path, parse_config_file_data
from common.procs import ROOT
from ryu_apps import policies
from ryu_apps.core import ControllerCore
from ryu_apps.flowpath import FlowPath
from ryu_apps.policy_core import PolicyCore
from ryu_apps.core_result import CoreResult

FAKE_SWITCH_TESTS = ("tests/unit/ryu_apps/test_core.py", "tests/unit/ryu_apps/test_flowpath.py",
                     "tests/unit/ryu_apps/test_dataplane.py")
POLICY_TESTS = ("tests/unit/ryu_apps/test_policy_core.py", "tests/unit/ryu_apps/policies",
                "tests/unit/experiments/test_lb_model.py",
                "tests/unit/ryu_apps/test_profiler_answers.py",
                "tests/unit/ryu_apps/estimators/test_running.py")

def replay_policies() -> tuple[str, ...]:
    """Every registered policy: the fake-switch scenarios and the model under each."""
    return tuple(policies.names())

_digests: dict[str, hashlib._Hash] = {}
_current = ["<collection>"]


def _feed(kind: str, payload) -> None:
    h = _digests.setdefault(_current[0], hashlib.sha256())
    h.update(kind.encode())
    h.update(payload if isinstance(payload, bytes) else repr(payload).encode())


def _result(res) -> None:
    for dpid, data in res.sends:
        _feed("send", dpid.to_bytes(8, "big") + bytes(data))
    if res.decision is not None:
        _decision(res.decision)


def _decision(d) -> None:
    _feed("decision", (d.microservice, d.instance, d.server, d.algorithm, d.reason,
                       sorted(d.scores.items()), d.weights, d.time))


_depth = [0]


def _wrap(cls, name: str, record, outermost_only: bool = False) -> None:
    """`outermost_only`: record what a call returns to its caller outside the wrapped
    classes, not what one of their methods returns to another (how the work is split
    between them may change; what leaves them may not)."""
    original = getattr(cls, name)

    def wrapper(*args, **kwargs):
        _depth[0] += 1
        try:
            out = original(*args, **kwargs)
        finally:
            _depth[0] -= 1
        if not outermost_only or _depth[0] == 0:
            record(out)
        return out
    wrapper.__wrapped__ = original
    setattr(cls, name, wrapper)


def install() -> None:
    def record(out):
        if isinstance(out, CoreResult):
            _result(out)
        elif isinstance(out, (bytes, bytearray)):
            _feed("bytes", bytes(out))
    for cls in (ControllerCore, FlowPath):
        for name, member in list(vars(cls).items()):
            if callable(member) and not name.startswith("_"):
                _wrap(cls, name, record, outermost_only=True)
    _wrap(PolicyCore, "choose", _decision)
    forced = os.environ.get("MALB_REPLAY_POLICY")
    if forced:
        init = ControllerCore.__init__

        def forced_init(self, cfg, policy=None, *args, **kwargs):
            init(self, cfg, forced, *args, **kwargs)
        ControllerCore.__init__ = forced_init


# ---------------------------------------------------------------- pytest plugin
def pytest_configure(config):
    if os.environ.get("MALB_REPLAY_OUT"):
        install()


def pytest_runtest_setup(item):
    _current[0] = item.nodeid


def pytest_unconfigure(config):
    out = os.environ.get("MALB_REPLAY_OUT")
    if out:
        with open(out, "w") as fh:
            json.dump({k: h.hexdigest() for k, h in sorted(_digests.items())}, fh, indent=0)


# ---------------------------------------------------------------- the command
def _pytest(paths, out: str, policy: str | None) -> dict:
    env = {**os.environ, "MALB_REPLAY_OUT": out}
    if policy:
        env["MALB_REPLAY_POLICY"] = policy
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "tests.replay",
                    "-p", "no:cacheprovider", *paths], cwd=ROOT, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    with open(out) as fh:
        return json.load(fh)


def _model_runs() -> dict:
    """Every policy's decisions in the fluid model: equal and unequal servers, two seeds."""
    # deferred: the fluid model (NumPy, SciPy), for the command only, not in the plugin
    from experiments import lb_model, workload
    out = {}
    for shares in ("0.25", "0.6,0.3,0.3,0.2"):
        opts = lb_model.parser().parse_args(["--phase-seconds", "20", "--period", "1",
                                             "--server-cpu", shares])
        cfg = parse_config_file_data(workload.config_data(opts), config_path(None))
        for policy in replay_policies():
            for seed in (2, 3):
                model = lb_model.PolicyRun(cfg, opts, policy, seed)
                _digests.clear()
                _current[0] = "model"
                model.run(3 * opts.phase_seconds)
                out[f"model {shares} {policy} seed {seed}"] = _digests["model"].hexdigest()
    return out


def record(path: str) -> None:
    tmp = path + ".part"
    result = {"tests": _pytest([*FAKE_SWITCH_TESTS, *POLICY_TESTS], tmp, None)}
    for policy in replay_policies():
        result[f"fake switch under {policy}"] = _pytest(FAKE_SWITCH_TESTS, tmp, policy)
    os.unlink(tmp)
    install()
    result["model"] = _model_runs()
    with open(path, "w") as fh:
        json.dump(result, fh, indent=1, sort_keys=True)
    print(f"{path}: " + ", ".join(f"{k}: {len(v)} digests" for k, v in result.items()))


def compare(a: str, b: str) -> int:
    with open(a) as fh:
        old = json.load(fh)
    with open(b) as fh:
        new = json.load(fh)
    differ = unmatched = 0
    for group in sorted(set(old) | set(new)):
        o, n = old.get(group, {}), new.get(group, {})
        changed = sorted(k for k in set(o) & set(n) if o[k] != n[k])
        gone = sorted(set(o) - set(n))
        print(f"{group}: {len(set(o) & set(n))} in both, {len(changed)} differ, "
              f"{len(gone)} only before, {len(set(n) - set(o))} only after")
        for k in changed:
            print(f"  differs: {k}")
        differ += len(changed)
        unmatched += len(gone) + len(set(n) - set(o))
    if unmatched:
        print(f"{unmatched} records on one side only (tests added, removed or renamed, or "
              f"recorded from another directory): look at them before trusting the rest")
    return 1 if differ or unmatched else 0


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 2 and args[0] == "record":
        record(args[1])
        return 0
    if len(args) == 3 and args[0] == "compare":
        return compare(args[1], args[2])
    print(__doc__.split("\n\n")[-1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
