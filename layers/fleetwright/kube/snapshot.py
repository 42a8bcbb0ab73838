"""The cluster as the scheduler sees it: API objects listed through :class:`KubeCluster`, converted by
``fleetwright.model.kube``.

A pod's stored version never changes, so the pods of the last listing are kept by (uid, resourceVersion)
and a warm process converts only the pods that changed since (the cluster cache does the same for the
functions that run with it; the economy mode and the replay list every pass).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from fleetwright.kube.client import JsonObject
from fleetwright.kube.cluster import KubeCluster, is_unschedulable
from fleetwright.model.errors import DocumentError
from fleetwright.model.kube import daemonset_pod, node_from_object, pod_from_object
from fleetwright.model.node import Node
from fleetwright.model.pod import Pod

TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass(slots=True)
class ClusterSnapshot:
    """Nodes with their pods, the pods waiting for capacity, and the DaemonSets' pods (one per set).

    ``errors`` holds objects that could not be converted; they are left out rather than failing the whole
    snapshot, so one malformed object does not stop provisioning for everyone else.
    """

    nodes: list[Node] = field(default_factory=list)
    pending_pods: list[Pod] = field(default_factory=list)
    daemonsets: list[Pod] = field(default_factory=list)
    errors: list[DocumentError] = field(default_factory=list)


def read_snapshot(cluster: KubeCluster) -> ClusterSnapshot:
    """List nodes, pods and DaemonSets (three LISTs) and convert them into the scheduler's model.

    Bound pods that have finished (Succeeded/Failed) hold no resources and are left out; pods bound to a
    node that is not listed are ignored.
    """
    snapshot = ClusterSnapshot()
    node_objects = cluster.list_nodes()
    by_node: dict[str, list[Pod]] = defaultdict(list)
    converted: dict[tuple[str, str], Pod] = {}
    for obj in cluster.list_pods():
        bound_to = (obj.get("spec") or {}).get("nodeName")
        phase = (obj.get("status") or {}).get("phase")
        if bound_to and phase in TERMINAL_PHASES:
            continue
        if not bound_to and not is_unschedulable(obj):
            continue  # not yet looked at by the scheduler, or finished
        try:
            pod = _pod(obj, converted)
        except DocumentError as err:
            snapshot.errors.append(err)
            continue
        if bound_to:
            by_node[bound_to].append(pod)
        else:
            snapshot.pending_pods.append(pod)
    _LAST_LISTING.clear()
    _LAST_LISTING.update(converted)
    for obj in node_objects:
        name = str((obj.get("metadata") or {}).get("name") or "")
        try:
            snapshot.nodes.append(node_from_object(obj, by_node.get(name, [])))
        except DocumentError as err:
            snapshot.errors.append(err)
    for obj in cluster.list_daemonsets():
        try:
            snapshot.daemonsets.append(daemonset_pod(obj))
        except DocumentError as err:
            snapshot.errors.append(err)
    return snapshot


_LAST_LISTING: dict[tuple[str, str], Pod] = {}  # the pods of the last listing, by (uid, resourceVersion)


def _pod(obj: JsonObject, converted: dict[tuple[str, str], Pod]) -> Pod:
    """The pod ``obj`` is, converted once per stored version (``converted`` collects this listing's)."""
    meta = obj.get("metadata") or {}
    uid, version = meta.get("uid"), meta.get("resourceVersion")
    if not uid or not version:
        return pod_from_object(obj)
    key = (str(uid), str(version))
    pod = _LAST_LISTING.get(key) or pod_from_object(obj)
    converted[key] = pod
    return pod
