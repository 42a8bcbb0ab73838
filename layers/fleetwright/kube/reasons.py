"""The Events Karpenter users read, with Karpenter's reasons, message shapes and dedupe windows.

Each function builds an :class:`~fleetwright.kube.events.Event` for
:meth:`~fleetwright.kube.events.EventRecorder.publish`; docs/kubernetes.md lists them all.
"""

from __future__ import annotations

from typing import Final

from fleetwright.kube.events import NOMINATION_LIMITER, NORMAL, WARNING, Event, ObjectRef
from fleetwright.model.pod import Pod

# Provisioning.
NOMINATED: Final = "Nominated"
FAILED_SCHEDULING: Final = "FailedScheduling"
# NodeClaim lifecycle.
INSUFFICIENT_CAPACITY_ERROR: Final = "InsufficientCapacityError"
LAUNCH_FAILED: Final = "LaunchFailed"
# A NodePool whose nodes keep failing to register stops launching for a while (Fleetwright's own).
REGISTRATION_BREAKER_OPEN: Final = "RegistrationBreakerOpen"
# Disruption.
DISRUPTION_BLOCKED: Final = "DisruptionBlocked"
UNCONSOLIDATABLE: Final = "Unconsolidatable"
DISRUPTION_LAUNCHING: Final = "DisruptionLaunching"
DISRUPTION_WAITING_READINESS: Final = "DisruptionWaitingReadiness"
DISRUPTION_TERMINATING: Final = "DisruptionTerminating"
INVALID_DO_NOT_DISRUPT_ANNOTATION: Final = "InvalidDoNotDisruptAnnotation"
# Node repair.
NODE_REPAIR_BLOCKED: Final = "NodeRepairBlocked"
NODE_REPAIR_BLOCKED_DEDUPE_SECONDS: Final = 900.0
# Termination.
AWAITING_VOLUME_DETACHMENT: Final = "AwaitingVolumeDetachment"
DISRUPTED: Final = "Disrupted"

NODE_CLAIM_API_VERSION: Final = "karpenter.sh/v1"
FAILED_SCHEDULING_DEDUPE_SECONDS: Final = 300.0
UNCONSOLIDATABLE_DEDUPE_SECONDS: Final = 900.0


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


def nodepool_ref(name: str) -> ObjectRef:
    """The reference to a NodePool (the recorder looks its uid up, so ``kubectl describe`` finds it)."""
    return ObjectRef("NodePool", name, api_version=NODE_CLAIM_API_VERSION)


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
        f"Deleted to be gone by the node's termination time {deadline}: given {given}s of its {own}s "
        "terminationGracePeriodSeconds, past its PodDisruptionBudgets and do-not-disrupt annotation",
        NORMAL,
        (pod.namespace, pod.name),
    )


def _sentence(text: str) -> str:
    """Capitalized, as Karpenter's ``pretty.Sentence`` writes reasons."""
    return text[:1].upper() + text[1:] if text else text
