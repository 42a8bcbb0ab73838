"""`fleetwright plan` with the built-in catalog: Karpenter's GPU examples, the AWS instance labels
Karpenter v1.14 defines and ``topology.k8s.aws/zone-id``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fleetwright.catalog.loader import builtin_catalog
from tests.cli.test_plan import plan_json, write
from tests.support.cli import EXAMPLES, Run

NODECLASS = EXAMPLES / "inflate" / "ec2nodeclass.yaml"
P = "karpenter.k8s.aws/"


def nodepool(name: str, requirements: str, taints: str = "") -> str:
    return f"""
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: {name}}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
{requirements}
{taints}
"""


def pod(name: str, requests: str = "cpu: 100m", extra: str = "", labels: str = "{app: x}") -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default, labels: {labels}}}
spec:
  containers:
    - name: c
      image: busybox
      resources:
        requests: {{{requests}}}
        limits: {{{requests}}}
{extra}
"""


def plan_for(run: Run, tmp_path: Path, *documents: str) -> dict[str, Any]:
    path = write(tmp_path / "manifests.yaml", "\n---\n".join(documents))
    return plan_json(run, NODECLASS, path)


def test_karpenter_nvidia_gpu_example_plans_a_p3_node(run: Run, tmp_path: Path) -> None:
    """The GPU NodePool of Karpenter's scheduling docs: p3 only, tainted nvidia.com/gpu."""
    gpu_pool = nodepool(
        "gpu",
        "      - {key: karpenter.k8s.aws/instance-family, operator: In, values: [p3]}",
        "      taints:\n      - {key: nvidia.com/gpu, value: 'true', effect: NoSchedule}",
    )
    toleration = "  tolerations:\n    - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}"
    doc = plan_for(run, tmp_path, gpu_pool, pod("mygpupod", "nvidia.com/gpu: 1", toleration))
    assert doc["unschedulable"] == []
    (claim,) = doc["nodeClaims"]
    assert claim["instanceTypes"][0] == "p3.2xlarge"
    assert set(claim["instanceTypes"]) == {"p3.2xlarge", "p3.8xlarge", "p3.16xlarge"}
    assert claim["taints"] == ["nvidia.com/gpu=true:NoSchedule"]


def test_amd_gpu_nodepool_plans_a_g4ad_node(run: Run, tmp_path: Path) -> None:
    gpu_pool = nodepool(
        "amd-gpu",
        "      - {key: karpenter.k8s.aws/instance-gpu-manufacturer, operator: In, values: [amd]}",
        "      taints:\n      - {key: amd.com/gpu, value: 'true', effect: NoSchedule}",
    )
    toleration = "  tolerations:\n    - {key: amd.com/gpu, operator: Exists, effect: NoSchedule}"
    doc = plan_for(run, tmp_path, gpu_pool, pod("amdpod", "amd.com/gpu: 1", toleration))
    assert doc["unschedulable"] == []
    (claim,) = doc["nodeClaims"]
    assert claim["instanceTypes"][0] == "g4ad.xlarge"
    assert all(name.startswith("g4ad.") for name in claim["instanceTypes"])


def _expected(key: str, predicate: Any) -> set[str]:
    return {it.name for it in builtin_catalog("us-east-1") if key in it.labels and predicate(it.labels[key])}


@pytest.mark.parametrize(
    ("requirement", "key", "predicate"),
    [
        (
            "{key: karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz, operator: Gt, values: ['3900']}",
            P + "instance-cpu-sustained-clock-speed-mhz",
            lambda v: int(v) > 3900,
        ),
        (
            "{key: karpenter.k8s.aws/instance-encryption-in-transit-supported, operator: In,"
            " values: ['true']}",
            P + "instance-encryption-in-transit-supported",
            lambda v: v == "true",
        ),
        (
            "{key: karpenter.k8s.aws/instance-capability-flex, operator: In, values: ['true']}",
            P + "instance-capability-flex",
            lambda v: v == "true",
        ),
        (
            "{key: karpenter.k8s.aws/nitro-sandbox, operator: In, values: ['true']}",
            P + "nitro-sandbox",
            lambda v: v == "true",
        ),
    ],
)
def test_nodepool_restricted_by_a_new_instance_label(
    run: Run, tmp_path: Path, requirement: str, key: str, predicate: Any
) -> None:
    """Every type the claim may launch carries the label value (the cheapest types overall do not)."""
    expected = _expected(key, predicate)
    assert 0 < len(expected) < len(builtin_catalog("us-east-1"))
    pool = nodepool("restricted", f"      - {requirement}")
    doc = plan_for(run, tmp_path, pool, pod("one", "cpu: 100m"))
    assert doc["unschedulable"] == []
    offered = {name for claim in doc["nodeClaims"] for name in claim["instanceTypes"]}
    assert offered and offered <= expected
    assert claim_types_match(doc, expected)


