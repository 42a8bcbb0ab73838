"""consolidateAfter counts from a node's last pod event — a pod bound to it or gone from it — as Karpenter
counts it, on the virtual wall clock: the controller against moto and the emulator, and the pod-set
markers that remember what a node held."""

from __future__ import annotations

from typing import Any

import pytest

from fleetwright.disruption.podevents import update_pod_events
from fleetwright.disruption.types import NodeState
from fleetwright.kube.resources import PODS
from fleetwright.local.apiserver.store import rfc3339
from fleetwright.local.simulate.dynamo import MemoryDynamoDB
from fleetwright.model import labels as wk
from fleetwright.model.node import Node
from fleetwright.model.pod import Pod
from fleetwright.state.podevents import PodSetStore
from fleetwright.state.table import DynamoTable, create_state_table
from tests.support.disruption import Rig, RigFactory, nodepool
from tests.support.waiting import wait_for

# Waits for work on other threads (the emulator, a workflow run, a watch) on the real clock.
pytestmark = pytest.mark.real_time


def started(rig: Rig, pod: str, node: str, at: float, cpu: str = "500m") -> None:
    """A pod bound to ``node`` that the kubelet started at ``at`` (epoch seconds on the wall clock)."""
    rig.pod(pod, node, cpu=cpu)
    status = {"status": {"phase": "Running", "startTime": rfc3339(at)}}
    rig.world.client.patch(PODS, pod, status, "default", subresource="status")


def one_of_two_pods_leaves(rig: Rig) -> tuple[str, Any]:
    """A node initialized a minute ago gets two pods; a first pass leaves it (they came 10 s ago); a minute
    later one pod leaves. The node and the controller, before the pass that sees the departure."""
    big = rig.node("m5.2xlarge")
    wall = rig.world.wall
    wall.advance(60)
    started(rig, "web-0", big, wall() - 10)
    started(rig, "web-1", big, wall() - 10)
    controller = rig.controller()
    assert underutilized(controller.run_once()) == []  # the pods came 10 s ago

    wall.advance(60)  # the pods came 70 s ago, and now one leaves
    rig.world.client.delete(PODS, "web-1", "default")
    wait_for(lambda: len(rig.world.kube.list_pods_on_node(big)) == 1)
    return big, controller


def underutilized(report: Any) -> list[list[str]]:
    return [c.nodes for c in report.commands if c.reason == "Underutilized"]


def test_a_node_that_received_a_pod_10s_ago_is_not_consolidated(make_rig: RigFactory) -> None:
    rig = make_rig(nodepool(consolidate_after="30s"))
    big = rig.node("m5.2xlarge")  # one small pod on it: a c5.large would do
    wall = rig.world.wall
    wall.advance(60)  # initialized a minute ago
    started(rig, "web-0", big, wall() - 10)
    controller = rig.controller()

    assert underutilized(controller.run_once()) == []
    wall.advance(15)  # 25 s since the pod came
    assert underutilized(controller.run_once()) == []

    wall.advance(6)  # 31 s
    assert underutilized(controller.run_once()) == [[big]]


def test_a_node_whose_pod_left_is_consolidated_only_consolidate_after_after_the_departure(
    make_rig: RigFactory,
) -> None:
    rig = make_rig(nodepool(consolidate_after="30s"))
    big, controller = one_of_two_pods_leaves(rig)
    wall = rig.world.wall
    assert underutilized(controller.run_once()) == []
    marker = rig.world.state.podsets.get(big)
    assert marker is not None and marker.removed == wall() and marker.count == 1

    wall.advance(29)
    assert underutilized(controller.run_once()) == []
    wall.advance(2)
    assert underutilized(controller.run_once()) == [[big]]


# -- the pod-set markers, without a cluster ---------------------------------------------------------------


def store() -> PodSetStore:
    client = MemoryDynamoDB()
    create_state_table(client, "state")
    return PodSetStore(DynamoTable("state", client=client), "demo")


def state(name: str, pods: list[Pod], *, instance: str = "i-1", created: float = 0.0) -> NodeState:
    node = Node(name=name, labels={wk.NODEPOOL: "default"}, allocatable={}, pods=pods)
    return NodeState(node, "m5.large", "on-demand", "us-east-1a", 0.096, created, instance_id=instance)


