"""Following launched claims until their node is up: registration, initialization, timeouts, orphans.

A real kubelet registers only its ``--node-labels`` and its own well-known labels (hostname, os, arch;
the cloud controller adds instance type, zone and region). As Karpenter's registration does, Fleetwright
then puts on the Node what the claim knows: its NodePool, EC2NodeClass, capacity type, the instance
type's labels, the claim's labels, annotations and taints, ``karpenter.sh/registered`` and the
termination finalizer (so ``kubectl delete node`` goes through the termination workflow);
``karpenter.sh/initialized`` once the node is Ready without startup taints and every extended resource its
pods requested (a GPU, say) is registered on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from fleetwright.claims.records import parse_taint
from fleetwright.kube.cluster import KubeCluster
from fleetwright.kube.resources import NODES
from fleetwright.model import labels as wk
from fleetwright.model.quantity import parse_resource
from fleetwright.state.nodeclaims import NodeClaimRecord

JsonObject = dict[str, Any]

# Karpenter's names: the finalizer that makes a Node's deletion run the termination workflow first, and
# the labels that say how far a node got.
TERMINATION_FINALIZER = "karpenter.sh/termination"
REGISTERED_LABEL = "karpenter.sh/registered"
INITIALIZED_LABEL = "karpenter.sh/initialized"
NODECLASS_LABEL = "karpenter.k8s.aws/ec2nodeclass"
NODE_SYNC_ERRORS = "NodeSyncErrors"  # metric: a Node the API would not let us label
# The kubelet's own: a claim's label never overrides it.
_KUBELET_OWNED = frozenset({wk.HOSTNAME})

# Taints a node carries until it is ready, whatever its NodePool says.
EPHEMERAL_TAINTS = frozenset(
    {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
        "node.cloudprovider.kubernetes.io/uninitialized",
        "karpenter.sh/unregistered",
    }
)


def instance_id_of(provider_id: str) -> str:
    """The instance id in ``aws:///<zone>/<instance id>`` ("" for anything else)."""
    if not provider_id.startswith("aws://"):
        return ""
    return provider_id.rstrip("/").rsplit("/", 1)[-1]


