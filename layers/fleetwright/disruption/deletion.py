"""Deletion retires: a Fleetwright node that is deleted, whose NodeClaim is deleted, or whose NodePool is
gone, is drained and its instance terminated by the termination workflow, as Karpenter's termination
controller does.

Fleetwright puts the ``karpenter.sh/termination`` finalizer on every Node it registers
(:mod:`fleetwright.claims.registration`), so ``kubectl delete node`` leaves the Node Terminating
(``deletionTimestamp`` set) instead of removing it. Every disruption pass, first thing:

1. the Nodes of a NodePool that no longer exists (neither among the configured NodePools nor among the
   cluster's NodePool objects) and of a NodeClaim object being deleted are deleted the same way (the
   finalizer is added first when a Node lacks it), as Karpenter's NodeClaims, owned by their NodePool, are
   garbage-collected; a NodeClaim being deleted whose claim has no Node gets a workflow for its instance
   alone, or, when the claim ended, just its finalizer lifted;
2. for every Node of ours being deleted with no termination workflow running on its instance, one is
   started: cordon, drain (PodDisruptionBudgets respected; pods still there at the node's
   ``terminationGracePeriod`` (its NodeClaim's, else its NodePool's) after the deletion are deleted;
   without one the drain waits as long as it takes), terminate, then the workflow removes the finalizer
   and the Node goes away.

Why in the disruption pass: it already lists every node, holds the workflow starter and runs the sweep, so
one place decides which node has a workflow (the provisioner's Lambda cannot start workflows); a deletion
waits at most one pass (a minute). Never twice for one node: executions are named
``<instance id>-deleted-<attempt>`` and none starts while any execution about the instance runs (Step
Functions refuses a name twice, so two passes seeing one deletion start one workflow). A workflow that
failed is followed by the next attempt after a growing pause (1, 2, 4 ... minutes, then hourly), measured
from the deletion: the Node keeps its finalizer and its cordon until its instance is gone. A Node whose
instance is already gone is the garbage collector's (it deletes the pods and lifts the finalizer).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, Protocol

from fleetwright.claims.registration import TERMINATION_FINALIZER, has_finalizer, instance_id_of
from fleetwright.claims.terms import claim_terms
from fleetwright.cloud.provider import InstanceReader
from fleetwright.disruption.gc import parse_timestamp
from fleetwright.kube.cluster import KubeCluster
from fleetwright.kube.errors import KubeApiError
from fleetwright.kube.resources import NODE_CLAIMS, NODE_POOLS, NODES
from fleetwright.model import labels as wk
from fleetwright.model.nodepool import NodePool
from fleetwright.observability.metrics import COUNT, MetricsSink, NullMetrics
from fleetwright.state.nodeclaims import NodeClaimRecord, NodeClaimStore
from fleetwright.workflow.request import (
    DEFAULT_DRAIN_INTERVAL_SECONDS,
    DEFAULT_POLL_SECONDS,
    DELETE_AT_DEADLINE,
    TerminationRequest,
)
from fleetwright.workflow.starter import RUNNING, StartResult, execution_name, instance_prefix

if TYPE_CHECKING:
    from fleetwright.kube.cache import ClusterCache

log = logging.getLogger(__name__)

JsonObject = dict[str, Any]

# Workflow reasons (the request's ``reason``, the metric's dimension).
NODE_DELETED: Final = "NodeDeleted"
NODECLAIM_DELETED: Final = "NodeClaimDeleted"
NODEPOOL_DELETED: Final = "NodePoolDeleted"
EXECUTION_REASON: Final = "deleted"  # one name family whatever the reason: one workflow per instance

# Metrics.
NODES_RETIRED: Final = "NodesRetired"  # workflows started for deleted nodes (dimension Reason)
DELETION_RETRIES: Final = "DeletionWorkflowRetries"  # attempts after the first
DELETION_ERRORS: Final = "DeletionErrors"

# Without a terminationGracePeriod the drain waits for PodDisruptionBudgets as long as it takes (the
# workflow continues in new executions); this far-off deadline stands for "never".
NO_DEADLINE_SECONDS: Final = 10 * 365 * 86400
FIRST_RETRY_SECONDS: Final = 60.0
MAX_RETRY_SECONDS: Final = 3600.0
MAX_ATTEMPTS_LOOKED_UP: Final = 1000
GONE_STATES: Final = frozenset({"shutting-down", "terminated"})


class RetireWorkflows(Protocol):
    """The termination workflow as the retirer uses it (``StepFunctionsStarter``, ``DeferredWorkflows``)."""

    def running(self) -> list[str]:
        """Names of the RUNNING executions."""
        ...

    def status(self, name: str) -> str | None:
        """The status of the execution called ``name``; None when there is none."""
        ...

    def start(self, name: str, request: TerminationRequest) -> StartResult:
        """Start an execution called ``name``."""
        ...


@dataclass(slots=True)
class RetireReport:
    """What one pass did: workflows started (node → execution), Nodes whose deletion it requested
    (their NodePool or NodeClaim is gone: node → reason), nodes already in a workflow's hands, nodes
    waiting (instance gone, or a failed attempt's pause), and errors per node."""

    started: dict[str, str] = field(default_factory=dict)
    deleted: dict[str, str] = field(default_factory=dict)
    running: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def retry_after(attempt: int) -> float:
    """Seconds after the deletion before attempt ``attempt`` (≥ 1) may start: 0, 1, 3, 7, 15, 31, 63
    minutes, then one more hour per attempt."""
    total, pause = 0.0, FIRST_RETRY_SECONDS
    for _ in range(attempt - 1):
        total += pause
        pause = min(MAX_RETRY_SECONDS, pause * 2)
    return total


def deleting(obj: Mapping[str, Any]) -> bool:
    """The object has a ``deletionTimestamp``."""
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


class DeletionRetirer:
    """Starts the termination workflow for deleted nodes; see the module docstring.

    ``nodepools`` gives the configured NodePools (read at each pass); a node's NodePool is gone when it
    is neither among them nor among the cluster's NodePool objects. With none at all, or when the
    cluster's NodePools cannot be listed, nothing is retired for a missing NodePool: a configuration that
    could not be read must not drain the fleet. ``clock`` gives epoch seconds. With ``cache`` (synced
    when a pass starts) the Nodes and NodeClaim objects are read from it instead of listed.
    """

    def __init__(
        self,
        kube: KubeCluster,
        cloud: InstanceReader,
        workflows: RetireWorkflows,
        claims: NodeClaimStore,
        nodepools: Callable[[], Sequence[NodePool]],
        *,
        metrics: MetricsSink | None = None,
        logger: logging.Logger | Any = None,
        clock: Callable[[], float] = time.time,
        drain_interval_seconds: int = DEFAULT_DRAIN_INTERVAL_SECONDS,
        poll_seconds: int = DEFAULT_POLL_SECONDS,
        cache: ClusterCache | None = None,
    ) -> None:
        self.kube = kube
        self.cache = cache
        self.cloud = cloud
        self.workflows = workflows
        self.claims = claims
        self.nodepools = nodepools
        self.metrics = metrics or NullMetrics()
        self.log = logger or log
        self.clock = clock
        self.drain_interval_seconds = drain_interval_seconds
        self.poll_seconds = poll_seconds

    def retire(self) -> RetireReport:
        """One pass over the cluster's nodes (and NodeClaim objects)."""
        report = RetireReport()
        if self.cache is not None:
            self.cache.sync()
        records = {r.instance_id: r for r in self.claims.list() if r.instance_id}
        pools = {np.name: np for np in self.nodepools()}
        existing = self._existing_pools(pools)
        claims_deleting = self._claims_being_deleted()
        retiring: list[tuple[JsonObject, str]] = []
        with_node: set[str] = set()  # claims whose Node exists
        for node in self.kube.list_nodes() if self.cache is None else self.cache.node_objects():
            name = str((node.get("metadata") or {}).get("name") or "")
            instance_id = instance_id_of(str((node.get("spec") or {}).get("providerID") or ""))
            record = records.get(instance_id) if instance_id else None
            if record is not None:
                with_node.add(record.id)
            if deleting(node):
                if has_finalizer(node):
                    retiring.append((node, self._reason(node, record, existing, claims_deleting)))
                continue
            if record is None or not record.active:
                continue  # not ours, or its claim ended (a workflow or the garbage collector has it)
            why = self._why_retire(node, record, existing, claims_deleting)
            if not why:
                continue
            try:
                deleted = self._delete(node)
            except Exception as error:
                self._error(report, name, error)
                continue
            if deleted is not None:
                report.deleted[name] = why
                self.log.warning(
                    "node deleted: its NodePool or NodeClaim is gone",
                    extra={
                        "node": name,
                        "instanceId": instance_id,
                        "reason": why,
                        "nodePool": record.nodepool,
                    },
                )
                retiring.append((deleted, why))
        if not retiring and not set(claims_deleting) - with_node:
            return report
        running = self.workflows.running()
        gone = self._gone_instances(retiring)
        for node, reason in retiring:
            name = str((node.get("metadata") or {}).get("name") or "")
            try:
                self._retire(node, reason, records, pools, running, gone, report)
            except Exception as error:
                self._error(report, name, error)
        self._claims_without_node(claims_deleting, with_node, records, pools, running, report)
        return report

    # -- deciding ----------------------------------------------------------------------------------------

    def _existing_pools(self, configured: Mapping[str, NodePool]) -> set[str]:
        """The NodePools in use: the configured ones and the cluster's NodePool objects not being deleted
        (either source keeps a pool: a pass whose NodePools fell back to the documents does not retire the
        cluster's). Empty when the cluster cannot be read: nothing is retired for a missing NodePool then."""
        try:
            listing = self.kube.client.list(NODE_POOLS)
            in_cluster = {str(o["metadata"]["name"]) for o in listing.items if not deleting(o)}
        except KubeApiError as error:
            if not error.not_found:
                self.log.warning(
                    "cannot list NodePools; no node is retired for its NodePool this pass",
                    extra={"error": str(error)},
                )
                return set()
            in_cluster = set()
        except Exception as error:
            self.log.warning(
                "cannot list NodePools; no node is retired for its NodePool this pass",
                extra={"error": f"{type(error).__name__}: {error}"},
            )
            return set()
        return set(configured) | in_cluster

    def _claims_being_deleted(self) -> dict[str, float]:
        """The NodeClaim objects being deleted, by name, with their deletion time (none when the NodeClaim
        CRD is not installed)."""
        if self.cache is not None:
            items = self.cache.nodeclaim_objects() or []  # None: the CRD is not installed
        else:
            try:
                items = self.kube.client.list(NODE_CLAIMS).items
            except KubeApiError as error:
                if error.not_found:
                    return {}
                raise
        return {
            str(o["metadata"]["name"]): parse_timestamp(o["metadata"]["deletionTimestamp"]) or self.clock()
            for o in items
            if deleting(o)
        }

    @staticmethod
    def _why_retire(
        node: Mapping[str, Any],
        record: NodeClaimRecord,
        pools: set[str],
        claims_deleting: Mapping[str, float],
    ) -> str:
        if record.id in claims_deleting:
            return NODECLAIM_DELETED
        pool = str(((node.get("metadata") or {}).get("labels") or {}).get(wk.NODEPOOL) or record.nodepool)
        if pools and pool not in pools:
            return NODEPOOL_DELETED
        return ""

    def _reason(
        self,
        node: Mapping[str, Any],
        record: NodeClaimRecord | None,
        pools: set[str],
        claims_deleting: Mapping[str, float],
    ) -> str:
        if record is None:
            return NODE_DELETED
        return self._why_retire(node, record, pools, claims_deleting) or NODE_DELETED

    def _delete(self, node: Mapping[str, Any]) -> JsonObject | None:
        """Delete the Node, adding the finalizer first so that it stays until its workflow is done; the
        Node as it then is (None when it vanished)."""
        meta = node.get("metadata") or {}
        name = str(meta.get("name") or "")
        uid = str(meta.get("uid") or "")
        if not has_finalizer(node):
            self.kube.add_finalizer(NODES, name, TERMINATION_FINALIZER)
        if not self.kube.delete_node(name, uid=uid or None):
            return None
        return self.kube.get_node(name)

    def _gone_instances(self, retiring: Sequence[tuple[JsonObject, str]]) -> set[str]:
        ids = {instance_id_of(str((n.get("spec") or {}).get("providerID") or "")) for n, _ in retiring} - {""}
        found = self.cloud.describe(ids) if ids else {}
        return {i for i in ids if found.get(i) is None or found[i].state in GONE_STATES}

    # -- acting ------------------------------------------------------------------------------------------

    def _retire(
        self,
        node: Mapping[str, Any],
        reason: str,
        records: Mapping[str, NodeClaimRecord],
        pools: Mapping[str, NodePool],
        running: Sequence[str],
        gone: set[str],
        report: RetireReport,
    ) -> None:
        meta = node.get("metadata") or {}
        name = str(meta.get("name") or "")
        instance_id = instance_id_of(str((node.get("spec") or {}).get("providerID") or ""))
        if not instance_id or instance_id in gone:
            # Nothing left to drain or terminate: the garbage collector deletes the pods and the finalizer.
            # (An instance that is not this cluster's is not described either: another Karpenter's Node with
            # the same finalizer is never drained here.)
            report.waiting.append(name)
            return
        record = records.get(instance_id)
        pool = str((meta.get("labels") or {}).get(wk.NODEPOOL) or (record.nodepool if record else ""))
        deleted_at = parse_timestamp(meta.get("deletionTimestamp")) or self.clock()
        self._start(name, name, instance_id, record, pools.get(pool), reason, deleted_at, running, report)

    def _start(
        self,
        label: str,
        node: str,
        instance_id: str,
        record: NodeClaimRecord | None,
        pool: NodePool | None,
        reason: str,
        deleted_at: float,
        running: Sequence[str],
        report: RetireReport,
    ) -> None:
        """One workflow for ``instance_id`` unless one runs, or a failed attempt's pause is not over
        (``label`` names it in the report: the Node, or ``nodeclaim/<name>`` for a claim without one)."""
        if any(n.startswith(instance_prefix(instance_id)) for n in running):
            report.running.append(label)
            return
        attempt = self._next_attempt(instance_id)
        if attempt is None:
            report.running.append(label)
            return
        if self.clock() - deleted_at < retry_after(attempt):
            report.waiting.append(label)
            return
        # The node's own terminationGracePeriod: its claim's, copied at launch, else its NodePool's.
        grace = claim_terms(record, pool).termination_grace_period
        seconds = float(grace) if grace is not None else float(NO_DEADLINE_SECONDS)
        request = TerminationRequest(
            node=node,
            instance_id=instance_id,
            claim_id=record.id if record is not None else "",
            reason=reason,
            deadline=datetime.fromtimestamp(deleted_at, tz=UTC) + timedelta(seconds=seconds),
            on_deadline=DELETE_AT_DEADLINE,
            drain_interval_seconds=self.drain_interval_seconds,
            poll_seconds=self.poll_seconds,
        )
        execution = execution_name(instance_id, EXECUTION_REASON, attempt)
        started = self.workflows.start(execution, request)
        if not started.started:
            report.running.append(label)  # another pass started it first
            return
        report.started[label] = started.execution
        self.metrics.add(NODES_RETIRED, 1, COUNT, {"Reason": reason})
        if attempt > 1:
            self.metrics.add(DELETION_RETRIES, 1, COUNT)
        self.log.info(
            "termination workflow started for a deleted node",
            extra={
                "node": node,
                "nodeclaim": request.claim_id,
                "instanceId": instance_id,
                "reason": reason,
                "execution": execution,
                "attempt": attempt,
                "deadline": request.to_json()["deadline"],
            },
        )

    def _claims_without_node(
        self,
        claims_deleting: Mapping[str, float],
        seen: set[str],
        records: Mapping[str, NodeClaimRecord],
        pools: Mapping[str, NodePool],
        running: Sequence[str],
        report: RetireReport,
    ) -> None:
        """NodeClaim objects being deleted whose claim has no Node: its instance (if any) is terminated by
        a workflow; a claim that ended, or was never recorded, only needs its finalizer lifted; one still
        launching waits for its instance."""
        by_id = {r.id: r for r in records.values()}
        for name, deleted_at in sorted(claims_deleting.items()):
            if name in seen:
                continue
            label = f"nodeclaim/{name}"
            record = by_id.get(name)
            try:
                if record is None or not record.active:
                    self.kube.remove_finalizer(NODE_CLAIMS, name, TERMINATION_FINALIZER)
                    continue
                if not record.instance_id:
                    report.waiting.append(label)
                    continue
                pool = pools.get(record.nodepool)
                self._start(
                    label,
                    "",
                    record.instance_id,
                    record,
                    pool,
                    NODECLAIM_DELETED,
                    deleted_at,
                    running,
                    report,
                )
            except Exception as error:
                self._error(report, label, error)

    def _next_attempt(self, instance_id: str) -> int | None:
        """The first attempt number no execution has used; None when one is running."""
        for attempt in range(1, MAX_ATTEMPTS_LOOKED_UP + 1):
            status = self.workflows.status(execution_name(instance_id, EXECUTION_REASON, attempt))
            if status is None:
                return attempt
            if status == RUNNING:
                return None
        return None

    def _error(self, report: RetireReport, name: str, error: BaseException) -> None:
        report.errors.append(f"{name}: {type(error).__name__}: {error}")
        self.metrics.add(DELETION_ERRORS, 1, COUNT)
        self.log.error(
            "cannot retire a deleted node; the next pass tries again",
            extra={"node": name, "error": f"{type(error).__name__}: {error}"[:500]},
        )
