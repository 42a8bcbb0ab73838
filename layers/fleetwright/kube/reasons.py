"""The Events Karpenter users read, with Karpenter's reasons, message shapes and dedupe windows.

Each function builds an :class:`~fleetwright.kube.events.Event` for
:meth:`~fleetwright.kube.events.EventRecorder.publish`; docs/kubernetes.md lists them all.
"""

from __future__ import annotations

from typing import Final

from fleetwright.kube.events import NOMINATION_LIMITER, NORMAL, WARNING, Event, ObjectRef
from fleetwright.model.pod import Pod

# The reason strings are Karpenter v1.14's (kubernetes-sigs/karpenter ``pkg/events/reason.go`` and the AWS
# provider's interruption events) where Karpenter has the event; the constant names are stable (the CLI and
# tests import them). ``KARPENTER_REASONS`` says which of Karpenter's reasons Fleetwright emits.

# Provisioning.
NOMINATED: Final = "Nominated"
FAILED_SCHEDULING: Final = "FailedScheduling"
NO_COMPATIBLE_INSTANCE_TYPES: Final = "NoCompatibleInstanceTypes"
# NodeClaim lifecycle.
INSUFFICIENT_CAPACITY_ERROR: Final = "InsufficientCapacityError"
LAUNCH_FAILED: Final = "LaunchFailed"
# A NodePool whose nodes keep failing to register stops launching for a while (Fleetwright's own).
REGISTRATION_BREAKER_OPEN: Final = "RegistrationBreakerOpen"
FAILED_CONSISTENCY_CHECK: Final = "FailedConsistencyCheck"
# Disruption.
DISRUPTION_BLOCKED: Final = "DisruptionBlocked"
UNCONSOLIDATABLE: Final = "Unconsolidatable"
DISRUPTION_LAUNCHING: Final = "DisruptionLaunching"
DISRUPTION_WAITING_READINESS: Final = "DisruptionWaitingReadiness"
DISRUPTION_TERMINATING: Final = "DisruptionTerminating"
CONSOLIDATION_CANDIDATE: Final = "ConsolidationCandidate"
CONSOLIDATION_REJECTED: Final = "ConsolidationRejected"
CONSOLIDATION_APPROVED: Final = "ConsolidationApproved"
INVALID_DO_NOT_DISRUPT_ANNOTATION: Final = "InvalidDoNotDisruptAnnotation"
DO_NOT_DISRUPT_UNTIL: Final = "DoNotDisruptUntil"
DO_NOT_DISRUPT_GRACE_PERIOD_ELAPSED: Final = "DoNotDisruptGracePeriodElapsed"
DISRUPTION_ABANDONED: Final = "DisruptionAbandoned"
# Node repair.
NODE_REPAIR_BLOCKED: Final = "NodeRepairBlocked"
NODE_REPAIR_BLOCKED_DEDUPE_SECONDS: Final = 900.0
# Termination.
AWAITING_VOLUME_DETACHMENT: Final = "AwaitingVolumeDetachment"
DISRUPTED: Final = "Disrupted"
EVICTED: Final = "Evicted"
FAILED_DRAINING: Final = "FailedDraining"
TERMINATION_GRACE_PERIOD_EXPIRING: Final = "TerminationGracePeriodExpiring"
FAILED_TERMINATION: Final = "FailedTermination"
DISRUPTION_CALLED_OFF: Final = "DisruptionCalledOff"
# Interruption (the AWS provider's reasons).
SPOT_INTERRUPTED: Final = "SpotInterrupted"
SPOT_REBALANCE_RECOMMENDATION: Final = "SpotRebalanceRecommendation"
INSTANCE_STOPPING: Final = "InstanceStopping"
INSTANCE_TERMINATING: Final = "InstanceTerminating"
INSTANCE_UNHEALTHY: Final = "InstanceUnhealthy"
TERMINATING_ON_INTERRUPTION: Final = "TerminatingOnInterruption"
INTERRUPTION_HANDLING_FAILED: Final = "InterruptionHandlingFailed"

NODE_CLAIM_API_VERSION: Final = "karpenter.sh/v1"
NODE_POOL_API_VERSION: Final = "karpenter.sh/v1"
FAILED_SCHEDULING_DEDUPE_SECONDS: Final = 300.0
UNCONSOLIDATABLE_DEDUPE_SECONDS: Final = 900.0
NODE_POOL_DEDUPE_SECONDS: Final = 60.0  # NoCompatibleInstanceTypes, a NodePool's DisruptionBlocked

