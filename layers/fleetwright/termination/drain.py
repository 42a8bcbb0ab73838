"""One drain pass over a node: evict its pods group by group, respecting disruption budgets, until the
deadline. The rules are Karpenter's terminator's (v1.x):

- Which pods the node waits for: every pod but finished ones (Succeeded/Failed), mirror (static) pods,
  pods that tolerate the ``karpenter.sh/disrupted:NoSchedule`` taint (an eviction would only see them
  scheduled right back; they go with the node) and pods stuck terminating more than a minute past their
  ``deletionTimestamp`` (their kubelet is not finishing them). DaemonSet pods are waited for: the taint
  keeps their controller from putting them back.
- In what order: four groups, each evicted only once the one before it is gone (a terminating pod, or a
  ``karpenter.sh/do-not-disrupt`` pod, keeps its group open): non-critical pods not owned by a DaemonSet,
  non-critical DaemonSet pods, then pods of ``system-cluster-critical`` / ``system-node-critical`` not
  owned by a DaemonSet, then critical DaemonSet pods (cluster DNS and node agents keep serving the pods
  being moved).
- Pods annotated ``karpenter.sh/do-not-disrupt`` (``"true"``, or a duration not yet elapsed since the pod
  started) are never evicted; they hold the drain open until the deadline.
- An eviction refused with 429 (a PodDisruptionBudget) is tried again on the next pass.
- Against a deadline that deletes (Karpenter's ``terminationGracePeriod``), each pod the node waits for is
  deleted, past its budgets, do-not-disrupt and group order (as Karpenter's terminator does), as soon as
  its own ``terminationGracePeriodSeconds`` would otherwise end after the deadline: a pod with 300 s is
  deleted 300 s before it, with its 300 s intact. A terminating pod whose ``deletionTimestamp`` lies past
  the deadline is deleted again with what is left. The grace given is what remains before the deadline,
  at least 1 s (0 would remove the pod from the API before its containers stop).
- At the deadline every remaining pod is deleted so (grace 1 s) and the node counts as drained: the
  instance is terminated then.
- Once no pod that must go remains, the node is drained only when its VolumeAttachments are gone too
  (:mod:`fleetwright.termination.volumes`), or at the deadline.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fleetwright.kube.cluster import EvictionOutcome, KubeCluster
from fleetwright.kube.errors import KubeApiError
from fleetwright.model.labels import DISRUPTED_TAINT_KEY, MIRROR_POD_ANNOTATION
from fleetwright.model.taints import NO_SCHEDULE, Taint
from fleetwright.termination.continuation import parse_time
from fleetwright.termination.errors import is_transient
from fleetwright.termination.volumes import pending_attachments

log = logging.getLogger(__name__)

DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
CRITICAL_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
FINISHED_PHASES = frozenset({"Succeeded", "Failed"})
DEFAULT_POD_GRACE_SECONDS = 30  # what the API server gives a pod that sets none
MIN_DELETE_GRACE_SECONDS = 1
UNREADABLE_STATUSES = frozenset({403, 404})  # RBAC without volumeattachments; no storage.k8s.io/v1
STUCK_TERMINATING_SECONDS = 60  # past a pod's deletionTimestamp, as Karpenter waits
DISRUPTED_NO_SCHEDULE = Taint(DISRUPTED_TAINT_KEY, NO_SCHEDULE)


def pod_key(pod: Mapping[str, Any]) -> str:
    """``namespace/name``."""
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


def is_daemonset_pod(pod: Mapping[str, Any]) -> bool:
    """Controlled by a DaemonSet."""
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    return any(o.get("kind") == "DaemonSet" and o.get("controller", True) for o in owners)


def is_mirror_pod(pod: Mapping[str, Any]) -> bool:
    """A static pod's API mirror (the kubelet owns it; it cannot be evicted): the mirror annotation, or
    owned by its Node."""
    meta = pod.get("metadata") or {}
    if MIRROR_POD_ANNOTATION in (meta.get("annotations") or {}):
        return True
    owners = meta.get("ownerReferences") or []
    return any(
        o.get("kind") == "Node" and o.get("apiVersion") == "v1" for o in owners if isinstance(o, Mapping)
    )


def is_finished(pod: Mapping[str, Any]) -> bool:
    """Succeeded or Failed."""
    return (pod.get("status") or {}).get("phase") in FINISHED_PHASES


def is_terminating(pod: Mapping[str, Any]) -> bool:
    """Already being deleted."""
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def is_stuck_terminating(pod: Mapping[str, Any], now: float) -> bool:
    """Terminating more than a minute past its ``deletionTimestamp`` (the end of its grace period): its
    kubelet is not finishing it, and waiting longer would not help."""
    ends = parse_time((pod.get("metadata") or {}).get("deletionTimestamp"))
    return ends is not None and now - ends > STUCK_TERMINATING_SECONDS


def tolerates_disrupted(pod: Mapping[str, Any]) -> bool:
    """Tolerates ``karpenter.sh/disrupted:NoSchedule``: an eviction would let it come straight back."""
    from fleetwright.model.taints import Toleration

    for raw in (pod.get("spec") or {}).get("tolerations") or []:
        if not isinstance(raw, Mapping):
            continue
        toleration = Toleration(
            key=str(raw.get("key") or ""),
            operator=str(raw.get("operator") or "Equal"),
            value=str(raw.get("value") or ""),
            effect=str(raw.get("effect") or ""),
        )
        if toleration.tolerates(DISRUPTED_NO_SCHEDULE):
            return True
    return False


def is_do_not_disrupt(pod: Mapping[str, Any], now: float) -> bool:
    """Protected by ``karpenter.sh/do-not-disrupt`` at ``now``: ``"true"``, or a duration not yet elapsed
    since the pod's ``status.startTime`` (see ``fleetwright.model.donotdisrupt``)."""
    from fleetwright.model.donotdisrupt import pod_protection
    from fleetwright.model.kube import start_time

    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    started = start_time((pod.get("status") or {}).get("startTime"))
    return pod_protection(annotations, started, now).active


