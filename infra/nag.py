"""cdk-nag (AwsSolutions) findings that are intended, each acknowledged with its reason.

cdk-nag 2.38 is used on purpose: its ``NagSuppressions`` keep the reason next to the finding in the
template metadata, and ``Aspects.of(app).add(AwsSolutionsChecks())`` works with every aws-cdk-lib 2.x.
"""

from __future__ import annotations

from typing import cast

from aws_cdk import CfnResource, Stack
from aws_cdk import aws_iam as iam
from cdk_nag import NagPackSuppression, NagSuppressions, RegexAppliesTo
from constructs import IConstruct

from infra.autoscaler import FleetwrightAutoscaler
from infra.controller_policy import (
    CREATED_RESOURCE_TYPES,
    PUBLIC_RESOURCE_TYPES,
    SHARED_RESOURCE_TYPES,
    ControllerPolicy,
    instance_profile_prefix,
)
from infra.node_role import NODE_MANAGED_POLICIES

# How cdk-nag spells the EC2 ARN prefix of the controller policy's resources.
_EC2 = "arn:<AWS::Partition>:ec2:<AWS::Region>"
# Execution ARNs are formatted with the stack's region and account: tokens, or literal values when the
# app is synthesized for an environment (the CDK CLI sets one).
_EXECUTIONS = r"/^Resource::arn:<AWS::Partition>:states:.+:execution:.+:\*$/g"


def _default_policy(role: iam.IRole | None) -> IConstruct | None:
    """The policy CDK's grants add to ``role`` (where their findings are), if any."""
    return None if role is None else role.node.try_find_child("DefaultPolicy")


def _logical_id(construct: IConstruct) -> str:
    """The logical id of an L2 construct's CloudFormation resource, as cdk-nag prints it in findings."""
    resource = cast(CfnResource, construct.node.default_child)
    return str(Stack.of(construct).resolve(resource.logical_id))


def acknowledge_findings(autoscaler: FleetwrightAutoscaler) -> None:
    """Attach the acknowledgements to the autoscaler's resources."""
    NagSuppressions.add_resource_suppressions(
        autoscaler.interruption.delivery_dead_letter_queue,
        [
            NagPackSuppression(
                id="AwsSolutions-SQS3",
                reason="This queue is the dead-letter queue of the interruption rules' EventBridge targets "
                "(their DeadLetterConfig, which cdk-nag does not look at); a deny-all redrive-allow policy "
                "keeps any queue from making it its own dead-letter queue.",
            )
        ],
    )
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
    for policy in autoscaler.controller_policies:
        _acknowledge_policy(policy, autoscaler.cluster_name)
    if autoscaler.network is not None:
        NagSuppressions.add_resource_suppressions(
            autoscaler.network.attach_policy,
            [
                NagPackSuppression(
                    id="AwsSolutions-IAM5",
                    reason="What Lambda needs to attach the functions to their subnets (the actions of "
                    "AWSLambdaVPCAccessExecutionRole): Lambda creates and deletes the network interfaces "
                    "itself, so their IDs are not known in advance.",
                    applies_to=["Resource::*"],
                )
            ],
        )
    _acknowledge_functions(autoscaler)


def _acknowledge_functions(autoscaler: FleetwrightAutoscaler) -> None:
    """The wildcards of the termination workflow's permissions. (The functions run the newest Python
    runtime, so AwsSolutions-L1 needs no acknowledgement.)"""
    for function in autoscaler.termination_starters:
        policy = _default_policy(function.role)
        if policy is None:
            continue
        NagSuppressions.add_resource_suppressions(
            policy,
            [
                NagPackSuppression(
                    id="AwsSolutions-IAM5",
                    reason="states:DescribeExecution on the executions of the termination state machine only "
                    "(execution:<state machine>:*): execution names are made at run time from the instance "
                    "and the reason, and the handler looks one up to detect duplicate events.",
                    applies_to=[RegexAppliesTo(regex=_EXECUTIONS)],
                )
            ],
        )
    handling = autoscaler.interruption_handling
    machine_policy = None if handling is None else _default_policy(handling.workflow.state_machine.role)
    if handling is None or machine_policy is None:
        return
    NagSuppressions.add_resource_suppressions(
        machine_policy,
        [
            NagPackSuppression(
                id="AwsSolutions-IAM5",
                reason="Step Functions' LambdaInvoke task may call the step function's versions and "
                "aliases (<function ARN>:*); that one function and nothing else.",
                applies_to=[f"Resource::<{_logical_id(handling.steps)}.Arn>:*"],
            ),
            NagPackSuppression(
                id="AwsSolutions-IAM5",
                reason="Execution logging (CloudWatch Logs delivery APIs) and X-Ray tracing of the state "
                "machine: these actions do not support resource-level permissions.",
                applies_to=["Resource::*"],
            ),
        ],
    )


def _acknowledge_policy(policy: ControllerPolicy, cluster_name: str) -> None:
    """The wildcards of one function's policy, each acknowledged only where its statements hold it."""
    permissions = policy.permissions
    created = (
        CREATED_RESOURCE_TYPES
        if permissions.launches
        else tuple(
            kind
            for kind, held in (
                ("instance", permissions.terminates),
                ("launch-template", permissions.deletes_launch_templates),
            )
            if held
        )
    )
    acknowledgements = [
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
            applies_to=[f"Resource::{_EC2}:<AWS::AccountId>:{kind}/*" for kind in created],
        ),
    ]
    if permissions.launches:
        acknowledgements += _launch_acknowledgements(cluster_name)
    NagSuppressions.add_resource_suppressions(policy, acknowledgements)


def _launch_acknowledgements(cluster_name: str) -> list[NagPackSuppression]:
    """The wildcards of the launch statements: what a launch uses, AMI parameters, instance profiles."""
    return [
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
            "<cluster>_<region>_<hash> (<cluster>_<hash> before regions); only that prefix, and changes "
            "only to profiles tagged for this cluster and not for another region.",
            applies_to=[
                "Resource::arn:<AWS::Partition>:iam::<AWS::AccountId>:instance-profile/"
                f"{instance_profile_prefix(cluster_name)}*"
            ],
        ),
    ]
