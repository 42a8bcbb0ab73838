"""How the scheduler weighs a node's price against the pods it can hold."""

from __future__ import annotations

from fleetwright.scheduling.vectors import Vector

# A type whose price per copy of the pods' mix exceeds this multiple of the NodePool's median is an
# outlier that claims do not grow into (see fleetwright.scheduling.claims).
OUTLIER_FACTOR = 3.0
# What a node costs beyond its instance: the default 20 GiB gp3 root volume at $0.08 per GiB-month.
NODE_FIXED_COST_PER_HOUR = 20 * 0.08 / 730


def unit_cost(price: float, capacity: Vector, mix: Vector) -> float:
    """Price per copy of ``mix`` when a node of this capacity is filled with copies of it."""
    copies = min((c / m for c, m in zip(capacity, mix, strict=True) if m > 0), default=0.0)
    return (price + NODE_FIXED_COST_PER_HOUR) / copies if copies > 0 else float("inf")


# LowestCost packing: a claim grows only into types within this fraction of the best price per copy
# of its pods' mix among the types that hold what it already has.
EFFICIENCY_SLACK = 0.10
LOWEST_COST = "LowestCost"
