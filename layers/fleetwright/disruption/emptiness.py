"""Emptiness: which nodes hold nothing but DaemonSet and static pods long enough to be removed.

``empty_candidates`` applies the per-node rules; ``select_within_budgets`` then cuts the list to what
each NodePool's ``Empty`` disruption budget allows, removing the longest-empty nodes first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from fleetwright.disruption.budgets import allowed_disruptions
from fleetwright.model.labels import DO_NOT_DISRUPT_ANNOTATION, NODEPOOL
from fleetwright.model.node import Node
from fleetwright.model.nodepool import NodePool
from fleetwright.model.pod import Pod, is_node_bound

EMPTY = "Empty"
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True, slots=True)
class EmptyCandidate:
    """A node that may be removed because it has been empty for at least its pool's consolidateAfter."""

    node: str
    nodepool: str
    empty_for: float  # seconds


def is_terminal(pod: Pod) -> bool:
    """True for pods that have finished (they no longer occupy the node)."""
    return pod.phase in TERMINAL_PHASES


def is_empty(node: Node) -> bool:
    """True when the node runs no pod that would need a new home if the node went away."""
    return all(is_terminal(pod) or is_node_bound(pod) for pod in node.pods)


def _do_not_disrupt(annotations: Mapping[str, str]) -> bool:
    return annotations.get(DO_NOT_DISRUPT_ANNOTATION) == "true"


def blocked_by_annotation(node: Node, node_annotations: Mapping[str, str]) -> bool:
    """True when the node, or a pod still running on it, is annotated ``karpenter.sh/do-not-disrupt``."""
    return _do_not_disrupt(node_annotations) or any(
        _do_not_disrupt(pod.annotations) for pod in node.pods if not is_terminal(pod)
    )


def empty_candidates(
    nodes: Sequence[Node],
    nodepools: Mapping[str, NodePool],
    empty_since: Mapping[str, float],
    now: float,
    *,
    initialized: Callable[[Node], bool] = lambda _node: True,
    terminating: frozenset[str] = frozenset(),
    node_annotations: Mapping[str, Mapping[str, str]] | None = None,
) -> list[EmptyCandidate]:
    """The nodes that emptiness consolidation may remove now, in the order of ``nodes``.

    A node qualifies when it belongs (label ``karpenter.sh/nodepool``) to a pool in ``nodepools`` whose
    consolidateAfter is not ``Never``; it holds only DaemonSet, mirror and finished pods; it has been
    empty since ``empty_since[name]`` (epoch seconds) for at least consolidateAfter; it is registered
    and ``initialized``; it is not in ``terminating``; and neither it (``node_annotations[name]``) nor
    a running pod on it carries ``karpenter.sh/do-not-disrupt: "true"``. Both consolidation policies
    (WhenEmpty, WhenEmptyOrUnderutilized) remove empty nodes.
    """
    annotations = node_annotations or {}
    candidates: list[EmptyCandidate] = []
    for node in nodes:
        pool = nodepools.get(node.labels.get(NODEPOOL, ""))
        if pool is None:
            continue
        # Both consolidation policies (the only two the model accepts) include removing empty nodes.
        after = pool.spec.disruption.consolidate_after_seconds()
        since = empty_since.get(node.name)
        if after is None or since is None:
            continue
        if node.name in terminating or node.in_flight or not initialized(node):
            continue
        if not is_empty(node) or blocked_by_annotation(node, annotations.get(node.name, {})):
            continue
        empty_for = now - since
        if empty_for >= after:
            candidates.append(EmptyCandidate(node=node.name, nodepool=pool.name, empty_for=empty_for))
    return candidates


def select_within_budgets(
    candidates: Sequence[EmptyCandidate],
    nodepools: Mapping[str, NodePool],
    nodes_per_pool: Mapping[str, int],
    disrupting: Mapping[str, int],
    now: datetime,
) -> list[EmptyCandidate]:
    """At most each pool's ``Empty`` budget allows of ``candidates``, longest-empty first.

    ``nodes_per_pool`` counts every node of each pool (the base of percentage budgets); ``disrupting``
    counts the pool's nodes already being disrupted. Candidates of pools missing from ``nodepools`` are
    dropped. The result is ordered longest-empty first (ties by node name, so it is deterministic).
    """
    remaining: dict[str, int] = {}
    selected: list[EmptyCandidate] = []
    for candidate in sorted(candidates, key=lambda c: (-c.empty_for, c.node)):
        pool = nodepools.get(candidate.nodepool)
        if pool is None:
            continue
        if candidate.nodepool not in remaining:
            remaining[candidate.nodepool] = allowed_disruptions(
                pool,
                EMPTY,
                nodes_per_pool.get(candidate.nodepool, 0),
                disrupting.get(candidate.nodepool, 0),
                now,
            )
        if remaining[candidate.nodepool] > 0:
            remaining[candidate.nodepool] -= 1
            selected.append(candidate)
    return selected
