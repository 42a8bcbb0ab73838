"""Expiration: nodes older than their ``expireAfter``, and nodes in a Capacity Block within 40
minutes of its end (EC2 reclaims them before it), are replaced, forcefully.

A node's ``expireAfter`` is its NodeClaim's, copied from the NodePool at launch (as Karpenter); editing the
NodePool's drifts its nodes instead (it is in the NodePool hash), so they roll within the ``Drifted``
budget. Claims recorded before the value was copied follow their NodePool's current one.

Expiration is not limited by disruption budgets, ``karpenter.sh/do-not-disrupt`` or PodDisruptionBudgets
(the drain deadline, ``terminationGracePeriod``, bounds how long those may hold the node). Every expired
node gets its own command; the replacements for all of them come from one simulation (their pods
scheduled together, without any of them), each claim attached to the command of the node whose pod it
received first, so capacity is not bought twice.
"""

from __future__ import annotations

from collections.abc import Sequence

from fleetwright.disruption.candidates import Cluster, claims_summary, describe_seconds, evictable_pods
from fleetwright.disruption.method import PassContext
from fleetwright.disruption.simulation import Simulator
from fleetwright.disruption.types import EXPIRATION, EXPIRED, Command, NodeState
from fleetwright.model.labels import CAPACITY_RESERVATION_ID


def is_expired(cluster: Cluster, state: NodeState) -> bool:
    """True when ``state`` is ours, not already going, and has lived at least its pool's expireAfter, or
    runs in a Capacity Block about to end."""
    pool = cluster.pool_of(state)
    if pool is None or state.terminating:
        return False
    if capacity_block_end(cluster, state) is not None:
        return True
    lifetime = cluster.terms(state).expire_after
    return lifetime is not None and cluster.now - state.created_at >= lifetime


def expire_after_text(cluster: Cluster, state: NodeState) -> str:
    """``expireAfter 24h`` and whose it is: the node's claim's (copied at launch) or its NodePool's."""
    terms = cluster.terms(state)
    whose = (
        f"its NodeClaim's (NodePool {state.nodepool} at launch)"
        if terms.copied
        else f"NodePool {state.nodepool}"
    )
    return f"{whose} expireAfter {describe_seconds(terms.expire_after or 0)}"


def capacity_block_end(cluster: Cluster, state: NodeState) -> float | None:
    """When the Capacity Block the node runs in ends (epoch seconds), if that is within the expiry
    window (EC2 reclaims its instances before the end), else None."""
    reservation = state.node.labels.get(CAPACITY_RESERVATION_ID)
    if not reservation:
        return None
    return cluster.input.expiring_reservations.get(reservation)


def expired_nodes(cluster: Cluster) -> list[NodeState]:
    """Our expired nodes, oldest first (ties by name)."""
    return sorted((s for s in cluster.ours if is_expired(cluster, s)), key=lambda s: (s.created_at, s.name))


def expiration_commands(cluster: Cluster, simulator: Simulator) -> list[Command]:
    """One forceful command per expired node, with the replacements its pods need."""
    # Static pools' nodes are replaced by a node of their pool instead (fleetwright.disruption.static_pools).
    expired = [s for s in expired_nodes(cluster) if not cluster.is_static(s)]
    if not expired:
        return []
    commands = {s.name: Command(method=EXPIRATION, reason=EXPIRED, candidates=[s]) for s in expired}
    home = {p.key: s.name for s in expired for p in evictable_pods(s)}
    results = simulator.run(expired)
    for claim in results.new_claims:
        owners = {home[p.key] for p in claim.pods if p.key in home}
        owner = next((s.name for s in expired if s.name in owners), expired[0].name)
        commands[owner].replacements.append(claim)
    stuck: dict[str, int] = {}
    for error in results.errors:
        name = home.get(error.pod.key, "")
        stuck[name] = stuck.get(name, 0) + 1
    for state in expired:
        command = commands[state.name]
        block_end = capacity_block_end(cluster, state)
        if block_end is not None:
            text = (
                f"node {state.name} ({state.instance_type}) expired: its capacity block "
                f"{state.node.labels[CAPACITY_RESERVATION_ID]} ends in "
                f"{describe_seconds(max(0.0, block_end - cluster.now))}"
            )
        else:
            text = (
                f"node {state.name} ({state.instance_type}) expired: "
                f"{describe_seconds(cluster.now - state.created_at)} old, {expire_after_text(cluster, state)}"
            )
        if command.replacements:
            text += f"; launch {claims_summary(command.replacements)}"
        if stuck.get(state.name):
            text += f"; {stuck[state.name]} pod(s) fit nowhere and will stay pending"
        command.explanation = text
    return [commands[s.name] for s in expired]


def still_expired(cluster: Cluster, fresh: Sequence[NodeState]) -> str | None:
    """None when every node of an expiration command is still expired in the fresh ``cluster``."""
    steady = [s.name for s in fresh if not is_expired(cluster, s)]
    return f"node {steady[0]} has not expired any more" if steady else None


class Expiration:
    """Expiration of dynamic NodePools' nodes as a disruption method (forceful, a command per node)."""

    name = EXPIRATION
    reason = EXPIRED
    forceful = True

    def should_disrupt(self, cluster: Cluster, state: NodeState) -> bool:
        """Expired, and not of a static pool (those are ``StaticExpiration``'s)."""
        return is_expired(cluster, state) and not cluster.is_static(state)

    def compute_commands(self, ctx: PassContext) -> list[Command]:
        """One command per expired node, the replacements from one simulation."""
        return expiration_commands(ctx.cluster, ctx.simulator)

    def validate(self, cluster: Cluster, command: Command, fresh: Sequence[NodeState]) -> str | None:
        """Every node has still expired."""
        return still_expired(cluster, fresh)
