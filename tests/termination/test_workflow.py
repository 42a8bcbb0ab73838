"""The shipped state machine, run on moto's interpreter: drains, deadlines, budgets, the failure path."""

from __future__ import annotations

import json
from typing import Any

from fleetwright.kube.resources import EVENTS
from fleetwright.state.nodeclaims import ClaimStatus, NodeClaimRecord
from tests.support.termination import Harness


def _claim(harness: Harness, instance: dict[str, Any], claim_id: str = "default-abcd1234") -> None:
    harness.world.state.nodeclaims.create(
        NodeClaimRecord(
            id=claim_id,
            nodepool="default",
            status=str(ClaimStatus.INITIALIZED),
            created_at=harness.clock(),
            instance_id=instance["InstanceId"],
        )
    )


def test_drains_terminates_deletes_the_node_and_finalizes_the_claim(harness: Harness) -> None:
    instance = harness.launch_instance()
    _claim(harness, instance)
    node = harness.node_for(instance, "node-a")
    harness.pod("web-0", node)
    harness.pod("web-1", node)
    harness.pod("logs-agent", node, owner=("DaemonSet", "logs"))

    result = harness.run(harness.request(instance, node))

    assert result["status"] == "SUCCEEDED", result
    assert harness.instance_state(instance["InstanceId"]) in ("shutting-down", "terminated")
    assert harness.world.kube.get_node(node) is None
    # The workloads' pods go first, the DaemonSet's pod once they are gone (Karpenter's order).
    passes = [out["drain"]["evicted"] for out in harness.outputs("drain")]
    assert [sorted(p) for p in passes] == [["default/web-0", "default/web-1"], ["default/logs-agent"]]
    claim = harness.world.state.nodeclaims.get("default-abcd1234")
    assert claim is not None and claim.status == ClaimStatus.TERMINATED
    assert harness.steps.kube.get_pod("default", "web-0") is None
    assert harness.step_names()[0] == "cordon"
    assert harness.step_names()[-2:] == ["delete_node", "finalize_claim"]
    assert harness.metrics.total("NodesTerminated", Reason="SpotInterruption") == 1


