"""Maglev consistent hashing (``maglev``; Eisenbud et al., "Maglev: A Fast and Reliable
Software Network Load Balancer", NSDI 2016): the flow's 5-tuple looked up in the Maglev
table of the microservice's in-service instances (ryu_apps/maglev.py), equal weights. A flow
always lands on the same instance while the pool stands; an instance going or coming moves
about 1/N of the flows. Without a flow key, round robin. Its short flows can be left to the
switch (a select group rendering the table)."""
from __future__ import annotations

from dataclasses import dataclass

from ryu_apps import maglev
from ryu_apps.policies import register
from ryu_apps.policies.base import Backend, Options, Policy
from ryu_apps.policies.shared_rules import round_robin


@dataclass(frozen=True)
class MaglevOptions(Options):
    table_size: int = maglev.DEFAULT_TABLE_SIZE     # M, a prime

    def __post_init__(self):
        if not maglev.is_prime(self.table_size):
            raise ValueError(f"maglev_table_size: must be a prime number, "
                             f"got {self.table_size!r}")


@register("maglev")
class Maglev(Policy):
    title = "Maglev"
    Options = MaglevOptions
    options: MaglevOptions  # Policy.__init__ sets it: of this class's Options
    dataplane = True

    def __init__(self, options=None):
        super().__init__(options)
        # microservice -> (the in-service instances it was built from, the table)
        self._tables: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}

    def table(self, ms: str, candidates: list[Backend]) -> tuple[str, ...]:
        """The Maglev table of these instances, rebuilt only when the set changes (health,
        draining, pool): a rebuild takes tens of ms at M=65537."""
        names = tuple(b.name for b in candidates)
        cached = self._tables.get(ms)
        if cached is None or cached[0] != names:
            cached = (names, maglev.build_table(names, None, self.options.table_size))
            self._tables[ms] = cached
        return cached[1]

    def choose(self, view, ms, candidates, now, flow):
        if flow.key is None:
            return round_robin(view, self, ms, candidates, now,
                               "maglev: no flow key given, round robin")
        # the table of every instance in service; a caller left out of the candidates (its
        # own call) takes the next slot's owner, so nobody else's flows move
        table = self.table(ms, [b for b in view.pools[ms] if view.in_service(b)])
        slot = maglev.slot_of(table, flow.key)
        names = {c.name for c in candidates}
        while table[slot] not in names:
            slot = (slot + 1) % len(table)
        b = next(c for c in candidates if c.name == table[slot])
        return self.decision(b, "maglev", f"maglev: slot {slot} of {len(table)}, "
                                          f"{len(candidates)} in service", now)
