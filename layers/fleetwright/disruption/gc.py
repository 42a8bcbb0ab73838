"""Garbage collection: what a crash, a lost event or a failed step left behind (docs/disruption.md).

Three independent sweeps, each run once per disruption pass:

1. **Instances** carrying this cluster's ownership tags, older than the registration timeout, with no Node
   and no active NodeClaim (or an active claim that names another instance: a duplicate launch) are
   terminated. The timeout is what keeps a launch in progress safe: its instance is younger than that.
   Ownership is the cluster tag *and* the NodePool tag the controller's CreateFleet writes: an instance
   with the cluster tag alone was tagged by someone else's hand (``CreateTags`` on any instance gives it);
   it is an impostor, reported (``ImpostorsSeen``, a warning) and never terminated.
2. **Nodes** of a NodePool (label ``karpenter.sh/nodepool``, ``aws:///`` providerID) whose instance is
   ours and shutting down, terminated or forgotten by EC2 have their pods and Node deleted and their claim
   finalized. A Node whose instance exists but is not ours is never touched; one whose instance EC2 no
   longer lists is deleted only when a NodeClaim record proves it was ours. A Node carrying the disrupted
   taint belongs to a termination workflow, which gets a grace period to finish first.
3. **Launch templates** of this cluster that no live instance was launched from and that are older than a
   grace period (so one created for a launch in progress survives) are deleted.

A failure in one sweep (or one object) is reported, logged and counted, and the others still run.

Listing every live instance of a large cluster is the costliest read of a pass, so with
``list_every_seconds`` the collector reuses its last listing that long. A listing that old decides nothing
on its own: sweep 1 acts only on instances past the registration timeout that have neither a Node nor an
active claim *now* and re-reads the claim before terminating (terminating an instance that ended since is
a no-op); sweep 2 describes every suspect afresh; sweep 3 runs only on a fresh listing, as a template
counts as unused only when no live instance names it. An old listing only delays: an orphan is found at
most ``list_every_seconds`` later, and a Node whose instance ended in the meantime (not through Fleetwright's
termination, which deletes it itself) waits as long.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from fleetwright.claims.registration import instance_id_of, nodes_by_instance, release_node
from fleetwright.cloud.instances import CLUSTER_TAG, LIVE_STATES, NODEPOOL_TAG, Instance
from fleetwright.cloud.provider import InventoryCloud
from fleetwright.disruption import metrics as m
from fleetwright.kube.cluster import DISRUPTED_TAINT, KubeCluster
from fleetwright.kube.resources import NODES
from fleetwright.model import labels as wk
from fleetwright.observability.metrics import COUNT, MetricsSink, NullMetrics
from fleetwright.state.nodeclaims import ClaimStatus, NodeClaimRecord
from fleetwright.state.store import StateStore
from fleetwright.workflow.claimbook import TERMINATED_CLAIM_TTL_SECONDS, StoreClaimBook

log = logging.getLogger(__name__)

GONE_STATES = frozenset({"shutting-down", "terminated"})
# EC2 tags every instance launched from a launch template with the template's id (RunInstances, CreateFleet).
LAUNCH_TEMPLATE_ID_TAG = "aws:ec2launchtemplate:id"
# When the disrupted taint has no ``timeAdded`` (the API server only stamps NoExecute taints), the collector
# records when it first found the node orphaned, so the grace period survives across Lambda invocations.
ORPHANED_SINCE_ANNOTATION = "fleetwright.io/orphaned-since"

DEFAULT_REGISTRATION_TIMEOUT_SECONDS = 900.0
DEFAULT_LAUNCH_TEMPLATE_GRACE_SECONDS = 3600.0
DEFAULT_DISRUPTED_NODE_GRACE_SECONDS = 600.0
# What the disruption function's wiring uses: shorter than the described instances' maximum age
# (disruption/described.py), so the listing refreshes them before they expire.
DEFAULT_LIST_EVERY_SECONDS = 240.0

INSTANCE = "Instance"
NODE = "Node"
LAUNCH_TEMPLATE = "LaunchTemplate"


@dataclass(slots=True)
class GcReport:
    """What one collection did. ``kept`` explains objects that looked like garbage but were left alone
    (``{"kind": ..., "name": ..., "why": ...}``); ``errors`` name the sweep or object that failed."""

    terminated_instances: list[str] = field(default_factory=list)
    deleted_nodes: list[str] = field(default_factory=list)
    deleted_launch_templates: list[str] = field(default_factory=list)
    finalized_claims: list[str] = field(default_factory=list)
    kept: list[dict[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when nothing failed."""
        return not self.errors


