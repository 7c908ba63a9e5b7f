"""A placement as Kubernetes manifests (Ahmed et al., PLOS ONE, enforce their placement through
affinity in the manifests): per microservice a Deployment and a Service, with required
nodeAffinity on the plan's servers, required podAntiAffinity (one replica per node) and
preferred podAffinity towards its heaviest peers (docs/placement.md, "Kubernetes export").

- manifests: plain data in, plain dicts out;
- to_yaml: them as one multi-document YAML stream for ``kubectl apply -f``.
"""
from __future__ import annotations

from common.config import Config

HOSTNAME = "kubernetes.io/hostname"
MAX_AFFINITY_TERMS = 5       # the heaviest peers of each microservice


def manifests(cfg: Config, layout: dict[str, list[str]], graph: dict,
              namespace: str = "default") -> list[dict]:
    """Per microservice a Deployment and a Service: required nodeAffinity on the servers the
    plan chose for it (node names = server names, label kubernetes.io/hostname), required
    podAntiAffinity (one replica per node, as in the testbed), and preferred podAffinity
    towards its MAX_AFFINITY_TERMS heaviest peers, weighted 1-100 by the edge's bytes/s
    against the heaviest edge, so a scheduler that re-places a pod later keeps heavy
    talkers together."""
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
                    {"key": HOSTNAME, "operator": "In", "values": list(servers)}]}]}},
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": m.name}},
                 "topologyKey": HOSTNAME}]},
        }
        if peers and top > 0:
            affinity["podAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": max(1, min(100, round(100 * w / top))),
                 "podAffinityTerm": {"labelSelector": {"matchLabels": {"app": peer}},
                                     "topologyKey": HOSTNAME}}
                for w, peer in peers]}
        container = {"name": m.name, "image": m.image,
                     "ports": [{"containerPort": m.port, "protocol": m.protocol.upper()}],
                     "env": [{"name": "MALB_MICROSERVICE", "value": m.name}]}
        if m.kind == "callgraph":
            container["command"] = ["python3", "-m", "services.callgraph", "--port",
                                    str(m.port)]
        out.append({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": m.name, "namespace": namespace, "labels": labels},
            "spec": {"replicas": len(servers), "selector": {"matchLabels": {"app": m.name}},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"affinity": affinity,
                                           "containers": [container]}}}})
        out.append({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": m.name, "namespace": namespace, "labels": labels},
            "spec": {"selector": {"app": m.name},
                     "ports": [{"name": m.protocol, "port": m.port, "targetPort": m.port,
                                "protocol": m.protocol.upper()}]}})
    return out


def to_yaml(docs: list[dict]) -> str:
    import yaml   # deferred: PyYAML, only for the export
    return "".join("---\n" + yaml.safe_dump(d, sort_keys=False) for d in docs)
