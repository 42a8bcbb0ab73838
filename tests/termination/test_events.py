"""What the termination workflow tells users on the Node and NodeClaims it works on."""

from __future__ import annotations

from typing import Any

from fleetwright.kube.resources import EVENTS
from fleetwright.state.nodeclaims import ClaimStatus, NodeClaimRecord
from tests.support.termination import Harness


def events(harness: Harness, name: str, kind: str) -> list[tuple[str, str]]:
    listed = harness.world.client.list(EVENTS, field_selector=f"involvedObject.name={name}").items
    return sorted((e["reason"], e["message"]) for e in listed if e["involvedObject"]["kind"] == kind)


def _claim(harness: Harness, claim_id: str, status: ClaimStatus, instance_id: str) -> None:
    harness.world.state.nodeclaims.create(
        NodeClaimRecord(
            id=claim_id,
            nodepool="default",
            status=str(status),
            created_at=harness.clock(),
            instance_id=instance_id,
        )
    )


def test_a_disrupted_node_and_its_claim_say_they_are_terminating(harness: Harness) -> None:
    instance = harness.launch_instance()
    _claim(harness, "default-abcd1234", ClaimStatus.INITIALIZED, instance["InstanceId"])
    node = harness.node_for(instance, "node-a")
    harness.pod("web-0", node)

    result = harness.run(harness.request(instance, node, reason="Underutilized", onDeadline="abandon"))

    assert result["status"] == "SUCCEEDED", result
    assert events(harness, node, "Node") == [("DisruptionTerminating", "Disrupting Node: Underutilized")]
    assert events(harness, "default-abcd1234", "NodeClaim") == [
        ("DisruptionTerminating", "Disrupting NodeClaim: Underutilized")
    ]
    assert events(harness, "web-0", "Pod") == [("Evicted", "Evicted pod: Underutilized")]


def test_a_drain_with_a_deadline_says_when_every_pod_will_be_deleted(harness: Harness) -> None:
    instance = harness.launch_instance()
    _claim(harness, "default-abcd1234", ClaimStatus.INITIALIZED, instance["InstanceId"])
    node = harness.node_for(instance, "node-a")
    harness.pod("web-0", node)
    request = harness.request(instance, node, reason="Drifted", seconds_to_deadline=600)

    harness.steps.run("drain", harness.steps.run("cordon", request))

    expiring = ("TerminationGracePeriodExpiring", "All pods will be deleted by 2027-01-15T08:10:00Z")
    assert expiring in events(harness, node, "Node")
    assert expiring in events(harness, "default-abcd1234", "NodeClaim")
    warning = harness.world.client.list(EVENTS, field_selector="involvedObject.name=node-a").items
    assert {e["type"] for e in warning if e["reason"] == "TerminationGracePeriodExpiring"} == {"Warning"}


def test_a_drain_a_budget_holds_up_says_which_pod_on_the_node(harness: Harness) -> None:
    instance = harness.launch_instance()
    node = harness.node_for(instance, "node-a")
    harness.pod("db-0", node, labels={"app": "db"})
    harness.pdb("db", {"app": "db"}, min_available=1)
    request = harness.request(instance, node, reason="Underutilized", seconds_to_deadline=600)

    state = harness.steps.run("drain", harness.steps.run("cordon", request))

    assert state["drain"]["done"] is False
    [message] = [m for r, m in events(harness, node, "Node") if r == "FailedDraining"]
    assert message.startswith("Failed to drain node, ") and message.endswith("(Pod=default/db-0)")
    assert events(harness, "db-0", "Pod") == []  # not evicted


def test_event_writes_refused_by_the_api_never_stop_the_drain(harness: Harness) -> None:
    instance = harness.launch_instance()
    node = harness.node_for(instance, "node-a")
    harness.pod("web-0", node)
    harness.apiserver.faults.inject(403, verb="POST", resource="events", times=100)
    request = harness.request(instance, node, reason="Underutilized", seconds_to_deadline=600)

    state = harness.steps.run("drain", harness.steps.run("cordon", request))

    assert state["drain"]["evicted"] == ["default/web-0"]
    assert harness.metrics.total("EventsNotRecorded") >= 1
    assert harness.world.client.list(EVENTS).items == []


def test_waiting_for_a_replacement_says_so_on_the_replacement(harness: Harness) -> None:
    instance = harness.launch_instance()
    _claim(harness, "default-abcd1234", ClaimStatus.INITIALIZED, instance["InstanceId"])
    _claim(harness, "default-repl0001", ClaimStatus.LAUNCHED, "i-0123456789abcdef0")  # no node yet
    node = harness.node_for(instance, "node-a")
    request: dict[str, Any] = harness.request(
        instance,
        node,
        reason="Drifted",
        seconds_to_deadline=3600,
        waitForReplacement=True,
        replacementClaims=["default-repl0001"],
    )

    state = harness.steps.run("await_replacement", harness.steps.run("cordon", request))

    assert state["replacement"]["ready"] is False
    assert events(harness, "default-repl0001", "NodeClaim") == [
        ("DisruptionWaitingReadiness", "Waiting on readiness to continue disruption")
    ]
    assert events(harness, node, "Node") == []  # not terminating yet: the drain has not started
