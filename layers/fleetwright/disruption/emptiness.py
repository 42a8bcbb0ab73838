"""Emptiness: whether a node holds nothing but DaemonSet, static and finished pods (such a node may be
removed once its pool's ``consolidateAfter`` has passed)."""

from __future__ import annotations

from fleetwright.model.node import Node
from fleetwright.model.pod import Pod, is_node_bound

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


def is_terminal(pod: Pod) -> bool:
    """True for pods that have finished (they no longer occupy the node)."""
    return pod.phase in TERMINAL_PHASES


def is_empty(node: Node) -> bool:
    """True when the node runs no pod that would need a new home if the node went away."""
    return all(is_terminal(pod) or is_node_bound(pod) for pod in node.pods)
