"""`fleetwright plan` with topology spreads that set nodeTaintsPolicy / nodeAffinityPolicy."""

import json
from pathlib import Path
from textwrap import dedent
from typing import Any

import pytest

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
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a, us-east-1b]}
"""

NODE = """
apiVersion: v1
kind: Node
metadata:
  name: {name}
  labels:
    kubernetes.io/hostname: {name}
    topology.kubernetes.io/zone: {zone}
    node.kubernetes.io/instance-type: m5.large
spec:
  taints: {taints}
status:
  capacity: {{cpu: "2", memory: 8Gi, pods: "29"}}
  allocatable: {{cpu: 1930m, memory: 7Gi, pods: "29"}}
"""

POD = """
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default, labels: {{app: web}}}}
spec:
  {node}
  topologySpreadConstraints:
    - maxSkew: 1
      topologyKey: topology.kubernetes.io/zone
      whenUnsatisfiable: DoNotSchedule
      labelSelector: {{matchLabels: {{app: web}}}}
      nodeTaintsPolicy: {policy}
  containers: [{{name: c, image: x, resources: {{requests: {{cpu: "1"}}}}}}]
"""


def _plan(run: Run, folder: Path, policy: str) -> dict[str, Any]:
    docs = [
        NODEPOOL,
        (EXAMPLES / "inflate" / "ec2nodeclass.yaml").read_text(),
        NODE.format(name="node-a", zone="us-east-1a", taints="[]"),
        NODE.format(name="node-b", zone="us-east-1b", taints="[]"),
        NODE.format(
            name="node-c", zone="us-east-1c", taints="[{key: dedicated, value: batch, effect: NoSchedule}]"
        ),
        POD.format(name="web-a", node="nodeName: node-a", policy=policy),
        POD.format(name="web-b", node="nodeName: node-b", policy=policy),
        POD.format(name="web-new", node="", policy=policy),
    ]
    for n, text in enumerate(docs):
        (folder / f"doc{n}.yaml").write_text(dedent(text).lstrip())
    code, out, err = run("plan", "-o", "json", "-f", str(folder))
    assert code == 0, err
    document: dict[str, Any] = json.loads(out)
    return document


@pytest.mark.parametrize("policy", ["Ignore", "Honor"])
def test_plan_honours_node_taints_policy(run: Run, tmp_path: Path, policy: str) -> None:
    doc = _plan(run, tmp_path, policy)
    placed = [p for c in doc["nodeClaims"] for p in c["pods"]] + [
        p for n in doc["existingNodes"] for p in n["pods"]
    ]
    if policy == "Ignore":
        # the tainted node's zone counts, with no web pod: a and b already hold one each
        assert placed == []
        [entry] = doc["unschedulable"]
        assert entry["pod"] == "default/web-new"
        assert "maxSkew 1 cannot be met" in entry["reason"] and "us-east-1c=0" in entry["reason"]
    else:
        assert placed == ["default/web-new"]
        assert doc["unschedulable"] == []
