"""What the capabilities launching replacements need of a launcher, so they type against these and not
against the provisioner (the composition code hands them a :class:`~fleetwright.claims.lifecycle
.ClaimLifecycle`, a :class:`~fleetwright.claims.static_limits.StaticLimitGuard` or the provisioner)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from fleetwright.claims.reports import PassReport
from fleetwright.kube.cluster import KubeCluster
from fleetwright.kube.snapshot import ClusterSnapshot
from fleetwright.model.node import Node
from fleetwright.model.pod import Pod
from fleetwright.scheduling.types import NewNodeClaim


class ClaimLauncher(Protocol):
    """Launches NodeClaims decided elsewhere (the disruption controller's replacements), recorded and
    fenced like every launch."""

    def launch_claims(self, claims: Sequence[NewNodeClaim]) -> PassReport:
        """Record and launch ``claims``; failures are in ``PassReport.failed``."""
        ...


class PodLauncher(Protocol):
    """Schedules pods against the cluster and launches what the scheduler opens (the interruption
    handler's replacements for the pods of a node about to go)."""

    @property
    def kube(self) -> KubeCluster:
        """The cluster the pods and nodes are read from."""
        ...

    def launch_for(
        self,
        pods: Sequence[Pod],
        snapshot: ClusterSnapshot,
        nodes: Sequence[Node],
        *,
        deadline: float | None = None,
    ) -> PassReport:
        """Schedule ``pods`` against ``nodes`` (and the claims in flight) and launch what the scheduler
        opens; raises when the launch lease stays taken or is lost."""
        ...
