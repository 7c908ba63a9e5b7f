"""The fault suite: the running stack under load, one fault after another
(`python -m experiments.faults`; docs/reliability.md). The package holds:

- command.py: the command line, the configuration, the run and its files;
- suite.py: the faults run one after another, each under a segment of load (FaultSuite);
- injection.py: the faults themselves (Faults);
- probing.py: what is looked at and touched on the stack, each checked to be ours;
- analysis.py: the figures from plain data, the targets and the report.
"""
from experiments.faults.analysis import (FLOW_TABLE, GRACE_HEALTH_INTERVALS,
                                         RECOVERY_TARGET_PERIODS, SAMPLE_TABLES, analyse,
                                         error_kind, late_flows, markdown_table,
                                         merge_decisions, read_requests, recovery_seconds,
                                         requests_in_window, rows_lost, summary_markdown,
                                         targets_met)
from experiments.faults.command import DEFAULT_FAULTS, FAULTS, config_data, main, parser, run
from experiments.faults.injection import Faults
from experiments.faults.probing import (FaultError, await_checks, docker_socket_path,
                                        history_snapshot, parse_ovs_list, parse_ovs_value,
                                        project_dockerd, unix_listener_inodes, verified_pid)
from experiments.faults.suite import FaultSuite, workload_spec

__all__ = [
    "DEFAULT_FAULTS", "FAULTS", "FLOW_TABLE", "GRACE_HEALTH_INTERVALS", "RECOVERY_TARGET_PERIODS",
    "SAMPLE_TABLES",
    "FaultError", "Faults", "FaultSuite", "analyse", "await_checks", "config_data",
    "docker_socket_path",
    "error_kind", "history_snapshot", "late_flows", "main", "markdown_table",
    "merge_decisions", "parse_ovs_list", "parse_ovs_value", "parser", "project_dockerd",
    "read_requests", "recovery_seconds", "requests_in_window", "rows_lost", "run",
    "summary_markdown", "targets_met", "unix_listener_inodes", "verified_pid",
    "workload_spec",
]
