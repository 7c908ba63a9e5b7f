"""Power of two choices on least connections (``p2c``): two distinct in-service instances
drawn at random, the one with fewer open connections takes the flow (Mitzenmacher, "The
Power of Two Choices in Randomized Load Balancing", IEEE TPDS 2001), what Envoy's
``LEAST_REQUEST`` balancer does by default (choice_count 2). On unequal servers the open
connections count over the server's CPU cores (Envoy, with unequal host weights, switches
to weighted scheduling on weight / (active requests + 1) instead; ours keeps two choices).
Seeded: the same seed and flows give the same choices."""
from __future__ import annotations

import random
from dataclasses import dataclass

from ryu_apps.policies import register
from ryu_apps.policies.base import Options, Policy
from ryu_apps.policies.shared_rules import open_per_capacity


@dataclass(frozen=True)
class PowerOfTwoOptions(Options):
    choices: int = 2
    seed: int = 1

    def __post_init__(self):
        if not isinstance(self.choices, int) or isinstance(self.choices, bool) \
                or self.choices < 1:
            raise ValueError(f"choices: a whole number >= 1, got {self.choices!r}")


@register("p2c")
class PowerOfTwoChoices(Policy):
    title = "power of two choices"
    Options = PowerOfTwoOptions
    options: PowerOfTwoOptions  # Policy.__init__ sets it: of this class's Options

    def __init__(self, options=None):
        super().__init__(options)
        self.rng = random.Random(self.options.seed)

    def choose(self, view, ms, candidates, now, flow):
        drawn = self.rng.sample(candidates, min(self.options.choices, len(candidates)))
        scores = {b.name: open_per_capacity(view, b) for b in drawn}
        best = min(drawn, key=lambda b: (scores[b.name], drawn.index(b)))
        return self.decision(best, "power-of-two-choices",
                             f"fewer open connections of {len(drawn)} drawn at random", now,
                             {b.server: round(scores[b.name], 3) for b in drawn})

    def watches(self, view, ms):
        return True
