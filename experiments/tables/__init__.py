"""The results tables of each part's page, rendered from the summaries under data/ (the
evaluations' own are in experiments/standing.py, which writes and checks them all:
`python -m experiments.standing [--doc PATH] [--check]`).

- block: Block, what a generated table is;
- slo: docs/slo.md's comparisons of the SLO loops against the governors.
"""
from __future__ import annotations

from experiments.tables import slo
from experiments.tables.block import Block

BLOCKS: tuple[Block, ...] = (*slo.BLOCKS,)

__all__ = ["Block", "BLOCKS"]