EMITTED: Final = "emitted"
# Every reason Karpenter v1.14 emits (core and AWS provider): EMITTED, or why Fleetwright does not.
KARPENTER_REASONS: Final[dict[str, str]] = {
    NOMINATED: EMITTED,
    FAILED_SCHEDULING: EMITTED,
    NO_COMPATIBLE_INSTANCE_TYPES: EMITTED,
    INSUFFICIENT_CAPACITY_ERROR: EMITTED,
    FAILED_CONSISTENCY_CHECK: EMITTED,
    DISRUPTION_BLOCKED: EMITTED,
    UNCONSOLIDATABLE: EMITTED,
    DISRUPTION_LAUNCHING: EMITTED,
    DISRUPTION_WAITING_READINESS: EMITTED,
    DISRUPTION_TERMINATING: EMITTED,
    CONSOLIDATION_CANDIDATE: EMITTED,
    CONSOLIDATION_REJECTED: EMITTED,
    CONSOLIDATION_APPROVED: EMITTED,
    INVALID_DO_NOT_DISRUPT_ANNOTATION: EMITTED,
    DO_NOT_DISRUPT_UNTIL: EMITTED,
    DO_NOT_DISRUPT_GRACE_PERIOD_ELAPSED: EMITTED,
    NODE_REPAIR_BLOCKED: EMITTED,
    AWAITING_VOLUME_DETACHMENT: EMITTED,
    DISRUPTED: EMITTED,
    EVICTED: EMITTED,
    FAILED_DRAINING: EMITTED,
    TERMINATION_GRACE_PERIOD_EXPIRING: EMITTED,
    FAILED_TERMINATION: EMITTED,
    SPOT_INTERRUPTED: EMITTED,
    SPOT_REBALANCE_RECOMMENDATION: EMITTED,
    INSTANCE_STOPPING: EMITTED,
    INSTANCE_TERMINATING: EMITTED,
    INSTANCE_UNHEALTHY: EMITTED,
    TERMINATING_ON_INTERRUPTION: EMITTED,
    "NodeClassNotReady": "Karpenter v1.14 declares it but emits it nowhere; a launch refused because the "
    "EC2NodeClass is not ready is a LaunchFailed event",
    "UnregisteredTaintMissing": "Fleetwright's nodes register without the karpenter.sh/unregistered taint "
    "(claims are matched to nodes by instance id), so there is no missing taint to report",
    "CapacityReservationInstanceInterrupted": "the interruption queue receives no capacity reservation "
    "interruption events; nodes of an ended reservation are relabelled on-demand instead",
    "ZonalShiftActive": "Fleetwright does not watch ARC zonal shifts",
    "ZonalShiftCleared": "Fleetwright does not watch ARC zonal shifts",
    "WaitingOnNodeClaimTermination": "Fleetwright puts no finalizer on EC2NodeClasses: deleting one does not "
    "wait for its NodeClaims",
}


def pod_ref(pod: Pod) -> ObjectRef:
    """The reference to a pod of the scheduler's model."""
    return ObjectRef("Pod", pod.name, pod.namespace, pod.uid)


def node_ref(name: str, uid: str = "") -> ObjectRef:
    """The reference to a Node; without its uid, the node's name stands for it (the kubelet's convention,
    which ``kubectl describe node`` also searches)."""
    return ObjectRef("Node", name, uid=uid or name)


def nodeclaim_ref(name: str, uid: str = "") -> ObjectRef:
    """The reference to a NodeClaim (its object may not exist: the reference still names it)."""
    return ObjectRef("NodeClaim", name, uid=uid, api_version=NODE_CLAIM_API_VERSION)


def nodepool_ref(name: str, uid: str = "") -> ObjectRef:
    """The reference to a NodePool (its uid is looked up by the recorder when not given)."""
    return ObjectRef("NodePool", name, uid=uid, api_version=NODE_POOL_API_VERSION)


def _identity(ref: ObjectRef) -> str:
    return ref.uid or f"{ref.namespace}/{ref.name}"


