"""The disruption pass and reserved nodes: an ending Capacity Block's node is drained and replaced; a node
whose On-Demand Capacity Reservation ended is relabelled on-demand."""

from __future__ import annotations

import datetime
from typing import Any

from fleetwright.kube.resources import NODES
from fleetwright.local.aws_fakes import CapacityReservations
from fleetwright.model import labels as wk
from tests.support.disruption import Rig, RigFactory, nodepool


def _make_reserved(rig: Rig, node: str, rid: str, kind: str) -> str:
    """Label the node (and its claim) as launched into reservation ``rid``, as a reserved launch does."""
    labels = {
        wk.CAPACITY_TYPE: "reserved",
        wk.CAPACITY_RESERVATION_ID: rid,
        wk.CAPACITY_RESERVATION_TYPE: kind,
        wk.CAPACITY_RESERVATION_INTERRUPTIBLE: "false",
    }
    rig.world.client.patch(NODES, node, {"metadata": {"labels": labels}})
    instance = rig.instance_id(node)
    [record] = [r for r in rig.world.state.nodeclaims.list() if r.instance_id == instance]
    from fleetwright.state.nodeclaims import ClaimStatus

    status = ClaimStatus(record.status)
    assert rig.world.state.nodeclaims.transition(
        record.id, status, status, labels={**record.labels, **labels}, capacity_type="reserved"
    )
    return record.id


def _block(rig: Rig, minutes_left: float, crs: CapacityReservations) -> tuple[str, str]:
    end = datetime.datetime.now(datetime.UTC) + datetime.timedelta(minutes=minutes_left)
    rid = crs.add("m5.large", "us-east-1a", 1, reservation_type="capacity-block", end=end)
    node = rig.node("m5.large")
    rig.pod("train-0", node, cpu="1")
    _make_reserved(rig, node, rid, "capacity-block")
    crs.placed[rig.instance_id(node)] = rid  # EC2 shows the instance in the block
    return rid, node


def _pools() -> Any:
    return nodepool(capacity_types=["reserved", "on-demand"], budgets=[{"nodes": "0"}])


def test_an_ending_capacity_block_gets_its_node_replaced_and_drained(make_rig: RigFactory) -> None:
    rig = make_rig(_pools())
    crs = CapacityReservations()
    crs.install(rig.world.aws.clients.ec2)
    rid, node = _block(rig, 35, crs)
    before = rig.claim_ids()

    report = rig.controller().run_once()

    assert not report.error, report.error
    assert rig.workflows.nodes() == {node}
    [replacement] = rig.replacements(before)
    assert replacement.capacity_type == "on-demand"  # the block is not offered any more
    assert replacement.labels.get(wk.CAPACITY_RESERVATION_ID) != rid
    [request] = rig.workflows.started.values()
    assert request.node == node


def test_a_capacity_block_outside_its_window_is_left_alone(make_rig: RigFactory) -> None:
    rig = make_rig(_pools())
    crs = CapacityReservations()
    crs.install(rig.world.aws.clients.ec2)
    _block(rig, 120, crs)
    report = rig.controller().run_once()
    assert not report.error, report.error
    assert rig.workflows.nodes() == set()


def test_a_node_whose_reservation_ended_is_relabelled_on_demand(make_rig: RigFactory) -> None:
    rig = make_rig(_pools())
    node = rig.node("m5.large")
    rig.pod("web-0", node, cpu="1")
    # moto's instance runs outside any reservation: EC2 says the reservation is over.
    claim = _make_reserved(rig, node, "cr-0123456789abcdef0", "default")

    report = rig.controller().run_once()

    assert not report.error, report.error
    obj = rig.world.kube.get_node(node)
    assert obj is not None
    labels = obj["metadata"]["labels"]
    assert labels[wk.CAPACITY_TYPE] == "on-demand"
    assert not wk.CAPACITY_RESERVATION_LABELS & set(labels)
    record = rig.world.state.nodeclaims.get(claim)
    assert record is not None
    assert record.capacity_type == "on-demand"
    assert not wk.CAPACITY_RESERVATION_LABELS & set(record.labels)
    assert rig.workflows.nodes() == set()  # still allowed by its NodePool: nothing to drain
