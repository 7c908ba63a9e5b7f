"""The policy registry (ryu_apps/policies/__init__.py), and that every consumer takes a
registered policy by name."""
import os

import pytest

from common import config
from experiments import lb_model
from ryu_apps import policies
from ryu_apps.policies.malb import MalbOptions

HERE = os.path.dirname(os.path.abspath(__file__))


def test_every_registered_policy_has_a_unit_test_module():
    missing = []
    for name in policies.names():
        module = policies.policy_class(name).__module__.rsplit(".", 1)[-1]
        if not os.path.exists(os.path.join(HERE, f"test_{module}.py")):
            missing.append(f"{name} (tests/unit/ryu_apps/policies/test_{module}.py)")
    assert not missing, f"registered policies without a unit test: {', '.join(missing)}"


def test_names_are_unique_and_each_makes_a_policy_of_that_name():
    names = policies.names()
    assert len(set(names)) == len(names)
    assert {"srr", "ln", "malb-paper", "malb", "maglev", "lc", "wlc", "wrr", "p2c"} <= \
        set(names)
    for name in names:
        p = policies.make(name)
        assert p.name == name and policies.title(name)


def test_a_policy_the_configuration_does_not_declare_is_refused_at_registration():
    with pytest.raises(ValueError, match="policy 'random' is not declared in "
                                         "common/config/model.py's POLICIES: add it there"):
        @policies.register("random")
        class Random(policies.Policy):
            pass
    assert "random" not in policies.names()


def test_unknown_names_and_options_are_refused_naming_the_choices():
    with pytest.raises(ValueError, match="policy: must be one of .*srr.*got 'best'"):
        policies.make("best")
    with pytest.raises(ValueError, match="unknown option 'speed'.*lookahead_s"):
        policies.make("malb", speed=3)
    with pytest.raises(ValueError, match="short_flows"):
        policies.make("malb", short_flows="fastest")


def test_malb_paper_is_the_papers_rule_with_every_addition_off():
    paper = policies.make("malb-paper").options
    assert (paper.short_flows, paper.long_flows) == ("round-robin", "predicted-load")
    assert not (paper.capacity_weighted or paper.per_flow_weights or paper.spread)
    ours = policies.make("malb").options
    assert ours == MalbOptions()


def test_consumers_take_every_registered_policy_by_name(config_file):
    # the configuration declares the names (POLICIES: REST's choices too), the registry has
    # a class for each, and the fluid model takes every one
    assert config.POLICIES == policies.names()
    for name in policies.names():
        cfg = config.parse_config_file_data({"controller": {"policy": name},
                                             "microservices": config.DEFAULT_MICROSERVICES},
                                            "test.yaml")
        assert cfg.controller.policy == name
    for name in ("lc", "p2c", "wrr"):
        assert lb_model.main(["--phase-seconds", "6", "--duration-scale", "0.1", "--runs",
                              "1", "--policies", f"srr,{name}", "--out",
                              os.path.join(os.path.dirname(config_file({})), name)]) == 0
