"""When each node last had a pod event — a pod bound to it or gone from it — so ``consolidateAfter`` counts
from there, as Karpenter counts it from a NodeClaim's ``status.lastPodEventTime``.

The disruption function reads a snapshot once a minute, so the event is derived:

- a pod bound: the newest ``status.startTime`` of the node's pods (the kubelet sets it within moments of
  the binding; a pod bound but not started yet counts as bound now);
- a pod gone (deleted, evicted or finished): no object records that once the pod is gone, so the pod-set
  markers (:mod:`fleetwright.state.podevents`) keep what each node held when its pods last changed. When a
  node now holds fewer of the marked pods than the marker counted (its pods less those started after the
  marker was written), one left since, and the pass that sees it counts it as gone at that pass: at most
  one pass late, never early.

Only pods that would need a new home count (not DaemonSet, mirror or finished pods), and the event is
never earlier than the node's initialization (Karpenter's clock when no pod event is known).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from fleetwright.disruption.candidates import evictable_pods
from fleetwright.disruption.types import NodeState
from fleetwright.model.pod import Pod
from fleetwright.state.podevents import PodSetMarker, PodSetStore

log = logging.getLogger(__name__)


def fingerprint(pods: Sequence[Pod]) -> str:
    """A short hash of the pods' identities (uid, else namespace/name), in no particular order."""
    keys = sorted(p.uid or p.key for p in pods)
    return hashlib.sha256("\n".join(keys).encode()).hexdigest()[:24]


def bound_at(pod: Pod, now: float) -> float:
    """When ``pod`` was bound to its node, as well as a snapshot tells: its start, else ``now``."""
    return pod.started_at if pod.started_at is not None else now


def last_bound(state: NodeState, now: float) -> float | None:
    """When the newest pod needing a new home was bound to the node (None: it holds none)."""
    return max((bound_at(p, now) for p in evictable_pods(state)), default=None)


def observe(marker: PodSetMarker | None, state: NodeState, now: float) -> PodSetMarker | None:
    """The marker to write for ``state`` seen at ``now`` (None: ``marker`` still holds)."""
    pods = evictable_pods(state)
    print_ = fingerprint(pods)
    mine = marker is not None and marker.instance_id == state.instance_id
    if marker is not None and mine and marker.fingerprint == print_:
        return None
    removed: float | None = None
    if marker is not None and mine:
        added = sum(1 for p in pods if bound_at(p, now) > marker.seen)
        removed = now if len(pods) - added < marker.count else marker.removed
    return PodSetMarker(state.name, print_, len(pods), now, removed, state.instance_id)


def last_pod_event(state: NodeState, now: float, removed: float | None, initialized: float | None) -> float:
    """The node's last pod event (see the module docstring), never before its initialization (else its
    launch) and never after ``now`` (a clock ahead of the controller's is not held against the node)."""
    floor = initialized if initialized is not None else state.created_at
    return min(now, max(floor, last_bound(state, now) or floor, removed or floor))


def update_pod_events(
    store: PodSetStore,
    nodes: Sequence[NodeState],
    now: float,
    *,
    initialized_at: Mapping[str, float] | None = None,
    logger: logging.Logger | Any = None,
    known: dict[str, PodSetMarker] | None = None,
) -> dict[str, PodSetMarker]:
    """Keep the pod-set markers in step with ``nodes``, set each initialized node's ``last_pod_event``, and
    return the markers as they now are. Markers of nodes gone are deleted; nodes being disrupted or still
    starting keep theirs untouched. ``known``: the markers as this invocation last returned them (its
    later rounds need not read them again: passes never overlap, so nobody else writes them meanwhile);
    None reads them."""
    say = logger or log
    initialized_at = initialized_at or {}
    markers = dict(known) if known is not None else store.list()
    for state in nodes:
        marker = markers.get(state.name)
        if state.nodepool and not state.terminating and state.initialized and not state.node.in_flight:
            fresh = observe(marker, state, now)
            if fresh is not None:
                store.put(fresh)
                markers[state.name] = fresh
                if marker is not None and fresh.removed != marker.removed:
                    say.debug("pod gone from node", extra={"node": state.name})
                marker = fresh
        removed = marker.removed if marker is not None and marker.instance_id == state.instance_id else None
        state.last_pod_event = last_pod_event(state, now, removed, initialized_at.get(state.name))
    for name in markers.keys() - {n.name for n in nodes}:
        store.clear(name)
        del markers[name]
    return markers
