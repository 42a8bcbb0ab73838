"""Replacement capacity for a node about to go: its pods are simulated without it and the NodeClaims the
scheduler opens are launched at once, so they boot while the node drains.

Claims are recorded in the state table exactly as the provisioner records its own (status ``Launching``
before CreateFleet, ``Launched`` after), so the provisioner follows them to registration, counts them as
in-flight capacity, and does not launch again for the same pods once they are evicted. The simulation
counts in-flight claims as nodes too, which is what makes a duplicate delivery launch nothing new.

Within one SQS batch (between ``start_batch`` and ``end_batch``) the cluster is read once: each replacement
reuses that snapshot, leaving out every node of the batch's instances, and counts the claims launched for
the batch's earlier messages as in flight (from the state table, read for each launch).

The launch takes the provisioner's lease (waiting at most the provisioner's ``lease_wait_seconds``) and is
fenced by it exactly as a provisioning pass is, so a replacement and a pass never launch for the same pods
at once; when the lease stays taken ``replace`` raises ``LeaseUnavailableError``.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from dataclasses import dataclass, field, replace

from fleetwright.claims.protocols import PodLauncher
from fleetwright.claims.registration import instance_id_of
from fleetwright.kube.snapshot import ClusterSnapshot, read_snapshot
from fleetwright.model.labels import DISRUPTED_TAINT_KEY
from fleetwright.model.node import Node
from fleetwright.model.pod import Pod, is_node_bound

log = logging.getLogger(__name__)

FAILED_CLAIM_TTL_SECONDS = 3600.0
LAUNCH_ATTEMPTS = 2


@dataclass(slots=True)
class ReplacementResult:
    """What was launched for a node's pods.

    ``claims`` are the NodeClaims launched (ids); ``failed`` claims that could not be launched, with the
    reason; ``placed_on_existing`` pods that fit nodes already there (or already launching);
    ``unschedulable`` pods no NodePool can take.
    """

    node: str = ""
    pods: int = 0
    claims: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    placed_on_existing: int = 0
    unschedulable: int = 0


def pods_to_replace(node: Node) -> list[Pod]:
    """The node's pods as pending pods: DaemonSet and mirror pods stay behind (they follow nodes)."""
    return [replace(p, node_name=None, phase="Pending") for p in node.pods if not is_node_bound(p)]


class ReplacementLauncher:
    """Launches replacement capacity for the pods of one node (see the module docstring), through the
    provisioner's own scheduling and launch path."""

    def __init__(self, provisioner: PodLauncher) -> None:
        self.provisioner = provisioner
        self._batch = False
        self._snapshot: ClusterSnapshot | None = None

    def start_batch(self) -> None:
        """Read the cluster at most once until :meth:`end_batch` (one SQS batch)."""
        self._batch = True
        self._snapshot = None

    def end_batch(self) -> None:
        """Read the cluster for every replacement again."""
        self._batch = False
        self._snapshot = None

    def snapshot(self) -> ClusterSnapshot:
        """The cluster: the batch's snapshot (read on first use), else a fresh one."""
        if self._snapshot is not None:
            return self._snapshot
        snapshot = read_snapshot(self.provisioner.kube)
        if self._batch:
            self._snapshot = snapshot
        return snapshot

    def replace(self, instance_id: str, *, going: Collection[str] = ()) -> ReplacementResult:
        """Simulate the pods of ``instance_id``'s node without the node; launch what the scheduler opens.

        Nodes that are going too do not count as room: cordoned or marked ``karpenter.sh/disrupted``
        ones, and those whose instances are in ``going`` (other interruptions being handled, which may not
        be cordoned yet). A launch that fails (throttling, the deadline, a refused offering) is tried once
        more for the pods it left: the claims already launched count as capacity, so nothing doubles.
        """
        snapshot = self.snapshot()
        leaving = next((n for n in snapshot.nodes if instance_id_of(n.provider_id) == instance_id), None)
        if leaving is None:
            return ReplacementResult()
        pods = pods_to_replace(leaving)
        others = [n for n in snapshot.nodes if n is not leaving and not _going(n, going)]
        result = ReplacementResult(node=leaving.name, pods=len(pods))
        for attempt in range(LAUNCH_ATTEMPTS):
            report = self.provisioner.launch_for(pods, snapshot, others)
            result.claims.extend(record.id for record in report.launched)
            result.failed.update(report.failed)
            if attempt == 0:
                result.placed_on_existing = report.placed_on_existing
                result.unschedulable = report.unschedulable
            if not report.failed:
                break
            log.warning(
                "replacement launch failed; trying once more"
                if attempt + 1 < LAUNCH_ATTEMPTS
                else "replacement launch failed again",
                extra={"instanceId": instance_id, "failed": dict(report.failed)},
            )
        return result


def _going(node: Node, instances: Collection[str]) -> bool:
    """True when the node is leaving the cluster too (so its free room is no place for pods)."""
    if node.unschedulable or any(t.key == DISRUPTED_TAINT_KEY for t in node.taints):
        return True
    return bool(instances) and instance_id_of(node.provider_id) in instances