def nominated(pod: Pod, *, nodeclaim: str = "", node: str = "") -> Event:
    """``Pod should schedule on: nodeclaim/X, node/Y`` — where the provisioner expects the pod to run."""
    where = [f"nodeclaim/{nodeclaim}"] if nodeclaim else []
    if node:
        where.append(f"node/{node}")
    ref = pod_ref(pod)
    return Event(
        ref,
        NOMINATED,
        f"Pod should schedule on: {', '.join(where)}",
        NORMAL,
        (_identity(ref),),
        limiter=NOMINATION_LIMITER,
    )


def failed_scheduling(pod: Pod, reason: str) -> Event:
    """No NodePool can run the pod, and why (the scheduler's reason)."""
    ref = pod_ref(pod)
    return Event(
        ref,
        FAILED_SCHEDULING,
        f"Failed to schedule pod, {reason}",
        WARNING,
        (_identity(ref),),
        FAILED_SCHEDULING_DEDUPE_SECONDS,
    )


def launch_failed(nodeclaim: ObjectRef, message: str, *, capacity: bool) -> Event:
    """The claim's launch failed: ``InsufficientCapacityError`` when EC2 had no capacity for any of its
    offerings, ``LaunchFailed`` for any other refusal."""
    reason = INSUFFICIENT_CAPACITY_ERROR if capacity else LAUNCH_FAILED
    return Event(
        nodeclaim,
        reason,
        f"NodeClaim {nodeclaim.name} event: {message}",
        WARNING,
        (_identity(nodeclaim),),
    )


def registration_breaker_open(nodepool: str, message: str) -> Event:
    """The NodePool launches nothing until its registration breaker closes, and why."""
    ref = nodepool_ref(nodepool)
    return Event(ref, REGISTRATION_BREAKER_OPEN, message, WARNING, (_identity(ref), message))


def disruption_blocked(ref: ObjectRef, message: str) -> Event:
    """Why the node (or its NodeClaim) may not be disrupted now."""
    return Event(ref, DISRUPTION_BLOCKED, _sentence(message), NORMAL, (_identity(ref),))


def unconsolidatable(ref: ObjectRef, message: str) -> Event:
    """Why consolidation leaves the node (or its NodeClaim) as it is."""
    return Event(
        ref, UNCONSOLIDATABLE, _sentence(message), NORMAL, (_identity(ref),), UNCONSOLIDATABLE_DEDUPE_SECONDS
    )


def disruption_launching(nodeclaim: ObjectRef, reason: str) -> Event:
    """A replacement NodeClaim launched for a disruption."""
    return Event(
        nodeclaim,
        DISRUPTION_LAUNCHING,
        f"Launching NodeClaim: {reason}",
        NORMAL,
        (_identity(nodeclaim), reason),
    )


def disruption_waiting_readiness(nodeclaim: ObjectRef) -> Event:
    """A disruption waits for this replacement to be Ready before draining."""
    return Event(
        nodeclaim,
        DISRUPTION_WAITING_READINESS,
        "Waiting on readiness to continue disruption",
        NORMAL,
        (_identity(nodeclaim),),
    )


def disruption_terminating(ref: ObjectRef, reason: str) -> Event:
    """The node (``Disrupting Node: Reason``) or its NodeClaim (``Disrupting NodeClaim: Reason``) goes."""
    return Event(
        ref,
        DISRUPTION_TERMINATING,
        f"Disrupting {ref.kind}: {reason}",
        NORMAL,
        (_identity(ref), reason),
    )


def invalid_do_not_disrupt(pod: Pod, message: str) -> Event:
    """A pod's ``karpenter.sh/do-not-disrupt`` value is neither "true" nor a positive duration: ignored."""
    ref = pod_ref(pod)
    return Event(
        ref,
        INVALID_DO_NOT_DISRUPT_ANNOTATION,
        f"Invalid karpenter.sh/do-not-disrupt annotation: {message}, ignoring annotation",
        WARNING,
        (_identity(ref), message),
    )


def do_not_disrupt_until(pod: Pod, until: str) -> Event:
    """The pod's ``karpenter.sh/do-not-disrupt`` duration protects it until ``until`` (RFC 3339)."""
    ref = pod_ref(pod)
    return Event(
        ref,
        DO_NOT_DISRUPT_UNTIL,
        f"The karpenter.sh/do-not-disrupt grace period will elapse at {until}",
        NORMAL,
        (_identity(ref), until),
    )


