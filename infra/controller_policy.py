"""The least-privilege IAM policies of the Fleetwright controller functions: one per function, holding
only what that function calls (:class:`FunctionPermissions`; ``tests/infra/test_least_privilege.py``
records each function's calls and checks them against its role).

Everything Fleetwright creates carries the tag ``fleetwright.io/cluster=<cluster>`` (see
:mod:`fleetwright.aws.tags`); the policies use that tag both ways: a launch must put it on every resource it
creates, and only resources carrying it may be terminated or deleted. Using, terminating or deleting also
needs the second tag the controller writes (instances: ``karpenter.sh/nodepool``; launch templates:
``fleetwright.io/ec2nodeclass``), as the code does (:func:`fleetwright.aws.tags.is_owned`), so the cluster
tag alone, which anyone with ``ec2:CreateTags`` can add, grants nothing. docs/iam.md explains each statement.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from aws_cdk import Aws
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from fleetwright.aws.instanceprofiles import REGION_TAG, legacy_instance_profile_name
from fleetwright.aws.tags import CLUSTER_TAG, INSTANCE_CONTROLLER_TAG, LAUNCH_TEMPLATE_CONTROLLER_TAG

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
# What a launch reads: zones, types, offerings, prices, AMIs, subnets, security groups, capacity
# reservations, placement groups, the cluster's launch templates and instances (claims being reconciled).
LAUNCH_READ_ACTIONS = (
    "ec2:DescribeAvailabilityZones",
    "ec2:DescribeCapacityReservations",
    "ec2:DescribeImages",
    "ec2:DescribeInstanceTypeOfferings",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeInstances",
    "ec2:DescribeLaunchTemplates",
    "ec2:DescribePlacementGroups",
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeSpotPriceHistory",
    "ec2:DescribeSubnets",
)
# Every Describe call of fleetwright.aws (garbage collection also reads the AMI a launch template boots).
EC2_READ_ACTIONS = tuple(sorted((*LAUNCH_READ_ACTIONS, "ec2:DescribeLaunchTemplateVersions")))
# The item actions of the state table's reads, writes and transactions (TransactWriteItems is authorized
# as the action of each item: PutItem, UpdateItem, DeleteItem, ConditionCheckItem).
TABLE_ACTIONS = (
    "dynamodb:GetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:ConditionCheckItem",
)


@dataclass(frozen=True, slots=True)
class FunctionPermissions:
    """What one controller function does in AWS, as the statements of its policy (docs/iam.md).

    ``launches``: CreateFleet from launch templates it creates, the node role passed to EC2, instance
    profiles for EC2NodeClass roles, prices and public AMI parameters. ``terminates``: TerminateInstances
    on this cluster's instances. ``deletes_launch_templates``: DeleteLaunchTemplate on this cluster's
    templates. ``reads_nodepools``: the stack's NodePool parameter. ``ec2_reads`` and ``table_actions``:
    the Describe calls and the state table's item actions it makes. Every function describes the cluster.
    """

    name: str
    launches: bool = False
    terminates: bool = False
    deletes_launch_templates: bool = False
    reads_nodepools: bool = False
    ec2_reads: tuple[str, ...] = ()
    table_actions: tuple[str, ...] = ()

    def __or__(self, other: FunctionPermissions) -> FunctionPermissions:
        """Everything either may do (for a role shared by several functions)."""
        return FunctionPermissions(
            f"{self.name}+{other.name}",
            launches=self.launches or other.launches,
            terminates=self.terminates or other.terminates,
            deletes_launch_templates=self.deletes_launch_templates or other.deletes_launch_templates,
            reads_nodepools=self.reads_nodepools or other.reads_nodepools,
            ec2_reads=tuple(sorted({*self.ec2_reads, *other.ec2_reads})),
            table_actions=tuple(a for a in TABLE_ACTIONS if a in {*self.table_actions, *other.table_actions}),
        )


# The provisioner launches for pending pods; its claim lifecycle terminates launches that never register.
PROVISIONER = FunctionPermissions(
    "provisioner",
    launches=True,
    terminates=True,
    reads_nodepools=True,
    ec2_reads=LAUNCH_READ_ACTIONS,
    table_actions=TABLE_ACTIONS,
)
# The interruption handler launches replacements (through the provisioner) and terminates stopped
# instances; the termination workflow it starts does the rest.
INTERRUPTION = FunctionPermissions(
    "interruption",
    launches=True,
    terminates=True,
    reads_nodepools=True,
    ec2_reads=LAUNCH_READ_ACTIONS,
    table_actions=tuple(a for a in TABLE_ACTIONS if a != "dynamodb:DeleteItem"),
)
# The disruption function launches replacements (consolidation, drift), terminates leaked instances and
# deletes launch templates nothing uses (garbage collection).
DISRUPTION = FunctionPermissions(
    "disruption",
    launches=True,
    terminates=True,
    deletes_launch_templates=True,
    reads_nodepools=True,
    ec2_reads=EC2_READ_ACTIONS,
    table_actions=TABLE_ACTIONS,
)
# The termination steps look up and terminate the one instance of a workflow and finalize its claim.
TERMINATION = FunctionPermissions(
    "termination",
    terminates=True,
    ec2_reads=("ec2:DescribeInstances",),
    table_actions=("dynamodb:GetItem", "dynamodb:Query", "dynamodb:UpdateItem"),
)
# Everything the built-in functions do: the policy of functions added with add_function and of roles
# given grant_controller.
CONTROLLER = replace(PROVISIONER | INTERRUPTION | DISRUPTION | TERMINATION, name="controller")
BUILT_IN = {p.name: p for p in (PROVISIONER, INTERRUPTION, DISRUPTION, TERMINATION)}


def owned_conditions(cluster: str, controller_tag: str) -> dict[str, dict[str, str]]:
    """Conditions of a statement acting on an existing resource: the cluster tag names ``cluster`` and the
    controller's second tag is present with a value (``?*``: at least one character, as the code asks)."""
    return {
        "StringEquals": {f"aws:ResourceTag/{CLUSTER_TAG}": cluster},
        "StringLike": {f"aws:ResourceTag/{controller_tag}": "?*"},
    }


