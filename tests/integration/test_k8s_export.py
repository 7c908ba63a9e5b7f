"""The Kubernetes export runs, checked without a cluster: every exported container started in
the local Docker engine with exactly the manifest's image, command, working directory,
environment, resource limits and securityContexts (its user, a read-only root filesystem,
no capability, no privilege escalation), on a network where each container answers to its
Service's name (as cluster DNS would resolve it); each answers its readiness probe, and a
request to each front service (one nobody calls) reaches every service below it."""
from __future__ import annotations

import os
import re
import time
import urllib.request
import uuid

import docker
import pytest

from common.config import load_config
from common.procs import ROOT
from placement.k8s import manifests

pytestmark = pytest.mark.integration
BOOKINFO = os.path.join(ROOT, "configs", "bookinfo.yaml")
# what the kubelet fills in from the pod (fieldRef), for the one pod of each Deployment
POD_FIELDS = {"metadata.name": "{name}-0", "spec.nodeName": "node1"}


def kubelet_env(container: dict, name: str) -> dict:
    env = {}
    for e in container["env"]:
        env[e["name"]] = e["value"] if "value" in e else \
            POD_FIELDS[e["valueFrom"]["fieldRef"]["fieldPath"]].format(name=name)
    return env


def expand(argv: list[str], env: dict) -> list[str]:
    """$(VAR) in a command, as Kubernetes expands it from the container's environment."""
    return [re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)),
                   a) for a in argv]


def cpu_nanos(quantity: str) -> int:
    return int(quantity[:-1]) * 1_000_000 if quantity.endswith("m") else int(float(quantity)
                                                                              * 1e9)


def get(url: str, timeout: float = 5) -> int:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            r.read()
            return r.status
    except OSError:
        return 0


@pytest.fixture
def exported_pods():
    cfg = load_config(BOOKINFO)
    layout = {"productpage": ["srv1"], "details": ["srv1"], "reviews": ["srv2"],
              "ratings": ["srv2"]}
    docs = manifests(cfg, layout, {"edges": []})
    client = docker.from_env()
    tag = uuid.uuid4().hex[:8]
    network = client.networks.create(f"malb-k8s-{tag}", driver="bridge",
                                     labels={"malb": "1"})
    started = []
    try:
        for d in docs:
            if d["kind"] != "Deployment":
                continue
            name = d["metadata"]["name"]
            c, = d["spec"]["template"]["spec"]["containers"]
            env = kubelet_env(c, name)
            lim = c["resources"]["limits"]
            pod = d["spec"]["template"]["spec"]["securityContext"]
            sc = c["securityContext"]
            started.append((name, c, client.containers.run(
                c["image"], entrypoint=expand(c["command"], env),
                command=expand(c.get("args", []), env), working_dir=c["workingDir"],
                environment=env, name=f"malb-k8s-{tag}-{name}", hostname=f"{name}-0",
                network=network.name, detach=True, labels={"malb": "1"},
                nano_cpus=cpu_nanos(lim["cpu"]), mem_limit=lim["memory"].replace("Mi", "m"),
                # the securityContexts, as a kubelet applies them
                user=f"{pod['runAsUser']}:{pod['runAsGroup']}",
                read_only=sc["readOnlyRootFilesystem"], cap_drop=sc["capabilities"]["drop"],
                security_opt=[] if sc["allowPrivilegeEscalation"] else ["no-new-privileges"])))
            # the Service's name resolves to the pod, as the cluster's DNS would
            network.disconnect(started[-1][2])
            network.connect(started[-1][2], aliases=[name])
        yield cfg, docs, [(n, c, _address(ctr, network.name)) for n, c, ctr in started]
    finally:
        for _, _, ctr in started:
            ctr.remove(force=True)
        network.remove()


def _address(container, network: str) -> str:
    container.reload()
    return container.attrs["NetworkSettings"]["Networks"][network]["IPAddress"]


def test_every_exported_pod_starts_answers_its_probe_and_reaches_its_callees(exported_pods):
    cfg, docs, pods = exported_pods
    deadline = time.time() + 30
    waiting = {name for name, _, _ in pods}
    while waiting and time.time() < deadline:
        for name, c, ip in pods:
            probe = c["readinessProbe"]["httpGet"]
            if name in waiting and get(f"http://{ip}:{probe['port']}{probe['path']}") == 200:
                waiting.discard(name)
        time.sleep(0.5)
    assert not waiting, f"not ready within 30 s: {sorted(waiting)}"
    callees = {c.service for m in cfg.microservices for c in m.calls}
    fronts = [(name, c, ip) for name, c, ip in pods if name not in callees]
    assert [f[0] for f in fronts] == ["productpage"]
    for _name, c, ip in fronts:
        # 200 only when every call below it answered (services/callgraph.py: 502 naming
        # the first callee that failed)
        assert get(f"http://{ip}:{c['ports'][0]['containerPort']}/", timeout=15) == 200
    # every callee was called, under its Service's name
    for name, c, ip in pods:
        if name in callees:
            with urllib.request.urlopen(f"http://{ip}:{c['ports'][0]['containerPort']}"
                                        f"/metrics", timeout=5) as r:
                text = r.read().decode()
            assert re.search(r'callgraph_requests_total\{[^}]*status="200"[^}]*\} [1-9]', text), \
                (name, text[:2000])
