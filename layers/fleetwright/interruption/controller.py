"""What Fleetwright does about each interruption event (docs/termination.md has the table), once it has passed
the checks of :mod:`fleetwright.interruption.trust` (docs/security.md): anything else is rejected before
anything is cordoned, drained, replaced or terminated.

- **Spot interruption warning**: the offering (type, zone, spot) is marked unavailable, the termination
  workflow starts (deadline: two minutes after the warning, less a margin) and replacement capacity for the
  node's pods is launched at once, so it boots during the notice.
- **Rebalance recommendation**: a metric; with ``replace_on_rebalance`` the node is replaced and then
  terminated like a scheduled change.
- **State change**: acted on by the instance's *current* state (``DescribeInstances``), never the
  event's: an instance that is stopping, stopped, shutting down or terminated has its pods and Node
  deleted and its NodeClaim finalized (a stopped one is also terminated); one that is running again
  (a stop delivered after a restart) is left alone (``StaleEvent``).
- **AWS Health scheduled change**: replacement first, then the workflow, which waits for the replacement
  and terminates before the scheduled time.

Each acted-on event is told on the instance's NodeClaim and Node with Karpenter's AWS provider's reasons
(SpotInterrupted, SpotRebalanceRecommendation, InstanceUnhealthy, InstanceStopping / InstanceTerminating,
then TerminatingOnInterruption once termination starts), through the event recorder, which never raises.

One event, one replacement, one workflow: an interruption record in the state table
(:mod:`fleetwright.state.interruptions`) is created with a conditional put before anything is launched,
and only the delivery that created it (or took over a failed or abandoned attempt with a conditional
update) launches and starts the workflow. A duplicate that finds an attempt claimed moments ago raises
:class:`InterruptionInProgressError`, so the message goes back to the queue and is looked at again once the
first delivery has finished or died. A failed, timed-out or aborted workflow whose instance still runs
gets a new attempt (``<instance id>-<kind>-<attempt>``) on the next delivery, up to ``max_attempts``;
then the node is given back (what Fleetwright added removed; a cordon set by hand stays) with a Warning
event and a metric.

Events about instances without this cluster's ownership tag are acknowledged and ignored, as are warnings
for instances already stopped, shutting down or terminated (a late or out-of-order delivery).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from fleetwright.claims.registration import nodes_by_instance, release_node
from fleetwright.cloud.instances import Instance
from fleetwright.cloud.offerings import UnavailableOfferings
from fleetwright.cloud.provider import InstanceCloud
from fleetwright.interruption.events import (
    EventKind,
    HealthEvent,
    InterruptionEvent,
    MessageError,
    RebalanceEvent,
    StateChangeEvent,
)
from fleetwright.interruption.replacement import ReplacementLauncher, ReplacementResult
from fleetwright.interruption.trust import EventOrigin, TrustLimits, check_event, check_spot
from fleetwright.kube import reasons
from fleetwright.kube.cluster import KubeCluster
from fleetwright.kube.events import EventRecorder, ObjectRef
from fleetwright.observability.metrics import COUNT, MetricsSink, NullMetrics
from fleetwright.state.interruptions import (
    CLAIMED,
    GAVE_UP,
    STARTED,
    InterruptionRecord,
    InterruptionRecords,
)
from fleetwright.workflow.claimbook import ClaimBook
from fleetwright.workflow.request import TerminationRequest
from fleetwright.workflow.starter import (
    ENDED_UNSUCCESSFULLY,
    RUNNING,
    SUCCEEDED,
    WorkflowStarter,
    execution_name,
)

log = logging.getLogger(__name__)

GONE_STATES = frozenset({"shutting-down", "terminated"})
STOPPED_STATES = frozenset({"stopping", "stopped"})
# An interrupted offering is likely to be refused again for a while; Karpenter-style caches use minutes.
SPOT_UNAVAILABLE_SECONDS = 180.0

# Metric names.
EVENTS_RECEIVED = "InterruptionEvents"
EVENTS_IGNORED = "InterruptionEventsIgnored"
MESSAGES_REJECTED = "InterruptionMessagesRejected"
DUPLICATE_EVENTS = "InterruptionDuplicates"
IN_PROGRESS = "InterruptionsInProgress"
ATTEMPTS_RETRIED = "InterruptionAttemptsRetried"
ATTEMPTS_EXHAUSTED = "InterruptionAttemptsExhausted"
WORKFLOWS_STARTED = "TerminationWorkflowsStarted"
REPLACEMENT_CLAIMS = "ReplacementNodeClaims"
REPLACEMENT_ERRORS = "ReplacementErrors"
REBALANCE_RECOMMENDATIONS = "RebalanceRecommendations"
NODES_CLEANED_UP = "NodesCleanedUp"

# Ignore reasons (the ``Reason`` dimension of InterruptionEventsIgnored).
NOT_OWNED = "NotOwned"
ALREADY_GONE = "AlreadyGone"
STALE_EVENT = "StaleEvent"
GIVEN_UP = "GivenUp"


class InterruptionInProgressError(RuntimeError):
    """Another delivery of the same event is handling it right now: fail this message back to the queue,
    so it is looked at again once that delivery has finished (or has died and can be taken over)."""

    def __init__(self, outcomes: list[Outcome]) -> None:
        names = ", ".join(f"{o.instance_id}/{o.kind}" for o in outcomes if o.action == "in-progress")
        super().__init__(f"interruption being handled by another delivery: {names}")
        self.outcomes = outcomes


@dataclass(slots=True)
class InterruptionSettings:
    """Timing: ``spot_notice_seconds`` (EC2's notice) less ``deadline_margin_seconds`` after the warning
    is the spot drain deadline, never sooner than ``spot_minimum_window_seconds`` from now nor later than
    the notice less the margin from now; a warning older than its notice whose instance still runs (a
    retry, a redrive) gets ``minimum_window_seconds`` from now. A scheduled change is met
    ``scheduled_change_margin_seconds`` early, never sooner than ``minimum_window_seconds`` from now (a
    start already passed included) nor later than ``scheduled_change_max_seconds`` from now
    (``scheduled_change_default_seconds`` when the event names no start time); ``rebalance_window_seconds``
    is the deadline of an opt-in rebalance replacement. The workflow waits ``drain_interval_seconds``
    between drain passes and ``poll_seconds`` between instance checks.

    Trust (:mod:`fleetwright.interruption.trust`): an event older than ``max_event_age_seconds`` or dated
    more than ``clock_skew_seconds`` ahead is rejected, as is an AWS Health event naming more than
    ``max_instances_per_event`` instances.

    An attempt claimed less than ``handler_timeout_seconds`` + ``claim_margin_seconds`` ago may still be
    in the hands of a live delivery (the handler's timeout bounds how long it can take); an older one
    that never started its workflow is taken over. ``max_attempts`` bounds the workflows started for one
    interruption.
    """

    spot_notice_seconds: float = 120.0
    deadline_margin_seconds: float = 15.0
    scheduled_change_margin_seconds: float = 600.0
    scheduled_change_default_seconds: float = 1800.0
    minimum_window_seconds: float = 120.0
    spot_minimum_window_seconds: float = 30.0
    scheduled_change_max_seconds: float = 14 * 24 * 3600.0
    max_event_age_seconds: float = 3600.0
    clock_skew_seconds: float = 30.0
    max_instances_per_event: int = 10
    rebalance_window_seconds: float = 900.0
    replace_on_rebalance: bool = False
    drain_interval_seconds: int = 5
    poll_seconds: int = 5
    handler_timeout_seconds: float = 60.0
    claim_margin_seconds: float = 30.0
    max_attempts: int = 5

    @property
    def limits(self) -> TrustLimits:
        """The bounds :func:`~fleetwright.interruption.trust.check_event` applies."""
        return TrustLimits(
            max_age_seconds=self.max_event_age_seconds,
            clock_skew_seconds=self.clock_skew_seconds,
            max_instances_per_event=self.max_instances_per_event,
        )

    @property
    def claim_fresh_seconds(self) -> float:
        """How long a claimed attempt is presumed to belong to a live delivery."""
        return self.handler_timeout_seconds + self.claim_margin_seconds


@dataclass(slots=True)
class Outcome:
    """What was done about one instance named in an event."""

    # workflow-started, duplicate, in-progress, gave-up, cleaned-up, recorded, ignored-not-owned,
    # ignored-gone, ignored-stale
    instance_id: str
    kind: str
    action: str
    node: str = ""
    execution: str = ""
    attempt: int = 0
    replacement: ReplacementResult | None = None
    detail: dict[str, Any] = field(default_factory=dict)


class InterruptionController:
    """Acts on interruption events for one cluster.

    ``records`` are the state table's interruption records (one per instance and event kind).
    ``replacements`` is None when no NodePool configuration is available (nodes are then drained and
    terminated without launching replacements first; the provisioner picks up the evicted pods).
    ``origin`` is the account and region whose events are acted on (any other event is rejected).
    ``clock`` gives epoch seconds.
    """

    def __init__(
        self,
        *,
        kube: KubeCluster,
        cloud: InstanceCloud,
        origin: EventOrigin,
        unavailable: UnavailableOfferings,
        workflow: WorkflowStarter,
        records: InterruptionRecords,
        claims: ClaimBook | None,
        replacements: ReplacementLauncher | None,
        settings: InterruptionSettings | None = None,
        metrics: MetricsSink | None = None,
        clock: Callable[[], float] = time.time,
        logger: logging.Logger | Any = None,
        events: EventRecorder | None = None,
    ) -> None:
        self.kube = kube
        self.cloud = cloud
        self.origin = origin
        self.unavailable = unavailable
        self.workflow = workflow
        self.records = records
        self.claims = claims
        self.replacements = replacements
        self.settings = settings or InterruptionSettings()
        self.metrics = metrics or NullMetrics()
        self.clock = clock
        self.log = logger or log
        self.events = events or EventRecorder(kube.client, metrics=self.metrics, logger=self.log)
        self._expected: set[str] = set()

    def expect(self, instance_ids: Iterable[str]) -> None:
        """A batch starts: its messages name ``instance_ids``, which are leaving too, so their nodes are no
        room for a replacement's pods (their interruption may not be recorded yet); the replacements of the
        batch share one read of the cluster until :meth:`batch_done`."""
        self._expected = set(instance_ids)
        if self.replacements is not None:
            self.replacements.start_batch()

    def batch_done(self) -> None:
        """The batch is handled: the next one reads the cluster again."""
        self._expected = set()
        if self.replacements is not None:
            self.replacements.end_batch()

    def _going(self, instance_id: str) -> set[str]:
        """Instances leaving besides ``instance_id``: the batch's and those with an interruption record."""
        going = set(self._expected)
        try:
            going.update(r.instance_id for r in self.records.all())
        except Exception as error:  # the batch's instances and the cordons still narrow the room
            self.log.warning("cannot list interruption records", extra={"error": str(error)})
        going.discard(instance_id)
        return going

    def admit(self, event: InterruptionEvent) -> None:
        """Raise :class:`~fleetwright.interruption.trust.RejectedEventError` unless the event passes every
        check that needs no AWS call (origin, resources, instance ids, age, AWS Health status, type, size)."""
        check_event(event, self.origin, self.clock(), self.settings.limits)

    def reject(self, error: MessageError, message_id: str = "", body: str = "") -> None:
        """Record a message that is not acted on: a metric per reason and a log line (the message is then
        deleted from the queue: the same message would be refused again)."""
        self.metrics.add(MESSAGES_REJECTED, 1, COUNT, {"Reason": error.kind})
        self.log.error(
            "interruption message rejected",
            extra={"messageId": message_id, "reason": error.kind, "error": str(error), "body": body[:500]},
        )

    def handle(self, event: InterruptionEvent) -> list[Outcome]:
        """Act on every instance the event names; returns what was done for each.

        Raises :class:`~fleetwright.interruption.trust.RejectedEventError` before acting on anything when the
        event fails a check (:meth:`admit`, or a spot warning for an instance that is not spot), and
        :class:`InterruptionInProgressError` (after acting on the other instances) when another delivery is
        handling one of them right now.
        """
        self.admit(event)
        ids = event.instance_ids
        # The truth is the instance's state now, not the state an event (maybe late, maybe out of order)
        # reports.
        owned = self.cloud.describe(ids) if ids else {}
        for described in owned.values():
            check_spot(event, described)
        self.metrics.add(EVENTS_RECEIVED, 1, COUNT, {"Kind": str(event.kind)})
        outcomes = []
        for instance_id in ids:
            instance = owned.get(instance_id)
            state = instance.state if instance is not None else ""
            if instance is None:
                outcomes.append(self._ignore(event, instance_id, "ignored-not-owned", NOT_OWNED))
            elif isinstance(event, StateChangeEvent):
                if state in GONE_STATES | STOPPED_STATES:
                    outcomes.append(self._clean_up(event, instance, state))
                else:
                    outcomes.append(
                        self._ignore(
                            event,
                            instance_id,
                            "ignored-stale",
                            STALE_EVENT,
                            reported=event.detail.state,
                            now=state,
                        )
                    )
            elif state in GONE_STATES | STOPPED_STATES:
                # Out of order (the state change came first) or late: the instance is already going.
                outcomes.append(self._ignore(event, instance_id, "ignored-gone", ALREADY_GONE, now=state))
            elif isinstance(event, RebalanceEvent) and not self.settings.replace_on_rebalance:
                outcomes.append(self._record_rebalance(event, instance))
            else:
                outcomes.append(self._replace_and_terminate(event, instance))
        if not ids:
            self.metrics.add(EVENTS_IGNORED, 1, COUNT, {"Reason": "NoInstances"})
        if any(o.action == "in-progress" for o in outcomes):
            raise InterruptionInProgressError(outcomes)
        return outcomes

    # -- actions -------------------------------------------------------------------------------------------

    def _ignore(
        self, event: InterruptionEvent, instance_id: str, action: str, reason: str, **detail: str
    ) -> Outcome:
        self.metrics.add(EVENTS_IGNORED, 1, COUNT, {"Reason": reason})
        self.log.info(
            "interruption event ignored",
            extra={
                "kind": str(event.kind),
                "instanceId": instance_id,
                "why": reason,
                "eventId": event.id,
                **detail,
            },
        )
        return Outcome(instance_id, str(event.kind), action, detail=dict(detail))

    def _replace_and_terminate(self, event: InterruptionEvent, instance: Instance) -> Outcome:
        instance_id = instance.id
        kind = str(event.kind)
        now = self.clock()
        outcome = Outcome(instance_id, kind, "workflow-started", node=self._node_name(instance_id))
        self._notify(event, instance, outcome.node)
        fresh = InterruptionRecord(
            instance_id=instance_id, kind=kind, claimed_at=now, node=outcome.node, event_id=event.id
        )
        if self.records.create(fresh):
            return self._run_attempt(event, instance, fresh, outcome)
        record = self.records.get(instance_id, kind)
        if record is None:  # deleted between the two calls: this delivery may start over
            if self.records.create(fresh):
                return self._run_attempt(event, instance, fresh, outcome)
            return self._in_progress(outcome, event, 0)
        outcome.attempt = record.attempt
        outcome.execution = record.execution
        if record.status == GAVE_UP:
            return self._duplicate(outcome, event, "attempts exhausted earlier")
        name = record.execution or execution_name(instance_id, kind, record.attempt)
        status = self.workflow.status(name)
        if status in (RUNNING, SUCCEEDED):
            if record.status == CLAIMED:  # its delivery died after starting the workflow
                self.records.update(record, status=STARTED, execution=name)
            return self._duplicate(outcome, event, f"workflow {status}")
        if (
            status is None
            and record.status == CLAIMED
            and now - record.claimed_at < self.settings.claim_fresh_seconds
        ):
            return self._in_progress(outcome, event, record.attempt)
        # The attempt failed (the workflow ended badly, or its delivery died before starting it).
        why = (
            f"workflow {status}"
            if status in ENDED_UNSUCCESSFULLY
            else "attempt abandoned before its workflow started"
        )
        if record.attempt >= self.settings.max_attempts:
            return self._give_up(event, record, outcome, why)
        taken = self.records.take_over(record, now)
        if taken is None:  # another delivery took it over first
            return self._in_progress(outcome, event, record.attempt + 1)
        self.metrics.add(ATTEMPTS_RETRIED, 1, COUNT, {"Kind": kind})
        self.log.warning(
            "interruption attempt failed; starting a new one",
            extra={
                "instanceId": instance_id,
                "kind": kind,
                "failed": record.attempt,
                "attempt": taken.attempt,
                "why": why,
            },
        )
        return self._run_attempt(event, instance, taken, outcome)

    def _run_attempt(
        self, event: InterruptionEvent, instance: Instance, record: InterruptionRecord, outcome: Outcome
    ) -> Outcome:
        """Launch (or reuse) the replacement and start this attempt's workflow; the record follows along so
        a later delivery (or the disruption sweep) can drive it again."""
        instance_id = instance.id
        kind = event.kind
        name = execution_name(instance_id, str(kind), record.attempt)
        outcome.attempt = record.attempt
        outcome.execution = name
        if kind is EventKind.SPOT_INTERRUPTION:
            self.unavailable.mark(
                instance.instance_type,
                instance.zone,
                "spot",
                f"SpotInterruption: {instance_id}",
                SPOT_UNAVAILABLE_SECONDS,
            )
            # Two minutes is short: cordon and drain start first, the replacement launches meanwhile.
            started = self._start(record, name, self._request(event, instance, outcome.node, []))
            outcome.replacement = self._replace(instance_id, record)
        else:
            outcome.replacement = self._replace(instance_id, record)
            claims = outcome.replacement.claims if outcome.replacement else []
            started = self._start(record, name, self._request(event, instance, outcome.node, claims))
        outcome.execution = started
        self._terminating(instance, outcome.node)
        self.metrics.add(WORKFLOWS_STARTED, 1, COUNT, {"Reason": str(kind)})
        self.log.info(
            "termination workflow started",
            extra={
                "kind": str(kind),
                "instanceId": instance_id,
                "node": outcome.node,
                "execution": started,
                "attempt": record.attempt,
                "replacementClaims": outcome.replacement.claims if outcome.replacement else [],
                "eventId": event.id,
            },
        )
        return outcome

    def _start(self, record: InterruptionRecord, name: str, request: TerminationRequest) -> str:
        """Store the request, start the workflow, mark the attempt started; the execution's id."""
        self.records.update(
            record, request=request.to_json(), deadline=request.deadline_epoch, execution=name
        )
        started = self.workflow.start(name, request)
        self.records.update(record, status=STARTED)
        return started.execution

    def _in_progress(self, outcome: Outcome, event: InterruptionEvent, attempt: int) -> Outcome:
        """Another delivery holds the attempt: this message goes back to the queue (never dropped while
        that delivery could still crash)."""
        outcome.action = "in-progress"
        self.metrics.add(IN_PROGRESS, 1, COUNT, {"Kind": outcome.kind})
        self.log.info(
            "interruption being handled by another delivery; message returned to the queue",
            extra={
                "instanceId": outcome.instance_id,
                "kind": outcome.kind,
                "attempt": attempt,
                "eventId": event.id,
            },
        )
        return outcome

    def _duplicate(self, outcome: Outcome, event: InterruptionEvent, why: str) -> Outcome:
        outcome.action = "duplicate"
        self.metrics.add(DUPLICATE_EVENTS, 1, COUNT)
        self.log.info(
            "interruption already handled",
            extra={"instanceId": outcome.instance_id, "kind": outcome.kind, "eventId": event.id, "why": why},
        )
        return outcome

    def _give_up(
        self, event: InterruptionEvent, record: InterruptionRecord, outcome: Outcome, why: str
    ) -> Outcome:
        """Attempts exhausted: give the node back rather than leave it cordoned with nobody working on it."""
        outcome.action = "gave-up"
        if not self.records.update(record, status=GAVE_UP):  # taken over meanwhile
            return self._in_progress(outcome, event, record.attempt + 1)
        self.metrics.add(ATTEMPTS_EXHAUSTED, 1, COUNT, {"Kind": record.kind})
        message = (
            f"Fleetwright gave up handling {record.kind} for instance {record.instance_id} after "
            f"{record.attempt} failed attempts ({why}); the node is given back"
        )
        node = record.node or outcome.node
        if node:
            obj = self.kube.unmark_disrupted(node)
            if obj is not None:
                ref = ObjectRef.of(obj, kind="Node")
                self.events.publish(reasons.interruption_handling_failed(ref, message))
        self.log.error(
            "interruption attempts exhausted; node given back",
            extra={
                "instanceId": record.instance_id,
                "kind": record.kind,
                "node": node,
                "attempts": record.attempt,
                "why": why,
                "eventId": event.id,
            },
        )
        return outcome

    def _replace(self, instance_id: str, record: InterruptionRecord) -> ReplacementResult | None:
        """The replacement of this attempt: an earlier attempt's claims that are still active, else a
        launch (a failed launch, lease refusals included, still lets the node be drained and terminated)."""
        if record.replacement_claims and self.claims is not None:
            active = sorted(self.claims.active_instances(record.replacement_claims))
            if active:
                self.log.info(
                    "earlier replacement reused",
                    extra={"instanceId": instance_id, "replacementClaims": active},
                )
                self.records.update(record, replacementClaims=active)
                return ReplacementResult(claims=active)
        if self.replacements is None:
            return None
        try:
            result = self.replacements.replace(instance_id, going=self._going(instance_id))
        except Exception as error:  # the node must still be drained and terminated
            self.metrics.add(REPLACEMENT_ERRORS, 1, COUNT)
            self.log.exception("replacement failed", extra={"instanceId": instance_id, "error": str(error)})
            return None
        if result.claims:
            self.metrics.add(REPLACEMENT_CLAIMS, len(result.claims), COUNT)
            self.records.update(record, replacementClaims=list(result.claims))
        if result.failed:
            self.metrics.add(REPLACEMENT_ERRORS, len(result.failed), COUNT)
        return result

    def _record_rebalance(self, event: RebalanceEvent, instance: Instance) -> Outcome:
        instance_id = instance.id
        node = self._node_name(instance_id)
        self.metrics.add(REBALANCE_RECOMMENDATIONS, 1, COUNT)
        self._notify(event, instance, node)
        self.log.info("rebalance recommendation recorded", extra={"instanceId": instance_id, "node": node})
        return Outcome(instance_id, str(event.kind), "recorded", node=node)

    def _clean_up(self, event: StateChangeEvent, instance: Instance, state: str) -> Outcome:
        """The instance (as EC2 describes it now) stopped or went away: remove what is left of it."""
        instance_id = instance.id
        outcome = Outcome(
            instance_id,
            str(event.kind),
            "cleaned-up",
            detail={"state": state, "reported": event.detail.state},
        )
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
            # Its termination finalizer would keep the Node Terminating: the instance is gone already.
            release_node(self.kube, outcome.node, str(meta.get("uid") or ""))
        self._notify(event, instance, outcome.node, state)
        self._terminating(instance, outcome.node)
        if state in STOPPED_STATES:
            # A stopped node is of no use to the cluster and its Node is gone: do not keep paying for it.
            self.cloud.terminate([instance_id])
        claim = instance.nodeclaim
        finalized = bool(
            claim and self.claims is not None and self.claims.finalize(claim, f"instance {state}")
        )
        outcome.detail["claimFinalized"] = finalized
        self.metrics.add(NODES_CLEANED_UP, 1, COUNT, {"State": state})
        self.log.info(
            "instance left; node and claim cleaned up",
            extra={
                "instanceId": instance_id,
                "state": state,
                "reported": event.detail.state,
                "node": outcome.node,
                "claim": claim,
            },
        )
        return outcome

    # -- helpers -------------------------------------------------------------------------------------------

    def _notify(self, event: InterruptionEvent, instance: Instance, node: str, state: str = "") -> None:
        """Karpenter's event for the message (SpotInterrupted, SpotRebalanceRecommendation,
        InstanceUnhealthy, or InstanceStopping / InstanceTerminating by the instance's ``state`` now) on
        its NodeClaim and Node."""
        if isinstance(event, StateChangeEvent):
            reason = reasons.INSTANCE_STOPPING if state in STOPPED_STATES else reasons.INSTANCE_TERMINATING
        else:
            reason = _NOTICES[event.kind]
        self.events.publish(*reasons.interruption_notice(reason, _refs(instance, node)))

    def _terminating(self, instance: Instance, node: str) -> None:
        """TerminatingOnInterruption on the NodeClaim and Node: their termination has started."""
        self.events.publish(*reasons.terminating_on_interruption(_refs(instance, node)))

    def _node_object(self, instance_id: str) -> Mapping[str, Any] | None:
        return nodes_by_instance(self.kube.list_nodes()).get(instance_id)

    def _node_name(self, instance_id: str) -> str:
        node = self._node_object(instance_id)
        return str(((node or {}).get("metadata") or {}).get("name") or "")

    def _request(
        self, event: InterruptionEvent, instance: Instance, node: str, replacement_claims: list[str]
    ) -> TerminationRequest:
        return TerminationRequest(
            node=node,
            instance_id=instance.id,
            claim_id=instance.nodeclaim,
            reason=str(event.kind),
            deadline=self.deadline(event),
            wait_for_replacement=event.kind is not EventKind.SPOT_INTERRUPTION,
            replacement_claims=replacement_claims,
            drain_interval_seconds=self.settings.drain_interval_seconds,
            poll_seconds=self.settings.poll_seconds,
        )

    def deadline(self, event: InterruptionEvent) -> datetime:
        """When the node must be empty (pods left then are deleted past their PDBs), always within a window
        starting now, whatever the event says:

        - spot: the notice less a margin after the warning, within [now + the spot minimum window,
          now + the notice less the margin]; a warning older than its notice (a retry or a redrive whose
          instance still runs): the minimum window;
        - scheduled change: the start less a margin, within [now + the minimum window, now + the scheduled
          change maximum] (a start already passed gets the minimum window); no start: the default window;
        - rebalance: the rebalance window.
        """
        now = datetime.fromtimestamp(self.clock(), tz=UTC)
        s = self.settings

        def within(moment: datetime, least: float, most: float) -> datetime:
            return min(max(moment, now + timedelta(seconds=least)), now + timedelta(seconds=most))

        if event.kind is EventKind.SPOT_INTERRUPTION:
            notice = event.time if event.time.tzinfo else event.time.replace(tzinfo=UTC)
            if now - notice > timedelta(seconds=s.spot_notice_seconds):  # no reclaim is coming now
                return now + timedelta(seconds=s.minimum_window_seconds)
            window = s.spot_notice_seconds - s.deadline_margin_seconds
            return within(notice + timedelta(seconds=window), s.spot_minimum_window_seconds, window)
        if isinstance(event, HealthEvent):
            start = event.scheduled_start()
            if start is None:
                return now + timedelta(seconds=s.scheduled_change_default_seconds)
            early = start - timedelta(seconds=s.scheduled_change_margin_seconds)
            return within(early, s.minimum_window_seconds, s.scheduled_change_max_seconds)
        return now + timedelta(seconds=s.rebalance_window_seconds)


_NOTICES: dict[EventKind, str] = {
    EventKind.SPOT_INTERRUPTION: reasons.SPOT_INTERRUPTED,
    EventKind.REBALANCE_RECOMMENDATION: reasons.SPOT_REBALANCE_RECOMMENDATION,
    EventKind.SCHEDULED_CHANGE: reasons.INSTANCE_UNHEALTHY,
}


def _refs(instance: Instance, node: str) -> list[ObjectRef]:
    """The instance's NodeClaim (when it was launched for one) and Node (when it has one)."""
    refs = [reasons.nodeclaim_ref(instance.nodeclaim)] if instance.nodeclaim else []
    if node:
        refs.append(reasons.node_ref(node))
    return refs
