"""deploy/: the Prometheus scrape configuration and the Grafana dashboard are current, promtool
accepts the configuration, and every metric a panel's query names is one a process exports
(tests/integration/test_controller.py has a real Prometheus scrape a running stack)."""
import json
import re
import shutil
import subprocess

import pytest
import yaml

from common.config import load_config
from deploy import monitoring
from placement.k8s import scrape_annotations
from tests.lib.metrics import families, process_texts

NAME = re.compile(r"\b((?:malb|rom|callgraph|process)_[a-z_]+)\b")
SUFFIXES = ("_bucket", "_sum", "_count")


def queries() -> list[str]:
    return [t["expr"] for p in monitoring.dashboard()["panels"] for t in p.get("targets", [])]


def test_the_shipped_files_are_what_the_default_configuration_makes(tmp_path):
    monitoring.write(str(tmp_path), load_config(None))
    for name in ("prometheus.yml", "prometheus-kubernetes.yml", "grafana/malb.json"):
        assert (tmp_path / name).read_text() == open(f"deploy/{name}").read(), \
            f"deploy/{name} is out of date: python -m deploy.monitoring"


def test_promtool_accepts_the_scrape_configuration():
    promtool = shutil.which("promtool")
    assert promtool, "promtool missing: `make setup` installs Debian's prometheus"
    out = subprocess.run([promtool, "check", "config", "deploy/prometheus.yml"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def test_every_server_has_its_agent_scraped_under_its_name():
    cfg = load_config("configs/callgraph30.yaml")
    jobs = {j["job_name"]: j for j in monitoring.scrape_config(cfg)["scrape_configs"]}
    agents = jobs["malb-agents"]["static_configs"]
    assert [a["labels"]["malb_server"] for a in agents] == [s.name for s in cfg.servers]
    assert all(a["targets"][0].startswith("127.0.0.1:91") for a in agents)
    c = cfg.controller
    assert jobs["malb-controller"]["static_configs"][0]["targets"] == [
        f"{c.rest_host}:{c.rest_port}"]


def test_every_panel_queries_metrics_that_the_processes_export():
    exported = set()
    for text in process_texts().values():
        exported |= set(families(text))
    named = {n for q in queries() for n in NAME.findall(q)}
    assert named, "no metric named in the dashboard"
    unknown = set()
    for n in named:
        base = next((n[:-len(s)] for s in SUFFIXES if n.endswith(s)), n)
        if n not in exported and base not in exported:
            unknown.add(n)
    assert not unknown
    # every panel has a query, every query a legend, and the ids are unique
    panels = [p for p in monitoring.dashboard()["panels"] if p["type"] != "row"]
    assert all(p["targets"] and all(t["legendFormat"] for t in p["targets"]) for p in panels)
    ids = [p["id"] for p in monitoring.dashboard()["panels"]]
    assert len(ids) == len(set(ids))
    json.dumps(monitoring.dashboard())


@pytest.mark.parametrize("argv, message", [
    (["--config", "/nonexistent.yaml"], "configuration file not found"),
    (["--out", "/proc/no/such/dir"], "--out /proc/no/such/dir"),
    (["--bogus"], "unrecognized arguments"),
])
def test_bad_flags_end_with_one_line_and_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        monitoring.main(argv)
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_the_kubernetes_job_keeps_the_pods_the_export_annotates():
    """Debian's promtool has no Kubernetes discovery: the job's relabelling is checked
    here against the annotations placement/k8s.py writes."""
    (job,) = yaml.safe_load(open("deploy/prometheus-kubernetes.yml"))["scrape_configs"]
    keep, address, path, _pod = job["relabel_configs"]
    annotations = scrape_annotations(8002)
    assert keep["regex"] == annotations["prometheus.io/scrape"]
    assert keep["source_labels"] == ["__meta_kubernetes_pod_annotation_prometheus_io_scrape"]
    joined = f"10.1.2.3:9999;{annotations['prometheus.io/port']}"
    assert re.sub(f"^(?:{address['regex']})$", address["replacement"].replace("$", "\\"),
                  joined) == "10.1.2.3:8002"
    assert path["source_labels"] == ["__meta_kubernetes_pod_annotation_prometheus_io_path"]
    assert re.fullmatch(path["regex"], annotations["prometheus.io/path"])
    assert path["target_label"] == "__metrics_path__"
