"""Deprecated label keys in NodePools and pods plan like their GA forms (``fleetwright plan``)."""

import json
from pathlib import Path
from textwrap import dedent
from typing import Any

from fleetwright.catalog.loader import builtin_catalog
from fleetwright.model.labels import ARCH
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
        - {key: beta.kubernetes.io/instance-type, operator: In, values: [m5.large]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
"""

POD = """
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: default}
spec:
  nodeSelector: {SELECTOR}
  containers: [{name: c, image: pause, resources: {requests: {cpu: 500m, memory: 1Gi}}}]
"""


def _plan(run: Run, folder: Path, nodepool: str, selector: str = "{}") -> dict[str, Any]:
    (folder / "ec2nodeclass.yaml").write_text((EXAMPLES / "inflate" / "ec2nodeclass.yaml").read_text())
    (folder / "nodepool.yaml").write_text(dedent(nodepool).lstrip())
    (folder / "pod.yaml").write_text(dedent(POD).lstrip().replace("{SELECTOR}", selector))
    code, out, err = run("plan", "-o", "json", "-f", str(folder))
    assert code == 0, err
    document: dict[str, Any] = json.loads(out)
    return document


def test_nodepool_restricted_through_the_beta_instance_type_label(run: Run, tmp_path: Path) -> None:
    doc = _plan(run, tmp_path, NODEPOOL)
    (claim,) = doc["nodeClaims"]
    assert claim["instanceTypes"] == ["m5.large"]


def test_pod_selecting_beta_zone_and_arch_labels(run: Run, tmp_path: Path) -> None:
    pool = NODEPOOL.replace(
        "beta.kubernetes.io/instance-type, operator: In, values: [m5.large]",
        "kubernetes.io/os, operator: In, values: [linux]",
    )
    selector = (
        '{"failure-domain.beta.kubernetes.io/zone": us-east-1b, "beta.kubernetes.io/arch": arm64,'
        ' "beta.kubernetes.io/os": linux, "failure-domain.beta.kubernetes.io/region": us-east-1}'
    )
    doc = _plan(run, tmp_path, pool, selector)
    (claim,) = doc["nodeClaims"]
    assert claim["zones"] == ["us-east-1b"]
    arch = {it.name: it.labels.get(ARCH) for it in builtin_catalog("us-east-1")}
    assert claim["instanceTypes"] and {arch[name] for name in claim["instanceTypes"]} == {"arm64"}
    assert doc["unschedulable"] == []


def test_pod_selecting_a_beta_zone_outside_the_pool_is_explained(run: Run, tmp_path: Path) -> None:
    pool = NODEPOOL + "        - {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}\n"
    doc = _plan(run, tmp_path, pool, '{"failure-domain.beta.kubernetes.io/zone": us-east-1c}')
    assert doc["nodeClaims"] == []
    (error,) = doc["unschedulable"]
    assert "topology.kubernetes.io/zone" in error["reason"]
