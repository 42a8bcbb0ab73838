"""Replacement capacity for a node about to go: its pods are simulated without it and the NodeClaims the
scheduler opens are launched at once, so they boot while the node drains.

Claims are recorded in the state table exactly as the provisioner records its own (status ``Launching``
before CreateFleet, ``Launched`` after), so the provisioner follows them to registration, counts them as
in-flight capacity, and does not launch again for the same pods once they are evicted. The simulation
counts in-flight claims as nodes too, which is what makes a duplicate delivery launch nothing new.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from fleetwright.aws.request import LaunchedInstance
from fleetwright.kube.cluster import KubeCluster
from fleetwright.kube.snapshot import read_snapshot
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.node import Node
from fleetwright.model.pod import Pod
from fleetwright.model.volumes import volume_requirements
from fleetwright.provisioning.claims import (
    claim_record,
    in_flight_node,
    launch_request,
    launched_fields,
    new_claim_id,
    offering_price,
)
from fleetwright.provisioning.cloud import Cloud
from fleetwright.provisioning.config import ProvisionerConfig
from fleetwright.provisioning.registration import instance_id_of
from fleetwright.scheduling.scheduler import schedule
from fleetwright.scheduling.templates import nodepool_templates
from fleetwright.scheduling.types import SchedulingInput
from fleetwright.state.nodeclaims import ClaimStatus, NodeClaimRecord, NodeClaimStore

log = logging.getLogger(__name__)

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
FAILED_CLAIM_TTL_SECONDS = 3600.0


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
    return [
        replace(p, node_name=None, phase="Pending")
        for p in node.pods
        if not (p.owner and p.owner[0] == "DaemonSet") and MIRROR_ANNOTATION not in p.annotations
    ]


class ReplacementLauncher:
    """Launches replacement capacity for the pods of one node (see the module docstring)."""

    def __init__(
        self,
        kube: KubeCluster,
        cloud: Cloud,
        claims: NodeClaimStore,
        config: ProvisionerConfig,
        *,
        clock: Callable[[], float] = time.time,
        logger: logging.Logger | Any = None,
    ) -> None:
        self.kube = kube
        self.cloud = cloud
        self.claims = claims
        self.config = config
        self.clock = clock
        self.log = logger or log

    def replace(self, instance_id: str) -> ReplacementResult:
        """Simulate the pods of ``instance_id``'s node without the node; launch what the scheduler opens."""
        snapshot = read_snapshot(self.kube)
        leaving = next((n for n in snapshot.nodes if instance_id_of(n.provider_id) == instance_id), None)
        if leaving is None:
            return ReplacementResult()
        result = ReplacementResult(node=leaving.name)
        pods = pods_to_replace(leaving)
        result.pods = len(pods)
        if not pods:
            return result
        records = self.claims.list()
        catalog = self.cloud.instance_types(None)
        by_name = {t.name: t for t in catalog}
        others = [n for n in snapshot.nodes if n is not leaving]
        registered = {instance_id_of(n.provider_id) for n in others if n.provider_id}
        in_flight = [
            in_flight_node(r, by_name)
            for r in records
            if r.in_flight and not (r.instance_id and r.instance_id in registered)
        ]
        nodes = others + in_flight
        templates = nodepool_templates(self.config.nodepools, self.config.nodeclasses, nodes)
        volumes: dict[str, Any] = {}
        if any(p.volume_claims for p in pods):
            volumes = dict(
                volume_requirements(
                    self.kube.list_pvcs(), self.kube.list_pvs(), self.kube.list_storage_classes()
                )
            )
        results = schedule(
            SchedulingInput(
                pods=pods,
                nodepools=templates,
                instance_types=catalog,
                nodes=nodes,
                daemonsets=list(snapshot.daemonsets),
                volumes=volumes,
            )
        )
        result.placed_on_existing = sum(len(p.pods) for p in results.existing)
        result.unschedulable = len(results.errors)
        for error in results.errors:
            self.log.warning(
                "pod of an interrupted node cannot be rescheduled",
                extra={"pod": error.pod.key, "reason": error.reason},
            )
        if results.new_claims:
            self._launch(results.new_claims, {t.name: t for t in templates}, by_name, instance_id, result)
        return result

    def _launch(
        self,
        new_claims: Sequence[Any],
        templates: Mapping[str, Any],
        by_name: Mapping[str, InstanceType],
        instance_id: str,
        result: ReplacementResult,
    ) -> None:
        planned: list[tuple[NodeClaimRecord, Any]] = []
        accepted: dict[str, set[str]] = {}
        for claim in new_claims:
            template = templates[claim.nodepool]
            node_class = self.config.nodeclass(template.node_class)
            if template.node_class not in accepted:
                accepted[template.node_class] = {t.name for t in self.cloud.instance_types(node_class)}
            candidates = [t for t in claim.instance_types if t.name in accepted[template.node_class]]
            if not candidates:
                result.failed[claim.name] = (
                    f"EC2NodeClass {template.node_class}: no AMI boots the claim's types"
                )
                continue
            record = claim_record(
                claim,
                new_claim_id(claim.nodepool),
                template,
                candidates,
                holder=f"interruption-{instance_id}",
                now=self.clock(),
            )
            # Recorded before the launch, as the provisioner does: a crash after CreateFleet leaves a claim
            # the provisioner's reconciliation matches to its instance by tag.
            self.claims.create(record)
            planned.append((record, launch_request(record, candidates, node_class)))
        if not planned:
            return
        outcomes = self.cloud.launch_many([request for _, request in planned])
        for (record, _), outcome in zip(planned, outcomes, strict=True):
            now = self.clock()
            if isinstance(outcome, LaunchedInstance):
                price = offering_price(by_name, outcome.instance_type, outcome.zone, outcome.capacity_type)
                self.claims.transition(
                    record.id,
                    ClaimStatus.LAUNCHING,
                    ClaimStatus.LAUNCHED,
                    **launched_fields(outcome, now, price),
                )
                result.claims.append(record.id)
                self.log.info(
                    "replacement launched",
                    extra={
                        "nodeclaim": record.id,
                        "for": instance_id,
                        "instanceId": outcome.instance_id,
                        "instanceType": outcome.instance_type,
                        "zone": outcome.zone,
                        "capacityType": outcome.capacity_type,
                        "pods": record.pod_count,
                    },
                )
            else:
                reason = "; ".join(outcome.reasons) or str(outcome)
                self.claims.transition(
                    record.id,
                    ClaimStatus.LAUNCHING,
                    ClaimStatus.FAILED,
                    reason=reason[:1000],
                    expires_at=int(now + FAILED_CLAIM_TTL_SECONDS),
                )
                result.failed[record.id] = reason
                self.log.error("replacement launch failed", extra={"nodeclaim": record.id, "reason": reason})
