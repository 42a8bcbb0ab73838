"""``instanceStorePolicy: RAID0``: the plan counts the instance store as the node's ephemeral storage,
so pods asking for more than the root volume get a node with local NVMe disks."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

from tests.cli.test_plan import plan_json
from tests.support.cli import Run

NODEPOOL = """
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: general}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, m5d.large]}
"""

NODECLASS = """
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
"""

POD = """
apiVersion: v1
kind: Pod
metadata: {name: scratch, namespace: default}
spec:
  containers:
    - name: c
      image: pause
      resources: {requests: {cpu: 100m, ephemeral-storage: 50Gi}}
"""


def _manifests(tmp_path: Path, raid0: bool) -> Path:
    nodeclass = NODECLASS + ("  instanceStorePolicy: RAID0\n" if raid0 else "")
    (tmp_path / "all.yaml").write_text("---\n".join(dedent(t).lstrip() for t in (NODEPOOL, nodeclass, POD)))
    return tmp_path / "all.yaml"


def test_raid0_makes_the_instance_store_the_ephemeral_storage(run: Run, tmp_path: Path) -> None:
    doc = plan_json(run, _manifests(tmp_path, raid0=True))
    (claim,) = doc["nodeClaims"]
    assert claim["instanceTypes"] == ["m5d.large"]  # 75 GB of NVMe; m5.large has only its 20Gi root
    assert doc["unschedulable"] == []


def test_without_raid0_the_root_volume_is_all_there_is(run: Run, tmp_path: Path) -> None:
    doc = plan_json(run, _manifests(tmp_path, raid0=False))
    assert doc["nodeClaims"] == []
    (error,) = doc["unschedulable"]
    assert error["pod"] == "default/scratch"