def test_node_is_cordoned_and_tainted_before_the_first_eviction(harness: Harness) -> None:
    instance = harness.launch_instance()
    node = harness.node_for(instance, "node-a")
    harness.pod("web-0", node)
    seen: list[dict[str, Any]] = []

    def look(step: str, payload: dict[str, Any]) -> None:
        if step == "drain" and not seen:
            seen.append(harness.world.kube.get_node(node) or {})

    harness.before_step.append(look)
    assert harness.run(harness.request(instance, node))["status"] == "SUCCEEDED"

    spec = seen[0]["spec"]
    assert spec["unschedulable"] is True
    assert {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"} in spec["taints"]
    assert seen[0]["metadata"]["labels"]["node.kubernetes.io/exclude-from-external-load-balancers"] == "true"


def test_critical_pods_are_evicted_only_after_the_others(harness: Harness) -> None:
    instance = harness.launch_instance()
    node = harness.node_for(instance, "node-a")
    harness.pod("coredns", node, priority_class="system-cluster-critical")
    harness.pod("web-0", node)
    harness.pod("kube-proxy-ish", node, priority_class="system-node-critical")

    assert harness.run(harness.request(instance, node))["status"] == "SUCCEEDED"

    passes = [out["drain"]["evicted"] for out in harness.outputs("drain")]
    assert passes[0] == ["default/web-0"]
    assert sorted(passes[1]) == ["default/coredns", "default/kube-proxy-ish"]


def test_drain_waits_for_a_budget_until_a_replacement_pod_is_ready(harness: Harness) -> None:
    instance = harness.launch_instance()
    node = harness.node_for(instance, "node-a")
    other = harness.world.register_node("aws:///us-east-1b/i-0other", "node-b", ready=True)
    del other
    harness.pod("web-0", node, labels={"app": "web"})
    harness.pdb("web", {"app": "web"}, min_available=1)
    drains: list[int] = []

    def replacement_becomes_ready(step: str, payload: dict[str, Any]) -> None:
        if step == "drain":
            drains.append(1)
            if len(drains) == 3:  # two passes refused, then the replacement is Running and Ready
                harness.pod("web-1", "node-b", labels={"app": "web"})

    harness.before_step.append(replacement_becomes_ready)
    result = harness.run(harness.request(instance, node))

    assert result["status"] == "SUCCEEDED", result
    outputs = [out["drain"] for out in harness.outputs("drain")]
    assert [bool(o["blocked"]) for o in outputs] == [True, True, False]
    assert "disruption budget" in outputs[0]["blocked"]["default/web-0"]
    assert outputs[2]["evicted"] == ["default/web-0"] and not outputs[2]["deleted"]
    assert harness.pods_on("node-b") == ["web-1"]
    assert harness.metrics.total("EvictionsBlocked") == 2


def test_deadline_deletes_what_a_budget_still_protects(harness: Harness) -> None:
    instance = harness.launch_instance()
    node = harness.node_for(instance, "node-a")
    harness.pod("db-0", node, labels={"app": "db"})
    harness.pdb("db", {"app": "db"}, min_available=1)
    passes: list[int] = []

    def time_passes(step: str, payload: dict[str, Any]) -> None:
        if step == "drain":
            passes.append(1)
            if len(passes) == 3:
                harness.clock.advance(200)  # past the deadline (120 s)

    harness.before_step.append(time_passes)
    result = harness.run(harness.request(instance, node))

    assert result["status"] == "SUCCEEDED", result
    outputs = [out["drain"] for out in harness.outputs("drain")]
    assert outputs[-1]["deleted"] == ["default/db-0"]
    assert all(o["blocked"] for o in outputs[:-1])
    assert harness.steps.kube.get_pod("default", "db-0") is None
    assert harness.metrics.total("PodsDeletedAtDeadline") == 1


def test_do_not_disrupt_pods_stay_until_the_deadline(harness: Harness) -> None:
    instance = harness.launch_instance()
    node = harness.node_for(instance, "node-a")
    harness.pod("batch-job", node, annotations={"karpenter.sh/do-not-disrupt": "true"})
    harness.pod("web-0", node)
    passes: list[int] = []

    def time_passes(step: str, payload: dict[str, Any]) -> None:
        if step == "drain":
            passes.append(1)
            if len(passes) == 4:
                harness.clock.advance(121)

    harness.before_step.append(time_passes)
    result = harness.run(harness.request(instance, node))

    assert result["status"] == "SUCCEEDED", result
    outputs = [out["drain"] for out in harness.outputs("drain")]
    assert outputs[0]["evicted"] == ["default/web-0"]
    # The do-not-disrupt pod is never evicted: it holds the drain open until the deadline deletes it.
    assert not any("default/batch-job" in o["evicted"] for o in outputs)
    assert all(not o["done"] for o in outputs[:-1]) and len(outputs) == 4
    assert outputs[-1]["deleted"] == ["default/batch-job"]
    assert harness.instance_state(instance["InstanceId"]) in ("shutting-down", "terminated")


def test_refusing_to_terminate_an_instance_it_does_not_own_fails_with_an_event_and_a_metric(
    harness: Harness,
) -> None:
    instance = harness.launch_instance(owned=False)
    node = harness.node_for(instance, "node-a")

    result = harness.run(harness.request(instance, node))

    assert result["status"] == "FAILED"
    assert result["error"] == "InstanceNotOwnedError"
    assert "refusing to terminate" in result["cause"]
    assert harness.instance_state(instance["InstanceId"]) == "running"
    assert harness.world.kube.get_node(node) is not None  # left for a person to look at
    events = harness.world.client.list(EVENTS, "default").items
    failures = [e for e in events if e["reason"] == "FailedTermination"]
    assert len(failures) == 1
    assert failures[0]["type"] == "Warning"
    assert failures[0]["involvedObject"]["name"] == node
    assert "InstanceNotOwnedError" in failures[0]["message"]
    assert harness.metrics.total("TerminationFailures") == 1
    assert "terminate" in harness.step_names() and "delete_node" not in harness.step_names()


def test_invalid_input_takes_the_failure_path(harness: Harness) -> None:
    result = harness.run({"node": "node-a", "instanceId": "not-an-instance", "reason": "Test"})

    assert result["status"] == "FAILED"
    assert result["error"] == "InvalidRequestError"
    assert "deadline" in result["cause"] and "instanceId" in result["cause"]
    assert harness.step_names() == ["cordon", "record_failure"]


def test_transient_errors_are_retried(harness: Harness) -> None:
    from fleetwright.kube.errors import KubeConnectionError

    instance = harness.launch_instance()
    node = harness.node_for(instance, "node-a")
    harness.pod("web-0", node)
    failures: list[int] = []

    def flaky(step: str, payload: dict[str, Any]) -> None:
        if step == "terminate" and not failures:
            failures.append(1)
            original = harness.steps.cloud.terminate

            def once(ids: Any) -> Any:
                harness.steps.cloud.terminate = original  # type: ignore[method-assign]
                raise KubeConnectionError("connection reset by peer")

            harness.steps.cloud.terminate = once  # type: ignore[method-assign]

    harness.before_step.append(flaky)
    result = harness.run(harness.request(instance, node))

    assert result["status"] == "SUCCEEDED", result
    terminate_calls = [out for name, _, out in harness.calls if name == "terminate"]
    assert terminate_calls[0]["errorType"] == "TransientError"
    assert "request" in terminate_calls[1]
    assert harness.instance_state(instance["InstanceId"]) in ("shutting-down", "terminated")


def test_a_throttled_cloud_is_retried(harness: Harness) -> None:
    from fleetwright.cloud.errors import ThrottledError

    instance = harness.launch_instance()
    node = harness.node_for(instance, "node-a")
    failures: list[int] = []

    def throttled(step: str, payload: dict[str, Any]) -> None:
        if step == "check_instance" and not failures:
            failures.append(1)
            original = harness.steps.cloud.get

            def once(instance_id: str) -> Any:
                harness.steps.cloud.get = original  # type: ignore[method-assign]
                raise ThrottledError("EC2 throttled the request", "RequestLimitExceeded")

            harness.steps.cloud.get = once  # type: ignore[method-assign]

    harness.before_step.append(throttled)
    result = harness.run(harness.request(instance, node))

    assert result["status"] == "SUCCEEDED", result
    checks = [out for name, _, out in harness.calls if name == "check_instance"]
    assert checks[0]["errorType"] == "TransientError"
    assert harness.instance_state(instance["InstanceId"]) in ("shutting-down", "terminated")


def test_a_node_that_never_registered_still_has_its_instance_terminated(harness: Harness) -> None:
    instance = harness.launch_instance()
    _claim(harness, instance)

    result = harness.run(harness.request(instance, ""))

    assert result["status"] == "SUCCEEDED", result
    assert harness.instance_state(instance["InstanceId"]) in ("shutting-down", "terminated")
    output = json.loads(result["output"])
    assert output["node"] == {"deleted": False}
    assert output["claim"] == {"finalized": True}


def _disrupted(harness: Harness, node: str) -> bool:
    obj = harness.world.kube.get_node(node) or {}
    spec = obj.get("spec") or {}
    taints = [t.get("key") for t in spec.get("taints") or []]
    return bool(spec.get("unschedulable")) or "karpenter.sh/disrupted" in taints


def test_a_graceful_disruption_is_called_off_at_its_deadline_instead_of_overriding_a_budget(
    harness: Harness,
) -> None:
    instance = harness.launch_instance()
    _claim(harness, instance)
    node = harness.node_for(instance, "node-a")
    harness.pod("db-0", node, labels={"app": "db"})
    harness.pod("web-0", node)
    harness.pdb("db", {"app": "db"}, min_available=1)
    passes: list[int] = []

    def time_passes(step: str, payload: dict[str, Any]) -> None:
        if step == "drain":
            passes.append(1)
            if len(passes) == 2:
                assert _disrupted(harness, node)  # cordoned while it drains
            if len(passes) == 3:
                harness.clock.advance(200)  # past the deadline (120 s)

    harness.before_step.append(time_passes)
    result = harness.run(harness.request(instance, node, reason="Underutilized", onDeadline="abandon"))

    assert result["status"] == "SUCCEEDED", result
    # The budget held: the protected pod is still there, on a node back in service, on a running instance.
    assert harness.steps.kube.get_pod("default", "db-0") is not None
    assert harness.pods_on(node) == ["db-0"]
    assert not _disrupted(harness, node)
    assert harness.instance_state(instance["InstanceId"]) == "running"
    assert "terminate" not in harness.step_names()
    assert json.loads(result["output"])["drain"]["abandoned"] is True
    claim = harness.world.state.nodeclaims.get("default-abcd1234")
    assert claim is not None and claim.status == ClaimStatus.INITIALIZED
    events = harness.world.client.list(EVENTS, "default").items
    [event] = [e for e in events if e["reason"] == "DisruptionCalledOff"]
    assert event["involvedObject"]["name"] == node and "terminationGracePeriod" in event["message"]
    assert harness.metrics.total("DisruptionsCalledOff", Reason="Underutilized") == 1
    assert harness.metrics.total("PodsDeletedAtDeadline") == 0


def _break_the_drain(harness: Harness) -> None:
    """The drain's first listing of the node's pods is refused (403: not a failure retrying heals)."""
    harness.apiserver.faults.inject(403, verb="GET", resource="pods", times=1)


def test_a_failure_before_terminating_gives_the_node_back(harness: Harness) -> None:
    instance = harness.launch_instance()
    node = harness.node_for(instance, "node-a")
    harness.pod("web-0", node)

    _break_the_drain(harness)
    result = harness.run(harness.request(instance, node, reason="Drifted", uncordonOnFailure=True))

    assert result["status"] == "FAILED"
    assert result["error"] == "KubeApiError"
    assert harness.instance_state(instance["InstanceId"]) == "running"
    assert not _disrupted(harness, node)  # not left cordoned with no workflow to finish the job
    [recorded] = harness.outputs("record_failure")
    assert recorded["failure"]["uncordoned"] is True
    assert "403" in recorded["failure"]["cause"]


def test_a_failed_interruption_gives_its_node_back_too(harness: Harness) -> None:
    # A cordoned node with no workflow behind it is the worst outcome: an interruption that still applies
    # starts a new workflow (a redelivered event or the disruption pass's sweep).
    instance = harness.launch_instance()
    node = harness.node_for(instance, "node-a")
    harness.pod("web-0", node)

    _break_the_drain(harness)
    result = harness.run(harness.request(instance, node, reason="ScheduledChange"))

    assert result["status"] == "FAILED"
    assert not _disrupted(harness, node)
    assert harness.pods_on(node) == ["web-0"]
    [recorded] = harness.outputs("record_failure")
    assert recorded["failure"]["uncordoned"] is True
    assert recorded["failure"]["eventRecorded"] is True
    events = harness.world.client.list(EVENTS, "default").items
    assert [e["involvedObject"]["name"] for e in events if e["reason"] == "FailedTermination"] == [node]


def test_a_failed_spot_interruption_keeps_its_node_cordoned(harness: Harness) -> None:
    # EC2 reclaims a spot instance two minutes after its warning: pods put back on it would only be
    # interrupted again.
    instance = harness.launch_instance()
    node = harness.node_for(instance, "node-a")
    harness.pod("web-0", node)

    _break_the_drain(harness)
    result = harness.run(harness.request(instance, node, reason="SpotInterruption"))

    assert result["status"] == "FAILED"
    assert harness.instance_state(instance["InstanceId"]) == "running"
    assert _disrupted(harness, node)
    [recorded] = harness.outputs("record_failure")
    assert recorded["failure"]["uncordoned"] is False
    assert recorded["failure"]["eventRecorded"] is True


def test_a_failure_after_terminate_was_asked_leaves_the_node_cordoned(harness: Harness) -> None:
    # The instance is going: giving the node back would only attract pods to a dying node.
    instance = harness.launch_instance()
    node = harness.node_for(instance, "node-a")
    harness.apiserver.faults.inject(403, verb="DELETE", resource="nodes", times=1)

    result = harness.run(harness.request(instance, node))

    assert result["status"] == "FAILED"
    assert harness.instance_state(instance["InstanceId"]) in ("shutting-down", "terminated")
    assert _disrupted(harness, node)
    [recorded] = harness.outputs("record_failure")
    assert recorded["failure"]["uncordoned"] is False and recorded["failure"]["eventRecorded"] is True
