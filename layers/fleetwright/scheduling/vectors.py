"""Resources as fixed-length integer tuples, and the Pareto skyline of instance capacities.

The scheduler turns every resource list into a tuple over the same dimensions (cpu, memory, pods, then
any other resource a pod asks for), so a fit check is a handful of integer comparisons.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from fleetwright.model.quantity import CPU, MEMORY, PODS

Vector = tuple[int, ...]

BASE_DIMENSIONS = (CPU, MEMORY, PODS)


def dimensions(resource_lists: Iterable[Mapping[str, int]]) -> tuple[str, ...]:
    """cpu, memory, pods, then every other resource requested anywhere, sorted."""
    extra: set[str] = set()
    for resources in resource_lists:
        for name, amount in resources.items():
            if amount > 0 and name not in BASE_DIMENSIONS:
                extra.add(name)
    return BASE_DIMENSIONS + tuple(sorted(extra))


def vector(resources: Mapping[str, int], dims: Sequence[str]) -> Vector:
    """The resource list as a tuple over ``dims`` (missing resources are zero)."""
    return tuple(resources.get(d, 0) for d in dims)


def add(a: Vector, b: Vector) -> Vector:
    """Element-wise sum."""
    return tuple(x + y for x, y in zip(a, b, strict=True))


def sub(a: Vector, b: Vector) -> Vector:
    """Element-wise difference."""
    return tuple(x - y for x, y in zip(a, b, strict=True))


def fits(need: Vector, capacity: Vector) -> bool:
    """True when ``need`` is within ``capacity`` in every dimension."""
    for n, c in zip(need, capacity):  # noqa: B905, SIM110 - hot path: a plain loop beats all(genexpr)
        if n > c:
            return False
    return True


def elementwise_max(vectors: Iterable[Vector], width: int) -> Vector:
    """Per-dimension maximum (zeros when empty)."""
    result = [0] * width
    for vec in vectors:
        for i, value in enumerate(vec):
            result[i] = max(result[i], value)
    return tuple(result)


def skyline(vectors: Iterable[Vector]) -> list[Vector]:
    """The Pareto-maximal vectors: a need fits some input vector iff it fits one of these.

    Sorted largest first, so the common case (the biggest type fits) exits after one comparison.
    """
    kept: list[Vector] = []
    for vec in sorted(set(vectors), reverse=True):
        if not any(fits(vec, other) for other in kept):
            kept.append(vec)
    return kept


def fits_any(need: Vector, capacities: Sequence[Vector]) -> bool:
    """True when ``need`` fits at least one of ``capacities``."""
    return any(fits(need, cap) for cap in capacities)


def pod_need(requests: Mapping[str, int], dims: Sequence[str]) -> Vector:
    """A pod's requests over ``dims``; every pod takes one of the node's pod slots."""
    need = [requests.get(d, 0) for d in dims]
    need[2] = max(need[2], 1)
    return tuple(need)