def _ec2_arn(resource: str, *, account: bool = True) -> str:
    owner = Aws.ACCOUNT_ID if account else ""
    return f"arn:{Aws.PARTITION}:ec2:{Aws.REGION}:{owner}:{resource}"


def instance_profile_prefix(cluster_name: str) -> str:
    """The name prefix of the instance profiles the controller creates for EC2NodeClass roles
    (``<cluster>_<region>_<digest>``, and before the region was in the name ``<cluster>_<digest>``)."""
    return legacy_instance_profile_name(cluster_name, "role").rsplit("_", 1)[0] + "_"


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
    table: dynamodb.ITable
    nodepool_parameter: ssm.IStringParameter


def _launch_statements(resources: ControllerResources) -> list[iam.PolicyStatement]:
    """Launching: CreateFleet from this cluster's launch templates, every created resource tagged for the
    cluster, the node role passed to EC2 only, instance profiles named and tagged for the cluster."""
    cluster = resources.cluster_name
    request_tag = {f"aws:RequestTag/{CLUSTER_TAG}": cluster}
    created = [_ec2_arn(f"{kind}/*") for kind in CREATED_RESOURCE_TYPES]
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
            conditions=owned_conditions(cluster, LAUNCH_TEMPLATE_CONTROLLER_TAG),
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
            sid="PassNodeRole",
            actions=["iam:PassRole"],
            resources=[resources.node_role.role_arn],
            # The China partition names the EC2 service principal ec2.amazonaws.com.cn.
            conditions={
                "StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}
            },
        ),
        *_instance_profile_statements(cluster),
        iam.PolicyStatement(sid="ReadPrices", actions=["pricing:GetProducts"], resources=["*"]),
        iam.PolicyStatement(
            sid="ReadPublicAmiParameters",
            actions=["ssm:GetParameter", "ssm:GetParameters"],
            resources=[f"arn:{Aws.PARTITION}:ssm:{Aws.REGION}::parameter/aws/service/*"],
        ),
    ]