def parse_timestamp(value: Any) -> float | None:
    """Epoch seconds of an ISO-8601 / RFC 3339 time (or a datetime); None when absent or unreadable."""
    if isinstance(value, datetime):
        return value.timestamp()
    text = str(value or "").strip()
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class GarbageCollector:
    """Finds and removes leaked instances, Nodes and launch templates of one cluster.

    ``registration_timeout_seconds``: an instance younger than this is a launch in progress.
    ``launch_template_grace_seconds``: a template younger than this may be about to be used.
    ``disrupted_node_grace_seconds``: how long a termination workflow may hold a Node whose instance is
    gone before the collector deletes the Node itself. ``clock`` gives epoch seconds. ``nodes``: where
    the Node objects come from (the cluster cache's, read once per collection); default: a LIST.
    ``list_every_seconds``: reuse the last listing of live instances that long (0: list every collection).
    """

    def __init__(
        self,
        kube: KubeCluster,
        cloud: InventoryCloud,
        state: StateStore,
        *,
        registration_timeout_seconds: float = DEFAULT_REGISTRATION_TIMEOUT_SECONDS,
        launch_template_grace_seconds: float = DEFAULT_LAUNCH_TEMPLATE_GRACE_SECONDS,
        disrupted_node_grace_seconds: float = DEFAULT_DISRUPTED_NODE_GRACE_SECONDS,
        claim_ttl_seconds: float = TERMINATED_CLAIM_TTL_SECONDS,
        metrics: MetricsSink | None = None,
        logger: logging.Logger | Any = None,
        clock: Callable[[], float] = time.time,
        nodes: Callable[[], Sequence[Mapping[str, Any]]] | None = None,
        list_every_seconds: float = 0.0,
    ) -> None:
        self.kube = kube
        self.cloud = cloud
        self.state = state
        self.nodes = nodes
        self.registration_timeout_seconds = registration_timeout_seconds
        self.launch_template_grace_seconds = launch_template_grace_seconds
        self.disrupted_node_grace_seconds = disrupted_node_grace_seconds
        self.claim_ttl_seconds = claim_ttl_seconds
        self.metrics = metrics or NullMetrics()
        self.log = logger or log
        self.clock = clock
        self.claims = StoreClaimBook(state.nodeclaims, clock=clock, ttl_seconds=claim_ttl_seconds)
        self.list_every_seconds = list_every_seconds
        self._live: list[Instance] | None = None
        self._listing: tuple[float, list[Instance]] | None = None  # (when, what) of the last listing
        self._fresh = False  # this collection listed the instances itself
        self._records: list[NodeClaimRecord] | None = None
        self._nodes: list[Mapping[str, Any]] | None = None

    def collect(self) -> GcReport:
        """Run the three sweeps; a failing one is reported and the others still run."""
        report = GcReport()
        # Fresh reads every pass: the cluster changes between passes.
        self._live = None
        self._fresh = False
        self._records = None
        self._nodes = None
        for name, sweep in (
            ("instances", self._collect_instances),
            ("nodes", self._collect_nodes),
            ("launch templates", self._collect_launch_templates),
        ):
            try:
                sweep(report)
            except Exception as error:
                self._error(report, f"{name}: {type(error).__name__}: {error}", sweep=name)
        return report

    # -- shared reads ------------------------------------------------------------------------------------

    def _live_instances(self, *, fresh: bool = False) -> list[Instance]:
        """The live instances: this collection's listing, or the last one while it is young enough
        (``fresh``: a listing made by this collection)."""
        if self._live is None or (fresh and not self._fresh):
            now = self.clock()
            if (
                not fresh
                and self._listing is not None
                and 0 <= now - self._listing[0] < self.list_every_seconds
            ):
                self._live = self._listing[1]
            else:
                self._live = list(self.cloud.list())
                self._listing = (now, self._live)
                self._fresh = True
        return self._live

    def forget_listing(self) -> None:
        """List the instances again at the next collection."""
        self._listing = None

    def _node_objects(self) -> list[Mapping[str, Any]]:
        if self._nodes is None:
            self._nodes = list(self.nodes() if self.nodes is not None else self.kube.list_nodes())
        return self._nodes

    def _claim_records(self) -> list[NodeClaimRecord]:
        if self._records is None:
            self._records = self.state.nodeclaims.list()
        return self._records

    # -- 1. instances ------------------------------------------------------------------------------------

    def _collect_instances(self, report: GcReport) -> None:
        listed = self._live_instances()
        fresh = self._fresh
        live = [i for i in listed if i.nodepool]
        if fresh:  # a reused listing was reported when it was made
            for impostor in (i for i in listed if not i.nodepool):
                self._impostor(report, impostor)
        if not live:
            return
        nodes = nodes_by_instance(self._node_objects())
        records = {r.id: r for r in self._claim_records()}
        # A batched launch tags each instance with its claim in a second call, which can fail: an active
        # claim naming the instance counts as well as the tag.
        claimed = {r.instance_id for r in records.values() if r.active and r.instance_id}
        now = self.clock()
        for instance in live:
            if instance.id in nodes or instance.id in claimed:
                continue
            launched = parse_timestamp(instance.launch_time)
            if launched is None or now - launched < self.registration_timeout_seconds:
                continue  # a launch in progress (or a time we cannot read: do nothing rather than guess)
            record = records.get(instance.nodeclaim) if instance.nodeclaim else None
            if record is not None and record.active and record.instance_id in ("", instance.id):
                # The provisioner follows its in-flight claims (and times them out); a registered claim
                # whose Node vanished is the kubelet's to re-create.
                continue
            try:
                self._terminate_orphan(instance, record, now - launched, report)
            except Exception as error:
                self._error(
                    report, f"instance {instance.id}: {type(error).__name__}: {error}", sweep="instances"
                )

    def _terminate_orphan(
        self, instance: Instance, record: NodeClaimRecord | None, age: float, report: GcReport
    ) -> None:
        claim_id = instance.nodeclaim
        if claim_id:
            # Re-read the claim just before acting: the provisioner may have adopted it since the listing.
            fresh = self.state.nodeclaims.get(claim_id)
            if fresh is not None and fresh.active and fresh.instance_id in ("", instance.id):
                return
            record = fresh
        if record is None:
            why = "no NodeClaim record" if claim_id else "no nodeclaim tag"
        elif record.active:
            why = f"duplicate: NodeClaim {record.id} belongs to {record.instance_id}"
        else:
            why = f"NodeClaim {record.id} is {record.status}"
        self.cloud.terminate([instance.id])
        if self._listing is not None:  # a kept listing does not offer it again
            self._listing = (self._listing[0], [i for i in self._listing[1] if i.id != instance.id])
        report.terminated_instances.append(instance.id)
        self.metrics.add(m.GARBAGE_COLLECTED, 1, COUNT, {"Kind": INSTANCE})
        self.log.warning(
            "orphaned instance terminated",
            extra={
                "instanceId": instance.id,
                "nodeclaim": claim_id,
                "why": why,
                "secondsSinceLaunch": round(age),
                "instanceType": instance.instance_type,
                "zone": instance.zone,
            },
        )
        # A claim that failed while its instance was in fact created: record where the instance went.
        if (
            record is not None
            and record.status == ClaimStatus.FAILED
            and self.state.nodeclaims.transition(
                record.id,
                ClaimStatus.FAILED,
                ClaimStatus.TERMINATED,
                reason=f"garbage collected: instance {instance.id} never became a node",
                instance_id=record.instance_id or instance.id,
                expires_at=int(self.clock() + self.claim_ttl_seconds),
            )
        ):
            report.finalized_claims.append(record.id)

    # -- 2. nodes ----------------------------------------------------------------------------------------

    def _collect_nodes(self, report: GcReport) -> None:
        ours: dict[str, Mapping[str, Any]] = {}  # instance id → Node
        now = self.clock()
        for obj in self._node_objects():
            meta = obj.get("metadata") or {}
            if wk.NODEPOOL not in (meta.get("labels") or {}):
                continue  # not a NodePool's node: another system's
            provider_id = str((obj.get("spec") or {}).get("providerID") or "")
            instance_id = instance_id_of(provider_id)
            if not instance_id:
                created = parse_timestamp(meta.get("creationTimestamp"))
                if (
                    not provider_id
                    and created is not None
                    and now - created >= self.registration_timeout_seconds
                ):
                    # Not an instance we can check: a human (or another tool) has to look at it.
                    self.log.warning(
                        "NodePool node without a providerID; left alone",
                        extra={"node": meta.get("name"), "ageSeconds": round(now - created)},
                    )
                continue
            ours[instance_id] = obj
        live = {i.id for i in self._live_instances()}
        suspects = {i: n for i, n in ours.items() if i not in live}
        if not suspects:
            return
        found = self.cloud.describe_any(suspects)
        by_instance = {r.instance_id: r for r in self._claim_records() if r.instance_id}
        for instance_id, node in sorted(suspects.items()):
            name = str((node.get("metadata") or {}).get("name") or "")
            instance = found.get(instance_id)
            record = by_instance.get(instance_id)
            if instance is not None:
                if instance.cluster != self.state.cluster:
                    self._keep(report, NODE, name, f"instance {instance_id} is not this cluster's")
                    continue
                if instance.state in LIVE_STATES:
                    continue  # launched or listed after our listing: alive
                if instance.state not in GONE_STATES:
                    self._keep(report, NODE, name, f"instance {instance_id} is {instance.state}")
                    continue
                why = f"instance {instance_id} is {instance.state}"
            elif record is not None:
                # EC2 forgets terminated instances after a while; our claim record proves it was ours.
                why = f"instance {instance_id} no longer exists"
            else:
                self._keep(report, NODE, name, f"instance {instance_id} unknown to EC2 and to our NodeClaims")
                continue
            try:
                if self._under_termination(node, now):
                    self._keep(report, NODE, name, "a termination workflow is handling it")
                    continue
                claim_id = (instance.nodeclaim if instance is not None else "") or (
                    record.id if record else ""
                )
                self._delete_node(node, claim_id, why, report)
            except Exception as error:
                self._error(report, f"node {name}: {type(error).__name__}: {error}", sweep="nodes")

    def _under_termination(self, node: Mapping[str, Any], now: float) -> bool:
        """True while a disrupted (workflow-held) node is within its grace period."""
        taint = next(
            (
                t
                for t in (node.get("spec") or {}).get("taints") or []
                if t.get("key") == DISRUPTED_TAINT["key"] and t.get("effect") == DISRUPTED_TAINT["effect"]
            ),
            None,
        )
        if taint is None:
            return False
        meta = node.get("metadata") or {}
        since = parse_timestamp(taint.get("timeAdded"))
        if since is None:
            since = parse_timestamp((meta.get("annotations") or {}).get(ORPHANED_SINCE_ANNOTATION))
        if since is None:
            # First sighting: start the clock on the node itself, so the next invocation sees it.
            stamp = datetime.fromtimestamp(now, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            self.kube.patch_annotations(
                NODES, str(meta.get("name") or ""), {ORPHANED_SINCE_ANNOTATION: stamp}
            )
            return True
        return now - since < self.disrupted_node_grace_seconds

    def _delete_node(self, node: Mapping[str, Any], claim_id: str, why: str, report: GcReport) -> None:
        meta = node.get("metadata") or {}
        name = str(meta.get("name") or "")
        # The instance is gone, so nothing will ever report its pods finished: delete them outright.
        pods = 0
        for pod in self.kube.list_pods_on_node(name):
            pod_meta = pod.get("metadata") or {}
            if self.kube.delete_pod(
                pod_meta.get("namespace") or "default",
                pod_meta["name"],
                grace_period_seconds=0,
                uid=pod_meta.get("uid"),
            ):
                pods += 1
        deleted = self.kube.delete_node(name, uid=meta.get("uid"))
        # Its termination finalizer would keep the Node Terminating for ever: the instance is gone already.
        release_node(self.kube, name, str(meta.get("uid") or ""))
        finalized = bool(claim_id) and self.claims.finalize(claim_id, f"garbage collected: {why}")
        if finalized:
            report.finalized_claims.append(claim_id)
        if deleted:
            report.deleted_nodes.append(name)
            self.metrics.add(m.GARBAGE_COLLECTED, 1, COUNT, {"Kind": NODE})
        self.log.warning(
            "node of a vanished instance deleted",
            extra={
                "node": name,
                "why": why,
                "podsDeleted": pods,
                "nodeclaim": claim_id,
                "claimFinalized": finalized,
            },
        )

    # -- 3. launch templates -----------------------------------------------------------------------------

    def _collect_launch_templates(self, report: GcReport) -> None:
        templates = list(self.cloud.launch_templates())
        if not templates:
            return
        now = self.clock()
        old = [
            t for t in templates if t.created_at and now - t.created_at >= self.launch_template_grace_seconds
        ]
        if not old:
            return
        if not self._fresh and self.list_every_seconds > 0:
            return  # decided only on a listing of this collection: the next full listing decides
        live = self._live_instances(fresh=True)
        in_use = {i.tags[LAUNCH_TEMPLATE_ID_TAG] for i in live if i.tags.get(LAUNCH_TEMPLATE_ID_TAG)}
        # EC2 tags instances with their template; one without the tag (moto's CreateFleet, or a tag lost)
        # could come from any template booting its AMI, so those templates are kept.
        untagged_images = {i.image_id for i in live if not i.tags.get(LAUNCH_TEMPLATE_ID_TAG)}
        for template in old:
            if template.id in in_use:
                continue
            try:
                if untagged_images and self.cloud.launch_template_image(template.id) in untagged_images:
                    self._keep(
                        report, LAUNCH_TEMPLATE, template.name, "an untagged live instance boots its AMI"
                    )
                    continue
                if self.cloud.delete_launch_template(template.name):
                    report.deleted_launch_templates.append(template.name)
                    self.metrics.add(m.GARBAGE_COLLECTED, 1, COUNT, {"Kind": LAUNCH_TEMPLATE})
                    self.log.info(
                        "unused launch template deleted",
                        extra={
                            "launchTemplate": template.name,
                            "launchTemplateId": template.id,
                            "ageSeconds": round(now - template.created_at),
                        },
                    )
            except Exception as error:
                self._error(
                    report,
                    f"launch template {template.name}: {type(error).__name__}: {error}",
                    sweep="launch templates",
                )

    # -- reporting ---------------------------------------------------------------------------------------

    def _impostor(self, report: GcReport, instance: Instance) -> None:
        why = f"tagged {CLUSTER_TAG} without {NODEPOOL_TAG}: not launched by this controller"
        report.kept.append({"kind": INSTANCE, "name": instance.id, "why": why})
        self.metrics.add(m.IMPOSTORS_SEEN, 1, COUNT, {"Kind": INSTANCE})
        self.log.warning(
            "instance tagged as this cluster's by someone else; left alone",
            extra={
                "instanceId": instance.id,
                "why": why,
                "nodeclaim": instance.nodeclaim,
                "launchTime": instance.launch_time,
                "instanceType": instance.instance_type,
                "zone": instance.zone,
            },
        )

    def _keep(self, report: GcReport, kind: str, name: str, why: str) -> None:
        report.kept.append({"kind": kind, "name": name, "why": why})
        self.log.info("garbage candidate kept", extra={"kind": kind, "name": name, "why": why})

    def _error(self, report: GcReport, message: str, *, sweep: str) -> None:
        report.errors.append(message)
        self.metrics.add(m.DISRUPTION_ERRORS, 1, COUNT, {"Stage": "GarbageCollection"})
        self.log.error("garbage collection step failed", extra={"sweep": sweep, "error": message})
