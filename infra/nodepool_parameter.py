"""The validated NodePool and EC2NodeClass documents, stored in an SSM parameter for the functions.

The provisioner reads it through ``FLEETWRIGHT_NODEPOOLS_PARAMETER`` (see
:mod:`fleetwright.provisioning.config`), so changing the NodePool file and redeploying changes what the
functions use without rebuilding their code.
"""

from __future__ import annotations

import yaml
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from infra.nodepools import NodePoolConfig, NodePoolFileError

STANDARD_LIMIT = 4096  # bytes; larger values need the (paid) advanced tier
ADVANCED_LIMIT = 8192


def parameter_name(cluster_name: str) -> str:
    """``/fleetwright/<cluster>/nodepools``."""
    return f"/fleetwright/{cluster_name}/nodepools"


def nodepools_yaml(config: NodePoolConfig) -> str:
    """The Karpenter documents of ``config`` as one multi-document YAML text."""
    return yaml.safe_dump_all(config.documents, sort_keys=False)


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