def do_not_disrupt_grace_period_elapsed(pod: Pod) -> Event:
    """The pod's ``karpenter.sh/do-not-disrupt`` duration has run out: it may be disrupted."""
    ref = pod_ref(pod)
    return Event(
        ref,
        DO_NOT_DISRUPT_GRACE_PERIOD_ELAPSED,
        "The karpenter.sh/do-not-disrupt grace period has elapsed, pod is now disruptable",
        NORMAL,
        (_identity(ref),),
    )


def node_repair_blocked(ref: ObjectRef, message: str) -> Event:
    """An unhealthy node is not repaired: too many of its NodePool's nodes are unhealthy."""
    return Event(
        ref, NODE_REPAIR_BLOCKED, message, WARNING, (_identity(ref),), NODE_REPAIR_BLOCKED_DEDUPE_SECONDS
    )


def awaiting_volume_detachment(node: ObjectRef, attachments: list[str]) -> Event:
    """A drained node's instance waits for these VolumeAttachments to be deleted."""
    shown = ", ".join(attachments[:5])
    if len(attachments) > 5:
        shown += f" and {len(attachments) - 5} other(s)"
    return Event(
        node,
        AWAITING_VOLUME_DETACHMENT,
        f"Awaiting deletion of bound volumeattachments ({shown})",
        NORMAL,
        (node.name,),
    )


def pod_deleted_for_deadline(pod: ObjectRef, *, given: int, own: int, deadline: str) -> Event:
    """A pod deleted, past its budgets and do-not-disrupt, so that it is gone by the node's termination
    time ``deadline`` (RFC 3339); ``given`` of its ``own`` grace seconds."""
    return Event(
        pod,
        DISRUPTED,
        f"Deleting the pod to accommodate the terminationTime {deadline} of the node. The pod was granted "
        f"{given} seconds of grace-period of its {own} terminationGracePeriodSeconds. This bypasses the PDB "
        "of the pod and the do-not-disrupt annotation.",
        NORMAL,
        (pod.namespace, pod.name),
    )


def evicted(pod: ObjectRef, reason: str) -> Event:
    """The Eviction API accepted the pod's eviction; ``reason`` is why its node goes."""
    return Event(pod, EVICTED, f"Evicted pod: {reason}", NORMAL, (pod.namespace, pod.name))


def failed_draining(node: ObjectRef, why: str) -> Event:
    """A drain pass left pods on the node (``why``: a budget refused an eviction, or how many wait)."""
    return Event(node, FAILED_DRAINING, f"Failed to drain node, {why}", WARNING, (node.name,))


def termination_grace_period_expiring(ref: ObjectRef, deadline: str) -> Event:
    """The node (or its NodeClaim) drains against a deadline that deletes what is left (RFC 3339)."""
    return Event(
        ref,
        TERMINATION_GRACE_PERIOD_EXPIRING,
        f"All pods will be deleted by {deadline}",
        WARNING,
        (ref.kind, ref.name),
    )


def failed_termination(node: ObjectRef, message: str) -> Event:
    """The termination workflow took its failure path (written at once, the failure path retries it)."""
    return Event(node, FAILED_TERMINATION, message, WARNING)


def disruption_called_off(node: ObjectRef, message: str) -> Event:
    """A graceful disruption reached its deadline with pods left: the node is given back and kept."""
    return Event(node, DISRUPTION_CALLED_OFF, message, WARNING, (_identity(node),))


def disruption_abandoned(node: ObjectRef, message: str) -> Event:
    """The sweep gave back a node left marked for disruption with no workflow working on it."""
    return Event(node, DISRUPTION_ABANDONED, message, WARNING, (_identity(node),))


# Interruption: Karpenter's AWS provider writes each on the NodeClaim, and on the Node when there is one.
_INTERRUPTION_NOTICES: Final[dict[str, tuple[str, str]]] = {
    SPOT_INTERRUPTED: (WARNING, "Spot interruption warning was triggered"),
    SPOT_REBALANCE_RECOMMENDATION: (NORMAL, "Spot rebalance recommendation was triggered"),
    INSTANCE_STOPPING: (WARNING, "Instance is stopping"),
    INSTANCE_TERMINATING: (WARNING, "Instance is terminating"),
    INSTANCE_UNHEALTHY: (WARNING, "An unhealthy warning was triggered for the instance"),
}