def is_critical(pod: Mapping[str, Any]) -> bool:
    """In one of the system-critical priority classes."""
    return (pod.get("spec") or {}).get("priorityClassName") in CRITICAL_PRIORITY_CLASSES


def stays(pod: Mapping[str, Any], now: float) -> bool:
    """A pod the drain neither evicts nor waits for: mirror pods, pods tolerating the disrupted taint, pods
    stuck terminating (they go with the node, and so do their volumes)."""
    return is_mirror_pod(pod) or tolerates_disrupted(pod) or is_stuck_terminating(pod, now)


def pods_to_drain(pods: Iterable[Mapping[str, Any]], now: float) -> list[Mapping[str, Any]]:
    """The pods a drain must see gone at ``now``: not finished, and not :func:`stays`."""
    return [p for p in pods if not (is_finished(p) or stays(p, now))]


def drain_group(pod: Mapping[str, Any]) -> int:
    """The pod's place in the eviction order: 0 non-critical, 1 non-critical DaemonSet, 2 critical,
    3 critical DaemonSet."""
    return 2 * is_critical(pod) + is_daemonset_pod(pod)


def next_tier(pods: Iterable[Mapping[str, Any]], now: float) -> list[Mapping[str, Any]]:
    """The pods to evict at ``now`` among ``pods`` (those the drain waits for): the evictable pods of the
    first group that still has any pod.

    Terminating and do-not-disrupt pods keep their group open (they are still there) but are not evicted.
    """
    waiting = list(pods)
    if not waiting:
        return []
    first = min(drain_group(p) for p in waiting)
    return [
        p
        for p in waiting
        if drain_group(p) == first and not is_terminating(p) and not is_do_not_disrupt(p, now)
    ]


