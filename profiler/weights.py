"""MALB resource weights (alpha, beta, gamma).

Section III.B/IV.A of the paper: a microservice's weight for a resource is that
resource's share of the microservice's total (normalized) utilization, e.g. usage
0.51 % CPU, 19.26 % memory, 22.87 % network gives 0.012, 0.452, 0.536. Section III.C:
a server's load for that microservice is alpha*cpu + beta*mem + gamma*net of the
server's utilization percentages (computed by the controller's policy core,
ryu_apps/policy_core.py, which also decides what a missing value means).
"""
from __future__ import annotations

import math

# The three resources of a load, in the order of their weights alpha, beta, gamma:
# everything that keeps per-resource figures uses these names.
RESOURCES = ("cpu", "mem", "net")
EQUAL_WEIGHTS = (1 / 3, 1 / 3, 1 / 3)


def _usage(name: str, value: float | None) -> float:
    """Validate one utilization percentage; None (no prediction yet) counts as 0."""
    if value is None:
        return 0.0
    if isinstance(value, bool):
        raise ValueError(f"{name}: expected a number, got {value!r}")
    value = float(value)
    if math.isnan(value) or value < 0 or math.isinf(value):
        raise ValueError(f"{name}: expected a finite utilization >= 0, got {value!r}")
    return value


def weights_from_usage(cpu: float | None, mem: float | None,
                       net: float | None) -> tuple[float, float, float]:
    """Return (alpha, beta, gamma), each resource's share of cpu + mem + net.

    Inputs are utilization percentages (measured or predicted). A None input means
    "unknown" and contributes no weight; when nothing is known or all usage is 0 there
    is no evidence of which resource matters, so the weights are equal (1/3 each).
    Negative, NaN or infinite inputs raise ValueError naming the resource.
    """
    values = (_usage("cpu", cpu), _usage("mem", mem), _usage("net", net))
    total = sum(values)
    if total == 0:
        return EQUAL_WEIGHTS
    alpha, beta, gamma = (v / total for v in values)
    return alpha, beta, gamma
