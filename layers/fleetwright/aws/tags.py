"""The tags Fleetwright puts on what it creates, and the ownership check before it touches anything."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fleetwright.cloud.instances import CLUSTER_TAG, NODECLAIM_TAG, NODEPOOL_TAG

# The ownership, NodePool and NodeClaim tags are the cloud contract's (an ``Instance`` reads them); the rest
# of the tag scheme is EC2's.
__all__ = [
    "CLUSTER_TAG",
    "INSTANCE_CONTROLLER_TAG",
    "LAUNCH_TEMPLATE_CONTROLLER_TAG",
    "NAME_TAG",
    "NODECLAIM_TAG",
    "NODECLASS_TAG",
    "NODEPOOL_TAG",
    "RESERVED_TAG_KEYS",
    "from_aws",
    "is_owned",
    "kubernetes_cluster_tag",
    "merge_tags",
    "ownership_problem",
    "ownership_tags",
    "tag_specifications",
    "to_aws",
]

NODECLASS_TAG = "fleetwright.io/ec2nodeclass"
NAME_TAG = "Name"

# The second tag ownership needs besides ``CLUSTER_TAG=<cluster>``: present (any value) on everything the
# controller creates, required by terminate, launch-template use and deletion and the garbage collector in
# code, and by the IAM policy's ``aws:ResourceTag`` conditions (infra/controller_policy.py). Instances carry
# their NodePool, as Karpenter's do; launch templates their EC2NodeClass's name (as they always have, so
# templates made before this check still qualify).
INSTANCE_CONTROLLER_TAG = NODEPOOL_TAG
LAUNCH_TEMPLATE_CONTROLLER_TAG = NODECLASS_TAG

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


def ownership_problem(
    tags: Mapping[str, str], cluster: str, controller_tag: str = INSTANCE_CONTROLLER_TAG
) -> str:
    """Why the tags do not make the resource ``cluster``'s ("" when they do): it needs
    ``CLUSTER_TAG=<cluster>`` and a non-empty ``controller_tag`` (:data:`INSTANCE_CONTROLLER_TAG` for an
    instance, :data:`LAUNCH_TEMPLATE_CONTROLLER_TAG` for a launch template)."""
    if tags.get(CLUSTER_TAG) != cluster:
        return f"not tagged {CLUSTER_TAG}={cluster}"
    if not tags.get(controller_tag):
        return f"tagged {CLUSTER_TAG}={cluster} but without {controller_tag}, which the controller writes"
    return ""


def is_owned(tags: Mapping[str, str], cluster: str, controller_tag: str = INSTANCE_CONTROLLER_TAG) -> bool:
    """True when the tags say the resource belongs to ``cluster``: its cluster tag and the controller's
    second tag (see :func:`ownership_problem`)."""
    return not ownership_problem(tags, cluster, controller_tag)
