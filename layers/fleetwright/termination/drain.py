"""One drain pass over a node: evict its pods in tiers, respecting disruption budgets, until the deadline.

Which pods a drain moves, and in what order:

- DaemonSet pods and mirror (static) pods stay: they belong to the node and go with it.
- Finished pods (Succeeded/Failed) hold nothing and are ignored.
- Pods annotated ``karpenter.sh/do-not-disrupt`` (``"true"``, or a duration not yet elapsed since the pod
  started) are not evicted; they block the drain until the deadline (and do not hold back the next tier).
- Other pods are evicted in two tiers: everything but the critical priority classes first; pods of
  ``system-cluster-critical`` / ``system-node-critical`` only once no other such pod is left (so cluster DNS
  and the like keep serving the pods being moved).
- An eviction refused with 429 (a PodDisruptionBudget) is tried again on the next pass.
- At the deadline every remaining pod (including do-not-disrupt and terminating ones) is deleted with a
  zero grace period: the instance is about to go, and the pods must leave the API before it does.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fleetwright.kube.cluster import EvictionOutcome, KubeCluster
from fleetwright.kube.errors import KubeApiError
from fleetwright.model.labels import MIRROR_POD_ANNOTATION
from fleetwright.termination.errors import is_transient

log = logging.getLogger(__name__)

DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
CRITICAL_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
FINISHED_PHASES = frozenset({"Succeeded", "Failed"})


def pod_key(pod: Mapping[str, Any]) -> str:
    """``namespace/name``."""
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


def is_daemonset_pod(pod: Mapping[str, Any]) -> bool:
    """Controlled by a DaemonSet."""
    owners = (pod.get("metadata") or {}).get("ownerReferences") or []
    return any(o.get("kind") == "DaemonSet" and o.get("controller", True) for o in owners)


def is_mirror_pod(pod: Mapping[str, Any]) -> bool:
    """A static pod's API mirror (the kubelet owns it; it cannot be evicted)."""
    return MIRROR_POD_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {})


def is_finished(pod: Mapping[str, Any]) -> bool:
    """Succeeded or Failed."""
    return (pod.get("status") or {}).get("phase") in FINISHED_PHASES


def is_terminating(pod: Mapping[str, Any]) -> bool:
    """Already being deleted."""
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def is_do_not_disrupt(pod: Mapping[str, Any], now: float | None = None) -> bool:
    """Protected by ``karpenter.sh/do-not-disrupt`` at ``now`` (default: the wall clock): ``"true"``, or a
    duration not yet elapsed since the pod's ``status.startTime`` (see ``fleetwright.model.donotdisrupt``)."""
    import time

    from fleetwright.model.donotdisrupt import pod_protection
    from fleetwright.model.kube import start_time

    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    started = start_time((pod.get("status") or {}).get("startTime"))
    return pod_protection(annotations, started, time.time() if now is None else now).active


def is_critical(pod: Mapping[str, Any]) -> bool:
    """In one of the system-critical priority classes."""
    return (pod.get("spec") or {}).get("priorityClassName") in CRITICAL_PRIORITY_CLASSES


def pods_to_drain(pods: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The pods a drain must see gone: not DaemonSet, not mirror, not finished."""
    return [p for p in pods if not (is_daemonset_pod(p) or is_mirror_pod(p) or is_finished(p))]


def next_tier(pods: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The pods to evict now: non-critical ones while any remain, else the critical ones.

    Do-not-disrupt pods are never in a tier; terminating pods keep their tier open (they are still there)
    but are not evicted again.
    """
    movable = [p for p in pods if not is_do_not_disrupt(p)]
    regular = [p for p in movable if not is_critical(p)]
    tier = regular if regular else [p for p in movable if is_critical(p)]
    return [p for p in tier if not is_terminating(p)]


@dataclass(slots=True)
class DrainPass:
    """What one pass did and what is left. ``done`` when no pod that must go remains."""

    done: bool = False
    evicted: list[str] = field(default_factory=list)
    blocked: dict[str, str] = field(default_factory=dict)  # pod → why (budget, API error)
    waiting: list[str] = field(default_factory=list)  # not acted on: do-not-disrupt, terminating, next tier
    deleted: list[str] = field(default_factory=list)  # deleted at the deadline
    remaining: int = 0

    def to_json(self) -> dict[str, Any]:
        """The pass as the workflow state's ``drain`` section."""
        return {
            "done": self.done,
            "evicted": self.evicted,
            "blocked": self.blocked,
            "waiting": self.waiting,
            "deleted": self.deleted,
            "remaining": self.remaining,
        }


def drain_pass(kube: KubeCluster, node: str, *, now: float, deadline: float) -> DrainPass:
    """Evict the next tier of ``node``'s pods (or, at ``deadline``, delete all that remain) and report.

    A missing node counts as drained. Transient API errors propagate (the workflow retries the pass);
    any other error on one pod's eviction leaves that pod blocked until the next pass.
    """
    result = DrainPass()
    if not node or kube.get_node(node) is None:
        result.done = True
        return result
    remaining = pods_to_drain(kube.list_pods_on_node(node))
    if not remaining:
        result.done = True
        return result
    if now >= deadline:
        for pod in remaining:
            meta = pod.get("metadata") or {}
            kube.delete_pod(
                meta.get("namespace") or "default", meta["name"], grace_period_seconds=0, uid=meta.get("uid")
            )
            result.deleted.append(pod_key(pod))
        log.warning("deadline reached; remaining pods deleted", extra={"node": node, "pods": result.deleted})
        result.done = True
        return result
    tier = next_tier(remaining)
    for pod in tier:
        meta = pod.get("metadata") or {}
        key = pod_key(pod)
        try:
            outcome = kube.evict(meta.get("namespace") or "default", meta["name"], uid=meta.get("uid"))
        except KubeApiError as error:
            if is_transient(error) and error.status != 500:
                raise
            # 500 is the answer for a pod selected by several budgets: it stays blocked, as a 429 would.
            result.blocked[key] = error.message or str(error)
            continue
        if outcome.outcome is EvictionOutcome.BLOCKED:
            result.blocked[key] = outcome.message or "blocked by a PodDisruptionBudget"
        else:
            result.evicted.append(key)
    in_tier = {pod_key(p) for p in tier}
    result.waiting = [pod_key(p) for p in remaining if pod_key(p) not in in_tier]
    # Evictions usually finish at once (or the pods are now terminating): look again so a drained node
    # does not cost another Wait.
    left = pods_to_drain(kube.list_pods_on_node(node))
    result.remaining = len(left)
    result.done = not left
    return result