def pod_grace_seconds(pod: Mapping[str, Any]) -> int:
    """The pod's ``terminationGracePeriodSeconds`` (the API server's default when unset)."""
    value = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    try:
        return max(0, int(value)) if value is not None else DEFAULT_POD_GRACE_SECONDS
    except (TypeError, ValueError):
        return DEFAULT_POD_GRACE_SECONDS


def delete_time(pod: Mapping[str, Any], deadline: float) -> float | None:
    """When the pod must be deleted for its grace period to end by ``deadline``; None when it needs no
    deletion (terminating already, and done by the deadline)."""
    if is_terminating(pod):
        ends = parse_time((pod.get("metadata") or {}).get("deletionTimestamp"))
        return float("-inf") if ends is not None and ends > deadline else None
    return deadline - pod_grace_seconds(pod)


def delete_grace(now: float, deadline: float) -> int:
    """The grace period a pod deleted now is given: what remains before the deadline, at least 1 s."""
    return max(int(deadline - now), MIN_DELETE_GRACE_SECONDS)


@dataclass(slots=True)
class DrainPass:
    """What one pass did and what is left. ``done`` when no pod that must go remains."""

    done: bool = False
    evicted: list[str] = field(default_factory=list)
    evicted_pods: list[Mapping[str, Any]] = field(default_factory=list)  # the evicted pods as listed
    blocked: dict[str, str] = field(default_factory=dict)  # pod → why (budget, API error)
    waiting: list[str] = field(default_factory=list)  # not acted on: do-not-disrupt, terminating, next tier
    deleted: list[str] = field(default_factory=list)  # deleted to meet the deadline
    grace: dict[str, int] = field(default_factory=dict)  # deleted pod → grace period given
    deleted_pods: list[Mapping[str, Any]] = field(default_factory=list)  # the deleted pods as listed
    remaining: int = 0
    volume_attachments: list[str] = field(default_factory=list)  # still attached, pods gone
    volume_attachments_unreadable: str = ""  # why they could not be listed (not waited for)
    next_delete_at: float | None = None  # when the next pod is due for deletion

    def to_json(self) -> dict[str, Any]:
        """The pass as the workflow state's ``drain`` section."""
        out: dict[str, Any] = {
            "done": self.done,
            "evicted": self.evicted,
            "blocked": self.blocked,
            "waiting": self.waiting,
            "deleted": self.deleted,
            "grace": self.grace,
            "remaining": self.remaining,
            "volumeAttachments": self.volume_attachments,
        }
        if self.volume_attachments_unreadable:
            out["volumeAttachmentsUnreadable"] = self.volume_attachments_unreadable
        return out


def drain_pass(
    kube: KubeCluster, node: str, *, now: float, deadline: float, delete_before_deadline: bool = True
) -> DrainPass:
    """Delete the pods due before ``deadline`` (with ``delete_before_deadline``), evict the next tier of
    the others, and report; at ``deadline`` delete all that remain.

    A missing node counts as drained. Transient API errors propagate (the workflow retries the pass);
    any other error on one pod's eviction leaves that pod blocked until the next pass.
    """
    result = DrainPass()
    if not node or kube.get_node(node) is None:
        result.done = True
        return result
    pods = kube.list_pods_on_node(node)
    remaining = pods_to_drain(pods, now)
    if not remaining:
        return _await_volumes(kube, node, pods, result, now=now, deadline=deadline)
    if now >= deadline:
        for pod in remaining:
            _delete(kube, pod, result, grace=MIN_DELETE_GRACE_SECONDS)
        log.warning("deadline reached; remaining pods deleted", extra={"node": node, "pods": result.deleted})
        result.done = True
        return result
    due = (
        _delete_due(kube, node, remaining, result, now=now, deadline=deadline)
        if delete_before_deadline
        else []
    )
    due_keys = {pod_key(p) for p in due}
    # A pod just deleted keeps its tier open, as a terminating one does.
    tier = [p for p in next_tier(remaining, now) if pod_key(p) not in due_keys]
    for pod in tier:
        _evict(kube, pod, result)
    acted = {pod_key(p) for p in tier} | due_keys
    result.waiting = [pod_key(p) for p in remaining if pod_key(p) not in acted]
    # Evictions usually finish at once (or the pods are now terminating): look again so a drained node
    # does not cost another Wait.
    pods = kube.list_pods_on_node(node)
    left = pods_to_drain(pods, now)
    result.remaining = len(left)
    if left:
        return result
    return _await_volumes(kube, node, pods, result, now=now, deadline=deadline)


