"""``spec.limits.nodes`` in ``fleetwright plan``: every claim and existing node of the NodePool counts one."""

import json
from pathlib import Path
from textwrap import dedent
from typing import Any

from tests.support.cli import EXAMPLES, Run

NODEPOOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
  limits:
    nodes: 2
"""

# Five pods of which an m5.large (under 2 cpu allocatable) holds one each.
DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: big, namespace: default}
spec:
  replicas: 5
  selector: {matchLabels: {app: big}}
  template:
    metadata: {labels: {app: big}}
    spec:
      containers: [{name: c, image: pause, resources: {requests: {cpu: "1900m", memory: 1Gi}}}]
"""

EXISTING_NODE = """
apiVersion: v1
kind: Node
metadata:
  name: ip-10-0-0-1.ec2.internal
  labels:
    kubernetes.io/hostname: ip-10-0-0-1.ec2.internal
    topology.kubernetes.io/zone: us-east-1a
    node.kubernetes.io/instance-type: m5.large
    karpenter.sh/nodepool: default
status:
  capacity: {cpu: "2", memory: 8Gi, pods: "29"}
  allocatable: {cpu: 1930m, memory: 7Gi, pods: "29"}
"""


def _plan(run: Run, folder: Path, *documents: str) -> dict[str, Any]:
    (folder / "ec2nodeclass.yaml").write_text((EXAMPLES / "inflate" / "ec2nodeclass.yaml").read_text())
    for n, text in enumerate(documents):
        (folder / f"doc{n}.yaml").write_text(dedent(text).lstrip())
    code, out, err = run("plan", "-o", "json", "-f", str(folder))
    assert code == 0, err
    document: dict[str, Any] = json.loads(out)
    return document


def test_plan_stops_at_the_node_limit_and_says_why(run: Run, tmp_path: Path) -> None:
    doc = _plan(run, tmp_path, NODEPOOL, DEPLOYMENT)
    assert len(doc["nodeClaims"]) == 2
    assert sum(len(c["pods"]) for c in doc["nodeClaims"]) == 2
    assert len(doc["unschedulable"]) == 3
    assert all("limit nodes=2 reached" in e["reason"] for e in doc["unschedulable"])


def test_existing_nodes_of_the_pool_count_against_the_node_limit(run: Run, tmp_path: Path) -> None:
    doc = _plan(run, tmp_path, NODEPOOL, DEPLOYMENT, EXISTING_NODE)
    assert len(doc["nodeClaims"]) == 1
    assert len(doc["unschedulable"]) == 4 - len(
        doc["existingNodes"][0]["pods"] if doc["existingNodes"] else []
    )


def test_without_a_node_limit_every_pod_gets_a_node(run: Run, tmp_path: Path) -> None:
    doc = _plan(run, tmp_path, NODEPOOL.replace("nodes: 2", 'cpu: "1000"'), DEPLOYMENT)
    assert len(doc["nodeClaims"]) == 5 and doc["unschedulable"] == []
