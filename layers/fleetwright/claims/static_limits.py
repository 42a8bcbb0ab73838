"""Static NodePools' node counts and ``limits.nodes``, shared by the provisioner's scale-up and every
replacement launch (:class:`StaticLimitGuard`).

A static pool's node count is its active NodeClaim records (launching, launched, registered, initialized —
also those whose node is being drained) plus Nodes labelled with the pool that no active record holds (as
Karpenter counts running and deleting nodes).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fleetwright.claims.lifecycle import ClaimLifecycle
from fleetwright.claims.reports import PassReport
from fleetwright.model.labels import NODEPOOL
from fleetwright.model.nodepool import NodePool
from fleetwright.observability import metrics as obs
from fleetwright.scheduling.types import NODES, NewNodeClaim
from fleetwright.state.nodeclaims import NodeClaimRecord

STATIC_LIMIT_REACHED = "StaticNodePoolLimitReached"


def static_nodepools(nodepools: Iterable[NodePool]) -> list[NodePool]:
    """The NodePools with ``spec.replicas`` set."""
    return [np for np in nodepools if np.spec.replicas is not None]


def _instance_id(node: Mapping[str, Any]) -> str:
    provider_id = str((node.get("spec") or {}).get("providerID") or "")
    return provider_id.rstrip("/").rsplit("/", 1)[-1] if provider_id else ""


def node_counts(
    pools: Sequence[NodePool], records: Sequence[NodeClaimRecord], nodes: Sequence[Mapping[str, Any]]
) -> dict[str, int]:
    """Per static pool, its nodes: active claim records plus labelled Nodes no active record holds."""
    counts = {np.name: 0 for np in pools}
    held: set[str] = set()
    for record in records:
        if record.active and record.nodepool in counts:
            counts[record.nodepool] += 1
            if record.instance_id:
                held.add(record.instance_id)
            if record.node_name:
                held.add(record.node_name)
    for node in nodes:
        metadata = node.get("metadata") or {}
        pool = (metadata.get("labels") or {}).get(NODEPOOL)
        if pool not in counts:
            continue
        if _instance_id(node) in held or metadata.get("name") in held:
            continue
        counts[pool] += 1
    return counts


class StaticLimitGuard:
    """Launches claims decided elsewhere (disruption replacements) through ``lifecycle``, refusing those
    that would take a static pool past ``limits.nodes``. The count is taken under the launch lease, so a
    scale-up the provisioner made after the claims were planned is seen."""

    def __init__(self, lifecycle: ClaimLifecycle) -> None:
        self.lifecycle = lifecycle

    def launch_claims(self, claims: Sequence[NewNodeClaim], *, deadline: float | None = None) -> PassReport:
        """:meth:`ClaimLifecycle.launch_claims`, or a report with every claim failed when one pool's limit
        would be exceeded (nothing launched)."""
        life = self.lifecycle
        pools = {p.name: p for p in static_nodepools(life.config.nodepools)}
        wanted = Counter(c.nodepool for c in claims if c.nodepool in pools)
        limited = [pools[n] for n in sorted(wanted) if (pools[n].limits() or {}).get(NODES) is not None]
        if not limited:
            return life.launch_claims(claims, deadline=deadline)
        # The lease the launch itself takes (re-entrant): nothing launches between the count and the launch.
        with life.replacement_pass(deadline):
            counts = node_counts(limited, life.state.nodeclaims.list(), life.node_objects())
            for pool in limited:
                limit = (pool.limits() or {})[NODES]
                if counts[pool.name] + wanted[pool.name] > limit:
                    reason = (
                        f"NodePool {pool.name} has {counts[pool.name]} node(s): {wanted[pool.name]} more "
                        f"would exceed its limits.nodes ({limit})"
                    )
                    life.metrics.add(STATIC_LIMIT_REACHED, 1, obs.COUNT, {"NodePool": pool.name})
                    life.log.warning("replacement refused", extra={"nodePool": pool.name, "reason": reason})
                    return PassReport(pending=0, failed={c.name: reason for c in claims})
            return life.launch_claims(claims, deadline=deadline)
