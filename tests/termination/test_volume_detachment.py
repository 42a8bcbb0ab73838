"""A drained node's instance is terminated once its VolumeAttachments are detached, or at the deadline."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwright.kube.resources import EVENTS, PERSISTENT_VOLUME_CLAIMS, PODS, VOLUME_ATTACHMENTS
from fleetwright.local.attachdetach import AttachDetachController
from tests.kube.objects import pod_object
from tests.support.termination import Harness


@pytest.fixture(autouse=True)
def attachments_by_hand(harness: Harness) -> None:
    """These tests play the attach-detach controller themselves: they decide when a volume detaches."""
    for controller in harness.apiserver.controllers:
        if isinstance(controller, AttachDetachController):
            controller.stop()


def _attach(harness: Harness, name: str, node: str, volume: str | None) -> None:
    source: dict[str, Any] = {"persistentVolumeName": volume} if volume else {"inlineVolumeSpec": {}}
    harness.world.client.create(
        VOLUME_ATTACHMENTS,
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "VolumeAttachment",
            "metadata": {"name": name},
            "spec": {"attacher": "ebs.csi.aws.com", "nodeName": node, "source": source},
        },
    )


def _detach(harness: Harness, name: str) -> None:
    harness.world.client.delete(VOLUME_ATTACHMENTS, name)


def _attached(harness: Harness) -> list[str]:
    return sorted(a["metadata"]["name"] for a in harness.world.client.list(VOLUME_ATTACHMENTS).items)


def test_the_instance_is_terminated_only_after_the_volumes_detach(harness: Harness) -> None:
    instance = harness.launch_instance()
    node = harness.node_for(instance, "node-a")
    harness.pod("db-0", node)
    _attach(harness, "csi-db-0", node, "pv-db-0")
    _attach(harness, "csi-scratch", node, None)  # an inline volume: nothing waits for it elsewhere
    drains: list[str] = []

    def detach_on_the_fourth_pass(step: str, _payload: dict[str, Any]) -> None:
        if step == "drain":
            drains.append(step)
            if len(drains) == 4:
                _detach(harness, "csi-db-0")
        if step == "terminate":  # by then the volume is detached
            assert _attached(harness) == ["csi-scratch"]

    harness.before_step.append(detach_on_the_fourth_pass)
    result = harness.run(harness.request(instance, node, seconds_to_deadline=3600))

    assert result["status"] == "SUCCEEDED", result
    outputs = [out["drain"] for out in harness.outputs("drain")]
    assert outputs[0]["evicted"] == ["default/db-0"]
    assert [o["volumeAttachments"] for o in outputs] == [["csi-db-0"]] * 3 + [[]]
    assert [o["done"] for o in outputs] == [False, False, False, True]
    events = [
        e
        for e in harness.world.client.list(EVENTS, "default").items
        if e["reason"] == "AwaitingVolumeDetachment"
    ]
    assert [(e["involvedObject"]["name"], e["message"]) for e in events] == [
        (node, "Awaiting deletion of bound volumeattachments (csi-db-0)")
    ]
    assert harness.instance_state(instance["InstanceId"]) in ("shutting-down", "terminated")


def test_volumes_of_pods_that_stay_do_not_hold_the_node(harness: Harness) -> None:
    instance = harness.launch_instance()
    node = harness.node_for(instance, "node-a")
    harness.world.client.create(
        PERSISTENT_VOLUME_CLAIMS,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "agent-state", "namespace": "default"},
            "spec": {"volumeName": "pv-agent", "accessModes": ["ReadWriteOnce"]},
        },
        "default",
    )
    agent = pod_object("agent", node=node)
    agent["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "name": "agent",
            "uid": "uid-agent",
            "controller": True,
        }
    ]
    agent["spec"]["volumes"] = [{"name": "state", "persistentVolumeClaim": {"claimName": "agent-state"}}]
    # A node agent tolerating every taint stays on the node to the end, and so does its volume.
    agent["spec"]["tolerations"] = [{"operator": "Exists"}]
    harness.world.client.create(PODS, agent, "default")
    _attach(harness, "csi-agent", node, "pv-agent")

    result = harness.run(harness.request(instance, node, seconds_to_deadline=3600))

    assert result["status"] == "SUCCEEDED", result
    assert [o["drain"]["volumeAttachments"] for o in harness.outputs("drain")] == [[]]
    assert harness.instance_state(instance["InstanceId"]) in ("shutting-down", "terminated")


def test_a_volume_that_never_detaches_holds_the_node_until_the_deadline(harness: Harness) -> None:
    instance = harness.launch_instance()
    node = harness.node_for(instance, "node-a")
    _attach(harness, "csi-stuck", node, "pv-stuck")
    deadline = harness.clock() + 300
    seen: list[float] = []
    harness.before_step.append(lambda step, _p: seen.append(harness.clock()) if step == "drain" else None)

    result = harness.run(harness.request(instance, node, seconds_to_deadline=300, drainIntervalSeconds=5))

    assert result["status"] == "SUCCEEDED", result
    outputs = [out["drain"] for out in harness.outputs("drain")]
    assert all(o["volumeAttachments"] == ["csi-stuck"] for o in outputs)
    assert [o["done"] for o in outputs][-2:] == [False, True]
    assert seen[-1] == deadline
    assert harness.instance_state(instance["InstanceId"]) in ("shutting-down", "terminated")


def test_a_drained_node_with_a_stuck_volume_is_terminated_at_a_graceful_deadline(harness: Harness) -> None:
    instance = harness.launch_instance()
    node = harness.node_for(instance, "node-a")
    _attach(harness, "csi-stuck", node, "pv-stuck")

    result = harness.run(
        harness.request(instance, node, seconds_to_deadline=60, drainIntervalSeconds=5, onDeadline="abandon")
    )

    # No pod is left to protect: the disruption is not called off, the instance goes.
    assert result["status"] == "SUCCEEDED", result
    assert not any(o["drain"].get("abandoned") for o in harness.outputs("drain"))
    assert harness.instance_state(instance["InstanceId"]) in ("shutting-down", "terminated")


def test_an_api_outage_while_volumes_detach_never_terminates_early(harness: Harness) -> None:
    instance = harness.launch_instance()
    node = harness.node_for(instance, "node-a")
    harness.pod("db-0", node)
    _attach(harness, "csi-db-0", node, "pv-db-0")
    drains: list[float] = []
    attached_at_terminate: list[list[str]] = []

    def faults(step: str, _payload: dict[str, Any]) -> None:
        if step == "drain":
            drains.append(harness.clock())
            if len(drains) == 2:  # drained, waiting for the volume: the API goes away for 120 s
                harness.apiserver.faults.outage(120, clock=harness.clock)
            elif len(drains) > 2 and drains[-1] >= drains[1] + 150 and _attached(harness):
                _detach(harness, "csi-db-0")  # detached some passes after the API came back
        if step == "terminate":
            attached_at_terminate.append(_attached(harness))

    harness.before_step.append(faults)
    result = harness.run(harness.request(instance, node, seconds_to_deadline=3600))

    assert result["status"] == "SUCCEEDED", result
    outputs = [out["drain"] for out in harness.outputs("drain")]
    assert any(o.get("apiError") for o in outputs)  # passes the outage refused did not finish
    assert [o["done"] for o in outputs].count(True) == 1 and outputs[-1]["done"]
    assert attached_at_terminate == [[]]
    assert harness.instance_state(instance["InstanceId"]) in ("shutting-down", "terminated")


def test_volume_attachments_the_role_may_not_list_do_not_hold_the_node(harness: Harness) -> None:
    instance = harness.launch_instance()
    node = harness.node_for(instance, "node-a")
    _attach(harness, "csi-db-0", node, "pv-db-0")
    harness.apiserver.faults.inject(403, verb="GET", resource="volumeattachments", times=100)

    result = harness.run(harness.request(instance, node, seconds_to_deadline=3600))

    # An older ClusterRole: the node is terminated as before the wait existed, and it is said.
    assert result["status"] == "SUCCEEDED", result
    [output] = [out["drain"] for out in harness.outputs("drain")]
    assert output["done"] and output["volumeAttachmentsUnreadable"] == "403 Forbidden"
    assert harness.metrics.total("VolumeAttachmentsUnreadable") == 1
    assert harness.instance_state(instance["InstanceId"]) in ("shutting-down", "terminated")
