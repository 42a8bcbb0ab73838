"""`fleetwright plan` with a Windows NodePool: Windows pods get Windows nodes, Linux pods never do."""

from __future__ import annotations

from pathlib import Path

from fleetwright.catalog.loader import builtin_catalog
from tests.cli.test_plan import plan_json, write
from tests.support.cli import Run

# Karpenter's examples/v1/windows-2022.yaml, with a cluster name filled in.
WINDOWS_2022 = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: windows2022}
spec:
  template:
    spec:
      requirements:
        - {key: kubernetes.io/os, operator: In, values: [windows]}
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}
        - {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["2"]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: windows2022}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: windows2022}
spec:
  role: KarpenterNodeRole-my-cluster
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: my-cluster}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: my-cluster}}]
  amiSelectorTerms: [{alias: windows2022@latest}]
"""

LINUX = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: linux}
spec:
  template:
    spec:
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: al2023}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: al2023}
spec:
  role: KarpenterNodeRole-my-cluster
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: my-cluster}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: my-cluster}}]
  amiSelectorTerms: [{alias: al2023@latest}]
"""


def pod(name: str, os_name: str | None) -> str:
    selector = f"  nodeSelector: {{kubernetes.io/os: {os_name}}}\n" if os_name else ""
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
{selector}  containers:
    - name: c
      image: mcr.microsoft.com/windows/servercore:ltsc2022
      resources: {{requests: {{cpu: 500m, memory: 1Gi}}}}
"""


def test_windows_pod_gets_a_windows_node(run: Run, tmp_path: Path) -> None:
    path = write(tmp_path / "m.yaml", "\n---\n".join([WINDOWS_2022, pod("iis", "windows")]))
    doc = plan_json(run, path)
    assert doc["unschedulable"] == []
    (claim,) = doc["nodeClaims"]
    assert claim["nodePool"] == "windows2022"
    assert claim["labels"]["kubernetes.io/os"] == "windows"
    assert claim["labels"]["node.kubernetes.io/windows-build"] == "10.0.20348"
    by_name = {it.name: it for it in builtin_catalog("us-east-1")}
    assert all(by_name[name].labels["kubernetes.io/arch"] == "amd64" for name in claim["instanceTypes"])


def test_linux_pods_never_land_on_the_windows_nodepool(run: Run, tmp_path: Path) -> None:
    docs = [WINDOWS_2022, LINUX, pod("iis", "windows"), pod("nginx", "linux")]
    doc = plan_json(run, write(tmp_path / "m.yaml", "\n---\n".join(docs)))
    assert doc["unschedulable"] == []
    pools = {pod_key: claim["nodePool"] for claim in doc["nodeClaims"] for pod_key in claim["pods"]}
    assert pools == {"default/iis": "windows2022", "default/nginx": "linux"}
    linux = next(claim for claim in doc["nodeClaims"] if claim["nodePool"] == "linux")
    assert "node.kubernetes.io/windows-build" not in linux["labels"]


def test_linux_pod_with_only_a_windows_nodepool_is_unschedulable(run: Run, tmp_path: Path) -> None:
    doc = plan_json(run, write(tmp_path / "m.yaml", "\n---\n".join([WINDOWS_2022, pod("nginx", "linux")])))
    assert doc["nodeClaims"] == []
    [error] = doc["unschedulable"]
    assert error["pod"] == "default/nginx"
    assert "kubernetes.io/os" in error["reason"]


def test_windows_pod_with_only_a_linux_nodepool_is_unschedulable(run: Run, tmp_path: Path) -> None:
    doc = plan_json(run, write(tmp_path / "m.yaml", "\n---\n".join([LINUX, pod("iis", "windows")])))
    assert doc["nodeClaims"] == []
    assert [e["pod"] for e in doc["unschedulable"]] == ["default/iis"]


def test_windows_nodes_run_110_pods_and_offer_private_ipv4_addresses(run: Run, tmp_path: Path) -> None:
    from fleetwright.catalog.os_family import for_ami_family

    m5 = next(it for it in builtin_catalog("us-east-1") if it.name == "m5.large")
    assert m5.allocatable["pods"] == 29
    (windows,) = for_ami_family([m5], "Windows2022")
    assert windows.allocatable["pods"] == 110
    assert windows.capacity["vpc.amazonaws.com/PrivateIPv4Address"] == 9
    assert (
        for_ami_family([next(it for it in builtin_catalog() if it.name == "m6g.large")], "Windows2019") == []
    )
