"""Loading big ``fleetwright plan`` inputs: pods as ``kubectl get pods -o yaml`` / ``-o json`` write them.

Usage: python bench/plan_load.py [--pods 20000] [--repeat 3] [--keep DIR]

Writes one ``List`` of N pending pods (seed 42, bench/scheduling.py's plain requests, owned by
ReplicaSets, with what the API server adds: uid, resourceVersion, the service-account token volume,
default tolerations, a PodScheduled=False status) in kubectl's YAML layout and in its JSON layout, next
to one NodePool and EC2NodeClass. Prints, for each format, the median of --repeat runs of
``load_manifests`` (reading and converting) and of the whole ``make_plan`` (loading, the solve on the
built-in us-east-1 catalog), and the file size; with --baseline also PyYAML's ``CSafeLoader`` alone on
the YAML file (what loading used before).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from scheduling import CPUS, MEMORIES, SEED, machine

from fleetwright.manifests import load_manifests
from fleetwright.plan import make_plan

STR_TAG = "tag:yaml.org,2002:str"
_RESOLVER = yaml.resolver.Resolver()
NODEPOOL = """apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-bench
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: bench}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: bench}}]
"""


def pod_object(i: int, rng: random.Random) -> dict[str, Any]:
    """One pending pod the way the API server returns it."""
    app = f"app-{i % 50}"
    hash_ = f"{i % 50:05d}abcd"
    name = f"{app}-{hash_}-{i:06x}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-24T10:00:00Z"},
            "creationTimestamp": "2026-11-24T10:00:01Z",
            "generateName": f"{app}-{hash_}-",
            "labels": {"app": app, "pod-template-hash": hash_},
            "name": name,
            "namespace": "bench",
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "blockOwnerDeletion": True,
                    "controller": True,
                    "kind": "ReplicaSet",
                    "name": f"{app}-{hash_}",
                    "uid": f"5f0c1e2a-0000-4000-8000-{i % 50:012d}",
                }
            ],
            "resourceVersion": str(100000 + i),
            "uid": f"9d3f7a10-{i % 65536:04x}-4000-8000-{i:012d}",
        },
        "spec": {
            "containers": [
                {
                    "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
                    "imagePullPolicy": "IfNotPresent",
                    "name": "app",
                    "ports": [{"containerPort": 8080, "name": "http", "protocol": "TCP"}],
                    "resources": {
                        "requests": {"cpu": rng.choice(CPUS), "memory": rng.choice(MEMORIES)},
                    },
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "volumeMounts": [
                        {
                            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                            "name": f"kube-api-access-{i % 100000:05d}",
                            "readOnly": True,
                        }
                    ],
                }
            ],
            "dnsPolicy": "ClusterFirst",
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
            "priority": 0,
            "restartPolicy": "Always",
            "schedulerName": "default-scheduler",
            "securityContext": {},
            "serviceAccount": "default",
            "serviceAccountName": "default",
            "terminationGracePeriodSeconds": 30,
            "tolerations": [
                {
                    "effect": "NoExecute",
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "tolerationSeconds": 300,
                },
                {
                    "effect": "NoExecute",
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "tolerationSeconds": 300,
                },
            ],
            "volumes": [
                {
                    "name": f"kube-api-access-{i % 100000:05d}",
                    "projected": {
                        "defaultMode": 420,
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {
                                "configMap": {
                                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                                    "name": "kube-root-ca.crt",
                                }
                            },
                            {
                                "downwardAPI": {
                                    "items": [
                                        {
                                            "fieldRef": {
                                                "apiVersion": "v1",
                                                "fieldPath": "metadata.namespace",
                                            },
                                            "path": "namespace",
                                        }
                                    ]
                                }
                            },
                        ],
                    },
                }
            ],
        },
        "status": {
            "conditions": [
                {
                    "lastProbeTime": None,
                    "lastTransitionTime": "2026-11-24T10:00:01Z",
                    "message": "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are "
                    "available: 3 No preemption victims found for incoming pod.",
                    "reason": "Unschedulable",
                    "status": "False",
                    "type": "PodScheduled",
                }
            ],
            "phase": "Pending",
            "qosClass": "Burstable",
        },
    }


def pod_list(pods: int) -> dict[str, Any]:
    """``kubectl get pods -o json``'s document for ``pods`` pending pods."""
    rng = random.Random(SEED)
    return {
        "apiVersion": "v1",
        "items": [pod_object(i, rng) for i in range(pods)],
        "kind": "List",
        "metadata": {"resourceVersion": ""},
    }


