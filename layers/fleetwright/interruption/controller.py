"""What Fleetwright does about each interruption event (docs/termination.md has the table).

- **Spot interruption warning**: the offering (type, zone, spot) is marked unavailable, the termination
  workflow starts (deadline: two minutes after the warning, less a margin) and replacement capacity for the
  node's pods is launched at once, so it boots during the notice.
- **Rebalance recommendation**: a Kubernetes event on the Node and a metric; with
  ``replace_on_rebalance`` the node is replaced and then terminated like a scheduled change.
- **State change** (stopping, stopped, shutting-down, terminated): the instance is (nearly) gone, so its
  pods and Node are deleted and its NodeClaim finalized; a stopping/stopped instance is also terminated.
- **AWS Health scheduled change**: replacement first, then the workflow, which waits for the replacement
  and terminates before the scheduled time.

Events about instances without this cluster's ownership tag are acknowledged and ignored, as are warnings
for instances already shutting down or terminated (a late or out-of-order delivery).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from fleetwright.aws.unavailable import UnavailableOfferings
from fleetwright.interruption.events import (
    EventKind,
    HealthEvent,
    InterruptionEvent,
    RebalanceEvent,
    StateChangeEvent,
)
from fleetwright.interruption.replacement import ReplacementLauncher, ReplacementResult
from fleetwright.interruption.workflow import WorkflowStarter, execution_name
from fleetwright.kube.cluster import KubeCluster
from fleetwright.provisioning.observability import COUNT, MetricsSink, NullMetrics
from fleetwright.provisioning.registration import nodes_by_instance
from fleetwright.termination.claims import ClaimBook
from fleetwright.termination.request import TerminationRequest

log = logging.getLogger(__name__)

GONE_STATES = frozenset({"shutting-down", "terminated"})
STOPPED_STATES = frozenset({"stopping", "stopped"})
# An interrupted offering is likely to be refused again for a while; Karpenter-style caches use minutes.
SPOT_UNAVAILABLE_SECONDS = 180.0

# Metric names.
EVENTS_RECEIVED = "InterruptionEvents"
EVENTS_IGNORED = "InterruptionEventsIgnored"
DUPLICATE_EVENTS = "InterruptionDuplicates"
WORKFLOWS_STARTED = "TerminationWorkflowsStarted"
REPLACEMENT_CLAIMS = "ReplacementNodeClaims"
REPLACEMENT_ERRORS = "ReplacementErrors"
REBALANCE_RECOMMENDATIONS = "RebalanceRecommendations"
NODES_CLEANED_UP = "NodesCleanedUp"


class Instances(Protocol):
    """What the controller needs of the cloud provider (``AwsProvider``)."""

    def describe(self, instance_ids: Iterable[str]) -> Mapping[str, Any]:
        """This cluster's instances among ``instance_ids`` (with ``state``, ``instance_type``, ``zone``,
        ``capacity_type``, ``nodeclaim``)."""
        ...

    def terminate(self, instance_ids: Iterable[str]) -> Any:
        """Terminate this cluster's instances."""
        ...


@dataclass(slots=True)
class InterruptionSettings:
    """Timing: ``spot_notice_seconds`` (EC2's notice) less ``deadline_margin_seconds`` is the spot drain
    deadline; a scheduled change is met ``scheduled_change_margin_seconds`` early (at least
    ``minimum_window_seconds`` from now, ``scheduled_change_default_seconds`` when the event names no start
    time); ``rebalance_window_seconds`` is the deadline of an opt-in rebalance replacement. The workflow
    waits ``drain_interval_seconds`` between drain passes and ``poll_seconds`` between instance checks."""

    spot_notice_seconds: float = 120.0
    deadline_margin_seconds: float = 15.0
    scheduled_change_margin_seconds: float = 600.0
    scheduled_change_default_seconds: float = 1800.0
    minimum_window_seconds: float = 120.0
    rebalance_window_seconds: float = 900.0
    replace_on_rebalance: bool = False
    drain_interval_seconds: int = 5
    poll_seconds: int = 5


@dataclass(slots=True)
class Outcome:
    """What was done about one instance named in an event."""

    instance_id: str
    kind: str
    action: str  # workflow-started, duplicate, cleaned-up, recorded, ignored-not-owned, ignored-gone
    node: str = ""
    execution: str = ""
    replacement: ReplacementResult | None = None
    detail: dict[str, Any] = field(default_factory=dict)


