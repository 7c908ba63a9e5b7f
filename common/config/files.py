"""Configuration files: which one, reading it, and the environment's say.

- config_path(): the file given, else $MALB_CONFIG, else configs/paper.yaml;
- load_config_data(): its YAML mapping, unvalidated; load_config(): validated, with
  per-section overrides; parse_config_file_data(): a mapping read from a file, validated;
- with_token_from_environment(): $MALB_TOKEN in place of security.token.
"""
from __future__ import annotations

import dataclasses
import os

from common.config.fields import ConfigError, token
from common.config.model import Config, SecurityCfg
from common.config.parse import parse_config
from common.paths import WORK, shipped

DEFAULT_CONFIG_PATH = shipped("configs", "paper.yaml")
CONFIG_ENV_VAR = "MALB_CONFIG"
TOKEN_ENV_VAR = "MALB_TOKEN"      # overrides security.token (configuration files only)


def config_path(path: str | None = None) -> str:
    """The file to read: the one given, else $MALB_CONFIG, else configs/paper.yaml."""
    return path or os.environ.get(CONFIG_ENV_VAR) or DEFAULT_CONFIG_PATH


def load_config_data(path: str | None = None) -> dict:
    """The YAML mapping of a configuration file (default as config_path says), unvalidated:
    for tools that change a few fields before validating the whole (experiments)."""
    import yaml  # deferred: PyYAML comes with Ryu; pure users of the model need not have it

    path = config_path(path)
    try:
        with open(path, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
    except FileNotFoundError:
        raise ConfigError(f"{path}: configuration file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot be read: {exc}") from None
    except yaml.YAMLError as exc:       # its message spans lines: one line here
        raise ConfigError(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None
    except ValueError as exc:     # e.g. an integer of more than 4,300 digits
        raise ConfigError(f"{path}: cannot be read: {str(exc)[:120]}") from None
    data = data or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping")
    return data


def parse_config_file_data(data: dict, path: str) -> Config:
    """Validate a mapping read from ``path`` (relative paths in it, such as the history,
    are relative to the checkout, or to the working directory of an installed package)."""
    try:
        cfg = parse_config(data, source=os.path.abspath(path), base_dir=WORK,
                           microservices_required=True)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    return with_token_from_environment(cfg)


def with_token_from_environment(cfg: Config, environ=os.environ) -> Config:
    """$MALB_TOKEN, when set and not empty, in place of security.token: every process of a
    run started with it (the controller, agents, profiler, testbed, experiments) then
    requires and sends the same token, whatever the file says."""
    value = environ.get(TOKEN_ENV_VAR)
    if not value:
        return cfg
    return dataclasses.replace(cfg, security=SecurityCfg(token=token(value, TOKEN_ENV_VAR)))


def load_config(path: str | None = None, overrides: dict | None = None) -> Config:
    """Load and validate a YAML file (default: $MALB_CONFIG, else configs/paper.yaml).

    ``overrides`` is merged section by section on top of the file (used by command-line
    flags such as ``--servers``)."""
    path = config_path(path)
    data = load_config_data(path)
    for section, values in (overrides or {}).items():
        if isinstance(values, dict) and isinstance(data.get(section), dict):
            data[section] = {**data[section], **values}
        else:
            data[section] = values
    return parse_config_file_data(data, path)
