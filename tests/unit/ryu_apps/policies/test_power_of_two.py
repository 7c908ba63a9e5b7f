"""Power of two choices (p2c): ryu_apps/policies/power_of_two.py."""
from collections import Counter

from tests.lib.policy_core import make_core


def test_p2c_never_sends_a_flow_to_the_most_loaded_instance_of_four():
    core = make_core("p2c")
    for k in range(5):                       # srv1 holds five open connections
        core.connections.add(("held", k), "srv1-backend", 100.0)
    picks = Counter(core.choose("backend", 100.0, watched=("new", k)).server
                    for k in range(3))
    assert "srv1" not in picks               # drawn with another, the other has fewer


def test_p2c_is_seeded_and_counts_open_connections():
    def run(seed):
        core = make_core("p2c", options={"seed": seed})
        out = []
        for k in range(40):
            out.append(core.choose("backend", 100.0 + k, watched=k).server)
            if k >= 4:
                core.flow_ended(k - 4, 100.0 + k)     # four flows open at a time
        return out
    assert run(1) == run(1) and run(1) != run(2)
    assert max(Counter(run(1)).values()) - min(Counter(run(1)).values()) <= 4


def test_p2c_decision_names_the_two_it_drew():
    core = make_core("p2c")
    d = core.choose("ui", 100.0, watched=1)
    assert d.algorithm == "power-of-two-choices" and len(d.scores) == 2
    assert d.server in d.scores
