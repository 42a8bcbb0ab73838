"""cdk-nag (AwsSolutions) findings that are intended, each acknowledged with its reason.

cdk-nag 2.38 is used on purpose: its ``NagSuppressions`` keep the reason next to the finding in the
template metadata, and ``Aspects.of(app).add(AwsSolutionsChecks())`` works with every aws-cdk-lib 2.x.
"""

from __future__ import annotations

from cdk_nag import NagPackSuppression, NagSuppressions

from infra.autoscaler import FleetwrightAutoscaler
from infra.controller_policy import (
    CREATED_RESOURCE_TYPES,
    PUBLIC_RESOURCE_TYPES,
    SHARED_RESOURCE_TYPES,
    instance_profile_prefix,
)
from infra.node_role import NODE_MANAGED_POLICIES

# How cdk-nag spells the EC2 ARN prefix of the controller policy's resources.
_EC2 = "arn:<AWS::Partition>:ec2:<AWS::Region>"


def acknowledge_findings(autoscaler: FleetwrightAutoscaler) -> None:
    """Attach the acknowledgements to the autoscaler's resources."""
    NagSuppressions.add_resource_suppressions(
        autoscaler.node_role.role,
        [
            NagPackSuppression(
                id="AwsSolutions-IAM4",
                reason="EKS worker nodes need exactly these AWS managed policies (kubelet, VPC CNI, image "
                "pulls from ECR, SSM access for debugging); AWS keeps them current with EKS.",
                applies_to=[
                    f"Policy::arn:<AWS::Partition>:iam::aws:policy/{name}" for name in NODE_MANAGED_POLICIES
                ],
            )
        ],
    )
    NagSuppressions.add_resource_suppressions(
        autoscaler.controller_policy,
        [
            NagPackSuppression(
                id="AwsSolutions-IAM5",
                reason="Read-only EC2 Describe* and pricing:GetProducts do not support resource-level "
                "permissions; the EC2 reads are limited to the stack's region.",
                applies_to=["Resource::*"],
            ),
            NagPackSuppression(
                id="AwsSolutions-IAM5",
                reason="Instances, volumes, network interfaces, fleets, Spot requests and launch templates "
                "get new IDs at launch; every statement on them requires the fleetwright.io/cluster tag "
                "of this cluster (aws:RequestTag when created, aws:ResourceTag afterwards).",
                applies_to=[f"Resource::{_EC2}:<AWS::AccountId>:{kind}/*" for kind in CREATED_RESOURCE_TYPES],
            ),
            NagPackSuppression(
                id="AwsSolutions-IAM5",
                reason="The AMIs, snapshots, subnets and security groups a launch uses are chosen by the "
                "EC2NodeClass selectors at run time; a launch only reads them.",
                applies_to=[f"Resource::{_EC2}::{kind}/*" for kind in PUBLIC_RESOURCE_TYPES]
                + [f"Resource::{_EC2}:*:{kind}/*" for kind in SHARED_RESOURCE_TYPES],
            ),
            NagPackSuppression(
                id="AwsSolutions-IAM5",
                reason="EKS-optimized AMI IDs are public SSM parameters under /aws/service/; their names "
                "depend on the Kubernetes version and AMI family.",
                applies_to=["Resource::arn:<AWS::Partition>:ssm:<AWS::Region>::parameter/aws/service/*"],
            ),
            NagPackSuppression(
                id="AwsSolutions-IAM5",
                reason="Instance profiles for EC2NodeClass roles are created at run time, named "
                "<cluster>_<hash of the role>; only that prefix, and changes only to profiles tagged for "
                "this cluster.",
                applies_to=[
                    "Resource::arn:<AWS::Partition>:iam::<AWS::AccountId>:instance-profile/"
                    f"{instance_profile_prefix(autoscaler.cluster_name)}*"
                ],
            ),
        ],
    )
