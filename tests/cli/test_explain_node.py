"""``fleetwright explain node`` on manifests: each disruption method's verdict and what blocks it, the pass's
decision, the events a pass would publish and the removal simulated pod by pod."""

from __future__ import annotations

import json
from pathlib import Path
from textwrap import dedent
from typing import Any

from tests.support.cli import Run

NOW = "2026-11-10T00:00:00Z"

CLASS = """
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
"""


def pool(
    *,
    types: str = "[m5.large, m5.xlarge, c5.large]",
    policy: str = "WhenEmptyOrUnderutilized",
    after: str = "1m",
    expire: str = "720h",
    budgets: str = "",
) -> str:
    return f"""
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: general}}
spec:
  template:
    spec:
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
      expireAfter: {expire}
      requirements:
        - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
        - {{key: node.kubernetes.io/instance-type, operator: In, values: {types}}}
  disruption:
    consolidationPolicy: {policy}
    consolidateAfter: {after}
    {budgets}
"""


def node(
    name: str, *, kind: str = "m5.xlarge", created: str = "2026-11-01T00:00:00Z", annotations: str = "{}"
) -> str:
    return f"""
apiVersion: v1
kind: Node
metadata:
  name: {name}
  creationTimestamp: "{created}"
  annotations: {annotations}
  labels:
    karpenter.sh/nodepool: general
    node.kubernetes.io/instance-type: {kind}
    topology.kubernetes.io/zone: us-east-1a
    karpenter.sh/capacity-type: on-demand
    kubernetes.io/arch: amd64
    kubernetes.io/os: linux
    kubernetes.io/hostname: {name}
spec:
  providerID: aws:///us-east-1a/i-{name}
status:
  allocatable: {{cpu: 3920m, memory: 14Gi, pods: "58"}}
  conditions: [{{type: Ready, status: "True"}}]
"""


def pod(
    name: str, on: str, *, cpu: str = "500m", app: str = "web", started: str = "2026-11-01T00:05:00Z"
) -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: shop, labels: {{app: {app}}}}}
spec:
  nodeName: {on}
  containers: [{{name: c, image: x, resources: {{requests: {{cpu: {cpu}, memory: 1Gi}}}}}}]
status: {{phase: Running, startTime: "{started}"}}
"""


def pdb(allowed: int) -> str:
    return f"""
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {{name: web, namespace: shop}}
spec:
  selector: {{matchLabels: {{app: web}}}}
  maxUnavailable: {allowed}