def nodes_by_instance(nodes: Iterable[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Node objects by the instance id of their ``spec.providerID``."""
    found: dict[str, Mapping[str, Any]] = {}
    for node in nodes:
        instance_id = instance_id_of(str((node.get("spec") or {}).get("providerID") or ""))
        if instance_id:
            found[instance_id] = node
    return found


def node_name(node: Mapping[str, Any]) -> str:
    """The node's name."""
    return str((node.get("metadata") or {}).get("name") or "")


# Resources the kubelet reports itself as it registers; the others (``nvidia.com/gpu``,
# ``aws.amazon.com/neuron``, ``vpc.amazonaws.com/efa``, ...) appear only once their device plugin runs.
_KUBELET_RESOURCES = frozenset({"cpu", "memory", "pods", "ephemeral-storage"})


def _format_taint(taint: Mapping[str, Any]) -> str:
    """``key=value:Effect`` (``key:Effect`` without a value), as Karpenter quotes a taint."""
    key, value, effect = taint.get("key"), taint.get("value"), taint.get("effect")
    return f"{key}={value}:{effect}" if value else f"{key}:{effect}"


def unregistered_resource(node: Mapping[str, Any], record: NodeClaimRecord) -> str | None:
    """The first extended resource the claim's pods requested that the Node's allocatable does not offer
    yet (absent or zero: its device plugin has not registered it), or None."""
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    for name, amount in sorted(record.requests.items()):
        if amount <= 0 or name in _KUBELET_RESOURCES or name.startswith("hugepages-"):
            continue
        offered = allocatable.get(name)
        try:
            registered = offered is not None and parse_resource(name, offered) > 0
        except ValueError:
            registered = False
        if not registered:
            return name
    return None


def initialization_issue(node: Mapping[str, Any], record: NodeClaimRecord) -> tuple[str, str] | None:
    """Why the claim's node is not initialized yet, as Karpenter's condition says it (reason, message), in
    Karpenter's order: not Ready, a startup taint, a known ephemeral taint, a requested extended resource
    not registered; None once initialized."""
    conditions = (node.get("status") or {}).get("conditions") or []
    if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
        return "NodeNotReady", "Node status is NotReady"
    taints = (node.get("spec") or {}).get("taints") or []
    startup = {(t.key, t.effect) for t in map(parse_taint, record.startup_taints)}
    for taint in taints:
        if (taint.get("key"), taint.get("effect")) in startup:
            return "StartupTaintsExist", f'StartupTaint "{_format_taint(taint)}" still exists'
    for taint in taints:
        if taint.get("key") in EPHEMERAL_TAINTS:
            return "KnownEphemeralTaintsExist", f'KnownEphemeralTaint "{_format_taint(taint)}" still exists'
    missing = unregistered_resource(node, record)
    if missing is not None:
        return "ResourceNotRegistered", f'Resource "{missing}" was requested but not registered'
    return None


def is_initialized(node: Mapping[str, Any], record: NodeClaimRecord) -> bool:
    """Ready, none of the claim's startup taints (nor the ephemeral not-ready taints) left, and every
    extended resource its pods requested registered on the Node (Karpenter's rule)."""
    return initialization_issue(node, record) is None


def claim_labels(record: NodeClaimRecord, type_labels: Mapping[str, str]) -> dict[str, str]:
    """The labels a claim's Node carries: the instance type's (``type_labels``, the catalog's), the
    claim's template and single-valued requirement labels, its NodePool, EC2NodeClass, and what the launch
    fixed (instance type, zone, capacity type)."""
    labels = {k: v for k, v in type_labels.items() if k not in _KUBELET_OWNED}
    labels.update({k: v for k, v in record.labels.items() if k not in _KUBELET_OWNED})
    labels[wk.NODEPOOL] = record.nodepool
    if record.node_class:
        labels[NODECLASS_LABEL] = record.node_class
    for key, value in (
        (wk.INSTANCE_TYPE, record.instance_type),
        (wk.ZONE, record.zone),
        (wk.CAPACITY_TYPE, record.capacity_type),
    ):
        if value:
            labels[key] = value
    return labels


def _taint_list(texts: Iterable[str]) -> list[JsonObject]:
    found = []
    for taint in map(parse_taint, texts):
        found.append(
            {"key": taint.key, "effect": taint.effect, **({"value": taint.value} if taint.value else {})}
        )
    return found


def registration_change(
    record: NodeClaimRecord, type_labels: Mapping[str, str]
) -> Callable[[JsonObject], JsonObject | None]:
    """A ``KubeCluster.modify`` change that syncs the claim onto its Node (labels, the NodePool template's
    annotations, the termination finalizer, ``karpenter.sh/registered=true``, and, until that label is
    there, the claim's taints and startup taints); None when the Node has it all already."""
    wanted = {**claim_labels(record, type_labels), REGISTERED_LABEL: "true"}

    def change(node: JsonObject) -> JsonObject | None:
        meta = node.get("metadata") or {}
        labels = meta.get("labels") or {}
        patch: JsonObject = {}
        missing = {k: v for k, v in wanted.items() if labels.get(k) != v}
        if missing:
            patch.setdefault("metadata", {})["labels"] = missing
        annotations = meta.get("annotations") or {}
        unset = {k: v for k, v in record.annotations.items() if annotations.get(k) != v}
        if unset:
            patch.setdefault("metadata", {})["annotations"] = unset
        finalizers = list(meta.get("finalizers") or [])
        if TERMINATION_FINALIZER not in finalizers and not meta.get("deletionTimestamp"):
            patch.setdefault("metadata", {})["finalizers"] = [*finalizers, TERMINATION_FINALIZER]
        if REGISTERED_LABEL not in labels:
            taints = list((node.get("spec") or {}).get("taints") or [])
            present = {(t.get("key"), t.get("effect")) for t in taints}
            added = []
            for taint in _taint_list([*record.taints, *record.startup_taints]):
                if (taint["key"], taint["effect"]) not in present:
                    present.add((taint["key"], taint["effect"]))
                    added.append(taint)
            if added:
                patch["spec"] = {"taints": [*taints, *added]}
        return patch or None

    return change


def initialization_change(node: JsonObject) -> JsonObject | None:
    """A ``KubeCluster.modify`` change that labels the Node ``karpenter.sh/initialized=true``."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    if labels.get(INITIALIZED_LABEL) == "true":
        return None
    return {"metadata": {"labels": {INITIALIZED_LABEL: "true"}}}


def has_finalizer(node: Mapping[str, Any]) -> bool:
    """The Node carries Fleetwright's termination finalizer."""
    return TERMINATION_FINALIZER in ((node.get("metadata") or {}).get("finalizers") or [])


def release_node(kube: KubeCluster, name: str, uid: str = "") -> bool:
    """Remove the termination finalizer from the Node ``name`` (only the incarnation ``uid`` when given),
    letting a deletion finish; False when there was nothing to remove or the Node is gone."""
    released = False

    def change(node: JsonObject) -> JsonObject | None:
        nonlocal released
        meta = node.get("metadata") or {}
        finalizers = list(meta.get("finalizers") or [])
        if (uid and meta.get("uid") != uid) or TERMINATION_FINALIZER not in finalizers:
            return None
        released = True
        return {"metadata": {"finalizers": [f for f in finalizers if f != TERMINATION_FINALIZER]}}

    kube.modify(NODES, name, change)
    return released
