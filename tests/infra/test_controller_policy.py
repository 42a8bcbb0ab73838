"""The controller's IAM policy: every statement, with its resources and conditions."""

from __future__ import annotations

from typing import Any

import pytest

from tests.infra.conftest import CLUSTER, Synthesis, node_role, only, render

P, R, A = "${AWS::Partition}", "${AWS::Region}", "${AWS::AccountId}"
EC2 = f"arn:{P}:ec2:{R}"
CLUSTER_TAG = "fleetwright.io/cluster"
CREATED = [
    f"{EC2}:{A}:{kind}/*"
    for kind in (
        "fleet",
        "instance",
        "volume",
        "network-interface",
        "launch-template",
        "spot-instances-request",
    )
]


def _statements(synthesis: Synthesis) -> dict[str, dict[str, Any]]:
    _, policy = only(synthesis.fleetwright.resources("AWS::IAM::ManagedPolicy"))
    statements = render(policy["Properties"]["PolicyDocument"]["Statement"])
    return {s["Sid"]: s for s in statements}


def _ids(synthesis: Synthesis) -> dict[str, str]:
    stack = synthesis.fleetwright
    return {
        "role": node_role(stack)[0],
        "queue": next(
            k for k, r in stack.resources("AWS::SQS::Queue").items() if "RedrivePolicy" in r["Properties"]
        ),
        "table": only(stack.resources("AWS::DynamoDB::Table"))[0],
        "parameter": only(stack.resources("AWS::SSM::Parameter"))[0],
    }


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def expected_statements(ids: dict[str, str]) -> dict[str, dict[str, Any]]:
    """What docs/iam.md promises, statement by statement."""
    request_tag = {f"aws:RequestTag/{CLUSTER_TAG}": CLUSTER}
    resource_tag = {f"aws:ResourceTag/{CLUSTER_TAG}": CLUSTER}
    profiles = f"arn:{P}:iam::{A}:instance-profile/{CLUSTER}_*"
    return {
        "LaunchFromSharedResources": {
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
            "Resource": [
                f"{EC2}::image/*",
                f"{EC2}::snapshot/*",
                f"{EC2}:*:subnet/*",
                f"{EC2}:*:security-group/*",
                f"{EC2}:*:capacity-reservation/*",
            ],
        },
        "LaunchFromClusterLaunchTemplates": {
            "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
            "Resource": [f"{EC2}:{A}:launch-template/*"],
            "Condition": {"StringEquals": resource_tag},
        },
        "CreateOnlyClusterTaggedResources": {
            "Action": ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
            "Resource": CREATED,
            "Condition": {"StringEquals": request_tag},
        },
        "TagOnlyWhileCreating": {
            "Action": ["ec2:CreateTags"],
            "Resource": CREATED,
            "Condition": {
                "StringEquals": {
                    **request_tag,
                    "ec2:CreateAction": ["RunInstances", "CreateFleet", "CreateLaunchTemplate"],
                }
            },
        },
        "LabelClusterInstances": {
            "Action": ["ec2:CreateTags"],
            "Resource": [f"{EC2}:{A}:instance/*"],
            "Condition": {
                "StringEquals": resource_tag,
                "ForAllValues:StringEquals": {"aws:TagKeys": ["fleetwright.io/nodeclaim", "Name"]},
            },
        },
        "DeleteOnlyClusterResources": {
            "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
            "Resource": [f"{EC2}:{A}:instance/*", f"{EC2}:{A}:launch-template/*"],
            "Condition": {"StringEquals": resource_tag},
        },
        "ReadEc2": {
            "Action": [
                "ec2:DescribeAvailabilityZones",
                "ec2:DescribeCapacityReservations",
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
            ],
            "Resource": ["*"],
            "Condition": {"StringEquals": {"aws:RequestedRegion": R}},
        },
        "ReadPrices": {"Action": ["pricing:GetProducts"], "Resource": ["*"]},
        "ReadPublicAmiParameters": {
            "Action": ["ssm:GetParameter", "ssm:GetParameters"],
            "Resource": [f"arn:{P}:ssm:{R}::parameter/aws/service/*"],
        },
        "ReadNodePools": {
            "Action": ["ssm:GetParameter"],
            # The parameter's name starts with "/", so the ARN has no slash of its own before it.
            "Resource": [f"arn:{P}:ssm:{R}:{A}:parameter" + "${" + ids["parameter"] + "}"],
        },
        "DescribeCluster": {
            "Action": ["eks:DescribeCluster"],
            "Resource": [f"arn:{P}:eks:{R}:{A}:cluster/{CLUSTER}"],
        },
        "PassNodeRole": {
            "Action": ["iam:PassRole"],
            "Resource": ["${" + ids["role"] + ".Arn}"],
            "Condition": {
                "StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}
            },
        },
        "CreateClusterInstanceProfiles": {
            "Action": ["iam:CreateInstanceProfile", "iam:TagInstanceProfile"],
            "Resource": [profiles],
            "Condition": {"StringEquals": request_tag},
        },
        "ManageClusterInstanceProfiles": {
            "Action": [
                "iam:AddRoleToInstanceProfile",
                "iam:RemoveRoleFromInstanceProfile",
                "iam:DeleteInstanceProfile",
            ],
            "Resource": [profiles],
            "Condition": {"StringEquals": resource_tag},
        },
        "ReadClusterInstanceProfiles": {"Action": ["iam:GetInstanceProfile"], "Resource": [profiles]},
        "ConsumeInterruptionQueue": {
            "Action": [
                "sqs:ReceiveMessage",
                "sqs:DeleteMessage",
                "sqs:ChangeMessageVisibility",
                "sqs:GetQueueAttributes",
                "sqs:GetQueueUrl",
            ],
            "Resource": ["${" + ids["queue"] + ".Arn}"],
        },
        "ReadWriteState": {
            "Action": [
                "dynamodb:GetItem",
                "dynamodb:BatchGetItem",
                "dynamodb:Query",
                "dynamodb:PutItem",
                "dynamodb:UpdateItem",
                "dynamodb:DeleteItem",
                "dynamodb:BatchWriteItem",
                "dynamodb:ConditionCheckItem",
            ],
            "Resource": ["${" + ids["table"] + ".Arn}"],
        },
    }


def test_policy_has_exactly_the_documented_statements(synthesis: Synthesis) -> None:
    assert sorted(_statements(synthesis)) == sorted(expected_statements(_ids(synthesis)))


@pytest.mark.parametrize(
    "sid", sorted(expected_statements({"role": "", "queue": "", "table": "", "parameter": ""}))
)
def test_statement(synthesis: Synthesis, sid: str) -> None:
    statement = _statements(synthesis)[sid]
    expected = expected_statements(_ids(synthesis))[sid]
    assert statement["Effect"] == "Allow"
    assert sorted(_as_list(statement["Action"])) == sorted(expected["Action"])
    assert sorted(_as_list(statement["Resource"])) == sorted(expected["Resource"])
    assert statement.get("Condition") == expected.get("Condition")


def test_no_statement_allows_every_action_of_a_service(synthesis: Synthesis) -> None:
    actions = [a for s in _statements(synthesis).values() for a in _as_list(s["Action"])]
    assert not [a for a in actions if "*" in a]


def test_only_reads_use_unscoped_resources(synthesis: Synthesis) -> None:
    unscoped = {
        a
        for s in _statements(synthesis).values()
        if "*" in _as_list(s["Resource"])
        for a in _as_list(s["Action"])
    }
    assert unscoped
    assert all(a.split(":")[1].startswith(("Describe", "Get")) for a in unscoped)
