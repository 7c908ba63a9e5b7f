"""Maglev consistent hashing (Eisenbud et al., "Maglev: A Fast and Reliable Software Network
Load Balancer", NSDI 2016, section 3.4), as plain Python: no Ryu, no I/O. The `maglev`
policy's lookup table, and the slot tables of data-plane mode (docs/controller.md).

- build_table: the lookup table of M slots (M prime); weights as turns;
- lookup, slot_of, flow_hash: a flow's backend and slot, by a hash stable across processes;
- changed_slots, slot_counts: the slots that moved between two tables, slots per backend;
- offset_skip, is_prime: a backend's preference list; the table sizes allowed.
"""
from __future__ import annotations

import hashlib
import math
from collections.abc import Hashable, Iterable, Sequence

from common.numbers import finite_non_negative

DEFAULT_TABLE_SIZE = 65537     # the paper's size; any prime works, well above 100 x backends


def is_prime(n: int) -> bool:
    if not isinstance(n, int) or n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    return all(n % k for k in range(3, math.isqrt(n) + 1, 2))


def _h64(data: bytes, person: bytes) -> int:
    # person= salts the digest: two independent hash functions from one algorithm
    return int.from_bytes(hashlib.blake2b(data, digest_size=8, person=person).digest(), "big")


def offset_skip(name: str, size: int) -> tuple[int, int]:
    """Where a backend's preference list starts in a table of `size` slots, and its stride:
    two independent blake2b hashes of its name, never Python's hash(), so the same names
    give the same table in every process and on every restart (a flow keeps its backend
    across controller restarts). With `size` prime, every stride visits every slot."""
    data = name.encode()
    return _h64(data, b"maglev-offset") % size, _h64(data, b"maglev-skip") % (size - 1) + 1


def flow_hash(key: Hashable) -> int:
    """A stable 64-bit hash of a flow key (e.g. the 5-tuple protocol, source address and port,
    destination address and port): the fields' text, separated so ("1", "23") != ("12", "3")."""
    parts = key if isinstance(key, (tuple, list)) else (key,)
    text = "\x1f".join(str(p) for p in parts)
    return _h64(text.encode(), b"maglev-flow")


def _check(names: Sequence[str], weights: Sequence[float] | None, size: int
           ) -> list[float]:
    if not is_prime(size):
        raise ValueError(f"size: must be a prime number, got {size!r}")
    if not names:
        raise ValueError("names: at least one backend is needed")
    if any(not isinstance(n, str) or not n for n in names):
        raise ValueError("names: every backend needs a non-empty name")
    if len(set(names)) != len(names):
        dup = next(n for n in names if list(names).count(n) > 1)
        raise ValueError(f"names: {dup!r} appears more than once")
    if len(names) > size:
        raise ValueError(f"size: {size} slots cannot hold {len(names)} backends")
    if weights is None:
        return [1.0] * len(names)
    if len(weights) != len(names):
        raise ValueError(f"weights: {len(weights)} weights for {len(names)} backends")
    out = []
    for n, w in zip(names, weights):
        if not finite_non_negative(w):
            raise ValueError(f"weights: {n}: must be a finite number >= 0, got {w!r}")
        out.append(float(w))
    if not any(out):
        raise ValueError("weights: at least one must be > 0")
    return out


def build_table(names: Sequence[str], weights: Sequence[float] | None = None,
                size: int = DEFAULT_TABLE_SIZE) -> tuple[str, ...]:
    """The lookup table: for each of `size` slots, the name of the backend that owns it.
    Every backend's preference list is the permutation (offset + j * skip) mod size
    (offset_skip); backends take turns claiming their next still-free preferred slot until
    the table is full. With equal weights each backend ends up with floor(M/N) or ceil(M/N)
    slots; one that goes or comes moves about 1/N of the slots and leaves most others where
    they were.

    `weights` (default all equal) are relative: a backend of weight w takes w / max(weights)
    turns per round (fractions carried over to later rounds; the paper's "adjusting the
    relative frequency of the backends' turns"); weight 0 takes no slot."""
    ws = _check(names, weights, size)
    top = max(ws)
    share = [w / top for w in ws]
    credit = [0.0] * len(names)
    params = [offset_skip(n, size) for n in names]
    nxt = [off for off, _ in params]          # each backend's next preferred slot
    skips = [sk for _, sk in params]
    entry = [-1] * size
    filled = 0
    while True:
        for i in range(len(names)):
            credit[i] += share[i]
            while credit[i] >= 1.0:
                credit[i] -= 1.0
                c, sk = nxt[i], skips[i]
                while entry[c] >= 0:
                    c += sk
                    if c >= size:
                        c -= size
                entry[c] = i
                c += sk
                nxt[i] = c - size if c >= size else c
                filled += 1
                if filled == size:
                    return tuple(names[k] for k in entry)


def lookup(table: Sequence[str], flow_key: Hashable) -> str:
    """The backend of a flow: the owner of slot flow_hash(key) mod M."""
    if not table:
        raise ValueError("table: empty")
    return table[flow_hash(flow_key) % len(table)]


def slot_of(table: Sequence[str], flow_key: Hashable) -> int:
    return flow_hash(flow_key) % len(table)


def changed_slots(old: Sequence[str], new: Sequence[str]) -> list[int]:
    """The slots whose backend differs between two tables of the same size: the share of
    the hash space (and so of new flows) that moves."""
    if len(old) != len(new):
        raise ValueError(f"new: {len(new)} slots, the old table has {len(old)}")
    return [k for k, (a, b) in enumerate(zip(old, new)) if a != b]


def slot_counts(table: Iterable[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name in table:
        counts[name] = counts.get(name, 0) + 1
    return counts
