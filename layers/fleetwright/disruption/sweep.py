"""The sweep: nodes left cordoned and tainted ``karpenter.sh/disrupted`` with nobody working on them.

A termination workflow that failed, timed out, was aborted or never started after its node was marked
leaves the node cordoned with its instance running; the node would count as "being disrupted" for ever
and hold its NodePool's disruption budget. Every disruption pass runs the sweep before planning, so a node
it gives back counts as a normal node in the same pass.

A node is looked at when it carries Fleetwright's taint (and a NodePool label), no RUNNING execution of
the termination workflow has a name starting with its instance id (``<instance id>-``, continued
executions included), and it was marked more than ``grace_seconds`` ago (the ``fleetwright.io/disrupted-at``
annotation; for a node without it, the sweep's first sighting, kept in the state table). The grace covers
the seconds between a workflow's start and its cordon, and the hand-over between continued executions.
Then (docs/disruption.md):

- Node being deleted: left to the deletion retirer (``deletion.py``), which never gives it back;
- instance gone (or stopping): left to the garbage collector and the interruption handler;
- instance running and an interruption record for it still applies (attempts left, deadline not past):
  **re-driven**, a new attempt of the workflow from the stored request;
- otherwise: **uncordoned** (``unmark_disrupted``: what Fleetwright added goes; a cordon the node had
  before it was marked stays), with a Warning event on the Node, the ``NodesUncordonedBySweep`` metric and
  a log line.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

from fleetwright.claims.registration import instance_id_of
from fleetwright.cloud.provider import InstanceReader
from fleetwright.disruption import metrics as m
from fleetwright.disruption.gc import parse_timestamp
from fleetwright.kube import reasons
from fleetwright.kube.cluster import DISRUPTED_AT_ANNOTATION, DISRUPTED_TAINT, KubeCluster
from fleetwright.kube.events import EventRecorder, ObjectRef
from fleetwright.model import labels as wk
from fleetwright.observability.metrics import COUNT, MetricsSink, NullMetrics
from fleetwright.state.interruptions import GAVE_UP, STARTED, InterruptionRecord, InterruptionRecords
from fleetwright.state.table import PARTITION_KEY, SORT_KEY, TTL_ATTRIBUTE, DynamoTable
from fleetwright.workflow.request import TerminationRequest
from fleetwright.workflow.starter import execution_name, instance_prefix

if TYPE_CHECKING:
    from fleetwright.kube.cache import ClusterCache

log = logging.getLogger(__name__)

DEFAULT_GRACE_SECONDS: Final = 300.0
DEFAULT_MAX_ATTEMPTS: Final = 5
RUNNING_STATES: Final = frozenset({"pending", "running"})
SIGHTING_TTL_SECONDS: Final = 7 * 86400.0

# What the sweep did with a node.
REDRIVEN: Final = "redriven"
UNCORDONED: Final = "uncordoned"


class SweepWorkflows(Protocol):
    """The termination workflow as the sweep uses it (``StepFunctionsStarter``)."""

    def running(self) -> list[str]:
        """Names of the RUNNING executions."""
        ...

    def start(self, name: str, request: TerminationRequest) -> Any:
        """Start an execution called ``name``."""
        ...


@dataclass(slots=True)
class SweepReport:
    """Nodes re-driven (node → execution name), uncordoned, and still within their grace or held by a
    running workflow (``waiting``); ``errors`` per node."""

    redriven: dict[str, str] = field(default_factory=dict)
    uncordoned: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class Sightings:
    """When the sweep first saw a marked node without the ``disrupted-at`` annotation (partition
    ``SWEEP#<cluster>``, sort key = node name), so its grace survives across invocations."""

    def __init__(self, table: DynamoTable, cluster: str) -> None:
        self.table = table
        self.pk = f"SWEEP#{cluster}"

    def all(self) -> dict[str, tuple[float, str]]:
        """node → (first seen, instance id)."""
        return {
            str(i[SORT_KEY]): (float(i.get("since", 0.0)), str(i.get("instanceId", "")))
            for i in self.table.query(self.pk)
        }

    def record(self, node: str, instance_id: str, since: float) -> None:
        """Remember the first sighting (an earlier one of the same instance wins)."""
        self.table.put(
            {
                PARTITION_KEY: self.pk,
                SORT_KEY: node,
                "since": since,
                "instanceId": instance_id,
                TTL_ATTRIBUTE: math.ceil(since + SIGHTING_TTL_SECONDS),
            },
            condition="attribute_not_exists(#pk) OR #iid <> :iid",
            names={"#pk": PARTITION_KEY, "#iid": "instanceId"},
            values={":iid": instance_id},
        )

    def forget(self, node: str) -> None:
        """Drop the sighting of ``node``."""
        self.table.delete(self.pk, node)


def disrupted(node: Mapping[str, Any]) -> bool:
    """The node carries Fleetwright's ``karpenter.sh/disrupted:NoSchedule`` taint and a NodePool label."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    taints = (node.get("spec") or {}).get("taints") or []
    return wk.NODEPOOL in labels and any(
        t.get("key") == DISRUPTED_TAINT["key"] and t.get("effect") == DISRUPTED_TAINT["effect"]
        for t in taints
    )


class DisruptionSweep:
    """Gives back (or re-drives) marked nodes nobody is working on; see the module docstring.

    ``max_attempts`` bounds the attempts of one interruption (as the interruption handler does).
    ``clock`` gives epoch seconds. With ``cache`` the nodes are read from it, synced first (so a node the
    deletion retirer just deleted or patched is seen as it is now).
    """

    def __init__(
        self,
        kube: KubeCluster,
        cloud: InstanceReader,
        workflows: SweepWorkflows,
        records: InterruptionRecords,
        sightings: Sightings,
        *,
        grace_seconds: float = DEFAULT_GRACE_SECONDS,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        metrics: MetricsSink | None = None,
        logger: logging.Logger | Any = None,
        clock: Callable[[], float] = time.time,
        cache: ClusterCache | None = None,
        events: EventRecorder | None = None,
    ) -> None:
        self.kube = kube
        self.cache = cache
        self.cloud = cloud
        self.workflows = workflows
        self.records = records
        self.sightings = sightings
        self.grace_seconds = grace_seconds
        self.max_attempts = max_attempts
        self.metrics = metrics or NullMetrics()
        self.log = logger or log
        self.clock = clock
        self.events = events or EventRecorder(kube.client, metrics=self.metrics, logger=self.log)

    def sweep(self) -> SweepReport:
        """One sweep over the cluster's nodes."""
        report = SweepReport()
        now = self.clock()
        if self.cache is not None:
            self.cache.sync(reuse=True)
            nodes = self.cache.node_objects()
        else:
            nodes = self.kube.list_nodes()
        marked = [n for n in nodes if disrupted(n)]
        seen = self.sightings.all()
        names = {str((n.get("metadata") or {}).get("name") or "") for n in marked}
        for gone in set(seen) - names:
            self.sightings.forget(gone)
        if not marked:
            return report
        running = self.workflows.running()
        for node in marked:
            meta = node.get("metadata") or {}
            name = str(meta.get("name") or "")
            instance_id = instance_id_of(str((node.get("spec") or {}).get("providerID") or ""))
            if not instance_id:
                continue
            if meta.get("deletionTimestamp"):
                report.waiting.append(name)  # being deleted: the deletion retirer's (disruption/deletion.py)
                continue
            try:
                if any(n.startswith(instance_prefix(instance_id)) for n in running):
                    report.waiting.append(name)
                    continue
                since = parse_timestamp((meta.get("annotations") or {}).get(DISRUPTED_AT_ANNOTATION))
                if since is None:
                    first, seen_instance = seen.get(name, (0.0, ""))
                    if seen_instance != instance_id:
                        self.sightings.record(name, instance_id, now)
                        first = now
                    since = first
                if now - since < self.grace_seconds:
                    report.waiting.append(name)
                    continue
                self._settle(node, name, instance_id, now, report)
            except Exception as error:
                report.errors.append(f"{name}: {type(error).__name__}: {error}")
                self.metrics.add(m.DISRUPTION_ERRORS, 1, COUNT, {"Stage": "Sweep"})
                self.log.exception("sweep failed for a node", extra={"node": name, "error": str(error)})
        return report

    def _settle(
        self, node: Mapping[str, Any], name: str, instance_id: str, now: float, report: SweepReport
    ) -> None:
        instance = self.cloud.describe([instance_id]).get(instance_id)
        if instance is None or instance.state not in RUNNING_STATES:
            # Gone: a Node without an instance is the garbage collector's; a stopping one the handler's.
            report.waiting.append(name)
            return
        record = self._applicable(instance_id, now)
        if record is not None:
            execution = self._redrive(record, now)
            if execution:
                report.redriven[name] = execution
                return
        self._uncordon(node, name, instance_id, now, report)

    def _applicable(self, instance_id: str, now: float) -> InterruptionRecord | None:
        """An interruption of the instance that still calls for its termination."""
        for record in self.records.for_instance(instance_id):
            if (
                record.status != GAVE_UP
                and record.request
                and record.attempt < self.max_attempts
                and now < record.deadline
            ):
                return record
        return None

    def _redrive(self, record: InterruptionRecord, now: float) -> str:
        """A new attempt from the stored request; "" when another sweep or delivery took it first."""
        taken = self.records.take_over(record, now)
        if taken is None:
            return ""
        name = execution_name(record.instance_id, record.kind, taken.attempt)
        request = TerminationRequest.model_validate(record.request)
        self.records.update(taken, execution=name)
        self.workflows.start(name, request)
        self.records.update(taken, status=STARTED)
        self.metrics.add(m.INTERRUPTIONS_REDRIVEN, 1, COUNT, {"Kind": record.kind})
        self.log.warning(
            "interruption workflow re-driven by the sweep",
            extra={
                "instanceId": record.instance_id,
                "kind": record.kind,
                "attempt": taken.attempt,
                "execution": name,
            },
        )
        return name

    def _uncordon(
        self, node: Mapping[str, Any], name: str, instance_id: str, now: float, report: SweepReport
    ) -> None:
        updated = self.kube.unmark_disrupted(name)
        self.sightings.forget(name)
        if updated is None:
            return
        report.uncordoned.append(name)
        self.metrics.add(m.NODES_UNCORDONED_BY_SWEEP, 1, COUNT)
        kept = bool((updated.get("spec") or {}).get("unschedulable"))
        given = (
            "removed the node's disruption taint (its own cordon stays)" if kept else "uncordoned the node"
        )
        message = (
            f"Fleetwright {given}: it was marked for disruption but no termination workflow is "
            f"running for instance {instance_id} and nothing calls for its termination"
        )
        self.events.publish(reasons.disruption_abandoned(ObjectRef.of(updated, kind="Node"), message))
        self.log.warning(
            "node left marked without a workflow given back",
            extra={"node": name, "instanceId": instance_id, "cordonKept": kept},
        )
