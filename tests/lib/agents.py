"""A host agent for unit tests: SLO_CONFIG (two servers, an SLO on srv1's ui) and make_agent
(an agent with a fake Docker client and one published sample, with its SLO runner and the
routes its server answers)."""
import time

from agents.agent import Agent, Selector, served_routes
from agents.dockerstats import Capacity
from agents.slo import SloRunner
from common.config import parse_config

SLO_CONFIG = {"servers": [{"cpu": 0.5, "cores": [0], "frequency": {"min_mhz": 1200}},
                          {"cpu": 0.5, "cores": [1]}],
              "microservices": [{"name": "ui", "port": 8002, "slo": {"target_ms": 80},
                                 "servers": ["srv1"]},
                                {"name": "video", "port": 8001, "servers": ["srv2"]}]}


def make_agent():
    """An agent with a fake Docker client and one published sample, its SLO runner for
    srv1's ui (emulated actuator, never started) and their routes as main() joins them."""
    agent = Agent("srv1", Selector(), lambda: Capacity(1.0, 1 << 30, 1e6, "config"),
                  client=object())
    agent._publish(time.time(), [], None, time.monotonic())
    slo = SloRunner(parse_config(SLO_CONFIG), "srv1", client=None, registry=agent.metrics,
                    actuator="emulated")
    return agent, slo, served_routes(agent, slo)
