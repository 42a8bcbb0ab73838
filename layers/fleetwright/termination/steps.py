"""The termination workflow's steps. Each takes the workflow state and returns it with its section updated;
``infra/termination_workflow.py`` strings them together (Choice, Wait, Retry, Catch) and
``functions/termination/handler.py`` runs them in Lambda.

| step | does | writes |
| --- | --- | --- |
| ``cordon`` | validates the input, cordons + taints + labels the node | ``request`` |
| ``await_replacement`` | checks whether the replacement claims' nodes are Ready | ``replacement.ready`` |
| ``drain`` | one drain pass (:mod:`fleetwright.termination.drain`)¹ | ``drain.done``, ``drain.waitSeconds`` |
| ``continue`` | starts the next execution (:mod:`fleetwright.termination.continuation`) | ``continuation`` |
| ``terminate`` | TerminateInstances after the ownership check | ``instance`` |
| ``check_instance`` | is the instance shutting down or gone? | ``instance.gone`` |
| ``delete_node`` | deletes the Node, lifts its finalizer (if still this instance's) | ``node`` |
| ``finalize_claim`` | marks the claim terminated, lifts its NodeClaim's finalizer | ``claim`` |
| ``record_failure`` | Warning event on the Node, ``TerminationFailures`` metric² | ``failure`` |

¹ At the deadline of a request with ``onDeadline: abandon`` it calls the disruption off instead: the node
is given back and kept (``DisruptionCalledOff`` event and metric): uncordoned, unless it was cordoned before
it was marked (``KubeCluster.unmark_disrupted`` removes only what ``mark_disrupted`` added).
A pass the Kubernetes API refused (unreachable, 5xx, throttled) is a pass that did not finish: it counts
``drain.apiErrors`` and the loop goes on. ``drain.waitSeconds`` grows while no pod leaves
(:mod:`fleetwright.termination.pacing`); ``drain.continueInNewExecution`` asks for a ``continue``.
² Best effort on the API: what it could not do is listed in ``failure.problems`` and, while the API may
come back, ``failure.pending`` asks the state machine to run it again. It also uncordons the node when its
instance was never asked to terminate and still runs (every reason: a cordoned node with no workflow is the
worst outcome), unless the Node is being deleted: the disruption pass then starts the workflow again
(``fleetwright.disruption.deletion``).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from fleetwright.claims.registration import (
    TERMINATION_FINALIZER,
    instance_id_of,
    nodes_by_instance,
    release_node,
)
from fleetwright.cloud.errors import InstanceNotFoundError, NotOwnedError
from fleetwright.cloud.instances import Instance
from fleetwright.cloud.provider import InstanceCloud
from fleetwright.kube import reasons
from fleetwright.kube.cluster import KubeCluster
from fleetwright.kube.events import EventRecorder, ObjectRef
from fleetwright.kube.resources import NODE_CLAIMS
from fleetwright.observability.metrics import COUNT, MetricsSink, NullMetrics
from fleetwright.termination.continuation import (
    ExecutionContext,
    carried_state,
    continuation_name,
    origin_of,
    should_continue,
)
from fleetwright.termination.drain import DrainPass, drain_pass, pod_grace_seconds, pod_key, pods_to_drain
from fleetwright.termination.errors import (
    InstanceNotOwnedError,
    InvalidRequestError,
    TerminationTimeoutError,
    is_transient,
)
from fleetwright.termination.pacing import next_drain_wait, next_retry_wait
from fleetwright.workflow.claimbook import ClaimBook
from fleetwright.workflow.request import ABANDON_AT_DEADLINE, TerminationRequest, epoch_to_iso

State = dict[str, Any]
GONE_STATES = frozenset({"shutting-down", "terminated"})

# Metric names (namespace set by the handler).
NODES_TERMINATED = "NodesTerminated"
TERMINATION_FAILURES = "TerminationFailures"
PODS_EVICTED = "PodsEvicted"
PODS_DELETED_AT_DEADLINE = "PodsDeletedAtDeadline"
EVICTIONS_BLOCKED = "EvictionsBlocked"
DISRUPTIONS_CALLED_OFF = "DisruptionsCalledOff"
DRAIN_API_ERRORS = "DrainApiErrors"
WORKFLOW_CONTINUATIONS = "WorkflowContinuations"
VOLUME_ATTACHMENTS_UNREADABLE = "VolumeAttachmentsUnreadable"
FAILURE_RECORD_ATTEMPTS = 30  # with waits doubling to 60 s: the API gets ~27 minutes to come back
SPOT_INTERRUPTION_REASON = "SpotInterruption"  # the workflow reason of a spot interruption warning


StepFunctions = Any  # a boto3 ``stepfunctions`` client (``start_execution``)


def request_of(state: Mapping[str, Any]) -> TerminationRequest:
    """The validated request in ``state`` (the first step sees the flat input, later ones ``request``)."""
    nested = state.get("request")
    raw = nested if isinstance(nested, Mapping) else state
    try:
        return TerminationRequest.model_validate(raw)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors(include_url=False)
        )
        raise InvalidRequestError(f"invalid termination request: {problems}") from None


def failure_message(error: Mapping[str, Any] | None) -> tuple[str, str]:
    """``(error name, message)`` from a Catch's ``{"Error", "Cause"}`` (a Lambda's cause is the JSON of
    ``errorType``/``errorMessage``)."""
    if not error:
        return "Unknown", "no error recorded"
    name = str(error.get("Error") or "Unknown")
    cause = str(error.get("Cause") or "")
    try:
        parsed = json.loads(cause)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and parsed.get("errorMessage"):
        cause = str(parsed["errorMessage"])
    return name, cause


class _FailureProblems:
    """What the failure path could not do, and whether any of it may heal (a transient error)."""

    def __init__(self, log: logging.Logger | Any, node: str) -> None:
        self.log = log
        self.node = node
        self.found: list[str] = []
        self.retryable = False

    def could_not(self, what: str, problem: Exception) -> None:
        self.retryable = self.retryable or is_transient(problem)
        self.found.append(f"{what}: {type(problem).__name__}: {problem}"[:300])
        self.log.warning("failure path: could not " + what, extra={"node": self.node, "error": str(problem)})


class TerminationSteps:
    """The steps, bound to a cluster (``kube``), the cloud (``cloud``) and the claim records (``claims``).

    ``clock`` gives epoch seconds (deadlines are wall-clock times); ``executions`` makes the Step
    Functions client the ``continue`` step starts the next execution with (made on first use).
    """

    def __init__(
        self,
        kube: KubeCluster,
        cloud: InstanceCloud,
        claims: ClaimBook | None,
        *,
        metrics: MetricsSink | None = None,
        clock: Callable[[], float] = time.time,
        logger: logging.Logger | Any = None,
        executions: Callable[[], StepFunctions] | None = None,
    ) -> None:
        self.kube = kube
        self.cloud = cloud
        self.claims = claims
        self.metrics = metrics or NullMetrics()
        self.clock = clock
        self.log = logger or logging.getLogger("fleetwright.termination")
        self._executions = executions
        self._client: StepFunctions = None
        # DisruptionWaitingReadiness on replacements, DisruptionTerminating on the node and its NodeClaim.
        self.events = EventRecorder(kube.client, metrics=self.metrics, logger=self.log)

        def plain(step: Callable[[State], State]) -> Callable[[State, ExecutionContext], State]:
            return lambda state, _context: step(state)

        self._steps: dict[str, Callable[[State, ExecutionContext], State]] = {
            "cordon": plain(self.cordon),
            "await_replacement": self.await_replacement,
            "drain": self.drain,
            "continue": self.continue_execution,
            "terminate": plain(self.terminate),
            "check_instance": plain(self.check_instance),
            "delete_node": plain(self.delete_node),
            "finalize_claim": plain(self.finalize_claim),
            "record_failure": plain(self.record_failure),
        }

    @property
    def names(self) -> list[str]:
        """The step names the workflow may ask for."""
        return list(self._steps)

    def run(self, step: str, state: State, context: Mapping[str, Any] | None = None) -> State:
        """Run ``step`` on ``state`` (``context``: the Task payload's execution details); raises
        InvalidRequestError for an unknown step."""
        handler = self._steps.get(step)
        if handler is None:
            raise InvalidRequestError(f"unknown step {step!r} (known: {', '.join(self._steps)})")
        return handler(dict(state), ExecutionContext.from_payload(context))

    # -- steps ---------------------------------------------------------------------------------------------

    def cordon(self, state: State) -> State:
        """Validate the input and mark the node disrupted (cordon, taint, exclude from load balancers)."""
        request = request_of(state)
        if request.node:
            marked = self.kube.mark_disrupted(request.node)
            self.log.info(
                "node cordoned" if marked is not None else "node not found; nothing to cordon",
                extra={"node": request.node, "instanceId": request.instance_id, "reason": request.reason},
            )
        return {"request": request.to_json()}

    def await_replacement(self, state: State, context: ExecutionContext | None = None) -> State:
        """``replacement.ready`` once every replacement claim's node is Ready, or once the deadline is
        closer than the drain reserve (the drain must start anyway)."""
        request = request_of(state)
        now = self.clock()
        pending = self._unready_replacements(request.replacement_claims)
        out_of_time = now >= request.deadline_epoch - request.drain_reserve_seconds
        ready = not pending or out_of_time or not request.wait_for_replacement
        passes = self._count_pass(state)
        if not ready:
            self.events.publish(
                *(reasons.disruption_waiting_readiness(reasons.nodeclaim_ref(c)) for c in pending)
            )
        state["replacement"] = {
            "ready": ready,
            "pending": pending,
            "gaveUp": bool(pending) and out_of_time,
            "continueInNewExecution": not ready and self._time_to_continue(request, passes, context),
        }
        return state

    def drain(self, state: State, context: ExecutionContext | None = None) -> State:
        """One drain pass; ``drain.done`` when the node holds no pod that must go and its volumes are
        detached (or at the deadline). A pass the API refused
        did not finish (``drain.apiErrors``); ``drain.waitSeconds`` is the wait before the next one."""
        request = request_of(state)
        previous = state.get("drain") or {}
        now = self.clock()
        passes = int(previous.get("passes", 0))
        api_errors = int(previous.get("apiErrors", 0))
        try:
            abandon = request.on_deadline == ABANDON_AT_DEADLINE
            if abandon and now >= request.deadline_epoch and self._pods_left(request.node):
                return self._call_off(state, request, passes)
            if not passes:
                self._terminating(request)
            if not abandon:
                self._expiring(request)
            result = drain_pass(
                self.kube,
                request.node,
                now=now,
                deadline=request.deadline_epoch,
                delete_before_deadline=not abandon,
            )
        except Exception as error:
            if not is_transient(error):
                raise
            return self._drain_refused(state, request, context, error, now)
        if result.evicted:
            self.metrics.add(PODS_EVICTED, len(result.evicted), COUNT)
        if result.deleted:
            self.metrics.add(PODS_DELETED_AT_DEADLINE, len(result.deleted), COUNT)
            self._deleted_for_deadline(request, result.deleted_pods, result.grace)
        if result.blocked:
            self.metrics.add(EVICTIONS_BLOCKED, len(result.blocked), COUNT)
        if result.volume_attachments_unreadable:
            self.metrics.add(VOLUME_ATTACHMENTS_UNREADABLE, 1, COUNT)
        self._drain_events(request, result)
        self.log.info(
            "drain pass",
            extra={"node": request.node, **result.to_json(), "pass": int(previous.get("passes", 0)) + 1},
        )
        before = previous.get("remaining")
        progressed = bool(result.evicted or result.deleted) or (
            isinstance(before, int) and result.remaining < before
        )
        loop_passes = self._count_pass(state)
        state["drain"] = {
            **result.to_json(),
            "abandoned": False,
            "passes": passes + 1,
            "apiErrors": api_errors,
            "waitSeconds": self._drain_wait(request, previous, progressed, False, now, result.next_delete_at),
            "continueInNewExecution": not result.done
            and self._time_to_continue(request, loop_passes, context),
        }
        return state

    def _terminating(self, request: TerminationRequest) -> None:
        """``Disrupting Node: <reason>`` on the node and ``Disrupting NodeClaim: <reason>`` on its claim,
        as the drain starts (replacements, if any, are ready or given up on)."""
        refs = []
        if request.node:
            try:
                node = self.kube.get_node(request.node)
            except Exception:  # the drain pass reports API trouble; the event names the node anyway
                node = None
            refs.append(
                ObjectRef.of(node, kind="Node") if node is not None else reasons.node_ref(request.node)
            )
        if request.claim_id:
            refs.append(reasons.nodeclaim_ref(request.claim_id))
        self.events.publish(*(reasons.disruption_terminating(ref, request.reason) for ref in refs))

    def _expiring(self, request: TerminationRequest) -> None:
        """TerminationGracePeriodExpiring on the node and its NodeClaim: what is left at the deadline is
        deleted (every pass while draining; the recorder's dedupe keeps it to one per two minutes)."""
        deadline = epoch_to_iso(request.deadline_epoch)
        refs = [reasons.node_ref(request.node)] if request.node else []
        if request.claim_id:
            refs.append(reasons.nodeclaim_ref(request.claim_id))
        self.events.publish(*(reasons.termination_grace_period_expiring(ref, deadline) for ref in refs))

    def _drain_events(self, request: TerminationRequest, result: DrainPass) -> None:
        """Evicted on each pod evicted; FailedDraining on the node while pods are left (the first one a
        budget or the API refused, else how many wait); AwaitingVolumeDetachment once only volumes are."""
        found = [
            reasons.evicted(ObjectRef.of(pod, kind="Pod"), request.reason) for pod in result.evicted_pods
        ]
        if request.node and not result.done and result.remaining:
            if result.blocked:
                key, why = min(result.blocked.items())
                problem = f"{why} (Pod={key})"
            else:
                problem = f"{result.remaining} pods are waiting to be evicted"
            found.append(reasons.failed_draining(reasons.node_ref(request.node), problem))
        if result.volume_attachments and not result.done:
            node = reasons.node_ref(request.node)
            found.append(reasons.awaiting_volume_detachment(node, result.volume_attachments))
        self.events.publish(*found)

    def _drain_refused(
        self,
        state: State,
        request: TerminationRequest,
        context: ExecutionContext | None,
        error: BaseException,
        now: float,
    ) -> State:
        """A pass the Kubernetes API refused: not finished, counted; the deadline still applies."""
        previous = state.get("drain") or {}
        api_errors = int(previous.get("apiErrors", 0)) + 1
        self.metrics.add(DRAIN_API_ERRORS, 1, COUNT)
        self.log.warning(
            "drain pass refused by the Kubernetes API; the next pass tries again",
            extra={"node": request.node, "error": str(error)[:500], "apiErrors": api_errors},
        )
        loop_passes = self._count_pass(state)
        state["drain"] = {
            "done": False,
            "abandoned": False,
            "evicted": [],
            "blocked": {},
            "waiting": [],
            "deleted": [],
            "remaining": previous.get("remaining", 0),
            "passes": int(previous.get("passes", 0)) + 1,
            "apiErrors": api_errors,
            "apiError": f"{type(error).__name__}: {error}"[:500],
            "waitSeconds": self._drain_wait(request, previous, False, True, now),
            "continueInNewExecution": self._time_to_continue(request, loop_passes, context),
        }
        return state

    def _drain_wait(
        self,
        request: TerminationRequest,
        previous: Mapping[str, Any],
        progressed: bool,
        api_error: bool,
        now: float,
        next_delete_at: float | None = None,
    ) -> int:
        """The wait before the next pass; it ends by the deadline and by the time the next pod is due
        for deletion (``next_delete_at``)."""
        last = previous.get("waitSeconds")
        due = (
            request.deadline_epoch if next_delete_at is None else min(request.deadline_epoch, next_delete_at)
        )
        return next_drain_wait(
            int(last) if isinstance(last, int | float) else None,
            interval=request.drain_interval_seconds,
            ceiling=request.max_drain_interval_seconds,
            progressed=progressed,
            api_error=api_error,
            now=now,
            deadline=due,
        )

    def _count_pass(self, state: State) -> int:
        """Count one more loop pass in this execution (``execution.passes``; a continuation starts at 0)."""
        execution = dict(state.get("execution") or {})
        execution["passes"] = int(execution.get("passes", 0)) + 1
        state["execution"] = execution
        return int(execution["passes"])

    def _time_to_continue(
        self, request: TerminationRequest, passes: int, context: ExecutionContext | None
    ) -> bool:
        return should_continue(
            passes,
            context or ExecutionContext(),
            now=self.clock(),
            max_passes=request.passes_per_execution,
            max_seconds=request.execution_seconds,
        )

    def continue_execution(self, state: State, context: ExecutionContext | None = None) -> State:
        """Start the next execution of this state machine with the state and a ``resume`` marker; this
        execution then ends (``ContinuedInNewExecution``). A retry after a start that went through finds
        the execution already there."""
        request = request_of(state)
        context = context or ExecutionContext()
        if not context.state_machine_arn:
            raise InvalidRequestError("continue needs the state machine ARN in the payload's context")
        resume = state.get("resume")
        count = int(resume.get("count", 0)) + 1 if isinstance(resume, Mapping) else 1
        origin = origin_of(state, context)
        name = continuation_name(origin, request.instance_id, count)
        carried = carried_state(state)
        carried["resume"] = {"origin": origin, "count": count, "from": context.name}
        if self._client is None:
            if self._executions is None:
                raise InvalidRequestError("no Step Functions client to continue the workflow with")
            self._client = self._executions()
        try:
            answer = self._client.start_execution(
                stateMachineArn=context.state_machine_arn, name=name, input=json.dumps(carried)
            )
            execution_arn = str(answer["executionArn"])
        except Exception as error:
            code = str(((getattr(error, "response", None) or {}).get("Error") or {}).get("Code", ""))
            if code != "ExecutionAlreadyExists":
                raise
            execution_arn = context.state_machine_arn.replace(":stateMachine:", ":execution:") + f":{name}"
        self.metrics.add(WORKFLOW_CONTINUATIONS, 1, COUNT)
        self.log.info(
            "workflow continues in a new execution",
            extra={"node": request.node, "instanceId": request.instance_id, "execution": name},
        )
        state["continuation"] = {"execution": name, "executionArn": execution_arn, "count": count}
        return state

    def _deleted_for_deadline(
        self, request: TerminationRequest, pods: Iterable[Mapping[str, Any]], grace: Mapping[str, int]
    ) -> None:
        """A ``Disrupted`` event on each pod deleted to be gone by the deadline (``kubectl describe pod``
        says why it went past its budget)."""
        deadline = epoch_to_iso(request.deadline_epoch)
        self.events.publish(
            *(
                reasons.pod_deleted_for_deadline(
                    ObjectRef.of(pod, kind="Pod"),
                    given=grace.get(pod_key(pod), 0),
                    own=pod_grace_seconds(pod),
                    deadline=deadline,
                )
                for pod in pods
            )
        )

    def _pods_left(self, node: str) -> bool:
        """Whether ``node`` still holds a pod a drain must move (a drained node whose volumes are still
        attached at an ``abandon`` deadline is terminated, not given back)."""
        return bool(node) and bool(pods_to_drain(self.kube.list_pods_on_node(node), self.clock()))

    def _call_off(self, state: State, request: TerminationRequest, passes: int) -> State:
        """The deadline of a disruption that may not force its way past: uncordon the node, keep the
        instance, say why on the Node."""
        left = self.kube.list_pods_on_node(request.node) if request.node else []
        remaining = [pod_key(p) for p in pods_to_drain(left, self.clock())]
        node = self.kube.unmark_disrupted(request.node) if request.node else None
        cordoned = _unschedulable(node)
        kept = "its taint is removed (it stays cordoned, as before)" if cordoned else "the node is uncordoned"
        message = (
            f"Disruption ({request.reason}) called off: {len(remaining)} pod(s) could not be evicted before "
            f"{epoch_to_iso(request.deadline_epoch)} (PodDisruptionBudgets or karpenter.sh/do-not-disrupt); "
            f"{kept} and kept. Set the NodePool's terminationGracePeriod to force it."
        )[:1000]
        if node is not None:
            self.events.publish(reasons.disruption_called_off(ObjectRef.of(node, kind="Node"), message))
        self.metrics.add(DISRUPTIONS_CALLED_OFF, 1, COUNT, {"Reason": request.reason})
        self.log.warning(
            "disruption called off at its deadline",
            extra={"node": request.node, "instanceId": request.instance_id, "pods": remaining[:20]},
        )
        state["drain"] = {
            "done": False,
            "abandoned": True,
            "remaining": len(remaining),
            "waiting": remaining[:50],
            "passes": passes,
        }
        return state

    def terminate(self, state: State) -> State:
        """TerminateInstances, after checking the instance carries this cluster's tag."""
        request = request_of(state)
        try:
            result = self.cloud.terminate([request.instance_id])
        except NotOwnedError as error:
            raise InstanceNotOwnedError(str(error)) from None
        already_gone = request.instance_id in result.already_gone
        self.log.info(
            "instance terminated", extra={"instanceId": request.instance_id, "alreadyGone": already_gone}
        )
        state["instance"] = {
            "terminateRequestedAt": epoch_to_iso(self.clock()),
            "terminateRequestedAtEpoch": self.clock(),
            "alreadyGone": already_gone,
            "gone": already_gone,
        }
        return state

    def check_instance(self, state: State) -> State:
        """``instance.gone`` once the instance is shutting down, terminated or unknown; raises
        TerminationTimeoutError when that takes longer than ``terminateTimeoutSeconds``."""
        request = request_of(state)
        instance = dict(state.get("instance") or {})
        found = self._instance(request.instance_id)
        current = found.state if found is not None else "gone"
        gone = found is None or current in GONE_STATES
        requested = float(instance.get("terminateRequestedAtEpoch") or self.clock())
        if not gone and self.clock() - requested > request.terminate_timeout_seconds:
            raise TerminationTimeoutError(
                f"instance {request.instance_id} is still {current} {self.clock() - requested:.0f} s after "
                "TerminateInstances"
            )
        instance.update({"gone": gone, "state": current})
        state["instance"] = instance
        return state

    def delete_node(self, state: State) -> State:
        """Delete the Node, unless it now belongs to another instance (a name reused)."""
        request = request_of(state)
        deleted = False
        if request.node:
            node = self.kube.get_node(request.node)
            if node is not None:
                owner = instance_id_of(str((node.get("spec") or {}).get("providerID") or ""))
                if owner and owner != request.instance_id:
                    self.log.warning(
                        "node belongs to another instance; left alone",
                        extra={
                            "node": request.node,
                            "instanceId": request.instance_id,
                            "nodeInstance": owner,
                        },
                    )
                else:
                    uid = str((node.get("metadata") or {}).get("uid") or "")
                    deleted = self.kube.delete_node(request.node, uid=uid or None)
                    # The termination finalizer held the Node (Terminating) until its instance was gone.
                    release_node(self.kube, request.node, uid)
        state["node"] = {"deleted": deleted}
        return state

    def finalize_claim(self, state: State) -> State:
        """Mark the NodeClaim terminated; count the node as terminated."""
        request = request_of(state)
        finalized = False
        if request.claim_id and self.claims is not None:
            finalized = self.claims.finalize(request.claim_id, f"terminated: {request.reason}")
        if request.claim_id:
            # A NodeClaim object being deleted waits for its instance to be gone, as its Node did.
            self.kube.remove_finalizer(NODE_CLAIMS, request.claim_id, TERMINATION_FINALIZER)
        self.metrics.add(NODES_TERMINATED, 1, COUNT, {"Reason": request.reason})
        self.log.info(
            "node terminated",
            extra={
                "node": request.node,
                "instanceId": request.instance_id,
                "claim": request.claim_id,
                "claimFinalized": finalized,
                "reason": request.reason,
            },
        )
        state["claim"] = {"finalized": finalized}
        return state

    def record_failure(self, state: State) -> State:
        """The failure path: say why on the Node (a Warning event) and in the ``TerminationFailures``
        metric, and give the node back (uncordon) when its instance was never asked to terminate and still
        runs. Best effort: never raises; what it could not do is in ``failure.problems``, and while that
        may heal (the API unreachable) ``failure.pending`` asks for another attempt after
        ``failure.retrySeconds``. Later attempts only do what is still undone."""
        error, cause = failure_message(state.get("error"))
        nested = state.get("request")
        raw: Mapping[str, Any] = nested if isinstance(nested, Mapping) else state
        node = str(raw.get("node") or "")
        instance_id = str(raw.get("instanceId") or "")
        before = state.get("failure")
        done: Mapping[str, Any] = before if isinstance(before, Mapping) else {}
        attempts = int(done.get("attempts", 0)) + 1
        event_recorded = bool(done.get("eventRecorded"))
        uncordoned = bool(done.get("uncordoned"))
        if attempts == 1:
            self.metrics.add(TERMINATION_FAILURES, 1, COUNT)
            self.log.error(
                "termination failed",
                extra={"node": node, "instanceId": instance_id, "error": error, "cause": cause},
            )
        problems = _FailureProblems(self.log, node)
        if node and not (event_recorded and (uncordoned or state.get("instance"))):
            obj: Mapping[str, Any] | None = None
            try:
                obj = self.kube.get_node(node)
            except Exception as problem:
                problems.could_not("read the Node", problem)
            if (
                obj is not None
                and not uncordoned
                and not state.get("instance")
                and str(raw.get("reason") or "") != SPOT_INTERRUPTION_REASON
                and not (obj.get("metadata") or {}).get("deletionTimestamp")
                and _owned_by(obj, instance_id)
            ):
                # Never asked to terminate: give the node back rather than leave it cordoned with no
                # workflow to finish the job. An interruption that still applies starts a new workflow.
                # A spot-interrupted node is not given back: EC2 reclaims its instance within two minutes,
                # and pods placed on it would only be interrupted again. Nor is a Node being deleted: its
                # finalizer holds it and the disruption pass starts the workflow again.
                uncordoned = self._give_back(node, instance_id, problems)
            if obj is not None and not event_recorded:
                message = f"Termination of instance {instance_id or '?'} failed: {error}: {cause}"[:1000]
                event_recorded = self._failure_event(obj, message, problems)
        pending = bool(problems.found) and problems.retryable and attempts < FAILURE_RECORD_ATTEMPTS
        state["failure"] = {
            "error": error,
            "cause": cause,
            "eventRecorded": event_recorded,
            "uncordoned": uncordoned,
            "attempts": attempts,
            "problems": problems.found,
            "pending": pending,
            "retrySeconds": next_retry_wait(attempts, base=_int(raw.get("pollSeconds"))),
        }
        return state

    # -- helpers -------------------------------------------------------------------------------------------

    def _give_back(self, node: str, instance_id: str, problems: _FailureProblems) -> bool:
        """Uncordon ``node`` when its instance still runs; True when it was uncordoned."""
        try:
            if self._still_running(instance_id):
                return self.kube.unmark_disrupted(node) is not None
        except Exception as problem:
            problems.could_not("uncordon the Node", problem)
        return False

    def _failure_event(self, node: Mapping[str, Any], message: str, problems: _FailureProblems) -> bool:
        """A Warning event on the Node saying why termination failed; True when it was recorded."""
        event = reasons.failed_termination(ObjectRef.of(node, kind="Node"), message)
        error = self.events.record(event)
        if error is not None:
            problems.could_not("record the event", error)
        return error is None

    def _still_running(self, instance_id: str) -> bool:
        """True when the instance is this cluster's and neither shutting down nor terminated."""
        if not instance_id:
            return False
        found = self._instance(instance_id)
        return found is not None and found.state not in GONE_STATES

    def _instance(self, instance_id: str) -> Instance | None:
        """This cluster's instance, None when it is gone or not ours."""
        try:
            return self.cloud.get(instance_id)
        except InstanceNotFoundError:
            return None

    def _unready_replacements(self, claim_ids: list[str]) -> list[str]:
        """Replacement claims whose node is not Ready yet (a claim that failed or vanished counts as done:
        waiting for it would only burn the notice)."""
        if not claim_ids or self.claims is None:
            return []
        active = self.claims.active_instances(claim_ids)
        nodes = nodes_by_instance(self.kube.list_nodes()) if active else {}
        pending = []
        for claim_id, instance_id in active.items():
            node: Mapping[str, Any] = (nodes.get(instance_id) if instance_id else None) or {}
            conditions = (node.get("status") or {}).get("conditions") or []
            if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
                pending.append(claim_id)
        return sorted(pending)


def _int(value: Any) -> int:
    """``value`` as a non-negative int (0 when it is not a number)."""
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0


def _owned_by(node: Mapping[str, Any], instance_id: str) -> bool:
    """True when the Node is this instance's (or its providerID is not set yet)."""
    owner = instance_id_of(str((node.get("spec") or {}).get("providerID") or ""))
    return not owner or not instance_id or owner == instance_id


def _unschedulable(node: Mapping[str, Any] | None) -> bool:
    """The node (as given back) is still cordoned: it was before Fleetwright marked it."""
    return bool(((node or {}).get("spec") or {}).get("unschedulable"))
