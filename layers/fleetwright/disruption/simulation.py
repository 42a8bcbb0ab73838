"""Where would the pods of nodes about to go land? The scheduler, run against the cluster without them.

The simulation sees every other node except those already being disrupted and cordoned ones, plus the
NodeClaims in flight, and may open new NodeClaims from the NodePools. NodePool limits count the nodes
that stay (the leaving nodes' capacity is released, and each leaving node's place under ``limits.nodes``).

Speed: a cluster of thousands of nodes is simulated many times per pass. When no pod anywhere uses
topology spread or pod (anti-)affinity, nodes without room for even the smallest pending pod cannot
change the outcome and are left out of the scheduler's input (the scheduler tries nodes in name order,
first fit, so the result is the same).

Waiting pods (for consolidation, as Karpenter's ``SimulateScheduling`` does): the pods waiting for capacity
and those of nodes being disrupted that no replacement on its way was launched for are scheduled along
with the leaving nodes' pods, so a command cannot give away the room they are about to take. Those that
would need a new node even with every node staying (:meth:`Simulator.waiting`, one run per pass) are left
out: they get their own node whatever consolidation does, and must not hold it up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from fleetwright.disruption.candidates import Cluster, as_pending, evictable_pods
from fleetwright.disruption.types import NodeState
from fleetwright.model import resources as res
from fleetwright.model.node import Node
from fleetwright.model.pod import Pod
from fleetwright.model.quantity import CPU, MEMORY, PODS
from fleetwright.scheduling.groups import has_topology
from fleetwright.scheduling.scheduler import schedule
from fleetwright.scheduling.templates import nodepool_templates
from fleetwright.scheduling.types import NODES, NodePoolTemplate, Results, SchedulingInput

_BASE = (CPU, MEMORY, PODS)


def _room(node: Node) -> tuple[int, int, int]:
    """What the scheduler will see as free on ``node`` (cpu, memory, pod slots)."""
    cpu = node.allocatable.get(CPU, 0)
    memory = node.allocatable.get(MEMORY, 0)
    slots = node.allocatable.get(PODS, 0)
    for pod in node.pods:
        cpu -= pod.requests.get(CPU, 0)
        memory -= pod.requests.get(MEMORY, 0)
        slots -= max(1, pod.requests.get(PODS, 0))
    return cpu, memory, slots


class Simulator:
    """Runs the scheduler for the pods of leaving nodes (see the module docstring)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        inp = cluster.input
        self.nodes: list[Node] = [
            s.node for s in inp.nodes if not s.terminating and not s.node.unschedulable
        ] + list(inp.in_flight)
        self.rooms = {id(n): _room(n) for n in self.nodes}
        everything = [s.node for s in inp.nodes] + list(inp.in_flight)
        self.templates: list[NodePoolTemplate] = nodepool_templates(
            inp.nodepools, inp.nodeclasses, everything, region=inp.region, public_subnets=inp.public_subnets
        )
        self.topology = any(has_topology(p) for n in everything for p in n.pods)
        self.runs = 0
        # Nodes not ready for pods yet: claims in flight and nodes still starting.
        self.uninitialized = {n.name for n in inp.in_flight} | {
            s.name for s in inp.nodes if not s.initialized or s.node.in_flight
        }
        self._waiting: list[Pod] | None = None

    def waiting(self) -> list[Pod]:
        """The pods that will take room on the nodes that stay: pods waiting for capacity, and the pods of
        nodes being disrupted not promised to a replacement on its way; only those that fit on the nodes
        there are (see the module docstring). Computed once per pass."""
        if self._waiting is None:
            promised = {p.key for n in self.cluster.input.in_flight for p in n.pods}
            promised.update(p.key for s in self.cluster.input.nodes if not s.initialized for p in s.node.pods)
            inp = self.cluster.input
            going = [
                p for s in inp.nodes if s.terminating for p in evictable_pods(s) if p.key not in promised
            ]
            everyone = as_pending([*inp.pending, *going])
            placed: set[str] = set()
            if everyone:
                self.runs += 1
                results = self._schedule(everyone, self.nodes, self.templates)
                placed = {p.key for e in results.existing for p in e.pods}
            self._waiting = [p for p in everyone if p.key in placed]
        return self._waiting

    def pods_of(self, leaving: Sequence[NodeState]) -> list[Pod]:
        """The leaving nodes' evictable pods, as pending pods."""
        return as_pending(p for s in leaving for p in evictable_pods(s))

    def run(
        self,
        leaving: Sequence[NodeState],
        pods: Sequence[Pod] | None = None,
        *,
        waiting: bool = False,
        packing: str | None = None,
    ) -> Results:
        """Schedule ``pods`` (default: the leaving nodes' evictable pods), and with ``waiting`` the
        :meth:`waiting` pods after them, without the leaving nodes; ``packing`` overrides the NodePools'
        packing policy for this run."""
        self.runs += 1
        pending = list(pods) if pods is not None else self.pods_of(leaving)
        if waiting:
            pending.extend(self.waiting())
        gone = {id(s.node) for s in leaving}
        nodes = [n for n in self.nodes if id(n) not in gone]
        if not self.topology and not any(has_topology(p) for p in pending):
            nodes = self._with_room(nodes, pending)
        released: dict[str, res.ResourceList] = {}
        for state in leaving:
            given = state.node.capacity or state.node.allocatable
            released[state.nodepool] = res.add(released.get(state.nodepool, {}), given, {NODES: 1})
        templates = [
            replace(t, usage=res.subtract(t.usage, released[t.name])) if t.name in released else t
            for t in self.templates
        ]
        if packing is not None:
            templates = [replace(t, packing=packing) for t in templates]
        return self._schedule(pending, nodes, templates)

    def _schedule(self, pending: list[Pod], nodes: list[Node], templates: list[NodePoolTemplate]) -> Results:
        inp = self.cluster.input
        return schedule(
            SchedulingInput(
                pods=pending,
                nodepools=templates,
                instance_types=inp.instance_types,
                nodes=nodes,
                daemonsets=inp.daemonsets,
                volumes=inp.volumes,
                namespace_labels=inp.namespace_labels,
            )
        )

    def _with_room(self, nodes: list[Node], pending: Sequence[Pod]) -> list[Node]:
        if not pending:
            return []
        least = [
            min(max(1, p.requests.get(d, 0)) if d == PODS else p.requests.get(d, 0) for p in pending)
            for d in _BASE
        ]
        return [
            n for n in nodes if all(free >= need for free, need in zip(self.rooms[id(n)], least, strict=True))
        ]
