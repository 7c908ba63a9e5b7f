"""The seconds of flow one instance carried (its open flows integrated over time), from
changes that arrive nearly in time order, some of them back-dated (plain Python):

- CarriedSeconds: `change(t, +1 | -1)` as flows start and end, an end possibly dated back
  to a flow's last traffic; `at(t)`: the seconds carried from the first change up to t,
  exact for t within the last `keep_s`.
"""
from __future__ import annotations

import math
import struct

US = 1_000_000          # times and sums are kept in whole microseconds: exact integers
# one change in a slot's record: its time (us) and delta, 64-bit integers (times to about
# 290,000 years either side of the epoch)
CHANGE = struct.Struct("<qq")


class CarriedSeconds:
    """F(x), the integral of the open-flow count up to x, is x * C(x) - S(x), where C and S
    sum the changes up to x (delta, and delta times its time). A flow found quiet when its
    rules idle out ends at its last traffic, up to the idle timeout before the latest
    change, so C and S are kept per slot of `slot_s` on a ring covering `keep_s`, in a
    Fenwick tree: a change, back-dated or not, and a value at a recent time each cost
    O(log(keep_s / slot_s)) and the changes inside one slot, whatever the number of flows.
    Changes older than the ring are folded into one sum; a value further back than that
    counts them as if they had all come before it."""

    def __init__(self, keep_s: float = 60.0, slot_s: float = 0.05):
        if not keep_s > 0 or not slot_s > 0:
            raise ValueError("keep_s and slot_s must be > 0")
        self.slot_us = max(1, round(slot_s * US))
        self.size = 1 << max(1, math.ceil(math.log2(keep_s * US / self.slot_us + 2)))
        self._count = [0] * (self.size + 1)         # Fenwick trees over ring positions
        self._sum = [0] * (self.size + 1)
        # slot -> its changes packed as CHANGE records: a bytearray, which the garbage
        # collector never follows (thousands of slots a minute) and which grows in place (a
        # flood's ends may all fall in one slot)
        self._slots: dict[int, bytearray] = {}
        self._latest: int | None = None             # the latest slot with a change
        self._old_count = self._old_sum = 0         # changes that left the ring
        self._all_count = self._all_sum = 0         # every change

    def change(self, t: float, delta: int) -> None:
        """The open-flow count changed by delta at t."""
        tau = round(t * US)
        slot = tau // self.slot_us
        self._all_count += delta
        self._all_sum += delta * tau
        latest = self._latest
        if latest is None or slot > latest:
            self._advance(slot)
            latest = slot
        if slot <= latest - self.size:              # before the ring
            self._old_count += delta
            self._old_sum += delta * tau
            return
        record = self._slots.get(slot)
        if record is None:
            record = self._slots[slot] = bytearray()
        record += CHANGE.pack(tau, delta)
        self._add(slot % self.size + 1, delta, delta * tau)

    def at(self, t: float) -> float:
        """Seconds of flow carried up to t."""
        x = round(t * US)
        if self._latest is None:
            return 0.0
        slot = x // self.slot_us
        if slot > self._latest:
            count, total = self._all_count, self._all_sum
        elif slot <= self._latest - self.size:
            count, total = self._old_count, self._old_sum
        else:       # all, less the ring's slots from x's on, plus x's own changes up to x
            c_after, s_after = self._range(slot, self._latest)
            count, total = self._all_count - c_after, self._all_sum - s_after
            for tau, delta in CHANGE.iter_unpack(self._slots.get(slot, b"")):
                if tau <= x:
                    count += delta
                    total += delta * tau
        # before the ring only the folded sums are known: never less than nothing carried
        return max(0, x * count - total) / US

    # ---------------------------------------------------------------- the ring
    def _advance(self, slot: int) -> None:
        """Slot becomes the latest: those that fall off the ring fold into the old sums."""
        if self._latest is not None and slot - self._latest < self.size:
            gone = [s for s in range(self._latest - self.size + 1, slot - self.size + 1)
                    if s in self._slots]
        else:
            gone = [s for s in self._slots if s <= slot - self.size]
        for s in gone:
            count = total = 0
            for tau, delta in CHANGE.iter_unpack(self._slots.pop(s)):
                count += delta
                total += delta * tau
            self._old_count += count
            self._old_sum += total
            self._add(s % self.size + 1, -count, -total)
        self._latest = slot

    def _add(self, i: int, count: int, total: int) -> None:
        while i <= self.size:
            self._count[i] += count
            self._sum[i] += total
            i += i & -i

    def _prefix(self, i: int) -> tuple[int, int]:
        count = total = 0
        while i > 0:
            count += self._count[i]
            total += self._sum[i]
            i -= i & -i
        return count, total

    def _range(self, first: int, last: int) -> tuple[int, int]:
        """The sums over slots first..last (at most the ring's size apart)."""
        lo, hi = first % self.size + 1, last % self.size + 1
        c_hi, s_hi = self._prefix(hi)
        c_lo, s_lo = self._prefix(lo - 1)
        if lo <= hi:
            return c_hi - c_lo, s_hi - s_lo
        c_all, s_all = self._prefix(self.size)
        return c_all - c_lo + c_hi, s_all - s_lo + s_hi