class InterruptionController:
    """Acts on interruption events for one cluster.

    ``replacements`` is None when no NodePool configuration is available (nodes are then drained and
    terminated without launching replacements first; the provisioner picks up the evicted pods).
    ``clock`` gives epoch seconds.
    """

    def __init__(
        self,
        *,
        kube: KubeCluster,
        cloud: Instances,
        unavailable: UnavailableOfferings,
        workflow: WorkflowStarter,
        claims: ClaimBook | None,
        replacements: ReplacementLauncher | None,
        settings: InterruptionSettings | None = None,
        metrics: MetricsSink | None = None,
        clock: Callable[[], float] = time.time,
        logger: logging.Logger | Any = None,
    ) -> None:
        self.kube = kube
        self.cloud = cloud
        self.unavailable = unavailable
        self.workflow = workflow
        self.claims = claims
        self.replacements = replacements
        self.settings = settings or InterruptionSettings()
        self.metrics = metrics or NullMetrics()
        self.clock = clock
        self.log = logger or log

    def handle(self, event: InterruptionEvent) -> list[Outcome]:
        """Act on every instance the event names; returns what was done for each."""
        self.metrics.add(EVENTS_RECEIVED, 1, COUNT, {"Kind": str(event.kind)})
        ids = event.instance_ids
        owned = self.cloud.describe(ids) if ids else {}
        outcomes = []
        for instance_id in ids:
            instance = owned.get(instance_id)
            if instance is None:
                outcomes.append(self._ignore(event, instance_id, "ignored-not-owned"))
            elif isinstance(event, StateChangeEvent):
                outcomes.append(self._clean_up(event, instance))
            elif str(getattr(instance, "state", "")) in GONE_STATES:
                # Out of order (the state change came first) or late: the instance is already going.
                outcomes.append(self._ignore(event, instance_id, "ignored-gone"))
            elif isinstance(event, RebalanceEvent) and not self.settings.replace_on_rebalance:
                outcomes.append(self._record_rebalance(event, instance))
            else:
                outcomes.append(self._replace_and_terminate(event, instance))
        if not ids:
            self.metrics.add(EVENTS_IGNORED, 1, COUNT, {"Reason": "NoInstances"})
        return outcomes

    # -- actions -------------------------------------------------------------------------------------------

    def _ignore(self, event: InterruptionEvent, instance_id: str, action: str) -> Outcome:
        reason = "NotOwned" if action == "ignored-not-owned" else "AlreadyGone"
        self.metrics.add(EVENTS_IGNORED, 1, COUNT, {"Reason": reason})
        self.log.info(
            "interruption event ignored",
            extra={"kind": str(event.kind), "instanceId": instance_id, "why": reason, "eventId": event.id},
        )
        return Outcome(instance_id, str(event.kind), action)

    def _replace_and_terminate(self, event: InterruptionEvent, instance: Any) -> Outcome:
        instance_id = str(instance.id)
        kind = event.kind
        name = execution_name(instance_id, str(kind))
        node = self._node_name(instance_id)
        outcome = Outcome(instance_id, str(kind), "workflow-started", node=node)
        # Step Functions returns a running execution for a repeated name and input instead of refusing it,
        # so a redelivery is recognized by asking first (and by ExecutionAlreadyExists after that).
        if self.workflow.already_started(name):
            return self._duplicate(outcome, event)
        if kind is EventKind.SPOT_INTERRUPTION:
            self.unavailable.mark(
                str(instance.instance_type),
                str(instance.zone),
                "spot",
                f"SpotInterruption: {instance_id}",
                SPOT_UNAVAILABLE_SECONDS,
            )
            # Two minutes is short: cordon and drain start first, the replacement launches meanwhile.
            started = self.workflow.start(name, self._request(event, instance, node, []))
            outcome.execution = started.execution
            if not started.started:
                return self._duplicate(outcome, event)
            outcome.replacement = self._replace(instance_id)
        else:
            outcome.replacement = self._replace(instance_id)
            claims = outcome.replacement.claims if outcome.replacement else []
            started = self.workflow.start(name, self._request(event, instance, node, claims))
            outcome.execution = started.execution
            if not started.started:
                return self._duplicate(outcome, event)
        self.metrics.add(WORKFLOWS_STARTED, 1, COUNT, {"Reason": str(kind)})
        self.log.info(
            "termination workflow started",
            extra={
                "kind": str(kind),
                "instanceId": instance_id,
                "node": node,
                "execution": outcome.execution,
                "replacementClaims": outcome.replacement.claims if outcome.replacement else [],
                "eventId": event.id,
            },
        )
        return outcome

    def _duplicate(self, outcome: Outcome, event: InterruptionEvent) -> Outcome:
        outcome.action = "duplicate"
        self.metrics.add(DUPLICATE_EVENTS, 1, COUNT)
        self.log.info(
            "termination workflow already started",
            extra={"instanceId": outcome.instance_id, "kind": outcome.kind, "eventId": event.id},
        )
        return outcome

    def _replace(self, instance_id: str) -> ReplacementResult | None:
        if self.replacements is None:
            return None
        try:
            result = self.replacements.replace(instance_id)
        except Exception as error:  # the node must still be drained and terminated
            self.metrics.add(REPLACEMENT_ERRORS, 1, COUNT)
            self.log.exception("replacement failed", extra={"instanceId": instance_id, "error": str(error)})
            return None
        if result.claims:
            self.metrics.add(REPLACEMENT_CLAIMS, len(result.claims), COUNT)
        if result.failed:
            self.metrics.add(REPLACEMENT_ERRORS, len(result.failed), COUNT)
        return result

    def _record_rebalance(self, event: RebalanceEvent, instance: Any) -> Outcome:
        instance_id = str(instance.id)
        node = self._node_name(instance_id)
        self.metrics.add(REBALANCE_RECOMMENDATIONS, 1, COUNT)
        if node:
            obj = self.kube.get_node(node)
            if obj is not None:
                obj.setdefault("kind", "Node")
                obj.setdefault("apiVersion", "v1")
                self.kube.create_event(
                    obj,
                    "RebalanceRecommendation",
                    f"EC2 recommends rebalancing Spot instance {instance_id}: interruption risk is elevated",
                    type="Warning",
                )
        self.log.info("rebalance recommendation recorded", extra={"instanceId": instance_id, "node": node})
        return Outcome(instance_id, str(event.kind), "recorded", node=node)

    def _clean_up(self, event: StateChangeEvent, instance: Any) -> Outcome:
        """The instance stopped or went away without a workflow: remove what is left of it."""
        instance_id = str(instance.id)
        state = event.detail.state
        outcome = Outcome(instance_id, str(event.kind), "cleaned-up", detail={"state": state})
        if state not in GONE_STATES | STOPPED_STATES:
            outcome.action = "ignored-running"
            return outcome
        node = self._node_object(instance_id)
        if node is not None:
            meta = node.get("metadata") or {}
            outcome.node = str(meta.get("name") or "")
            # The instance's containers are dead (or dying); nothing will report their pods gone.
            for pod in self.kube.list_pods_on_node(outcome.node):
                pod_meta = pod.get("metadata") or {}
                self.kube.delete_pod(
                    pod_meta.get("namespace") or "default",
                    pod_meta["name"],
                    grace_period_seconds=0,
                    uid=pod_meta.get("uid"),
                )
            self.kube.delete_node(outcome.node, uid=meta.get("uid"))
        if state in STOPPED_STATES:
            # A stopped node is of no use to the cluster and its Node is gone: do not keep paying for it.
            self.cloud.terminate([instance_id])
        claim = str(getattr(instance, "nodeclaim", "") or "")
        finalized = bool(
            claim and self.claims is not None and self.claims.finalize(claim, f"instance {state}")
        )
        outcome.detail["claimFinalized"] = finalized
        self.metrics.add(NODES_CLEANED_UP, 1, COUNT, {"State": state})
        self.log.info(
            "instance left; node and claim cleaned up",
            extra={"instanceId": instance_id, "state": state, "node": outcome.node, "claim": claim},
        )
        return outcome

    # -- helpers -------------------------------------------------------------------------------------------

    def _node_object(self, instance_id: str) -> Mapping[str, Any] | None:
        return nodes_by_instance(self.kube.list_nodes()).get(instance_id)

    def _node_name(self, instance_id: str) -> str:
        node = self._node_object(instance_id)
        return str(((node or {}).get("metadata") or {}).get("name") or "")

    def _request(
        self, event: InterruptionEvent, instance: Any, node: str, replacement_claims: list[str]
    ) -> TerminationRequest:
        return TerminationRequest(
            node=node,
            instance_id=str(instance.id),
            claim_id=str(getattr(instance, "nodeclaim", "") or ""),
            reason=str(event.kind),
            deadline=self.deadline(event),
            wait_for_replacement=event.kind is not EventKind.SPOT_INTERRUPTION,
            replacement_claims=replacement_claims,
            drain_interval_seconds=self.settings.drain_interval_seconds,
            poll_seconds=self.settings.poll_seconds,
        )

    def deadline(self, event: InterruptionEvent) -> datetime:
        """When the node must be empty: the spot notice less a margin, a scheduled change's start less a
        margin (never sooner than the minimum window, never after the start), or the rebalance window."""
        now = datetime.fromtimestamp(self.clock(), tz=UTC)
        s = self.settings
        if event.kind is EventKind.SPOT_INTERRUPTION:
            notice = event.time if event.time.tzinfo else event.time.replace(tzinfo=UTC)
            return notice + timedelta(seconds=s.spot_notice_seconds - s.deadline_margin_seconds)
        if isinstance(event, HealthEvent):
            start = event.scheduled_start()
            if start is None:
                return now + timedelta(seconds=s.scheduled_change_default_seconds)
            early = start - timedelta(seconds=s.scheduled_change_margin_seconds)
            return max(early, min(start, now + timedelta(seconds=s.minimum_window_seconds)))
        return now + timedelta(seconds=s.rebalance_window_seconds)
