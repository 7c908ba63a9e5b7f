"""A placement as Kubernetes manifests (Ahmed et al., PLOS ONE, enforce their placement through
affinity in the manifests): per microservice a Deployment and a Service, with required
nodeAffinity on the plan's servers, required podAntiAffinity (one replica per node) and
preferred podAffinity towards its heaviest peers; pods that run: the image (with a registry
prefix), the service's command, its environment, resources from its servers' shares, probes
on /health, the annotations Prometheus scrapes pods by, and the restricted Pod Security
Standard's settings (no root, no privilege escalation, no capabilities, a read-only root
filesystem, the runtime's seccomp profile) (docs/placement.md, "Kubernetes export").

- manifests: plain data in, plain dicts out;
- container_spec: one microservice's container, as the Deployment holds it;
- resources: its requests and limits from the configuration;
- scrape_annotations: the pod annotations by which Prometheus finds its metrics;
- POD_SECURITY, CONTAINER_SECURITY: the securityContexts every pod and container gets;
- to_yaml: them as one multi-document YAML stream for ``kubectl apply -f``, without
  anchors or aliases.
"""
from __future__ import annotations

import copy
import json
import re
import shlex

from common.config import Config, callgraph_spec

HOSTNAME = "kubernetes.io/hostname"  # one replica per node
SERVER_LABEL = "malb/server"         # which server a node is: kubectl label node N malb/server=srv1
MAX_AFFINITY_TERMS = 5       # the heaviest peers of each microservice
WORKDIR = "/opt/malb"        # where the image has the services (images/service)
MIN_MILLICORES, MIN_MEMORY_MB = 10, 16
# Kubernetes' "restricted" Pod Security Standard: the services need no root (they listen
# on ports above 1024), no capability and write no file
NOBODY = 65534
POD_SECURITY = {"runAsNonRoot": True, "runAsUser": NOBODY, "runAsGroup": NOBODY,
                "seccompProfile": {"type": "RuntimeDefault"}}
CONTAINER_SECURITY = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                      "capabilities": {"drop": ["ALL"]}}


# a registry host (with its port) and an optional path, as in an image reference
REGISTRY_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?(:[0-9]{1,5})?"
                         r"(/[a-z0-9]+([._-][a-z0-9]+)*)*/?$")


def check_registry(text: str) -> str:
    """A registry prefix as `--registry` takes it, or ValueError naming what is wrong."""
    if not REGISTRY_RE.match(text) or len(text) > 255:
        raise ValueError(f"expected a registry host[:port][/path], got {text[:40]!r}")
    return text.rstrip("/")


def image_ref(image: str, registry: str | None) -> str:
    """The image as the cluster pulls it: `registry/image` when a registry is given."""
    return f"{registry.rstrip('/')}/{image}" if registry else image


def resources(cfg: Config, layout: dict[str, list[str]], microservice: str) -> dict:
    """Requests = limits (Guaranteed QoS), the tightest of its servers' shares: a server's
    CPU and memory split evenly among the microservices the plan puts on it, as the
    Containernet testbed splits them."""
    cpu, memory = [], []
    for server in layout[microservice]:
        srv = cfg.server(server)
        n = sum(1 for servers in layout.values() if server in servers)
        cpu.append(srv.cpu / n)
        memory.append(srv.memory_mb / n)
    amount = {"cpu": f"{max(MIN_MILLICORES, int(min(cpu) * 1000))}m",
              "memory": f"{max(MIN_MEMORY_MB, int(min(memory)))}Mi"}
    return {"requests": dict(amount), "limits": dict(amount)}