def _delete_due(
    kube: KubeCluster,
    node: str,
    remaining: list[Mapping[str, Any]],
    result: DrainPass,
    *,
    now: float,
    deadline: float,
) -> list[Mapping[str, Any]]:
    """Delete the pods whose grace period must start now to end by ``deadline``; the deleted pods."""
    due: list[Mapping[str, Any]] = []
    later = []
    for pod in remaining:
        when = delete_time(pod, deadline)
        if when is not None and now >= when:
            due.append(pod)
        elif when is not None:
            later.append(when)
    result.next_delete_at = min(later) if later else None
    for pod in due:
        _delete(kube, pod, result, grace=delete_grace(now, deadline))
    if due:
        log.info(
            "pods deleted to end their grace periods by the deadline",
            extra={"node": node, "grace": result.grace},
        )
    return due


def _evict(kube: KubeCluster, pod: Mapping[str, Any], result: DrainPass) -> None:
    """Evict one pod: evicted, or blocked (by its budget, or an API error other than a transient one)."""
    meta = pod.get("metadata") or {}
    key = pod_key(pod)
    try:
        outcome = kube.evict(meta.get("namespace") or "default", meta["name"], uid=meta.get("uid"))
    except KubeApiError as error:
        if is_transient(error) and error.status != 500:
            raise
        # 500 is the answer for a pod selected by several budgets: it stays blocked, as a 429 would.
        result.blocked[key] = error.message or str(error)
        return
    if outcome.outcome is EvictionOutcome.BLOCKED:
        result.blocked[key] = outcome.message or "blocked by a PodDisruptionBudget"
    else:
        result.evicted.append(key)
        result.evicted_pods.append(pod)


def _delete(kube: KubeCluster, pod: Mapping[str, Any], result: DrainPass, *, grace: int) -> None:
    meta = pod.get("metadata") or {}
    kube.delete_pod(
        meta.get("namespace") or "default", meta["name"], grace_period_seconds=grace, uid=meta.get("uid")
    )
    key = pod_key(pod)
    result.deleted.append(key)
    result.grace[key] = grace
    result.deleted_pods.append(pod)


def _await_volumes(
    kube: KubeCluster,
    node: str,
    pods: Iterable[Mapping[str, Any]],
    result: DrainPass,
    *,
    now: float,
    deadline: float,
) -> DrainPass:
    """No pod that must go is left: drained once the node's VolumeAttachments are detached, or at the
    deadline (the instance goes then whatever is still attached)."""
    staying = [p for p in pods if not is_finished(p) and stays(p, now)]
    try:
        result.volume_attachments = pending_attachments(kube, node, staying)
    except KubeApiError as error:
        if error.status not in UNREADABLE_STATUSES:
            raise
        # A ClusterRole without ``volumeattachments`` (or an API without storage.k8s.io/v1): waiting
        # would hold every termination until its deadline, so the node goes as before, said loudly.
        result.volume_attachments_unreadable = f"{error.status} {error.reason}"
        log.warning(
            "cannot read VolumeAttachments; not waiting for volumes to detach",
            extra={"node": node, "error": str(error)},
        )
    result.done = not result.volume_attachments or now >= deadline
    if result.volume_attachments and result.done:
        log.warning(
            "deadline reached; volumes still attached",
            extra={"node": node, "volumeAttachments": result.volume_attachments[:20]},
        )
    return result