status: {{disruptionsAllowed: {allowed}}}
"""


def write(tmp_path: Path, *documents: str) -> Path:
    path = tmp_path / "all.yaml"
    path.write_text("---".join(dedent(d) for d in documents))
    return path


def explain(run: Run, path: Path, name: str, now: str = NOW) -> dict[str, Any]:
    code, out, err = run("explain", "node", name, "-f", str(path), "-o", "json", "--now", now)
    assert code == 0, err
    document: dict[str, Any] = json.loads(out)
    return document


def method(document: dict[str, Any], name: str) -> dict[str, Any]:
    [found] = [m for m in document["methods"] if m["method"] == name]
    return found


def test_a_pdb_allowing_no_disruption_blocks_consolidation_with_the_disruption_blocked_event(
    run: Run, tmp_path: Path
) -> None:
    path = write(
        tmp_path,
        CLASS,
        pool(),
        node("node-a"),
        node("node-b"),
        pod("web-1", "node-a"),
        pod("web-2", "node-b"),
        pdb(0),
    )
    document = explain(run, path, "node-a")
    blocked = "PodDisruptionBudget shop/web allows 0 disruption(s)"
    consolidation = method(document, "consolidation")
    assert consolidation["applies"]
    assert consolidation["blockedBy"] == blocked
    assert document["decision"] is None
    assert document["events"] == [{"type": "Normal", "reason": "DisruptionBlocked", "message": blocked}]
    # its pod would still fit on the other node
    assert document["removal"]["pods"] == [
        {"pod": "shop/web-1", "node": "node-b", "nodeClaim": None, "reason": None}
    ]


def test_without_the_block_the_pass_consolidates_the_node_onto_the_other(run: Run, tmp_path: Path) -> None:
    path = write(
        tmp_path,
        CLASS,
        pool(),
        node("node-a"),
        node("node-b"),
        pod("web-1", "node-a"),
        pod("web-2", "node-b"),
        pdb(1),
    )
    document = explain(run, path, "node-a")
    consolidation = method(document, "consolidation")
    assert consolidation["applies"] and consolidation["blockedBy"] is None
    assert "onto existing nodes" in consolidation["detail"]
    assert document["decision"]["reason"] == "Underutilized"
    assert document["events"] == []


def test_do_not_disrupt_on_the_node_blocks_every_graceful_method(run: Run, tmp_path: Path) -> None:
    annotated = node("node-a", annotations="{karpenter.sh/do-not-disrupt: 'true'}")
    path = write(
        tmp_path, CLASS, pool(), annotated, node("node-b"), pod("web-1", "node-a"), pod("web-2", "node-b")
    )
    document = explain(run, path, "node-a")
    blocked = "node is annotated karpenter.sh/do-not-disrupt"
    assert method(document, "consolidation")["blockedBy"] == blocked
    assert document["events"][0]["reason"] == "DisruptionBlocked"
    assert document["events"][0]["message"] == "Node is annotated karpenter.sh/do-not-disrupt"


def test_a_budget_of_zero_blocks_consolidation(run: Run, tmp_path: Path) -> None:
    budgets = "budgets: [{nodes: '0'}]"
    path = write(
        tmp_path,
        CLASS,
        pool(budgets=budgets),
        node("node-a"),
        node("node-b"),
        pod("web-1", "node-a"),
        pod("web-2", "node-b"),
    )
    document = explain(run, path, "node-a")
    assert (
        method(document, "consolidation")["blockedBy"]
        == "budget: NodePool general allows 0 more Underutilized disruption(s) now"
    )
    assert document["decision"] is None


def test_consolidate_after_not_passed_since_the_last_pod_started(run: Run, tmp_path: Path) -> None:
    fresh = pod("web-1", "node-a", started="2026-11-09T23:58:00Z")
    path = write(
        tmp_path, CLASS, pool(after="10m"), node("node-a"), node("node-b"), fresh, pod("web-2", "node-b")
    )
    document = explain(run, path, "node-a")
    consolidation = method(document, "consolidation")
    assert not consolidation["applies"]
    assert consolidation["detail"] == "last pod event 2m ago, consolidateAfter 10m not passed"


def test_when_empty_policy_leaves_busy_nodes_and_says_so(run: Run, tmp_path: Path) -> None:
    path = write(tmp_path, CLASS, pool(policy="WhenEmpty"), node("node-a"), pod("web-1", "node-a"))
    document = explain(run, path, "node-a")
    assert (
        method(document, "consolidation")["detail"]
        == "consolidationPolicy WhenEmpty: only empty nodes are removed"
    )
    assert document["events"] == [
        {
            "type": "Normal",
            "reason": "Unconsolidatable",
            "message": 'NodePool "general" has consolidation policy WhenEmpty, but node is not empty',
        }
    ]


def test_replacing_a_node_by_no_cheaper_type_is_not_worth_it(run: Run, tmp_path: Path) -> None:
    # Only m5.xlarge may be launched: a replacement could only be the node's own type.
    path = write(tmp_path, CLASS, pool(types="[m5.xlarge]"), node("node-a"), pod("big", "node-a", cpu="3"))
    document = explain(run, path, "node-a")
    consolidation = method(document, "consolidation")
    assert consolidation["applies"]
    assert consolidation["blockedBy"].startswith("not worth it: ")
    assert document["decision"] is None
    assert document["heldBack"] == consolidation["blockedBy"].removeprefix("not worth it: ")
    assert document["events"][0]["reason"] == "Unconsolidatable"
    # removing it would launch a node of its pool for the pod
    [move] = document["removal"]["pods"]
    [claim] = document["removal"]["nodeClaims"]
    assert move["nodeClaim"] == claim["name"]
    assert claim["nodePool"] == "general" and claim["instanceTypes"] == ["m5.xlarge"]


def test_an_expired_node_is_replaced_forcefully_whatever_blocks_it(run: Run, tmp_path: Path) -> None:
    old = node("node-a", annotations="{karpenter.sh/do-not-disrupt: 'true'}")
    path = write(tmp_path, CLASS, pool(expire="24h"), old, pod("web-1", "node-a"), pdb(0))
    document = explain(run, path, "node-a")
    expiration = method(document, "expiration")
    assert expiration["applies"]
    assert expiration["detail"].startswith("9d old, expireAfter 24h")
    assert document["decision"]["method"] == "expiration"
    assert document["decision"]["reason"] == "Expired"
    assert [m["nodeClaim"] is not None for m in document["removal"]["pods"]] == [True]


def test_not_expired_says_when_it_will_be(run: Run, tmp_path: Path) -> None:
    path = write(tmp_path, CLASS, pool(expire="240h"), node("node-a"), pod("web-1", "node-a"))
    document = explain(run, path, "node-a")
    assert method(document, "expiration")["detail"] == "expires in 24h (9d old, expireAfter 10d)"


def test_an_empty_node_past_consolidate_after_goes_by_emptiness(run: Run, tmp_path: Path) -> None:
    path = write(tmp_path, CLASS, pool(), node("node-a"), node("node-b"), pod("web-2", "node-b"))
    document = explain(run, path, "node-a")
    emptiness = method(document, "emptiness")
    assert emptiness["applies"] and emptiness["blockedBy"] is None
    assert document["decision"]["method"] == "emptiness"
    assert method(document, "consolidation")["detail"] == "empty: emptiness removes it"
    assert document["removal"]["pods"] == []


def test_a_node_whose_type_the_pool_no_longer_allows_has_drifted(run: Run, tmp_path: Path) -> None:
    path = write(tmp_path, CLASS, pool(types="[c5.large, m5.large]"), node("node-a"), pod("web-1", "node-a"))
    document = explain(run, path, "node-a")
    drift = method(document, "drift")
    assert drift["applies"]
    assert drift["detail"] == (
        "drifted: label node.kubernetes.io/instance-type=m5.xlarge no longer meets "
        "NodePool general's requirements"
    )


def test_a_pod_that_fits_nowhere_says_why(run: Run, tmp_path: Path) -> None:
    pinned = pod("web-1", "node-a").replace("spec:\n", "spec:\n  nodeSelector: {example.com/rack: r1}\n", 1)
    path = write(tmp_path, CLASS, pool(), node("node-a"), pinned)
    document = explain(run, path, "node-a")
    [move] = document["removal"]["pods"]
    assert move["node"] is None and move["nodeClaim"] is None
    assert "example.com/rack" in move["reason"]


def test_a_node_of_no_nodepool_is_not_ours(run: Run, tmp_path: Path) -> None:
    foreign = node("node-x").replace("karpenter.sh/nodepool: general", "team: blue")
    path = write(tmp_path, CLASS, pool(), foreign)
    code, out, err = run("explain", "node", "node-x", "-f", str(path), "--now", NOW)
    assert code == 0, err
    assert "not managed by a NodePool of this cluster" in out
    assert "Disruption methods" not in out


def test_the_table_shows_methods_blocks_and_moves(run: Run, tmp_path: Path) -> None:
    path = write(
        tmp_path,
        CLASS,
        pool(),
        node("node-a"),
        node("node-b"),
        pod("web-1", "node-a"),
        pod("web-2", "node-b"),
        pdb(0),
    )
    code, out, err = run("explain", "node", "node-a", "-f", str(path), "--now", NOW)
    assert code == 0, err
    assert "event DisruptionBlocked: PodDisruptionBudget shop/web allows 0 disruption(s)" in out
    assert "consolidation (Underutilized): applies" in out
    assert "blocked: PodDisruptionBudget shop/web allows 0 disruption(s)" in out
    assert "shop/web-1 -> node node-b" in out


def test_an_unknown_node_and_a_bad_time_are_usage_errors(run: Run, tmp_path: Path) -> None:
    path = write(tmp_path, CLASS, pool(), node("node-a"))
    code, out, err = run("explain", "node", "nope", "-f", str(path))
    assert (code, out) == (2, "")
    assert "node nope not found in the manifests" in err
    code, out, err = run("explain", "node", "node-a", "-f", str(path), "--now", "yesterday")
    assert (code, out) == (2, "")
    assert "--now" in err


def test_a_node_not_ready_yet_is_not_initialized_and_no_method_takes_it_gracefully(
    run: Run, tmp_path: Path
) -> None:
    starting = node("node-a").replace('status: "True"', 'status: "False"')
    path = write(
        tmp_path, CLASS, pool(), starting, node("node-b"), pod("web-1", "node-a"), pod("web-2", "node-b")
    )
    document = explain(run, path, "node-a")
    assert method(document, "consolidation")["blockedBy"] == "not initialized yet"
    assert document["events"] == [
        {"type": "Normal", "reason": "DisruptionBlocked", "message": "Not initialized yet"}
    ]


def test_a_pods_do_not_disrupt_holds_the_node_until_its_duration_has_passed(run: Run, tmp_path: Path) -> None:
    guarded = pod("web-1", "node-a").replace(
        "labels: {app: web}}", "labels: {app: web}, annotations: {karpenter.sh/do-not-disrupt: 240h}}"
    )
    path = write(tmp_path, CLASS, pool(), node("node-a"), node("node-b"), guarded, pod("web-2", "node-b"))
    held = method(explain(run, path, "node-a"), "consolidation")
    assert held["blockedBy"] == (
        "pod shop/web-1 is annotated karpenter.sh/do-not-disrupt until 2026-11-11T00:05:00Z"
    )
    later = method(explain(run, path, "node-a", now="2026-11-12T00:00:00Z"), "consolidation")
    assert later["blockedBy"] is None


def test_a_nodepool_whose_node_class_is_missing_is_a_usage_error(run: Run, tmp_path: Path) -> None:
    path = write(tmp_path, pool(), node("node-a"))
    code, out, err = run("explain", "node", "node-a", "-f", str(path), "--now", NOW)
    assert (code, out) == (2, "")
    assert "EC2NodeClass default" in err


def test_an_invalid_do_not_disrupt_value_is_ignored_and_said_so(run: Run, tmp_path: Path) -> None:
    odd = pod("web-1", "node-a").replace(
        "labels: {app: web}}", "labels: {app: web}, annotations: {karpenter.sh/do-not-disrupt: sometimes}}"
    )
    path = write(tmp_path, CLASS, pool(), node("node-a"), node("node-b"), odd, pod("web-2", "node-b"))
    document = explain(run, path, "node-a")
    assert method(document, "consolidation")["blockedBy"] is None
    [event] = [e for e in document["events"] if e["reason"] == "InvalidDoNotDisruptAnnotation"]
    assert event["type"] == "Warning"
    assert event["message"].startswith("Invalid karpenter.sh/do-not-disrupt annotation: ")


def test_a_node_already_being_disrupted_is_left_to_its_termination(run: Run, tmp_path: Path) -> None:
    cordoned = node("node-a", created="2026-01-01T00:00:00Z").replace(
        "spec:\n", "spec:\n  taints: [{key: karpenter.sh/disrupted, effect: NoSchedule}]\n", 1
    )
    path = write(tmp_path, CLASS, pool(), cordoned, node("node-b"), pod("web-1", "node-a"))
    document = explain(run, path, "node-a")
    assert document["decision"] is None
    assert {m["detail"] for m in document["methods"]} == {
        "already being disrupted (cordoned for it, or being deleted)"
    }
    assert not any(m["applies"] for m in document["methods"])