def container_spec(cfg: Config, layout: dict[str, list[str]], m,
                   registry: str | None = None) -> dict:
    """The microservice's container: its configured command as an argument list (`{instance}`
    becomes $(MALB_INSTANCE), which Kubernetes expands from the pod's name), run in the
    image's service directory, with the environment our services read."""
    command = shlex.split(m.command.format(port=m.port, name=m.name,
                                           instance="$(MALB_INSTANCE)"))
    env = [{"name": "MALB_MICROSERVICE", "value": m.name},
           {"name": "MALB_INSTANCE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
           {"name": "MALB_SERVER", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]
    if m.kind == "callgraph":
        # as on the testbed, but each callee reached by its Service's name (cluster DNS)
        spec = callgraph_spec(cfg, m, callee_host=lambda c: c.service)
        env.append({"name": "MALB_SPEC", "value": json.dumps(spec)})
    container = {"name": m.name, "image": image_ref(m.image, registry),
                 "imagePullPolicy": "IfNotPresent", "workingDir": WORKDIR, "command": command,
                 "ports": [{"containerPort": m.port, "protocol": m.protocol.upper()}],
                 "env": env, "resources": resources(cfg, layout, m.name),
                 "securityContext": copy.deepcopy(CONTAINER_SECURITY)}
    if m.protocol == "tcp":       # our services answer GET /health over HTTP
        probe = {"httpGet": {"path": "/health", "port": m.port}, "timeoutSeconds": 2}
        container["readinessProbe"] = {**probe, "periodSeconds": 2, "failureThreshold": 2}
        container["livenessProbe"] = {**probe, "initialDelaySeconds": 5, "periodSeconds": 10,
                                      "failureThreshold": 3}
    return container


def manifests(cfg: Config, layout: dict[str, list[str]], graph: dict,
              namespace: str = "default", registry: str | None = None) -> list[dict]:
    """Per microservice a Deployment and a Service (named as the microservice: call-graph
    pods call their callees by these names): required nodeAffinity on the servers the plan
    chose for it (nodes labelled malb/server=<server>), required podAntiAffinity (one
    replica per node, as in the testbed), and preferred podAffinity towards its
    MAX_AFFINITY_TERMS heaviest peers on the same server, weighted 1-100 by the edge's
    bytes/s against the heaviest edge, so a scheduler that re-places a pod later keeps
    heavy talkers together."""
    edges: dict[tuple[str, str], float] = {}
    for e in graph.get("edges", []):
        a, b = e["caller"], e["callee"]
        if a in layout and b in layout and a != b:
            key = (a, b) if a < b else (b, a)
            edges[key] = edges.get(key, 0.0) + float(e["bytes_per_s"])
    top = max(edges.values(), default=0.0)
    out = []
    for m in cfg.microservices:
        servers = layout[m.name]
        labels = {"app": m.name, "malb/microservice": m.name}
        peers = sorted(((w, b if a == m.name else a) for (a, b), w in edges.items()
                        if m.name in (a, b) and w > 0), reverse=True)[:MAX_AFFINITY_TERMS]
        affinity = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [
                    {"key": SERVER_LABEL, "operator": "In", "values": list(servers)}]}]}},
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": m.name}},
                 "topologyKey": HOSTNAME}]},
        }
        if peers and top > 0:
            affinity["podAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": max(1, min(100, round(100 * w / top))),
                 "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": peer}},
                                     "topologyKey": SERVER_LABEL}}
                for w, peer in peers]}
        container = container_spec(cfg, layout, m, registry)
        out.append({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": m.name, "namespace": namespace, "labels": labels},
            "spec": {"replicas": len(servers), "selector": {"matchLabels": {"app": m.name}},
                     "template": {"metadata": {"labels": labels,
                                               "annotations": scrape_annotations(m.port)},
                                  "spec": {"affinity": affinity,
                                           "securityContext": copy.deepcopy(POD_SECURITY),
                                           "containers": [container]}}}})
        out.append({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": m.name, "namespace": namespace, "labels": labels},
            "spec": {"selector": {"app": m.name},
                     "ports": [{"name": m.protocol, "port": m.port, "targetPort": m.port,
                                "protocol": m.protocol.upper()}]}})
    return out


def scrape_annotations(port: int) -> dict:
    """What Prometheus's `malb-kubernetes-pods` job (deploy/prometheus-kubernetes.yml) looks
    for on a pod: every service serves its metrics on its own port, at /metrics."""
    return {"prometheus.io/scrape": "true", "prometheus.io/port": str(port),
            "prometheus.io/path": "/metrics"}


def to_yaml(docs: list[dict]) -> str:
    """The documents as one YAML stream; an object used twice (a Deployment's labels, for
    one) written out twice, not as an anchor and an alias (&id001, *id001), which some
    tools that read manifests do not follow."""
    import yaml   # deferred: PyYAML, only for the export

    class Plain(yaml.SafeDumper):
        def ignore_aliases(self, data) -> bool:
            return True
    return "".join("---\n" + yaml.dump(d, Dumper=Plain, sort_keys=False) for d in docs)
