"""Nodes whose capacity reservation ended run on as on-demand instances: their labels are made to say so.

When an On-Demand Capacity Reservation ends, EC2 keeps its instances running as ordinary on-demand
instances (DescribeInstances no longer names the reservation). As Karpenter does, such a node is relabelled
``karpenter.sh/capacity-type: on-demand`` without the capacity-reservation labels, on the Node, the NodeClaim
object and the stored claim (so registration does not put the old labels back); a NodePool that allows
only ``reserved`` then sees the node as drifted.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from fleetwright.disruption.inputs import Gathered
from fleetwright.disruption.types import NodeState
from fleetwright.kube.errors import KubeApiError
from fleetwright.kube.resources import NODE_CLAIMS, NODES
from fleetwright.model import labels as wk
from fleetwright.state.nodeclaims import ClaimStatus, NodeClaimStore

log = logging.getLogger(__name__)

# The merge patch that demotes a node or NodeClaim (``None`` removes a label).
DEMOTED_LABELS: dict[str, str | None] = {
    wk.CAPACITY_TYPE: wk.ON_DEMAND,
    **{key: None for key in sorted(wk.CAPACITY_RESERVATION_LABELS)},
}


def ended_reservations(gathered: Gathered) -> list[NodeState]:
    """Our nodes labelled ``reserved`` whose instance EC2 no longer counts in a reservation."""
    return [
        s
        for s in gathered.ours()
        if not s.terminating
        and s.node.labels.get(wk.CAPACITY_TYPE) == wk.RESERVED
        and s.capacity_type == wk.ON_DEMAND
    ]


def demote(gathered: Gathered, kube: Any, claims: NodeClaimStore, logger: Any = None) -> list[str]:
    """Relabel the nodes of ended reservations (see the module docstring); the names relabelled.

    ``gathered`` is updated in place so this pass plans with the new labels. A node whose writes fail
    stays as it is and is tried again next pass.
    """
    out = logger or log
    done = []
    for state in ended_reservations(gathered):
        reservation = state.node.labels.get(wk.CAPACITY_RESERVATION_ID, "")
        try:
            record = gathered.claims.get(state.claim_id)
            if record is not None:
                labels = {k: v for k, v in record.labels.items() if k not in wk.CAPACITY_RESERVATION_LABELS}
                if wk.CAPACITY_TYPE in labels:
                    labels[wk.CAPACITY_TYPE] = wk.ON_DEMAND
                status = ClaimStatus(record.status)
                claims.transition(
                    record.id,
                    status,
                    status,
                    capacity_type=wk.ON_DEMAND,
                    labels=labels,
                    reservation_ids=[],
                )
                record.capacity_type = wk.ON_DEMAND
                record.labels = labels
                record.reservation_ids = []
                _relabel(kube, NODE_CLAIMS, record.id)
            _relabel(kube, NODES, state.name)
        except Exception as error:  # the next pass tries again
            out.warning(
                "cannot relabel node of an ended capacity reservation",
                extra={"node": state.name, "reservation": reservation, "error": str(error)},
            )
            continue
        labels = {k: v for k, v in state.node.labels.items() if k not in wk.CAPACITY_RESERVATION_LABELS}
        labels[wk.CAPACITY_TYPE] = wk.ON_DEMAND
        state.node = replace(state.node, labels=labels)
        out.info(
            "capacity reservation ended; node runs on as on-demand",
            extra={"node": state.name, "reservation": reservation},
        )
        done.append(state.name)
    return done


def _relabel(kube: Any, resource: Any, name: str) -> None:
    """Demote the object's labels (read first: a missing object or CRD is left alone)."""

    def change(obj: Mapping[str, Any]) -> dict[str, Any] | None:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        if labels.get(wk.CAPACITY_TYPE) != wk.RESERVED and not wk.CAPACITY_RESERVATION_LABELS & set(labels):
            return None
        return {"metadata": {"labels": dict(DEMOTED_LABELS)}}

    try:
        kube.modify(resource, name, change)
    except KubeApiError as error:
        if not error.not_found:
            raise
