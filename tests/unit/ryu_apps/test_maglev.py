"""Maglev hashing's known properties (Eisenbud et al., NSDI 2016, section 3.4)."""
import functools
import hashlib
import os
import subprocess
import sys

import pytest

from ryu_apps import maglev
from ryu_apps.maglev import build_table, changed_slots, lookup, slot_counts
from tests.conftest import ROOT

M = 65537


def names(n: int) -> tuple[str, ...]:
    return tuple(f"srv{i}-ui" for i in range(1, n + 1))


@functools.cache
def table(backends: tuple[str, ...], weights: tuple | None = None, size: int = M):
    return build_table(backends, weights, size)


@pytest.mark.parametrize("n", range(3, 21))
def test_equal_weights_give_every_backend_its_share_within_one_slot(n):
    counts = slot_counts(table(names(n)))
    assert set(counts) == set(names(n))
    # population in turns: floor(M/N) or ceil(M/N) slots each
    assert max(counts.values()) - min(counts.values()) <= 1
    assert max(counts.values()) / min(counts.values()) < 1.001


def test_weighted_shares_are_proportional_to_the_weights():
    backends, weights = ("a", "b", "c", "d"), (1.0, 2.0, 3.0, 0.5)
    counts = slot_counts(table(backends, weights))
    for b, w in zip(backends, weights):
        assert counts[b] / M == pytest.approx(w / sum(weights), abs=0.002)
    # weight 0: no slot at all; integer weights work the same
    counts = slot_counts(build_table(["a", "b", "c"], [0, 1, 1], 4099))
    assert "a" not in counts and abs(counts["b"] - counts["c"]) <= 1


@pytest.mark.parametrize("n", [3, 5, 8, 13, 20])
def test_removing_one_backend_moves_about_one_nth_of_the_slots(n):
    before = table(names(n))
    for gone in (names(n)[0], names(n)[n // 2], names(n)[-1]):
        after = table(tuple(b for b in names(n) if b != gone))
        moved = len(changed_slots(before, after)) / M
        assert 1 / n - 0.002 <= moved <= 1 / n + 0.02
        # the slots of the backends that stay mostly stay with them
        kept = [k for k, b in enumerate(before) if b != gone]
        assert sum(before[k] != after[k] for k in kept) / len(kept) < 0.01
        assert gone not in after


@pytest.mark.parametrize("n", [3, 8, 20])
def test_adding_a_backend_takes_about_its_share_and_moves_little_else(n):
    before = table(names(n))
    after = table(names(n) + ("new",))
    changed = changed_slots(before, after)
    assert len(changed) / M <= 1 / (n + 1) + 0.02
    assert sum(after[k] != "new" for k in changed) / M < 0.01


def test_lookup_follows_the_table_and_a_flow_moves_only_if_its_slot_moved():
    before, after = table(names(4)), table(names(4)[:3])
    moved = set(changed_slots(before, after))
    flows = [("tcp", "10.0.200.1", 40000 + p, "10.0.0.2", 80) for p in range(2000)]
    for f in flows:
        slot = maglev.slot_of(before, f)
        assert lookup(before, f) == before[slot]
        assert (lookup(before, f) != lookup(after, f)) == (slot in moved)
    # flows spread like the slots
    counts = slot_counts(lookup(before, f) for f in flows)
    assert min(counts.values()) > 2000 / 4 * 0.85


def test_flow_hash_separates_fields():
    assert maglev.flow_hash(("1", "23")) != maglev.flow_hash(("12", "3"))
    assert maglev.flow_hash(("tcp", "10.0.0.1", 1)) == maglev.flow_hash(["tcp", "10.0.0.1", 1])


def test_same_inputs_same_table_in_every_process():
    backends = ("srv1-video", "srv2-video", "srv3-video")
    here = hashlib.sha256("\n".join(build_table(backends, (1, 2, 1), 4099)).encode()).hexdigest()
    assert build_table(backends, (1, 2, 1), 4099) == build_table(backends, (1, 2, 1), 4099)
    code = ("import hashlib; from ryu_apps.maglev import build_table; print(hashlib.sha256("
            "'\\n'.join(build_table(('srv1-video', 'srv2-video', 'srv3-video'), (1, 2, 1), "
            "4099)).encode()).hexdigest())")
    for seed in ("1", "2"):     # Python's own hash() differs between these processes
        out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                             text=True, check=True, env={**os.environ, "PYTHONHASHSEED": seed})
        assert out.stdout.strip() == here


def test_backend_order_does_not_change_who_owns_most_slots():
    # the turn order breaks contested slots, so a reordering may move a few, not many
    a, b = build_table(names(5), size=4099), build_table(names(5)[::-1], size=4099)
    assert len(changed_slots(a, b)) / 4099 < 0.1


@pytest.mark.parametrize("args, field", [
    ((("a", "b"), None, 65536), "size"),
    ((("a", "b"), None, 1), "size"),
    ((("a", "b"), None, 4099.0), "size"),
    (((), None, 4099), "names"),
    ((("a", "a"), None, 4099), "names"),
    ((("a", ""), None, 4099), "names"),
    ((("a", "b"), (1.0, -1.0), 4099), "weights"),
    ((("a", "b"), (1.0, float("nan")), 4099), "weights"),
    ((("a", "b"), (0, 0), 4099), "weights"),
    ((("a", "b"), (1.0,), 4099), "weights"),
    ((("a", "b", "c"), None, 2), "size"),
])
def test_bad_input_is_a_value_error_naming_the_field(args, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        build_table(*args)


def test_changed_slots_needs_tables_of_one_size():
    with pytest.raises(ValueError, match="^new:"):
        changed_slots(build_table(["a"], size=5), build_table(["a"], size=7))
    assert changed_slots(("a", "b", "a"), ("a", "a", "a")) == [1]
