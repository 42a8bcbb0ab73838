"""`fleetwright plan` gives up a pod's heaviest preferred pod-affinity term first, as Karpenter does."""

import json
from pathlib import Path
from textwrap import dedent
from typing import Any

from tests.support.cli import EXAMPLES, Run

NODE = """
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels:
    kubernetes.io/hostname: {name}
    topology.kubernetes.io/zone: us-east-1a
    node.kubernetes.io/instance-type: m5.large
status:
  capacity: {{cpu: "2", memory: 8Gi, pods: "29"}}
  allocatable: {{cpu: 1930m, memory: 7Gi, pods: "29"}}
"""

RUNNING = """
apiVersion: v1
kind: Pod
metadata: {{name: {app}-0, namespace: default, labels: {{app: {app}}}}}
spec:
  nodeName: {node}
  containers: [{{name: c, image: x, resources: {{requests: {{cpu: 100m}}}}}}]
"""

PENDING = """
apiVersion: v1
kind: Pod
metadata: {name: client, namespace: default}
spec:
  affinity:
    podAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 90
          podAffinityTerm:
            topologyKey: kubernetes.io/hostname
            labelSelector: {matchLabels: {app: x}}
        - weight: 10
          podAffinityTerm:
            topologyKey: kubernetes.io/hostname
            labelSelector: {matchLabels: {app: y}}
  containers: [{name: c, image: x, resources: {requests: {cpu: 100m}}}]
"""


def test_plan_places_the_pod_by_its_lighter_preference_when_both_cannot_hold(
    run: Run, tmp_path: Path
) -> None:
    inflate = EXAMPLES / "inflate"
    docs = [
        (inflate / "nodepool.yaml").read_text(),
        (inflate / "ec2nodeclass.yaml").read_text(),
        NODE.format(name="node-x"),
        NODE.format(name="node-y"),
        RUNNING.format(app="x", node="node-x"),
        RUNNING.format(app="y", node="node-y"),
        PENDING,
    ]
    for n, text in enumerate(docs):
        (tmp_path / f"doc{n}.yaml").write_text(dedent(text).lstrip())
    code, out, err = run("plan", "-o", "json", "-f", str(tmp_path))
    assert code == 0, err
    doc: dict[str, Any] = json.loads(out)
    assert doc["nodeClaims"] == [] and doc["unschedulable"] == []
    assert [(n["name"], n["pods"]) for n in doc["existingNodes"]] == [("node-y", ["default/client"])]
