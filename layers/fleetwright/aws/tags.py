"""The tags Fleetwright puts on what it creates, and the ownership check before it touches anything."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fleetwright.cloud.instances import CLUSTER_TAG, NODECLAIM_TAG

# The ownership and NodeClaim tags are the cloud contract's (an ``Instance`` reads them); the rest of the
# tag scheme is EC2's.
__all__ = [
    "CLUSTER_TAG",
    "NAME_TAG",
    "NODECLAIM_TAG",
    "NODECLASS_TAG",
    "NODEPOOL_TAG",
    "RESERVED_TAG_KEYS",
    "from_aws",
    "is_owned",
    "kubernetes_cluster_tag",
    "merge_tags",
    "ownership_tags",
    "tag_specifications",
    "to_aws",
]

NODEPOOL_TAG = "karpenter.sh/nodepool"
NODECLASS_TAG = "fleetwright.io/ec2nodeclass"
NAME_TAG = "Name"

# Keys a user's EC2NodeClass tags may not set: they decide what Fleetwright owns and may terminate.
RESERVED_TAG_KEYS = frozenset({CLUSTER_TAG, NODEPOOL_TAG, NODECLAIM_TAG, NODECLASS_TAG})


def kubernetes_cluster_tag(cluster: str) -> str:
    """``kubernetes.io/cluster/<name>``: the tag EKS and the cloud controller use for cluster resources."""
    return f"kubernetes.io/cluster/{cluster}"


def ownership_tags(
    cluster: str, nodepool: str = "", nodeclaim: str = "", node_class: str = ""
) -> dict[str, str]:
    """The tags that mark an instance (and its volumes and interfaces) as this cluster's.

    ``Name`` is the nodeclaim id so the console shows something meaningful.
    """
    tags = {CLUSTER_TAG: cluster, kubernetes_cluster_tag(cluster): "owned"}
    if nodepool:
        tags[NODEPOOL_TAG] = nodepool
    if node_class:
        tags[NODECLASS_TAG] = node_class
    if nodeclaim:
        tags[NODECLAIM_TAG] = nodeclaim
        tags[NAME_TAG] = nodeclaim
    return tags


def merge_tags(user: Mapping[str, str] | None, ownership: Mapping[str, str]) -> dict[str, str]:
    """User tags plus ownership tags; ownership wins, and reserved keys from the user are dropped.

    A user-supplied ``Name`` is kept: it only labels the console.
    """
    merged = {k: v for k, v in (user or {}).items() if k not in RESERVED_TAG_KEYS}
    for key, value in ownership.items():
        if key == NAME_TAG and NAME_TAG in merged:
            continue
        merged[key] = value
    return merged


def to_aws(tags: Mapping[str, str]) -> list[dict[str, str]]:
    """``{"k": "v"}`` → ``[{"Key": "k", "Value": "v"}]`` (sorted, so requests are deterministic)."""
    return [{"Key": key, "Value": tags[key]} for key in sorted(tags)]


def from_aws(tags: Iterable[Mapping[str, Any]] | None) -> dict[str, str]:
    """``[{"Key": "k", "Value": "v"}]`` → ``{"k": "v"}``."""
    return {str(tag["Key"]): str(tag.get("Value", "")) for tag in tags or ()}


def tag_specifications(resource_types: Iterable[str], tags: Mapping[str, str]) -> list[dict[str, Any]]:
    """``TagSpecifications`` applying ``tags`` to each resource type."""
    aws_tags = to_aws(tags)
    return [{"ResourceType": kind, "Tags": aws_tags} for kind in resource_types]


def is_owned(tags: Mapping[str, str], cluster: str) -> bool:
    """True when the tags say the resource belongs to ``cluster``."""
    return tags.get(CLUSTER_TAG) == cluster
