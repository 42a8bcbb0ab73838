"""Following launched claims until their node is up: registration, initialization, timeouts, orphans.

A real kubelet registers only its ``--node-labels`` and its own well-known labels (hostname, os, arch;
the cloud controller adds instance type, zone and region). As Karpenter's registration does, Fleetwright
then puts on the Node what the claim knows: its NodePool, EC2NodeClass, capacity type, the instance
type's labels, the claim's labels, annotations and taints, ``karpenter.sh/registered`` and the
termination finalizer (so ``kubectl delete node`` goes through the termination workflow);
``karpenter.sh/initialized`` once the node is Ready without startup taints.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from fleetwright.claims.records import parse_taint
from fleetwright.kube.cluster import KubeCluster
from fleetwright.kube.resources import NODES
from fleetwright.model import labels as wk
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


def is_initialized(node: Mapping[str, Any], record: NodeClaimRecord) -> bool:
    """Ready, and none of the claim's startup taints (nor the ephemeral not-ready taints) remain."""
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    if not ready:
        return False
    startup = {(t.key, t.effect) for t in map(parse_taint, record.startup_taints)}
    for taint in (node.get("spec") or {}).get("taints") or []:
        key = taint.get("key")
        if key in EPHEMERAL_TAINTS or (key, taint.get("effect")) in startup:
            return False
    return True


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