def pod(name: str, started_at: float | None) -> Pod:
    return Pod(
        namespace="default",
        name=name,
        requests={},
        uid=f"uid-{name}",
        node_name="n",
        phase="Running",
        started_at=started_at,
        owner=("ReplicaSet", "web"),
    )


def test_a_pod_added_is_its_start_and_a_pod_replaced_is_a_departure_seen_at_that_pass() -> None:
    markers = store()
    first = state("n", [pod("a", 100.0)])
    update_pod_events(markers, [first], 200.0, initialized_at={"n": 50.0})
    assert first.last_pod_event == 100.0  # the pod's start; nothing left yet

    added = state("n", [pod("a", 100.0), pod("b", 230.0)])
    update_pod_events(markers, [added], 260.0, initialized_at={"n": 50.0})
    assert added.last_pod_event == 230.0  # only an addition: its start, not the pass
    stored = markers.get("n")
    assert stored is not None and stored.removed is None and stored.count == 2

    # One left and another came since: as many pods as before, but a departure all the same.
    swapped = state("n", [pod("a", 100.0), pod("c", 270.0)])
    update_pod_events(markers, [swapped], 320.0, initialized_at={"n": 50.0})
    assert swapped.last_pod_event == 320.0

    same = state("n", [pod("a", 100.0), pod("c", 270.0)])
    update_pod_events(markers, [same], 400.0, initialized_at={"n": 50.0})
    assert same.last_pod_event == 320.0  # nothing changed: the departure stands


def test_a_node_never_counts_from_before_its_initialization_and_a_reused_name_starts_over() -> None:
    markers = store()
    fresh = state("n", [pod("a", 10.0)])  # a pod bound while the node was still starting
    update_pod_events(markers, [fresh], 100.0, initialized_at={"n": 40.0})
    assert fresh.last_pod_event == 40.0

    update_pod_events(markers, [state("n", [])], 150.0, initialized_at={"n": 40.0})
    again = state("n", [pod("b", 160.0)], instance="i-2", created=155.0)  # a new instance, same host name
    update_pod_events(markers, [again], 170.0)
    assert again.last_pod_event == 160.0
    stored = markers.get("n")
    assert stored is not None and stored.instance_id == "i-2" and stored.removed is None

    update_pod_events(markers, [], 200.0)  # the node is gone: its marker too
    assert markers.list() == {}


def test_later_rounds_start_from_the_markers_the_first_read_left() -> None:
    markers = store()
    reads: list[int] = []
    listing = markers.list

    def counted() -> dict[str, Any]:
        reads.append(1)
        return listing()

    markers.list = counted  # type: ignore[method-assign]
    first = update_pod_events(markers, [state("n", [pod("a", 100.0)])], 200.0)
    later = state("n", [pod("b", 230.0)])  # "a" left, "b" came: seen by a later round of the same pass
    after = update_pod_events(markers, [later], 240.0, known=first)

    assert len(reads) == 1
    assert later.last_pod_event == 240.0 and after["n"].removed == 240.0
    stored = listing()["n"]
    assert stored.removed == 240.0 and stored.count == 1


def test_a_failed_marker_write_fails_the_pass_and_the_departure_is_counted_late_never_early(
    make_rig: RigFactory,
) -> None:
    """DynamoDB throttles the pod-set marker write of the pass that sees a pod leave: that pass disrupts
    nothing, and the next one counts the departure from its own time."""
    from botocore.exceptions import ClientError

    rig = make_rig(nodepool(consolidate_after="30s"))
    big, controller = one_of_two_pods_leaves(rig)
    wall = rig.world.wall
    podsets = rig.world.state.podsets
    put = podsets.put
    throttled = ClientError({"Error": {"Code": "ThrottlingException", "Message": "slow down"}}, "PutItem")

    def refuse(_marker: object) -> None:
        raise throttled

    podsets.put = refuse  # type: ignore[method-assign]
    failed = controller.run_once()
    assert failed.error and "ThrottlingException" in failed.error
    assert failed.commands == []
    podsets.put = put  # type: ignore[method-assign]

    wall.advance(20)  # the departure was 20 s ago; this pass sees it
    assert underutilized(controller.run_once()) == []
    marker = podsets.get(big)
    assert marker is not None and marker.removed == wall()
    wall.advance(29)  # 49 s after the departure, 29 s after the pass that saw it
    assert underutilized(controller.run_once()) == []
    wall.advance(2)
    assert underutilized(controller.run_once()) == [[big]]
