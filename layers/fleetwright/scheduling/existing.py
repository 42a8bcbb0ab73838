"""Existing (and in-flight) nodes during one simulation: what room they have left."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from fleetwright.model.node import Node
from fleetwright.model.pod import HostPort, Pod
from fleetwright.model.requirements import Requirements
from fleetwright.model.taints import NO_SCHEDULE, Taint, Toleration, first_untolerated, tolerates_all
from fleetwright.scheduling import vectors as vec


@dataclass(slots=True, eq=False)
class NodeInProgress:
    """An existing node, the room it has left and the pending pods placed on it in this run."""

    seq: int
    node: Node
    room: vec.Vector
    host_ports: list[HostPort]
    placed: list[Pod] = field(default_factory=list)
    compatible: dict[tuple[str, int], bool] = field(default_factory=dict)

    def accepts(
        self, option_key: str, option: Requirements, tolerations_key: int, tolerations: tuple[Toleration, ...]
    ) -> bool:
        """Labels and taints allow a pod with this requirement option and these tolerations (cached).

        PreferNoSchedule taints count: the scheduler tolerates them only in its last attempts.
        """
        cache_key = (option_key, tolerations_key)
        cached = self.compatible.get(cache_key)
        if cached is None:
            cached = (
                not self.node.unschedulable
                and option.matches(self.node.labels)
                and first_untolerated(tolerations, self.node.taints) is None
            )
            self.compatible[cache_key] = cached
        return cached

    def try_add(self, pod: Pod, need: vec.Vector) -> bool:
        """Place the pod when it fits in the room left and its host ports are free."""
        room = self.room
        for i, amount in enumerate(need):
            if amount > room[i]:
                return False
        for port in pod.host_ports:
            if any(port.conflicts(other) for other in self.host_ports):
                return False
        self.room = vec.sub(room, need)
        self.placed.append(pod)
        self.host_ports.extend(pod.host_ports)
        return True


def node_in_progress(seq: int, node: Node, dims: tuple[str, ...]) -> NodeInProgress:
    """The node's allocatable minus what its bound pods request."""
    used = [0] * len(dims)
    ports: list[HostPort] = []
    for pod in node.pods:
        for i, amount in enumerate(vec.pod_need(pod.requests, dims)):
            used[i] += amount
        ports.extend(pod.host_ports)
    room = vec.sub(vec.vector(node.allocatable, dims), tuple(used))
    return NodeInProgress(seq, node, room, ports)


def daemon_ports_coming(node: Node, daemonsets: Sequence[Pod]) -> list[HostPort]:
    """Host ports of the DaemonSets that will run on a node not registered yet (their pods come with it)."""
    return [
        port
        for ds in daemonsets
        if ds.host_ports
        and tolerates_all(ds.tolerations, node.taints) is None
        and any(option.matches(node.labels) for option in ds.node_requirement_options())
        for port in ds.host_ports
    ]


UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", NO_SCHEDULE)


def hard_taints(node: NodeInProgress) -> tuple[Taint, ...]:
    """The node's taints, a cordoned node's ``node.kubernetes.io/unschedulable`` one included."""
    if node.node.unschedulable:
        return (*node.node.taints, UNSCHEDULABLE_TAINT)
    return node.node.taints
