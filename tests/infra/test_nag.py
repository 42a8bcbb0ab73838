"""cdk-nag AwsSolutions: no unacknowledged findings, and every acknowledgement says why."""

from __future__ import annotations

import re

from aws_cdk import CfnResource, Stack

from tests.support.infra import Synthesis

NAG = re.compile(r"AwsSolutions-[A-Z0-9]+")
# Rules whose findings name what they are about (a policy, a resource pattern): acknowledgements of them
# must list exactly which findings they cover.
GRANULAR_RULES = ("AwsSolutions-IAM4", "AwsSolutions-IAM5")


def _resource_path(synthesis: Synthesis, construct_path: str) -> str:
    """``Fleetwright/X/Resource`` → ``X`` (the construct path below the autoscaler)."""
    prefix = f"/{synthesis.fleetwright.name}/Fleetwright/"
    return construct_path.removeprefix(prefix).removesuffix("/Resource")


def _acknowledgements(synthesis: Synthesis) -> list[tuple[str, dict[str, object]]]:
    """(construct path, rule) of every acknowledgement in the template's metadata."""
    stack = Stack.of(synthesis.autoscaler)
    paths = {
        stack.resolve(c.logical_id): _resource_path(synthesis, "/" + c.node.path)
        for c in synthesis.autoscaler.node.find_all()
        if isinstance(c, CfnResource)
    }
    return [
        (paths[logical_id], rule)
        for logical_id, resource in synthesis.fleetwright.raw["Resources"].items()
        for rule in resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])
    ]


def test_no_unacknowledged_findings(synthesis: Synthesis) -> None:
    findings = [m for m in synthesis.fleetwright.messages if "ERROR" in m[0] or "WARNING" in m[0]]
    assert findings == []


def test_checks_ran_and_every_acknowledgement_was_needed(synthesis: Synthesis) -> None:
    suppressed = {
        (_resource_path(synthesis, path), NAG.search(text).group())  # type: ignore[union-attr]
        for _, path, text in synthesis.fleetwright.messages
        if "was triggered but suppressed" in text
    }
    assert suppressed == {
        # the node role's AWS managed policies and the wildcards of each function's policy
        ("Node/Role", "AwsSolutions-IAM4"),
        ("ProvisionerPolicy", "AwsSolutions-IAM5"),
        ("InterruptionHandlerPolicy", "AwsSolutions-IAM5"),
        ("DisruptionPolicy", "AwsSolutions-IAM5"),
        ("TerminationStepsPolicy", "AwsSolutions-IAM5"),
        # DescribeExecution on the workflow's executions; the state machine's invoke, logging and tracing
        ("InterruptionHandlerRole/DefaultPolicy", "AwsSolutions-IAM5"),
        ("DisruptionRole/DefaultPolicy", "AwsSolutions-IAM5"),
        ("TerminationWorkflow/StateMachine/Role/DefaultPolicy", "AwsSolutions-IAM5"),
        # the interruption rules' delivery dead-letter queue (cdk-nag does not see a target's DLQ)
        ("Interruption/DeliveryDeadLetterQueue", "AwsSolutions-SQS3"),
    }
    acknowledged = {(path, str(rule["id"])) for path, rule in _acknowledgements(synthesis)}
    assert acknowledged == suppressed


def test_each_acknowledgement_gives_a_reason(synthesis: Synthesis) -> None:
    acknowledgements = _acknowledgements(synthesis)
    # node role managed policies, the wildcards of the three launching functions' policies and of the
    # termination steps' (Describe reads, instance/*), DescribeExecution (two roles), the state machine's,
    # the delivery dead-letter queue
    assert len(acknowledgements) == 1 + 3 * 5 + 2 + 2 + 2 + 1
    for _, rule in acknowledgements:
        assert len(str(rule["reason"])) >= 60, rule
        if rule["id"] in GRANULAR_RULES:
            assert rule["applies_to"], rule  # scoped to named findings, never the whole rule


def test_no_function_role_uses_an_aws_managed_policy(synthesis: Synthesis) -> None:
    # The functions' roles write only to their own log groups instead of AWSLambdaBasicExecutionRole.
    roles = synthesis.fleetwright.resources("AWS::IAM::Role")
    lambda_roles = [r for r in roles.values() if "lambda.amazonaws.com" in str(r["Properties"])]
    assert len(lambda_roles) == 4
    for role in lambda_roles:
        assert "iam::aws:policy" not in str(role["Properties"].get("ManagedPolicyArns", []))
