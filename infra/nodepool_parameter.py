"""The validated NodePool and EC2NodeClass documents, stored in an SSM parameter for the functions.

The provisioner reads it through ``FLEETWRIGHT_NODEPOOLS_PARAMETER`` (see
:mod:`fleetwright.config.settings`), so changing the NodePool file and redeploying changes what the
functions use without rebuilding their code. A deployment without a NodePool file stores a comment only:
the functions then read the cluster's NodePools only.
"""

from __future__ import annotations

import hashlib
from typing import Any

import yaml
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from infra.nodepools import NodePoolConfig, NodePoolFileError

STANDARD_LIMIT = 4096  # bytes; larger values need the (paid) advanced tier
ADVANCED_LIMIT = 8192


def parameter_name(cluster_name: str) -> str:
    """``/fleetwright/<cluster>/nodepools``."""
    return f"/fleetwright/{cluster_name}/nodepools"


# What the API server adds to an object (``kubectl get -o yaml`` of a live NodePool has all of it); none of
# it means anything to the functions, and it would eat into the parameter's 4 KB.
SERVER_SET_METADATA = (
    "managedFields",
    "resourceVersion",
    "uid",
    "generation",
    "creationTimestamp",
    "finalizers",
)
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def deployable_document(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` without ``status`` and server-set metadata (the annotation ``kubectl apply`` keeps
    included)."""
    kept = {key: value for key, value in document.items() if key != "status"}
    metadata = document.get("metadata")
    if isinstance(metadata, dict):
        kept["metadata"] = {k: v for k, v in metadata.items() if k not in SERVER_SET_METADATA}
        annotations = metadata.get("annotations")
        if isinstance(annotations, dict) and LAST_APPLIED in annotations:
            rest = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
            if rest:
                kept["metadata"]["annotations"] = rest
            else:
                del kept["metadata"]["annotations"]
    return kept


# The parameter's text for a deployment without documents: SSM refuses an empty value, and a comment is
# read as no document (the functions then use the cluster's NodePools only).
CLUSTER_ONLY_TEXT = (
    "# No NodePool documents deployed: the functions read NodePools and EC2NodeClasses from the cluster\n"
    "# (kubectl apply -f nodepool.yaml).\n"
)


def nodepools_yaml(config: NodePoolConfig) -> str:
    """The Karpenter documents of ``config`` (see :func:`deployable_document`) as one multi-document YAML
    text; :data:`CLUSTER_ONLY_TEXT` when there are none."""
    if config.cluster_only:
        return CLUSTER_ONLY_TEXT
    return yaml.safe_dump_all([deployable_document(d) for d in config.documents], sort_keys=False)


def nodepools_digest(config: NodePoolConfig) -> str:
    """A short SHA-256 of :func:`nodepools_yaml`: it changes exactly when the parameter's text does."""
    return hashlib.sha256(nodepools_yaml(config).encode()).hexdigest()[:16]


class NodePoolParameter(ssm.StringParameter):
    """A String parameter with :func:`nodepools_yaml`; advanced tier only when the text needs it."""

    def __init__(
        self, scope: Construct, construct_id: str, *, cluster_name: str, config: NodePoolConfig
    ) -> None:
        text = nodepools_yaml(config)
        size = len(text.encode())
        if size > ADVANCED_LIMIT:
            raise NodePoolFileError(
                [
                    f"error: {', '.join(config.paths)}: NodePool documents are {size} bytes; "
                    f"an SSM parameter holds at most {ADVANCED_LIMIT}"
                ]
            )
        super().__init__(
            scope,
            construct_id,
            parameter_name=parameter_name(cluster_name),
            string_value=text,
            description=f"Fleetwright NodePools and EC2NodeClasses of EKS cluster {cluster_name}",
            tier=ssm.ParameterTier.STANDARD if size <= STANDARD_LIMIT else ssm.ParameterTier.ADVANCED,
        )
