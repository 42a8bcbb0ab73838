"""The controller functions' IAM policies: one per function, every statement with its resources and
conditions; launching, deleting and the NodePools only where the function does them."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.infra import CLUSTER, Synthesis, node_role, only, render

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
FUNCTIONS = ("Provisioner", "InterruptionHandler", "Disruption", "TerminationSteps")
LAUNCH = [
    "LaunchFromSharedResources",
    "LaunchFromClusterLaunchTemplates",
    "CreateOnlyClusterTaggedResources",
    "TagOnlyWhileCreating",
    "PassNodeRole",
    "CreateClusterInstanceProfiles",
    "TagClusterInstanceProfiles",
    "ManageClusterInstanceProfiles",
    "ReadClusterInstanceProfiles",
    "ReadPrices",
    "ReadPublicAmiParameters",
]
COMMON = ["TerminateClusterInstances", "ReadEc2", "DescribeCluster", "ReadWriteState"]
SIDS = {
    "Provisioner": [*LAUNCH, *COMMON, "ReadNodePools"],
    "InterruptionHandler": [*LAUNCH, *COMMON, "ReadNodePools"],
    "Disruption": [*LAUNCH, *COMMON, "ReadNodePools", "DeleteClusterLaunchTemplates"],
    "TerminationSteps": COMMON,
}
LAUNCH_READS = [
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
]
EC2_READS = {
    "Provisioner": LAUNCH_READS,
    "InterruptionHandler": LAUNCH_READS,
    # Garbage collection reads the AMI a launch template boots.
    "Disruption": [*LAUNCH_READS, "ec2:DescribeLaunchTemplateVersions"],
    "TerminationSteps": ["ec2:DescribeInstances"],
}

EVERY_ITEM_ACTION = [
    "dynamodb:GetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:ConditionCheckItem",
]
TABLE = {
    # Powertools idempotency deletes a failed run's record.
    "Provisioner": EVERY_ITEM_ACTION,
    "InterruptionHandler": [a for a in EVERY_ITEM_ACTION if a != "dynamodb:DeleteItem"],
    # Emptiness markers and the sweep's sightings are deleted.
    "Disruption": EVERY_ITEM_ACTION,
    # The claim book: read the claims, finalize one.
    "TerminationSteps": ["dynamodb:GetItem", "dynamodb:Query", "dynamodb:UpdateItem"],
}


def _policies(synthesis: Synthesis) -> dict[str, tuple[str, dict[str, Any]]]:
    """The managed policy (logical id, body) attached to each built-in function's role, by function."""
    stack = synthesis.fleetwright
    policies = stack.resources("AWS::IAM::ManagedPolicy")
    roles = stack.resources("AWS::IAM::Role")
    found = {}
    for function in FUNCTIONS:
        _, body = only(
            {
                k: f
                for k, f in stack.resources("AWS::Lambda::Function").items()
                if k.startswith(f"Fleetwright{function}") and "Role" in f["Properties"]
            }
        )
        role = roles[render(body["Properties"]["Role"]).removeprefix("${").split(".")[0]]
        (reference,) = render(role["Properties"]["ManagedPolicyArns"])
        policy_id = reference.removeprefix("${").removesuffix("}")
        found[function] = (policy_id, policies[policy_id])
    return found


def _statements(synthesis: Synthesis, function: str) -> dict[str, dict[str, Any]]:
    statements = render(_policies(synthesis)[function][1]["Properties"]["PolicyDocument"]["Statement"])
    return {s["Sid"]: s for s in statements}


