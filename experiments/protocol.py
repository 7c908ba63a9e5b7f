"""Which schedule seeds a comparison may be designed on and which it is judged on.

Holds DESIGN and EVALUATION (the two seed ranges, docs/evaluation.md defines their use;
RANGES names them), range_of (the range a seed is in), spans (1, 2, 3, 7 -> "1-3, 7"),
describe_seeds (one phrase for a summary, e.g. "schedule seeds 1001-1005 (evaluation
range)"), run_order (the order the contestants play run k in, rotated run by run) and
eta_text (what is left of a series of runs, by the runs so far). A
policy is tuned on design seeds only; figures that claim how well it does come from
evaluation seeds it was never run on while it was being changed.
"""
from __future__ import annotations

import time

DESIGN = range(1, 1000)              # seeds 1-999: try, tune, debug
EVALUATION = range(1000, 10000)      # seeds 1000-9999: report
RANGES = {"design": DESIGN, "evaluation": EVALUATION}


def range_of(seed: int) -> str | None:
    """'design', 'evaluation', or None for a seed in neither."""
    return next((name for name, r in RANGES.items() if seed in r), None)


def spans(seeds: list[int]) -> str:
    """1, 2, 3, 7 -> '1-3, 7'."""
    out: list[list[int]] = []
    for s in sorted(set(seeds)):
        if out and s == out[-1][1] + 1:
            out[-1][1] = s
        else:
            out.append([s, s])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in out)


def describe_seeds(seeds: list[int]) -> str:
    """'schedule seeds 1001-1005 (evaluation range)'; a set that straddles the ranges or
    leaves them says so, so no summary passes design runs off as an evaluation."""
    if not seeds:
        return "no schedule seeds"
    names = {range_of(s) for s in seeds}
    if names == {"design"}:
        where = "design range"
    elif names == {"evaluation"}:
        where = "evaluation range"
    elif None in names:
        where = "partly outside both ranges: design 1-999, evaluation 1000-9999"
    else:
        where = "mixes the design and evaluation ranges"
    word = "seed" if len(set(seeds)) == 1 else "seeds"
    return f"schedule {word} {spans(seeds)} ({where})"


def run_order(contestants: list[str], run: int) -> list[str]:
    """The order the contestants (policies, placement methods) play run k (1-based) in:
    rotated by one place each run, so that a drift within a round (a stack's leftovers, a
    warmer machine) falls on every one of them alike instead of always on the last."""
    k = (run - 1) % len(contestants)
    return list(contestants[k:]) + list(contestants[:k])


def eta_text(took_s: list[float], remaining: int, guess_s: float) -> str:
    """What is left of a series of runs, `remaining` of them including the one starting:
    by the mean of the runs played so far (`took_s`), else by `guess_s` a run; with the
    clock time it should end."""
    per_run = sum(took_s) / len(took_s) if took_s else guess_s
    left = max(0, remaining) * per_run
    end = time.strftime("%H:%M", time.localtime(time.time() + left))
    how = f"{len(took_s)} run(s) so far" if took_s else "the estimate"
    return f"about {left / 60:.0f} min left by {how}, ending about {end}"
