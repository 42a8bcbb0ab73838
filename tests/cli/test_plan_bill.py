"""`fleetwright plan` weighs each node's whole bill: Karpenter's getting-started walkthrough (a v1alpha5
Provisioner without instance-category limits, `inflate` scaled to 5 pods of 1 CPU) no longer plans five
t4g.nano spot nodes whose root volumes and CPU credits cost many times their instance price."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent
from typing import Any

import pytest

from fleetwright.catalog.bill import DEFAULT_VIEW, node_bill
from fleetwright.catalog.loader import builtin_catalog
from fleetwright.model.allocatable import instance_type_allocatable
from tests.cli.test_plan import plan_json
from tests.support.cli import Run

WALKTHROUGH = """
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: default}
spec:
  requirements:
    - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
  limits: {resources: {cpu: 1000}}
  providerRef: {name: default}
  ttlSecondsAfterEmpty: 30
---
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata: {name: default}
spec:
  subnetSelector: {karpenter.sh/discovery: my-cluster}
  securityGroupSelector: {karpenter.sh/discovery: my-cluster}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: inflate}
spec:
  replicas: 5
  selector: {matchLabels: {app: inflate}}
  template:
    metadata: {labels: {app: inflate}}
    spec:
      terminationGracePeriodSeconds: 0
      containers:
        - name: inflate
          image: public.ecr.aws/eks-distro/kubernetes/pause:3.7
          resources: {requests: {cpu: 1}}
"""

NODECLASS = """
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: node-role
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: my-cluster}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: my-cluster}}]
"""

NODEPOOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: default}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
"""


def walkthrough(tmp_path: Path) -> Path:
    path = tmp_path / "walkthrough.yaml"
    path.write_text(dedent(WALKTHROUGH).lstrip())
    return path


def one_node_holding_all_five() -> float:
    """The whole bill of the cheapest single spot node with room for the five 1-CPU pods."""
    bills = []
    for it in builtin_catalog("us-east-1"):
        offering = it.cheapest(capacity_types=frozenset({"spot"}))
        if offering is not None and instance_type_allocatable(it, None)["cpu"] >= 5000:
            bills.append(node_bill(it.name, offering.price, DEFAULT_VIEW, 5000).total)
    return min(bills)


def test_walkthrough_plans_no_node_per_pod_and_costs_no_more_per_pod_than_one_node(
    run: Run, tmp_path: Path
) -> None:
    doc = plan_json(run, walkthrough(tmp_path))
    claims = doc["nodeClaims"]
    assert sum(len(claim["pods"]) for claim in claims) == 5 and doc["unschedulable"] == []
    assert len(claims) < 5
    assert not any(claim["instanceTypes"][0].startswith("t4g.") for claim in claims)
    per_pod = doc["summary"]["hourlyBill"]["total"] / 5
    assert per_pod <= one_node_holding_all_five() / 5 + 1e-6
    for claim in claims:
        bill = claim["bill"]
        assert bill["total"] == pytest.approx(
            bill["instance"] + bill["volumes"] + bill["publicIPv4"] + bill["cpuCredits"], abs=1e-5
        )
        assert bill["volumes"] == pytest.approx(20 * 0.08 / 730, abs=1e-6)  # AL2's 20 GiB gp3 root volume


def test_walkthrough_candidates_leave_out_burstable_types_that_would_run_on_surplus_credits(
    run: Run, tmp_path: Path
) -> None:
    doc = plan_json(run, walkthrough(tmp_path))
    assert doc["nodeClaims"]
    for claim in doc["nodeClaims"]:
        # Each node's pods request 2 or 3 CPUs: no T type's baseline covers them, so none is a candidate
        # EC2 could launch in place of the cheapest by bill.
        assert not [
            name for name in claim["instanceTypes"] if name.split(".")[0] in {"t2", "t3", "t3a", "t4g"}
        ]
        assert claim["bill"]["cpuCredits"] == 0.0


def write(tmp_path: Path, nodeclass: str = NODECLASS) -> Path:
    (tmp_path / "nodepool.yaml").write_text(dedent(NODEPOOL).lstrip())
    (tmp_path / "nodeclass.yaml").write_text(dedent(nodeclass).lstrip())
    (tmp_path / "pods.yaml").write_text(dedent(WALKTHROUGH).split("---")[2].lstrip())
    return tmp_path


def addresses(doc: dict[str, Any]) -> list[float]:
    return [claim["bill"]["publicIPv4"] for claim in doc["nodeClaims"]]


def test_public_ipv4_is_billed_when_the_node_class_or_the_subnets_assign_one(
    run: Run, tmp_path: Path
) -> None:
    private = plan_json(run, write(tmp_path))
    assert set(addresses(private)) == {0.0}
    public = plan_json(run, write(tmp_path), extra=("--public-subnets",))
    assert set(addresses(public)) == {0.005}
    assert public["summary"]["hourlyBill"]["publicIPv4"] == pytest.approx(0.005 * len(public["nodeClaims"]))
    pinned = NODECLASS + "  associatePublicIPAddress: true\n"
    assert set(addresses(plan_json(run, write(tmp_path, pinned)))) == {0.005}
    refused = NODECLASS + "  associatePublicIPAddress: false\n"
    assert set(addresses(plan_json(run, write(tmp_path, refused), extra=("--public-subnets",)))) == {0.0}


def test_block_device_mappings_are_billed(run: Run, tmp_path: Path) -> None:
    mapped = NODECLASS + dedent(
        """
        blockDeviceMappings:
          - deviceName: /dev/xvda
            rootVolume: true
            ebs: {volumeSize: 100Gi, volumeType: gp3, iops: 6000, throughput: 250}
        """
    ).replace("\n", "\n  ")
    doc = plan_json(run, write(tmp_path, mapped))
    volumes = (100 * 0.08 + 3000 * 0.005 + 125 * 0.04) / 730
    billed = [claim["bill"]["volumes"] for claim in doc["nodeClaims"]]
    assert billed and billed == [pytest.approx(volumes, abs=1e-6)] * len(billed)


def test_table_shows_each_part_of_the_bill(run: Run, tmp_path: Path) -> None:
    code, out, err = run("plan", "-f", str(write(tmp_path)), "--public-subnets")
    assert code == 0, err
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("NODEPOOL"))
    assert header.split()[-5:] == ["INSTANCE", "VOLUMES", "IPV4", "CREDITS", "$/HOUR"]
    rows = [line.split() for line in lines if line.startswith("default ")]
    assert rows and all(row[-3] == "0.0050" and row[-4] == "0.0022" for row in rows)
    assert "public IPv4 $" in out and "CPU credits $0.0000" in out
