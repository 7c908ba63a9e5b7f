"""One configuration shape for every part of the platform.

The testbed builder, the Ryu app, the agents, the profiler and the experiments all read the
same YAML file through load_config(), which validates it in one place and raises
ConfigError naming the offending field (``servers[2].cpu: ...``). The package holds:

- model.py: every field of the file declared once (type, default, range, help), and the
  plain data the platform passes around (Config, Server, Instance, ...);
- fields.py: how a field is declared and read, and the value checkers;
- parse.py: a mapping validated into a Config; files.py: which file, reading it;
- derive.py: addresses, ports and placements derived the same way everywhere;
- checks.py: checks across the whole; schema.py: the JSON Schema and the docs' tables.
"""
from common.config.checks import (WILDCARD_HOSTS, check_deployable, check_testbed_builds,
                                  listeners)
from common.config.derive import (ACTIVE_FLOW_TTL_S, LINUX_IFNAME_MAX, PROXY_IP, PROXY_NAME,
                                  active_flow_refresh_s, active_flow_ttl_s, callgraph_spec)
from common.config.fields import ConfigError
from common.config.fields import size_mb as parse_size_mb
from common.config.fields import token as check_token
from common.config.files import (CONFIG_ENV_VAR, DEFAULT_CONFIG_PATH, TOKEN_ENV_VAR,
                                 config_path, load_config, load_config_data,
                                 parse_config_file_data, with_token_from_environment)
from common.config.model import (CONTAINER_PREFIX, MAX_INSTANCES, MAX_MICROSERVICES,
                                 MAX_SERVERS, POLICIES, AgentsCfg, Call, Client, Config,
                                 ControllerCfg, Dataplane, Frequency, Health, Instance,
                                 Microservice, ProfilerCfg, Proxy, SecurityCfg, Server, Slo,
                                 SloLoopCfg, Switch, TestbedCfg, Trunk, mac_for)
from common.config.parse import DEFAULT_MICROSERVICES, parse_config

__all__ = [
    "ACTIVE_FLOW_TTL_S", "CONFIG_ENV_VAR", "CONTAINER_PREFIX", "DEFAULT_CONFIG_PATH",
    "DEFAULT_MICROSERVICES", "LINUX_IFNAME_MAX", "MAX_INSTANCES", "MAX_MICROSERVICES",
    "MAX_SERVERS", "POLICIES", "PROXY_IP", "PROXY_NAME", "TOKEN_ENV_VAR", "WILDCARD_HOSTS",
    "AgentsCfg", "Call", "Client", "Config", "ConfigError", "ControllerCfg", "Dataplane",
    "Frequency", "Health", "Instance", "Microservice", "ProfilerCfg", "Proxy", "SecurityCfg",
    "Server", "Slo", "SloLoopCfg", "Switch", "TestbedCfg", "Trunk", "active_flow_refresh_s",
    "active_flow_ttl_s", "callgraph_spec", "check_deployable", "check_testbed_builds",
    "check_token", "config_path",
    "listeners", "load_config", "load_config_data", "mac_for", "parse_config",
    "parse_config_file_data", "parse_size_mb", "with_token_from_environment",
]