def interruption_notice(reason: str, refs: list[ObjectRef]) -> list[Event]:
    """What an interruption message says about the instance (``reason``: one of SpotInterrupted,
    SpotRebalanceRecommendation, InstanceStopping, InstanceTerminating, InstanceUnhealthy), on each of
    ``refs`` (its NodeClaim and Node)."""
    type_, message = _INTERRUPTION_NOTICES[reason]
    return [Event(ref, reason, message, type_, (_identity(ref),)) for ref in refs]


def terminating_on_interruption(refs: list[ObjectRef]) -> list[Event]:
    """The interruption started the node's termination: ``Interruption triggered termination for the
    NodeClaim`` / ``... for the Node``."""
    return [
        Event(
            ref,
            TERMINATING_ON_INTERRUPTION,
            f"Interruption triggered termination for the {ref.kind}",
            WARNING,
            (_identity(ref),),
        )
        for ref in refs
    ]


def interruption_handling_failed(node: ObjectRef, message: str) -> Event:
    """An interruption's attempts are exhausted: the node is given back."""
    return Event(node, INTERRUPTION_HANDLING_FAILED, message, WARNING, (_identity(node),))


def consolidation_candidate(ref: ObjectRef, command: str, savings: float) -> Event:
    """Consolidation found a command removing this node (or its NodeClaim)."""
    return Event(
        ref,
        CONSOLIDATION_CANDIDATE,
        f"Consolidation candidate: {command} (savings: ${savings:.2f})",
        NORMAL,
        (_identity(ref), command),
    )


def consolidation_rejected(ref: ObjectRef, command: str, reason: str, savings: float) -> Event:
    """The command was dropped when checked again before acting (``reason``: what changed)."""
    return Event(
        ref,
        CONSOLIDATION_REJECTED,
        f"Consolidation rejected: {command}, reason: {reason} (savings: ${savings:.2f})",
        NORMAL,
        (_identity(ref), command, reason),
    )


def consolidation_approved(
    ref: ObjectRef, *, score: float, threshold: float, k: int, savings_pct: float, disruption_pct: float
) -> Event:
    """A Balanced NodePool's score passed: on the node and its NodeClaim for a single-node command, on
    the NodePool for a multi-node one."""
    return Event(
        ref,
        CONSOLIDATION_APPROVED,
        f"score {score:.2f} >= threshold {threshold:.2f} (k: {k}, savings {savings_pct:.1f}%, "
        f"disruption {disruption_pct:.1f}%)",
        NORMAL,
        (_identity(ref),),
    )


def nodepool_disruption_blocked(nodepool: ObjectRef, reason: str) -> Event:
    """The NodePool's budgets allow no disruption for ``reason`` (Empty, Drifted, Underutilized) now."""
    return Event(
        nodepool,
        DISRUPTION_BLOCKED,
        f"No allowed disruptions for disruption reason {reason} due to blocking budget",
        NORMAL,
        (_identity(nodepool), reason),
        NODE_POOL_DEDUPE_SECONDS,
    )


def no_compatible_instance_types(nodepool: ObjectRef, *, min_values: bool) -> Event:
    """No instance type offered satisfies the NodePool's requirements (``min_values``: its minValues)."""
    message = "NodePool requirements filtered out all compatible available instance types"
    if min_values:
        message += " due to minValues incompatibility"
    return Event(
        nodepool,
        NO_COMPATIBLE_INSTANCE_TYPES,
        message,
        WARNING,
        (_identity(nodepool),),
        NODE_POOL_DEDUPE_SECONDS,
    )


def failed_consistency_check(nodeclaim: ObjectRef, message: str) -> Event:
    """The claim's node is not what was launched (``expected 4 of resource cpu, but found 2 ...``)."""
    return Event(nodeclaim, FAILED_CONSISTENCY_CHECK, message, WARNING, (_identity(nodeclaim), message))


def _sentence(text: str) -> str:
    """Capitalized, as Karpenter's ``pretty.Sentence`` writes reasons."""
    return text[:1].upper() + text[1:] if text else text
