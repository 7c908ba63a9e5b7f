"""The configuration's one declaration (common/config/model.py) against what is generated
from it: the JSON Schema editors read and the docs' field reference."""
import copy
import dataclasses
import glob
import os

import jsonschema
import pytest
import yaml

from common.config import ConfigError, parse_config
from common.config.fields import read_section, settings
from common.config import model
from common.config.model import FILE_SECTIONS, AgentsCfg, ControllerCfg, Dataplane, Health, \
    ProfilerCfg, SloLoopCfg
from common.config.schema import json_schema, main as schema_main, reference_markdown
from tests.conftest import ROOT

VALIDATOR = jsonschema.Draft202012Validator(json_schema())


def test_the_schema_and_the_field_reference_are_up_to_date():
    assert schema_main(["--check"]) == 0, "run python -m common.config.schema"


def test_the_schema_is_a_valid_draft_2020_12_schema():
    jsonschema.Draft202012Validator.check_schema(json_schema())


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(ROOT, "configs", "*.yaml"))))
def test_every_shipped_file_passes_the_schema(path):
    with open(path) as fh:
        data = yaml.safe_load(fh)
    assert not list(VALIDATOR.iter_errors(data))


def test_every_field_is_in_the_reference_with_its_help():
    text = reference_markdown()
    for cls in FILE_SECTIONS.values():
        for f, s in settings(cls):
            assert f"| `{s.name(f)}` |" in text and s.help.replace("|", "\\|") in text


# Sections whose fields are each checked alone (the others depend on a whole testbed)
PLAIN = {"testbed": model.TestbedSection, "controller": ControllerCfg, "profiler": ProfilerCfg,
         "agents": AgentsCfg, "agents.slo": SloLoopCfg, "controller.health": Health,
         "controller.dataplane": Dataplane}


def _cases():
    """(section path, key, value, accepted by the validator's range alone) for every number
    and choice field: its bounds and just past them, each choice and one that is not."""
    for path, cls in PLAIN.items():
        for f, s in settings(cls):
            key = s.name(f)
            if s.type in ("number", "integer"):
                step = 1 if s.type == "integer" else 0.001
                if s.lo is not None:
                    yield path, key, s.lo, True
                    yield path, key, s.lo - step, False
                if s.hi is not None:
                    yield path, key, s.hi, True
                    yield path, key, s.hi + step, False
                yield path, key, "7", False
                yield path, key, True, False
            elif s.type == "choice":
                for c in s.choices:
                    yield path, key, c, True
                yield path, key, "no-such-choice", False
            elif s.type == "bool":
                yield path, key, "yes", False


def _with(data: dict, path: str, key: str, value) -> dict:
    data = copy.deepcopy(data)
    node = data
    for part in path.split("."):
        node = node.setdefault(part, {})
    node[key] = value
    return data


@pytest.mark.parametrize("path,key,value,in_range", list(_cases()))
def test_schema_and_validator_agree_on_each_fields_range(path, key, value, in_range):
    """The schema is never stricter than the platform (an editor must not flag a file that
    runs), and a value out of a field's own range or choices is refused by both."""
    base = {"microservices": [{"name": "web", "port": 8080 if key != "rest_port" else 8081}],
            "controller": {"rest_port": 18080, "ofp_port": 16653}}
    data = _with(base, path, key, value)
    schema_ok = not list(VALIDATOR.iter_errors(data))
    try:
        parse_config(data)
        valid = True
    except ConfigError as exc:
        valid = False
        # a value in its own range may still break a check across fields: not the schema's
        if in_range:
            pytest.skip(f"in range, refused across fields: {exc}")
    assert valid == in_range
    if valid:
        assert schema_ok, f"the schema refuses {path}.{key}: {value!r}, which runs"
    else:
        assert not schema_ok, f"the schema accepts {path}.{key}: {value!r}, which is refused"


def test_a_dataclass_default_and_its_declared_default_agree():
    """Built in code (Health()) or read from an empty mapping, a section is the same."""
    for cls in (Health, Dataplane, SloLoopCfg):
        assert read_section(cls, {}, "x") == cls()
    assert dataclasses.asdict(read_section(SloLoopCfg, None, "x")) == \
        dataclasses.asdict(SloLoopCfg())