def _instance_profile_statements(cluster: str) -> list[iam.PolicyStatement]:
    """Instance profiles for EC2NodeClass roles: created tagged for the cluster and this region, changed
    only when the cluster's and not another region's (fleetwright.aws.instanceprofiles)."""
    profiles = instance_profile_arn_pattern(cluster)
    request_tag = {f"aws:RequestTag/{CLUSTER_TAG}": cluster}
    region_request_tag = {f"aws:RequestTag/{REGION_TAG}": Aws.REGION}
    resource_tag = {f"aws:ResourceTag/{CLUSTER_TAG}": cluster}
    return [
        # Created tagged for the cluster and this region (IAM is global: the region keeps two same-named
        # clusters' stacks in two regions apart).
        iam.PolicyStatement(
            sid="CreateClusterInstanceProfiles",
            actions=["iam:CreateInstanceProfile"],
            resources=[profiles],
            conditions={"StringEquals": {**request_tag, **region_request_tag}},
        ),
        # Tagging only a profile already the cluster's, with the cluster's tag: a profile someone made by
        # hand under the cluster's prefix cannot be claimed by tagging it (Karpenter scopes it so too).
        iam.PolicyStatement(
            sid="TagClusterInstanceProfiles",
            actions=["iam:TagInstanceProfile"],
            resources=[profiles],
            conditions={"StringEquals": {**request_tag, **region_request_tag, **resource_tag}},
        ),
        # Only this region's profiles, or those made before profiles had a region (no region tag).
        iam.PolicyStatement(
            sid="ManageClusterInstanceProfiles",
            actions=["iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile"],
            resources=[profiles],
            conditions={
                "StringEquals": resource_tag,
                "StringEqualsIfExists": {f"aws:ResourceTag/{REGION_TAG}": Aws.REGION},
            },
        ),
        iam.PolicyStatement(
            sid="ReadClusterInstanceProfiles", actions=["iam:GetInstanceProfile"], resources=[profiles]
        ),
    ]


def _deletion_statements(
    resources: ControllerResources, permissions: FunctionPermissions
) -> list[iam.PolicyStatement]:
    """Terminating instances and deleting launch templates, only those tagged for this cluster by the
    controller (the cluster tag and the controller's second tag)."""
    cluster = resources.cluster_name
    statements = []
    if permissions.terminates:
        statements.append(
            iam.PolicyStatement(
                sid="TerminateClusterInstances",
                actions=["ec2:TerminateInstances"],
                resources=[_ec2_arn("instance/*")],
                conditions=owned_conditions(cluster, INSTANCE_CONTROLLER_TAG),
            )
        )
    if permissions.deletes_launch_templates:
        statements.append(
            iam.PolicyStatement(
                sid="DeleteClusterLaunchTemplates",
                actions=["ec2:DeleteLaunchTemplate"],
                resources=[_ec2_arn("launch-template/*")],
                conditions=owned_conditions(cluster, LAUNCH_TEMPLATE_CONTROLLER_TAG),
            )
        )
    return statements


def controller_statements(
    resources: ControllerResources, permissions: FunctionPermissions = CONTROLLER
) -> list[iam.PolicyStatement]:
    """The statements of a function with ``permissions``, each with a ``sid`` (documented in
    docs/iam.md); by default those of every built-in function together."""
    statements = _launch_statements(resources) if permissions.launches else []
    statements += _deletion_statements(resources, permissions)
    if permissions.ec2_reads:
        statements.append(
            iam.PolicyStatement(
                sid="ReadEc2",
                actions=list(permissions.ec2_reads),
                resources=["*"],
                conditions={"StringEquals": {"aws:RequestedRegion": Aws.REGION}},
            )
        )
    if permissions.reads_nodepools:
        statements.append(
            iam.PolicyStatement(
                sid="ReadNodePools",
                actions=["ssm:GetParameter"],
                resources=[resources.nodepool_parameter.parameter_arn],
            )
        )
    cluster_arn = f"arn:{Aws.PARTITION}:eks:{Aws.REGION}:{Aws.ACCOUNT_ID}:cluster/{resources.cluster_name}"
    statements.append(
        iam.PolicyStatement(sid="DescribeCluster", actions=["eks:DescribeCluster"], resources=[cluster_arn])
    )
    if permissions.table_actions:
        statements.append(
            iam.PolicyStatement(
                sid="ReadWriteState",
                actions=list(permissions.table_actions),
                resources=[resources.table.table_arn],
            )
        )
    return statements


def controller_policy_document(
    resources: ControllerResources, permissions: FunctionPermissions = CONTROLLER
) -> iam.PolicyDocument:
    """A function's policy as a document, for users who attach it to roles of their own."""
    return iam.PolicyDocument(statements=controller_statements(resources, permissions))


class ControllerPolicy(iam.ManagedPolicy):
    """A customer-managed policy with :func:`controller_statements` for ``permissions`` (default: every
    built-in function's together), attached to the roles of the functions it describes."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        resources: ControllerResources,
        permissions: FunctionPermissions = CONTROLLER,
    ) -> None:
        what = "controller" if permissions is CONTROLLER else f"{permissions.name} function"
        super().__init__(
            scope,
            construct_id,
            description=f"Fleetwright {what} for EKS cluster {resources.cluster_name}",
            document=controller_policy_document(resources, permissions),
        )
        self.permissions = permissions
