"""How many generated cases the property-based and fuzz tests run (Hypothesis, schemathesis).

Two budgets, chosen once per test run by $MALB_FUZZ (docs/tests.md):
- quick (the default; `make check` and `make test`): a tenth of each test's thorough count;
- thorough (`make test-e2e`): the full counts, thousands of requests over loopback HTTP.
Both run without Hypothesis' example database, so nothing is written into the checkout.
"""
from __future__ import annotations

import os

from hypothesis import settings

PROFILES = ("quick", "thorough")
PROFILE = os.environ.get("MALB_FUZZ") or "quick"
if PROFILE not in PROFILES:
    raise SystemExit(f"MALB_FUZZ: expected one of {', '.join(PROFILES)}, got {PROFILE!r}")

# what a test that names no count of its own runs (Hypothesis' own default is 100)
settings.register_profile("quick", max_examples=20, database=None)
settings.register_profile("thorough", max_examples=200, database=None)
settings.load_profile(PROFILE)


def examples(thorough: int, quick: int | None = None) -> int:
    """A test's count of cases: `thorough` under the thorough budget, else `quick` (a tenth
    of thorough, at least 10, when not given)."""
    if PROFILE == "thorough":
        return thorough
    return quick if quick is not None else max(10, thorough // 10)
