"""Every process's /metrics: Prometheus's naming conventions (tests/lib/metrics.py), a process
collector and malb_build_info in each, and docs/metrics.md listing exactly what they
export."""
import re

import pytest

from tests.lib.metrics import convention_problems, families, process_texts, value

DOC = "docs/metrics.md"


@pytest.fixture(scope="module")
def texts():
    return process_texts()


@pytest.mark.parametrize("process", ["controller", "agent", "profiler", "rom service",
                                     "callgraph service"])
def test_each_process_follows_the_conventions_and_says_what_it_runs(texts, process):
    text = texts[process]
    assert convention_problems(text) == []
    assert value(text, "malb_build_info", process=process.split()[-1]) == 1
    assert value(text, "process_resident_memory_bytes") > 0


def test_the_rules_catch_what_the_old_names_did():
    old = ("# HELP malb_slo_sli_ms SLI.\n# TYPE malb_slo_sli_ms gauge\nmalb_slo_sli_ms 3\n"
           "# HELP malb_x_bytes_per_second Bytes.\n# TYPE malb_x_bytes_per_second gauge\n"
           "# HELP malb_cpu_percent CPU.\n# TYPE malb_cpu_percent gauge\n"
           "# HELP malb_freq_mhz Freq.\n# TYPE malb_freq_mhz gauge\n"
           "# HELP malb_energy_total Energy.\n# TYPE malb_energy_total gauge\n"
           "# HELP malb_wait Time to wait.\n# TYPE malb_wait gauge\n"
           "# HELP other_thing A thing.\n# TYPE other_thing gauge\n"
           '# HELP malb_up Up.\n# TYPE malb_up gauge\nmalb_up{instance="srv1-ui"} 1\n')
    problems = "\n".join(convention_problems(old))
    for name in ("malb_slo_sli_ms", "malb_x_bytes_per_second", "malb_cpu_percent",
                 "malb_freq_mhz", "malb_energy_total: a gauge", "malb_wait: its help times",
                 "other_thing: not one of our prefixes", "malb_up: label instance"):
        assert name in problems


def test_the_docs_list_every_metric_and_its_type(texts):
    exported = {}
    for text in texts.values():
        exported.update({n: t for n, t in families(text).items()
                         if not n.startswith("process_") and n != "malb_build_info"})
    documented = dict(re.findall(r"^\| `([a-z_]+)` \| (counter|gauge|histogram) \|",
                                 open(DOC).read(), re.M))
    assert documented == exported