def _ids(synthesis: Synthesis) -> dict[str, str]:
    stack = synthesis.fleetwright
    return {
        "role": node_role(stack)[0],
        "table": only(stack.resources("AWS::DynamoDB::Table"))[0],
        "parameter": only(stack.resources("AWS::SSM::Parameter"))[0],
    }


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def expected_statements(ids: dict[str, str], function: str) -> dict[str, dict[str, Any]]:
    """What docs/iam.md promises for ``function``'s policy, statement by statement."""
    request_tag = {f"aws:RequestTag/{CLUSTER_TAG}": CLUSTER}
    resource_tag = {f"aws:ResourceTag/{CLUSTER_TAG}": CLUSTER}
    # Existing instances and launch templates also need the second tag the controller writes.
    instance_owned = {
        "StringEquals": resource_tag,
        "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "?*"},
    }
    template_owned = {
        "StringEquals": resource_tag,
        "StringLike": {"aws:ResourceTag/fleetwright.io/ec2nodeclass": "?*"},
    }
    profiles = f"arn:{P}:iam::{A}:instance-profile/{CLUSTER}_*"
    region_request_tag = {"aws:RequestTag/fleetwright.io/region": "${AWS::Region}"}
    catalog: dict[str, dict[str, Any]] = {
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
            "Condition": template_owned,
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
        "TerminateClusterInstances": {
            "Action": ["ec2:TerminateInstances"],
            "Resource": [f"{EC2}:{A}:instance/*"],
            "Condition": instance_owned,
        },
        "DeleteClusterLaunchTemplates": {
            "Action": ["ec2:DeleteLaunchTemplate"],
            "Resource": [f"{EC2}:{A}:launch-template/*"],
            "Condition": template_owned,
        },
        "ReadEc2": {
            "Action": EC2_READS[function],
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
        # Profiles are created tagged for this region; one of another region is never changed, one made
        # before profiles had a region (no region tag) still is.
        "CreateClusterInstanceProfiles": {
            "Action": ["iam:CreateInstanceProfile"],
            "Resource": [profiles],
            "Condition": {"StringEquals": {**request_tag, **region_request_tag}},
        },
        "TagClusterInstanceProfiles": {
            "Action": ["iam:TagInstanceProfile"],
            "Resource": [profiles],
            "Condition": {"StringEquals": {**request_tag, **region_request_tag, **resource_tag}},
        },
        "ManageClusterInstanceProfiles": {
            "Action": ["iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile"],
            "Resource": [profiles],
            "Condition": {
                "StringEquals": resource_tag,
                "StringEqualsIfExists": {"aws:ResourceTag/fleetwright.io/region": "${AWS::Region}"},
            },
        },
        "ReadClusterInstanceProfiles": {"Action": ["iam:GetInstanceProfile"], "Resource": [profiles]},
        "ReadWriteState": {"Action": TABLE[function], "Resource": ["${" + ids["table"] + ".Arn}"]},
    }
    return {sid: catalog[sid] for sid in SIDS[function]}


def test_each_function_has_its_own_policy(synthesis: Synthesis) -> None:
    policies = _policies(synthesis)
    assert len({policy_id for policy_id, _ in policies.values()}) == len(FUNCTIONS)
    assert len(synthesis.fleetwright.resources("AWS::IAM::ManagedPolicy")) == len(FUNCTIONS)


@pytest.mark.parametrize("function", FUNCTIONS)
def test_policy_has_exactly_the_documented_statements(synthesis: Synthesis, function: str) -> None:
    assert sorted(_statements(synthesis, function)) == sorted(expected_statements(_ids(synthesis), function))


@pytest.mark.parametrize(
    ("function", "sid"),
    [(f, sid) for f in FUNCTIONS for sid in SIDS[f]],
)
def test_statement(synthesis: Synthesis, function: str, sid: str) -> None:
    statement = _statements(synthesis, function)[sid]
    expected = expected_statements(_ids(synthesis), function)[sid]
    assert statement["Effect"] == "Allow"
    assert sorted(_as_list(statement["Action"])) == sorted(expected["Action"])
    assert sorted(_as_list(statement["Resource"])) == sorted(expected["Resource"])
    assert statement.get("Condition") == expected.get("Condition")


def test_only_the_launching_functions_can_launch_or_pass_the_node_role(synthesis: Synthesis) -> None:
    def actions(function: str) -> set[str]:
        return {a for s in _statements(synthesis, function).values() for a in _as_list(s["Action"])}

    launching = {"ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate", "iam:PassRole"}
    assert launching <= actions("Provisioner")
    assert not launching & actions("TerminationSteps")
    assert not {a for a in actions("TerminationSteps") if a.startswith("iam:")}
    assert "ec2:DeleteLaunchTemplate" not in actions("Provisioner") | actions("InterruptionHandler")
    every = set().union(*(actions(f) for f in FUNCTIONS))
    assert "iam:DeleteInstanceProfile" not in every
    assert not {a for a in every if a.startswith("sqs:")}


@pytest.mark.parametrize("function", FUNCTIONS)
def test_no_statement_allows_every_action_of_a_service(synthesis: Synthesis, function: str) -> None:
    actions = [a for s in _statements(synthesis, function).values() for a in _as_list(s["Action"])]
    assert not [a for a in actions if "*" in a]


@pytest.mark.parametrize("function", FUNCTIONS)
def test_only_reads_use_unscoped_resources(synthesis: Synthesis, function: str) -> None:
    unscoped = {
        a
        for s in _statements(synthesis, function).values()
        if "*" in _as_list(s["Resource"])
        for a in _as_list(s["Action"])
    }
    assert unscoped
    assert all(a.split(":")[1].startswith(("Describe", "Get")) for a in unscoped)
