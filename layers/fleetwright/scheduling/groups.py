"""Pods that share every placement constraint share one group: its attempts are worked out once.

A group holds the pod's relaxation ladder (:mod:`fleetwright.scheduling.preferences`) as attempts, its
tolerations, and the summed needs of its pending pods (the shape claims pack for).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from fleetwright.model.labels import HOSTNAME
from fleetwright.model.pod import Pod
from fleetwright.model.requirements import Requirements
from fleetwright.model.taints import Taint, Toleration
from fleetwright.model.volumes import pod_volume_requirements
from fleetwright.scheduling import vectors as vec
from fleetwright.scheduling.preferences import Attempt, attempts, key_of, tolerating_attempts
from fleetwright.scheduling.topology import AFFINITY, PodConstraints, Topology


@dataclass(slots=True, eq=False)
class PodGroup:
    """Pods that share every placement constraint (not necessarily their requests)."""

    attempts: list[Attempt]  # strictest first
    tolerations: tuple[Toleration, ...]
    tolerations_key: int
    error: str = ""  # set when no attempt can work (a missing volume, contradictory selectors)
    resumable: bool = True  # refusals are permanent (see Placement.resume)
    mix: vec.Vector = ()  # the summed needs of the group's pending pods: the shape claims pack for
    # The same pods tolerating PreferNoSchedule taints, tried after every attempt above has failed.
    tolerating_preferences: PodGroup | None = None


def _group_key(pod: Pod, constraints: PodConstraints, volumes: Requirements | str) -> tuple[object, ...]:
    volume_key = volumes if isinstance(volumes, str) else key_of(volumes)
    return (
        tuple(key_of(o) for o in pod.node_requirement_options()),
        tuple(sorted((p.weight, key_of(p.requirements)) for p in pod.preferred_affinity)),
        pod.tolerations,
        constraints.signature(),
        volume_key,
    )


def has_topology(pod: Pod) -> bool:
    """True when the pod has a topology spread or a pod (anti-)affinity term."""
    return bool(
        pod.topology_spread
        or pod.pod_affinity
        or pod.pod_anti_affinity
        or pod.preferred_pod_affinity
        or pod.preferred_pod_anti_affinity
    )


class PodGroups:
    """The groups of one simulation, keyed by everything placement looks at but requests."""

    def __init__(
        self,
        topology: Topology,
        volumes: Mapping[str, Requirements | str],
        preferred_taints: Collection[Taint],
    ) -> None:
        self.topology = topology
        self.volumes = volumes
        self.preferred_taints = preferred_taints
        self.groups: dict[tuple[object, ...], PodGroup] = {}

    def of(self, pod: Pod) -> PodGroup:
        """The pod's constraint group (computed once per distinct set of constraints)."""
        constraints = self.topology.constraints_for(pod) if has_topology(pod) else PodConstraints()
        volumes = (
            pod_volume_requirements(pod.namespace, pod.volume_claims, self.volumes)
            if pod.volume_claims
            else Requirements()
        )
        key = _group_key(pod, constraints, volumes)
        group = self.groups.get(key)
        if group is None:
            group = self._new(pod, constraints, volumes)
            self.groups[key] = group
        return group

    def _new(self, pod: Pod, constraints: PodConstraints, volumes: Requirements | str) -> PodGroup:
        if isinstance(volumes, str):
            return PodGroup([], pod.tolerations, len(self.groups), error=volumes)
        ways = attempts(pod, constraints, volumes)
        group = PodGroup(ways, pod.tolerations, len(self.groups))
        if not ways:
            group.error = "node selector, required node affinity and volumes cannot all be met"
        group.resumable = not any(
            c.kind == AFFINITY and c.key == HOSTNAME for a in ways for c in a.constraints
        )
        if ways:
            tolerating = tolerating_attempts(pod, constraints, volumes, self.preferred_taints)
            if tolerating is not None:
                tolerations, last = tolerating
                group.tolerating_preferences = PodGroup(
                    last, tolerations, -1 - group.tolerations_key, resumable=group.resumable
                )
        return group
