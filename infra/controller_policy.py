"""The least-privilege IAM policy of the Fleetwright controller functions.

Everything Fleetwright creates carries the tag ``fleetwright.io/cluster=<cluster>`` (see
:mod:`fleetwright.aws.tags`); the policy uses that tag both ways: a launch must put it on every resource it
creates, and only resources carrying it may be terminated, deleted or re-tagged. docs/iam.md explains each
statement.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Aws
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sqs as sqs
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from fleetwright.aws.instanceprofiles import instance_profile_name
from fleetwright.aws.tags import CLUSTER_TAG, NAME_TAG, NODECLAIM_TAG

# The resource types a launch creates; each must be tagged in the request.
CREATED_RESOURCE_TYPES = (
    "fleet",
    "instance",
    "volume",
    "network-interface",
    "launch-template",
    "spot-instances-request",
)
# Resources a launch only uses: AMIs and snapshots (ARNs without an account) and subnets, security groups
# and capacity reservations (possibly shared from another account through RAM).
PUBLIC_RESOURCE_TYPES = ("image", "snapshot")
SHARED_RESOURCE_TYPES = ("subnet", "security-group", "capacity-reservation")
LAUNCH_ACTIONS = ("ec2:RunInstances", "ec2:CreateFleet")
CREATE_ACTIONS = ("RunInstances", "CreateFleet", "CreateLaunchTemplate")
# Tags the controller adds to its own instances after launch (a batched CreateFleet cannot tag per claim).
RETAG_KEYS = (NODECLAIM_TAG, NAME_TAG)
EC2_READ_ACTIONS = (
    "ec2:DescribeCapacityReservations",
    "ec2:DescribeAvailabilityZones",
    "ec2:DescribeImages",
    "ec2:DescribeInstanceTypeOfferings",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeInstances",
    "ec2:DescribeLaunchTemplateVersions",
    "ec2:DescribeLaunchTemplates",
    "ec2:DescribePlacementGroups",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeSpotPriceHistory",
    "ec2:DescribeSubnets",
)
QUEUE_ACTIONS = (
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibility",
    "sqs:GetQueueAttributes",
    "sqs:GetQueueUrl",
)
TABLE_ACTIONS = (
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:ConditionCheckItem",
)


def _ec2_arn(resource: str, *, account: bool = True) -> str:
    owner = Aws.ACCOUNT_ID if account else ""
    return f"arn:{Aws.PARTITION}:ec2:{Aws.REGION}:{owner}:{resource}"


def instance_profile_prefix(cluster_name: str) -> str:
    """The name prefix of the instance profiles the controller creates for EC2NodeClass roles."""
    return instance_profile_name(cluster_name, "role").rsplit("_", 1)[0] + "_"


def instance_profile_arn_pattern(cluster_name: str) -> str:
    """ARN pattern of the instance profiles the controller creates for EC2NodeClass roles."""
    return (
        f"arn:{Aws.PARTITION}:iam::{Aws.ACCOUNT_ID}:instance-profile/{instance_profile_prefix(cluster_name)}*"
    )


@dataclass(frozen=True, slots=True)
class ControllerResources:
    """What the controller policy is scoped to."""

    cluster_name: str
    node_role: iam.IRole
    queue: sqs.IQueue
    table: dynamodb.ITable
    nodepool_parameter: ssm.IStringParameter


def controller_statements(resources: ControllerResources) -> list[iam.PolicyStatement]:
    """The controller's policy statements, each with a ``sid`` (documented in docs/iam.md)."""
    cluster = resources.cluster_name
    request_tag = {f"aws:RequestTag/{CLUSTER_TAG}": cluster}
    resource_tag = {f"aws:ResourceTag/{CLUSTER_TAG}": cluster}
    created = [_ec2_arn(f"{kind}/*") for kind in CREATED_RESOURCE_TYPES]
    in_region = {"aws:RequestedRegion": Aws.REGION}
    profiles = instance_profile_arn_pattern(cluster)
    return [
        iam.PolicyStatement(
            sid="LaunchFromSharedResources",
            actions=list(LAUNCH_ACTIONS),
            resources=[_ec2_arn(f"{kind}/*", account=False) for kind in PUBLIC_RESOURCE_TYPES]
            + [f"arn:{Aws.PARTITION}:ec2:{Aws.REGION}:*:{kind}/*" for kind in SHARED_RESOURCE_TYPES],
        ),
        iam.PolicyStatement(
            sid="LaunchFromClusterLaunchTemplates",
            actions=list(LAUNCH_ACTIONS),
            resources=[_ec2_arn("launch-template/*")],
            conditions={"StringEquals": resource_tag},
        ),
        iam.PolicyStatement(
            sid="CreateOnlyClusterTaggedResources",
            actions=[*LAUNCH_ACTIONS, "ec2:CreateLaunchTemplate"],
            resources=created,
            conditions={"StringEquals": request_tag},
        ),
        iam.PolicyStatement(
            sid="TagOnlyWhileCreating",
            actions=["ec2:CreateTags"],
            resources=created,
            conditions={"StringEquals": {**request_tag, "ec2:CreateAction": list(CREATE_ACTIONS)}},
        ),
        iam.PolicyStatement(
            sid="LabelClusterInstances",
            actions=["ec2:CreateTags"],
            resources=[_ec2_arn("instance/*")],
            conditions={
                "StringEquals": resource_tag,
                "ForAllValues:StringEquals": {"aws:TagKeys": list(RETAG_KEYS)},
            },
        ),
        iam.PolicyStatement(
            sid="DeleteOnlyClusterResources",
            actions=["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
            resources=[_ec2_arn("instance/*"), _ec2_arn("launch-template/*")],
            conditions={"StringEquals": resource_tag},
        ),
        iam.PolicyStatement(
            sid="ReadEc2",
            actions=list(EC2_READ_ACTIONS),
            resources=["*"],
            conditions={"StringEquals": in_region},
        ),
        iam.PolicyStatement(sid="ReadPrices", actions=["pricing:GetProducts"], resources=["*"]),
        iam.PolicyStatement(
            sid="ReadPublicAmiParameters",
            actions=["ssm:GetParameter", "ssm:GetParameters"],
            resources=[f"arn:{Aws.PARTITION}:ssm:{Aws.REGION}::parameter/aws/service/*"],
        ),
        iam.PolicyStatement(
            sid="ReadNodePools",
            actions=["ssm:GetParameter"],
            resources=[resources.nodepool_parameter.parameter_arn],
        ),
        iam.PolicyStatement(
            sid="DescribeCluster",
            actions=["eks:DescribeCluster"],
            resources=[f"arn:{Aws.PARTITION}:eks:{Aws.REGION}:{Aws.ACCOUNT_ID}:cluster/{cluster}"],
        ),
        iam.PolicyStatement(
            sid="PassNodeRole",
            actions=["iam:PassRole"],
            resources=[resources.node_role.role_arn],
            # The China partition names the EC2 service principal ec2.amazonaws.com.cn.
            conditions={
                "StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}
            },
        ),
        iam.PolicyStatement(
            sid="CreateClusterInstanceProfiles",
            actions=["iam:CreateInstanceProfile", "iam:TagInstanceProfile"],
            resources=[profiles],
            conditions={"StringEquals": request_tag},
        ),
        iam.PolicyStatement(
            sid="ManageClusterInstanceProfiles",
            actions=[
                "iam:AddRoleToInstanceProfile",
                "iam:RemoveRoleFromInstanceProfile",
                "iam:DeleteInstanceProfile",
            ],
            resources=[profiles],
            conditions={"StringEquals": resource_tag},
        ),
        iam.PolicyStatement(
            sid="ReadClusterInstanceProfiles", actions=["iam:GetInstanceProfile"], resources=[profiles]
        ),
        iam.PolicyStatement(
            sid="ConsumeInterruptionQueue", actions=list(QUEUE_ACTIONS), resources=[resources.queue.queue_arn]
        ),
        iam.PolicyStatement(
            sid="ReadWriteState", actions=list(TABLE_ACTIONS), resources=[resources.table.table_arn]
        ),
    ]


def controller_policy_document(resources: ControllerResources) -> iam.PolicyDocument:
    """The controller policy as a document, for users who attach it to roles of their own."""
    return iam.PolicyDocument(statements=controller_statements(resources))


class ControllerPolicy(iam.ManagedPolicy):
    """A customer-managed policy with :func:`controller_statements`; attach it to each function's role."""

    def __init__(self, scope: Construct, construct_id: str, *, resources: ControllerResources) -> None:
        super().__init__(
            scope,
            construct_id,
            description=f"Fleetwright controller for EKS cluster {resources.cluster_name}",
            document=controller_policy_document(resources),
        )