def kubectl_yaml(value: Any, indent: int = 0) -> str:
    """``value`` in kubectl's YAML layout (sigs.k8s.io/yaml: sorted keys, lists not indented under their
    key, two spaces)."""
    lines: list[str] = []
    _emit(value, indent, lines)
    return "\n".join(lines) + "\n"


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    text = str(value)
    safe = text[:1].isalnum() and ": " not in text and not text.endswith(":") and " #" not in text
    if safe and _RESOLVER.resolve(yaml.ScalarNode, text, (True, False)) == STR_TAG:
        return text
    return json.dumps(text)


def _emit(value: Any, indent: int, lines: list[str]) -> None:
    pad = " " * indent
    if isinstance(value, dict):
        for key in sorted(value):
            item = value[key]
            if isinstance(item, dict) and item:
                lines.append(f"{pad}{key}:")
                _emit(item, indent + 2, lines)
            elif isinstance(item, list) and item:
                lines.append(f"{pad}{key}:")
                _emit(item, indent, lines)
            else:
                empty = "{}" if isinstance(item, dict) else "[]" if isinstance(item, list) else None
                lines.append(f"{pad}{key}: {empty or _scalar(item)}")
    else:
        for item in value:
            if isinstance(item, (dict, list)) and item:
                sub: list[str] = []
                _emit(item, indent + 2, sub)
                lines.append(f"{pad}- {sub[0][indent + 2 :]}")
                lines.extend(sub[1:])
            else:
                lines.append(f"{pad}- {_scalar(item)}")


def write_inputs(directory: Path, pods: int) -> dict[str, Path]:
    """The NodePool file and the pod list as YAML and JSON; their paths by format."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "nodepool.yaml").write_text(NODEPOOL, encoding="utf-8")
    listing = pod_list(pods)
    (directory / "pods.yaml").write_text(kubectl_yaml(listing), encoding="utf-8")
    (directory / "pods.json").write_text(json.dumps(listing, indent=4) + "\n", encoding="utf-8")
    return {"yaml": directory / "pods.yaml", "json": directory / "pods.json"}


def _median(run: Any, repeat: int) -> tuple[float, float]:
    """Median wall-clock and CPU seconds of ``repeat`` calls (CPU time is what other load on a shared
    machine disturbs least)."""
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        run()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def main() -> None:
    """Write the inputs and print the loading and planning figures."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pods", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", default=None, help="write the inputs here and keep them")
    parser.add_argument("--baseline", action="store_true", help="also time yaml.load_all with CSafeLoader")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(args.keep or scratch)
        files = write_inputs(directory, args.pods)
        nodepool = str(directory / "nodepool.yaml")
        print(f"{args.pods} pending pods; median of {args.repeat} runs, CPU seconds (wall clock)")
        print(f"{'format':<6} {'MB':>6} {'load':>16} {'plan':>16} {'nodes':>6}")
        for fmt, path in files.items():
            size = path.stat().st_size / 1e6
            load = _median(lambda p=path: load_manifests([nodepool, str(p)]), args.repeat)
            inputs = [nodepool, str(path)]
            whole = _median(lambda i=inputs: make_plan(i), args.repeat)
            nodes = len(make_plan(inputs).results.new_claims) if args.repeat else 0
            cells = [f"{cpu:7.2f} ({wall:6.2f})" for wall, cpu in (load, whole)]
            print(f"{fmt:<6} {size:>6.1f} {cells[0]:>16} {cells[1]:>16} {nodes:>6}")
        if args.baseline:
            text = files["yaml"].read_text(encoding="utf-8")
            wall, cpu = _median(lambda: list(yaml.load_all(text, Loader=yaml.CSafeLoader)), args.repeat)
            print(f"CSafeLoader alone on the YAML file: {cpu:.2f} CPU s ({wall:.2f} s wall clock)")


if __name__ == "__main__":
    main()
