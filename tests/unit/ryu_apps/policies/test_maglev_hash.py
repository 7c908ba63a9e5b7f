"""Maglev hashing (maglev): ryu_apps/policies/maglev_hash.py."""
from collections import Counter

import pytest

from ryu_apps import maglev
from tests.lib.policy_core import SERVERS, flow, loads, maglev_table, make_core


def test_maglev_sends_a_flow_where_its_5_tuple_hashes_and_spreads_flows():
    core = make_core(policy="maglev", options={"table_size": 4099})
    loads(core, srv1=(99, 99, 99))                  # load plays no part
    table = maglev.build_table([f"{s}-video" for s in SERVERS], None, 4099)
    picks = []
    for p in range(400):
        d = core.choose("video", flow_key=flow(30000 + p))
        assert d.instance == maglev.lookup(table, flow(30000 + p))
        assert (d.policy, d.algorithm, d.weights) == ("maglev", "maglev", None)
        picks.append(d.server)
    assert min(Counter(picks).values()) > 400 / 4 * 0.7
    # the same flow, the same instance, whatever came in between
    assert core.choose("video", flow_key=flow(30000)).instance == \
        core.choose("video", flow_key=flow(30000)).instance
    assert core.status()["policy"] == "maglev"


def test_maglev_table_is_rebuilt_only_when_the_in_service_set_changes():
    core = make_core(policy="maglev", options={"table_size": 4099})
    first = maglev_table(core, "ui")
    core.choose("ui", flow_key=flow(1))
    assert maglev_table(core, "ui") is first                     # cached
    before = {p: core.choose("ui", flow_key=flow(p)).instance for p in range(300)}
    core.set_health("srv2-ui", False)
    after = {p: core.choose("ui", flow_key=flow(p)).instance for p in range(300)}
    assert maglev_table(core, "ui") is not first and "srv2-ui" not in set(after.values())
    # the flows of the instance that went move; of the others, hardly any (Maglev is not
    # perfectly stable: a few contested slots change hands)
    moved = {p for p in before if before[p] != after[p]}
    gone = {p for p in before if before[p] == "srv2-ui"}
    assert gone <= moved and len(moved - gone) <= 0.03 * (300 - len(gone))
    core.set_health("srv2-ui", True)
    assert maglev_table(core, "ui") == first
    core.set_draining("srv3-ui")
    assert "srv3-ui" not in maglev_table(core, "ui")


def test_maglev_without_a_flow_key_falls_back_to_round_robin_and_says_so():
    core = make_core(policy="maglev")
    picks = [core.choose("video") for _ in range(4)]
    assert [d.server for d in picks] == SERVERS
    assert all(d.algorithm == "round-robin" and "no flow key" in d.reason for d in picks)
    core.set_policy("srr")
    assert core.choose("video", flow_key=flow(1)).algorithm == "round-robin"  # key ignored


def test_maglev_table_size_must_be_prime():
    with pytest.raises(ValueError, match="maglev_table_size"):
        make_core(policy="maglev", options={"table_size": 4096})


def test_a_caller_left_out_takes_the_next_slot_and_moves_nobody_elses_flows():
    core = make_core(policy="maglev", options={"table_size": 4099})
    me = core.pools["ui"][1]
    before = {p: core.choose("ui", flow_key=flow(p, me.ip)).instance for p in range(300)}
    first = maglev_table(core, "ui")
    mine = {p: core.choose("ui", flow_key=flow(p, me.ip), caller=me.ip).instance
            for p in range(300)}
    assert maglev_table(core, "ui") is first                     # no rebuild
    assert me.name not in mine.values()
    assert {p: i for p, i in before.items() if i != me.name} == \
        {p: i for p, i in mine.items() if before[p] != me.name}
