"""``fleetwright explain pod`` on manifests: the decision, the event it gives and each NodePool's fit."""

from __future__ import annotations

import json
from pathlib import Path
from textwrap import dedent
from typing import Any

from tests.cli.test_explain_node import CLASS
from tests.support.cli import Run


def pool(name: str, *, requirements: str = "", taints: str = "", limits: str = "", weight: int = 1) -> str:
    return f"""
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: {name}}}
spec:
  weight: {weight}
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      requirements:
        - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
        {requirements}
      {taints}
  {limits}
"""


def pod(name: str, *, cpu: str = "500m", node: str = "", extra: str = "") -> str:
    bound = f"nodeName: {node}" if node else ""
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: shop}}
spec:
  {bound}
  {extra}
  containers: [{{name: c, image: x, resources: {{requests: {{cpu: {cpu}, memory: 1Gi}}}}}}]
"""


NODE = """
apiVersion: v1
kind: Node
metadata:
  name: node-a
  labels:
    kubernetes.io/arch: amd64
    kubernetes.io/os: linux
    kubernetes.io/hostname: node-a
    topology.kubernetes.io/zone: us-east-1a
status:
  allocatable: {cpu: "4", memory: 16Gi, pods: "110"}
"""


def write(tmp_path: Path, *documents: str) -> Path:
    path = tmp_path / "all.yaml"
    path.write_text("---".join(dedent(d) for d in documents))
    return path


def explain(run: Run, path: Path, key: str) -> dict[str, Any]:
    code, out, err = run("explain", "pod", key, "-f", str(path), "-o", "json")
    assert code == 0, err
    document: dict[str, Any] = json.loads(out)
    return document


def by_pool(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["name"]: entry for entry in document["nodePools"]}


def test_a_pending_pod_launches_in_the_pool_that_fits_and_says_why_the_others_do_not(
    run: Run, tmp_path: Path
) -> None:
    gpu_taint = "taints: [{key: nvidia.com/gpu, value: 'true', effect: NoSchedule}]"
    arm = "- {key: kubernetes.io/arch, operator: In, values: [arm64]}"
    path = write(
        tmp_path,
        CLASS,
        pool("general"),
        pool("gpu", taints=gpu_taint, weight=10),
        pool("arm", requirements=arm),
        pod("web", extra="nodeSelector: {kubernetes.io/arch: amd64}"),
    )
    document = explain(run, path, "shop/web")
    decision = document["decision"]
    assert decision["action"] == "launch"
    assert decision["nodeClaim"]["nodePool"] == "general"
    assert document["event"] == {
        "type": "Normal",
        "reason": "Nominated",
        "message": f"Pod should schedule on: nodeclaim/{decision['nodeClaim']['name']}",
    }
    pools = by_pool(document)
    assert [entry["name"] for entry in document["nodePools"]] == ["gpu", "arm", "general"]  # weight, name
    assert pools["general"]["fits"] and "m5.large" in pools["general"]["instanceTypes"]
    assert pools["general"]["instanceTypes"] == decision["nodeClaim"]["instanceTypes"]
    assert not pools["gpu"]["fits"]
    assert pools["gpu"]["reason"] == "taint nvidia.com/gpu=true:NoSchedule is not tolerated"
    assert not pools["arm"]["fits"]
    assert "kubernetes.io/arch" in pools["arm"]["reason"]
    assert pools["arm"]["instanceTypes"] == []


def test_a_pod_no_pool_can_run_gets_the_failed_scheduling_event_with_every_pools_reason(
    run: Run, tmp_path: Path
) -> None:
    owned = "kubernetes.io/os: linux\n    karpenter.sh/nodepool: small"
    full = NODE.replace("kubernetes.io/os: linux", owned)
    full = full.replace("status:", 'status:\n  capacity: {cpu: "4", memory: 16Gi, pods: "110"}')
    path = write(
        tmp_path,
        CLASS,
        pool("small", limits="limits: {cpu: '4'}"),
        full,
        pod("busy", cpu="3500m", node="node-a"),
        pod("big", cpu="2"),
    )
    document = explain(run, path, "shop/big")
    assert document["decision"]["action"] == "unschedulable"
    reason = document["decision"]["reason"]
    assert reason == "NodePool small: limit cpu=4 reached"
    event = document["event"]
    assert event["type"] == "Warning"
    assert event["reason"] == "FailedScheduling"
    assert event["message"] == f"Failed to schedule pod, {reason}"
    assert not by_pool(document)["small"]["fits"]
    assert by_pool(document)["small"]["reason"] == "limit cpu=4 reached"


def test_a_pod_with_room_on_a_node_goes_there_without_a_launch(run: Run, tmp_path: Path) -> None:
    path = write(tmp_path, CLASS, pool("general"), NODE, pod("web"))
    document = explain(run, path, "shop/web")
    assert document["decision"]["action"] == "existing-node"
    assert document["decision"]["node"] == "node-a"
    assert document["event"]["message"] == "Pod should schedule on: node/node-a"
    assert by_pool(document)["general"]["fits"]  # a new node of the pool could run it too


def test_a_running_pod_says_where_it_runs_and_which_pools_could_run_it(run: Run, tmp_path: Path) -> None:
    path = write(tmp_path, CLASS, pool("general"), NODE, pod("web", node="node-a"))
    document = explain(run, path, "shop/web")
    assert document["decision"]["action"] == "bound"
    assert document["decision"]["node"] == "node-a"
    assert by_pool(document)["general"]["fits"]


def test_the_table_names_the_decision_the_event_and_the_pools(run: Run, tmp_path: Path) -> None:
    gpu_taint = "taints: [{key: nvidia.com/gpu, value: 'true', effect: NoSchedule}]"
    path = write(tmp_path, CLASS, pool("general"), pool("gpu", taints=gpu_taint), pod("web"))
    code, out, err = run("explain", "pod", "shop/web", "-f", str(path))
    assert code == 0, err
    assert "would launch a node: NodePool general" in out
    assert "event Nominated: Pod should schedule on: nodeclaim/" in out
    assert "gpu: does not fit: taint nvidia.com/gpu=true:NoSchedule is not tolerated" in out
    assert "general: fits" in out


def test_an_unknown_pod_is_a_usage_error(run: Run, tmp_path: Path) -> None:
    path = write(tmp_path, CLASS, pool("general"), pod("web"))
    code, out, err = run("explain", "pod", "shop/nope", "-f", str(path))
    assert code == 2
    assert out == ""
    assert "pod shop/nope not found in the manifests" in err


def test_bad_manifests_are_a_usage_error_naming_the_document(run: Run, tmp_path: Path) -> None:
    broken = "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: 3\n"
    path = write(tmp_path, CLASS, pool("general"), broken)
    code, out, err = run("explain", "pod", "default/x", "-f", str(path))
    assert code == 2
    assert out == ""
    assert "all.yaml" in err


def test_a_pod_bigger_than_every_instance_type_of_a_pool_gets_the_resource_reason(
    run: Run, tmp_path: Path
) -> None:
    small = "- {key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}"
    path = write(tmp_path, CLASS, pool("small", requirements=small), pool("general"), pod("wide", cpu="4"))
    document = explain(run, path, "shop/wide")
    assert document["decision"]["nodeClaim"]["nodePool"] == "general"
    too_big = "no instance type has cpu=4 within the NodePool's requirements"
    assert by_pool(document)["small"]["reason"] == too_big
    assert "m5.large" not in by_pool(document)["general"]["instanceTypes"]


def test_a_zone_spread_the_pool_cannot_keep_gets_the_topology_reason(run: Run, tmp_path: Path) -> None:
    zone_a = "- {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}"
    node_b = NODE.replace("node-a", "node-b").replace("us-east-1a", "us-east-1b")
    spread = (
        "topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, "
        "whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: web}}}]"
    )
    web = "namespace: shop, labels: {app: web}}"
    labelled = [pod(f"web-{i}", node="node-a").replace("namespace: shop}", web) for i in range(2)]
    new = pod("web-new", extra=spread).replace("namespace: shop}", web)
    path = write(tmp_path, CLASS, pool("zonal", requirements=zone_a), NODE, node_b, *labelled, new)
    document = explain(run, path, "shop/web-new")
    assert document["decision"] == {
        "action": "existing-node",
        "node": "node-b",
        "nodeClaim": None,
        "reason": None,
    }
    assert not by_pool(document)["zonal"]["fits"]
    assert by_pool(document)["zonal"]["reason"] == (
        "topology spread on zone: maxSkew 1 cannot be met (matching pods: us-east-1a=2, us-east-1b=0); "
        "only us-east-1a allowed by NodePool zonal"
    )
