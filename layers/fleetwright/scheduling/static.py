"""Claims for static NodePools (``spec.replicas``): nodes launched for the pool itself, not for pods."""

from __future__ import annotations

from collections.abc import Sequence

from fleetwright.model.instancetype import InstanceType
from fleetwright.model.pod import Pod
from fleetwright.scheduling import vectors as vec
from fleetwright.scheduling.claims import ClaimInProgress
from fleetwright.scheduling.finalize import finalize
from fleetwright.scheduling.pools import prepare_pool
from fleetwright.scheduling.types import NewNodeClaim, NodePoolTemplate


def static_claims(
    template: NodePoolTemplate, instance_types: Sequence[InstanceType], daemonsets: Sequence[Pod], count: int
) -> list[NewNodeClaim]:
    """``count`` claims for a static pool: its requirements and every type they allow (cheapest first),
    room kept for the DaemonSets that would run there. Empty when no type fits: no pod narrows them."""
    if count <= 0:
        return []
    dims = vec.dimensions([d.requests for d in daemonsets])
    pool = prepare_pool(template, sorted(instance_types, key=lambda t: t.name), list(daemonsets), dims)
    if not pool.types:
        return []
    zero = tuple(0 for _ in dims)
    claims = []
    for index in range(count):
        claim = ClaimInProgress(index, pool, pool.requirements, list(range(len(pool.types))), zero, zero)
        final = finalize(claim, f"{template.name}-static-{index + 1}")
        if isinstance(final, NewNodeClaim):  # without a reservation ledger it always is
            claims.append(final)
    return claims
