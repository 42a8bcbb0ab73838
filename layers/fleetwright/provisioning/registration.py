"""Following launched claims until their node is up: registration, initialization, timeouts, orphans."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fleetwright.provisioning.claims import parse_taint
from fleetwright.state.nodeclaims import NodeClaimRecord

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