def claim_types_match(doc: dict[str, Any], expected: set[str]) -> bool:
    return all(set(claim["instanceTypes"]) <= expected for claim in doc["nodeClaims"])


def test_pod_selecting_clock_speed_without_nodepool_mentioning_it(run: Run, tmp_path: Path) -> None:
    """A well-known label: the pod's selector narrows the types even when the NodePool is silent on it."""
    pool = nodepool("general", "      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}")
    selector = "  nodeSelector: {karpenter.k8s.aws/instance-encryption-in-transit-supported: 'true'}"
    doc = plan_for(run, tmp_path, pool, pod("p", "cpu: 100m", selector))
    assert doc["unschedulable"] == []
    expected = _expected(P + "instance-encryption-in-transit-supported", lambda v: v == "true")
    assert claim_types_match(doc, expected)


def test_nodepool_restricted_by_zone_id_plans_that_zone(run: Run, tmp_path: Path) -> None:
    pool = nodepool("zoned", "      - {key: topology.k8s.aws/zone-id, operator: In, values: [use1-az1]}")
    doc = plan_for(run, tmp_path, pool, pod("p"))
    assert doc["unschedulable"] == []
    (claim,) = doc["nodeClaims"]
    assert claim["zones"] == ["us-east-1b"]  # use1-az1 in the built-in map
    assert claim["labels"]["topology.k8s.aws/zone-id"] == "use1-az1"
    assert claim["labels"]["topology.kubernetes.io/zone"] == "us-east-1b"


def test_pod_node_selector_on_zone_id(run: Run, tmp_path: Path) -> None:
    pool = nodepool("general", "      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}")
    doc = plan_for(
        run, tmp_path, pool, pod("p", extra="  nodeSelector: {topology.k8s.aws/zone-id: use1-az4}")
    )
    assert doc["unschedulable"] == []
    (claim,) = doc["nodeClaims"]
    assert claim["zones"] == ["us-east-1d"]


def test_topology_spread_on_zone_id_spreads_over_zone_ids(run: Run, tmp_path: Path) -> None:
    pool = nodepool(
        "general",
        "      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}\n"
        "      - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}",
    )
    spread = (
        "  topologySpreadConstraints:\n"
        "    - {maxSkew: 1, topologyKey: topology.k8s.aws/zone-id, whenUnsatisfiable: DoNotSchedule,"
        " labelSelector: {matchLabels: {app: web}}}"
    )
    pods = [pod(f"web-{i}", "cpu: 100m", spread, labels="{app: web}") for i in range(6)]
    doc = plan_for(run, tmp_path, pool, *pods)
    assert doc["unschedulable"] == []
    zone_ids = sorted(claim["labels"]["topology.k8s.aws/zone-id"] for claim in doc["nodeClaims"])
    m5_zones = {
        o.zone_id for it in builtin_catalog("us-east-1") if it.name == "m5.large" for o in it.offerings
    }
    assert len(doc["nodeClaims"]) == len(m5_zones) == len(set(zone_ids))
    assert set(zone_ids) == m5_zones


def test_pod_anti_affinity_on_zone_id_puts_each_pod_in_its_own_zone(run: Run, tmp_path: Path) -> None:
    pool = nodepool("general", "      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}")
    anti = (
        "  affinity:\n    podAntiAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n"
        "        - {topologyKey: topology.k8s.aws/zone-id, labelSelector: {matchLabels: {app: db}}}"
    )
    doc = plan_for(run, tmp_path, pool, *[pod(f"db-{i}", extra=anti, labels="{app: db}") for i in range(3)])
    assert doc["unschedulable"] == []
    zone_ids = [claim["labels"]["topology.k8s.aws/zone-id"] for claim in doc["nodeClaims"]]
    assert len(zone_ids) == 3 == len(set(zone_ids))
