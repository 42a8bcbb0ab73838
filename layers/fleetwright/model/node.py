"""Existing nodes as the scheduler sees them."""

from __future__ import annotations

from dataclasses import dataclass, field

from fleetwright.model.pod import Pod
from fleetwright.model.resources import ResourceList
from fleetwright.model.taints import Taint


@dataclass(slots=True, eq=False)
class Node:
    """A node already in the cluster (or a NodeClaim in flight) and the pods bound to it."""

    name: str
    labels: dict[str, str]
    allocatable: ResourceList
    taints: tuple[Taint, ...] = ()
    capacity: ResourceList = field(default_factory=dict)
    unschedulable: bool = False
    pods: list[Pod] = field(default_factory=list)
    provider_id: str = ""
    ready: bool = True
    in_flight: bool = False  # a launched NodeClaim that has not registered yet
