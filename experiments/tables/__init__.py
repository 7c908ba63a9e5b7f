"""The results tables of each part's page, rendered from the summaries under data/ (the
evaluations' own are in experiments/standing.py, which writes and checks them all:
`python -m experiments.standing [--doc PATH] [--check]`).

- block: Block, what a generated table is;
- backends: docs/testbed.md's entry points on Containernet;
- slo: docs/slo.md's comparisons of the SLO loops against the governors;
- placement: docs/placement.md's;
- reliability: docs/reliability.md's;
- experiments_page: docs/experiments.md's;
- bench_pages: docs/profiler.md's and docs/haproxy.md's.
"""
from __future__ import annotations

from experiments.tables import backends, bench_pages, experiments_page, placement, \
    reliability, slo
from experiments.tables.block import Block

BLOCKS: tuple[Block, ...] = (*slo.BLOCKS, *placement.BLOCKS, *reliability.BLOCKS,
                             *experiments_page.BLOCKS, *bench_pages.BLOCKS,
                             *backends.BLOCKS)

__all__ = ["Block", "BLOCKS"]
