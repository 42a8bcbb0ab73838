"""How the scheduler weighs a node's bill against the pods it can hold.

A node costs its instance price, what its EC2NodeClass adds to every node (``extra``: volumes, public
IPv4 address) and, on burstable types, the CPU credits its pods spend above the type's baseline
(``fleetwright.catalog.bill``). A pool keeps the credits per type as ``CreditTerms``: the pods' CPU
(millicores) the node runs on its own credits, the type's baseline less its DaemonSets' CPU, and the price
of each millicore-hour above it.
"""

from __future__ import annotations

from fleetwright.scheduling.vectors import Vector

# A type whose price per copy of the pods' mix exceeds this multiple of the NodePool's median is an
# outlier that claims do not grow into (see fleetwright.scheduling.claims).
OUTLIER_FACTOR = 3.0

CreditTerms = tuple[float, float]  # (pods' CPU the baseline covers, USD per millicore-hour above it)


def credits(terms: CreditTerms | None, cpu: float) -> float:
    """USD per hour of surplus credits for pods requesting ``cpu`` millicores (0 off burstable types)."""
    if terms is None:
        return 0.0
    covered, rate = terms
    return rate * (cpu - covered) if cpu > covered else 0.0


def unit_cost(
    price: float, capacity: Vector, mix: Vector, extra: float = 0.0, terms: CreditTerms | None = None
) -> float:
    """Bill per copy of ``mix`` when a node of this capacity is filled with copies of it."""
    copies = min((c / m for c, m in zip(capacity, mix, strict=True) if m > 0), default=0.0)
    if copies <= 0:
        return float("inf")
    return (price + extra + credits(terms, copies * mix[0])) / copies


# LowestCost packing: a claim grows only into types within this fraction of the best price per copy
# of its pods' mix among the types that hold what it already has.
EFFICIENCY_SLACK = 0.10
LOWEST_COST = "LowestCost"
