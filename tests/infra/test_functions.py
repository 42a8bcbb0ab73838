"""The controller functions the stack deploys: code, runtime, schedule, environment, permissions, and their
access to Kubernetes."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import pytest
import yaml

from tests.support.infra import (
    CLUSTER,
    REPO_ROOT,
    Synthesis,
    SynthesizedStack,
    function_by_description,
    logical_id,
    only,
    render,
)

# (description prefix, directory under functions/)
FUNCTIONS = {
    "provisioner": "Fleetwright provisioner",
    "interruption": "Fleetwright interruption handler",
    "termination": "Fleetwright termination workflow steps",
    "disruption": "Fleetwright disruption",
}
SCHEDULED = ("provisioner", "disruption")


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _role_statements(stack: SynthesizedStack, role_id: str) -> list[dict[str, Any]]:
    """The statements of the inline policies attached to ``role_id``."""
    return [
        statement
        for policy in stack.resources("AWS::IAM::Policy").values()
        if "${" + role_id + "}" in render(policy["Properties"]["Roles"])
        for statement in render(policy["Properties"]["PolicyDocument"]["Statement"])
    ]


def _function_role(function: dict[str, Any]) -> str:
    return logical_id(render(function["Properties"]["Role"]))


@pytest.mark.parametrize("directory", sorted(FUNCTIONS))
def test_function_runs_its_handler_on_arm64_python_314_with_the_layer(
    synthesis: Synthesis, directory: str
) -> None:
    stack = synthesis.fleetwright
    _, function = function_by_description(stack, FUNCTIONS[directory])
    props = function["Properties"]
    layer_id, _ = only(stack.resources("AWS::Lambda::LayerVersion"))
    assert props["Architectures"] == ["arm64"]
    assert props["Runtime"] == "python3.14"
    assert render(props["Layers"]) == ["${" + layer_id + "}"]
    assert props["Handler"] == "handler.handler"
    asset = synthesis.outdir / f"asset.{props['Code']['S3Key'].removesuffix('.zip')}"
    source = REPO_ROOT / "functions" / directory / "handler.py"
    assert (asset / "handler.py").read_text() == source.read_text()


@pytest.mark.parametrize("directory", sorted(FUNCTIONS))
def test_function_metrics_carry_the_handlers_service_name(synthesis: Synthesis, directory: str) -> None:
    # The dashboard and alarms select metrics by this dimension, so it must be the handler's own name.
    _, function = function_by_description(synthesis.fleetwright, FUNCTIONS[directory])
    env = function["Properties"]["Environment"]["Variables"]
    source = (REPO_ROOT / "functions" / directory / "handler.py").read_text()
    service = re.search(r'^SERVICE = "([^"]+)"$', source, re.M)
    assert service is not None
    assert env["POWERTOOLS_SERVICE_NAME"] == service.group(1)
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == "Fleetwright"


@pytest.mark.parametrize("directory", SCHEDULED)
def test_scheduled_function_runs_every_minute_one_at_a_time(synthesis: Synthesis, directory: str) -> None:
    stack = synthesis.fleetwright
    function_id, function = function_by_description(stack, FUNCTIONS[directory])
    props = function["Properties"]
    assert props["Timeout"] == 60
    # The provisioner at 512 MB (docs/cost.md, "Latency at 512 MB"), the disruption function at 1,024 MB.
    assert props["MemorySize"] == (512 if directory == "provisioner" else 1024)
    assert props["ReservedConcurrentExecutions"] == 1
    arn = "${" + function_id + ".Arn}"
    [rule] = [
        r["Properties"]
        for r in stack.resources("AWS::Events::Rule").values()
        if arn in render([t["Arn"] for t in r["Properties"]["Targets"]])
    ]
    assert rule["ScheduleExpression"] == "rate(1 minute)"
    assert render([t["Arn"] for t in rule["Targets"]]) == [arn]
    _, permission = only(
        {
            k: p
            for k, p in stack.resources("AWS::Lambda::Permission").items()
            if render(p["Properties"]["FunctionName"]) == arn
        }
    )
    assert permission["Properties"]["Principal"] == "events.amazonaws.com"
    # A run that could not start in time is not retried: the next minute's run replaces it.
    _, invoke_config = only(
        {
            k: c
            for k, c in stack.resources("AWS::Lambda::EventInvokeConfig").items()
            if render(c["Properties"]["FunctionName"]) == "${" + function_id + "}"
        }
    )
    assert invoke_config["Properties"]["MaximumRetryAttempts"] == 0
    assert invoke_config["Properties"]["MaximumEventAgeInSeconds"] == 60


def test_provisioner_reads_the_nodepools_parameter_and_the_state_table(synthesis: Synthesis) -> None:
    stack = synthesis.fleetwright
    _, function = function_by_description(stack, FUNCTIONS["provisioner"])
    env = render(function["Properties"]["Environment"]["Variables"])
    parameter_id, _ = only(stack.resources("AWS::SSM::Parameter"))
    table_id, _ = only(stack.resources("AWS::DynamoDB::Table"))
    assert env["FLEETWRIGHT_CLUSTER_NAME"] == CLUSTER
    assert env["FLEETWRIGHT_NODEPOOLS_PARAMETER"] == "${" + parameter_id + "}"
    assert env["FLEETWRIGHT_STATE_TABLE"] == "${" + table_id + "}"
    assert "FLEETWRIGHT_NODEPOOLS_FILE" not in env  # the provisioner refuses both sources at once


@pytest.mark.parametrize("directory", sorted(FUNCTIONS))
def test_a_nodepool_change_changes_every_functions_configuration(
    synthesis: Synthesis, directory: str
) -> None:
    # Functions read the NodePools once per environment; a new digest makes Lambda start fresh ones.
    stack = synthesis.fleetwright
    _, parameter = only(stack.resources("AWS::SSM::Parameter"))
    _, function = function_by_description(stack, FUNCTIONS[directory])
    digest = function["Properties"]["Environment"]["Variables"]["FLEETWRIGHT_NODEPOOLS_DIGEST"]
    assert digest == hashlib.sha256(parameter["Properties"]["Value"].encode()).hexdigest()[:16]


def test_every_function_role_has_a_policy_of_its_own_and_writes_only_its_own_logs(
    synthesis: Synthesis,
) -> None:
    stack = synthesis.fleetwright
    policies = stack.resources("AWS::IAM::ManagedPolicy")
    attached = []
    for description in FUNCTIONS.values():
        _, function = function_by_description(stack, description)
        role_id = _function_role(function)
        role = stack.raw["Resources"][role_id]["Properties"]
        [policy] = render(role["ManagedPolicyArns"])
        attached.append(logical_id(policy))
        log_group = logical_id(render(function["Properties"]["LoggingConfig"]["LogGroup"]))
        logs = [s for s in _role_statements(stack, role_id) if "logs:" in json.dumps(s["Action"])]
        assert logs == [
            {
                "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
                "Effect": "Allow",
                "Resource": "${" + log_group + ".Arn}",
            }
        ]
    # one policy per function (test_controller_policy checks what each holds)
    assert sorted(attached) == sorted(policies)


def test_interruption_and_disruption_start_workflows_and_the_steps_continue_them(
    synthesis: Synthesis,
) -> None:
    stack = synthesis.fleetwright
    machine_id, _ = only(stack.resources("AWS::StepFunctions::StateMachine"))
    queue_id = next(
        k for k, q in stack.resources("AWS::SQS::Queue").items() if "RedrivePolicy" in q["Properties"]
    )
    grants: dict[str, dict[str, list[str]]] = {}
    for directory, description in FUNCTIONS.items():
        _, function = function_by_description(stack, description)
        extra = [s for s in _role_statements(stack, _function_role(function)) if "logs:" not in json.dumps(s)]
        grants[directory] = {a: _as_list(s["Resource"]) for s in extra for a in _as_list(s["Action"])}
    assert grants["provisioner"] == {}
    # The step function starts only the next execution of its own workflow (the Continue step).
    assert grants["termination"] == {"states:StartExecution": ["${" + machine_id + "}"]}
    for starter in ("interruption", "disruption"):
        assert grants[starter].pop("states:StartExecution") == ["${" + machine_id + "}"]
        [executions] = grants[starter].pop("states:DescribeExecution")
        assert executions.endswith(":*") and ":execution:" in executions and machine_id in executions
    # Everything else the disruption function does (launch, terminate, delete launch templates, the
    # state table) comes with its own policy, scoped by the cluster tag (test_controller_policy).
    # The sweep lists the workflow's running executions.
    assert grants["disruption"].pop("states:ListExecutions") == ["${" + machine_id + "}"]
    assert grants["disruption"] == {}
    handler = grants["interruption"]
    # What Lambda's poller calls with the function's role, and nothing else on the queue.
    assert set(handler) == {"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"}
    assert all(resources == ["${" + queue_id + ".Arn}"] for resources in handler.values())


def test_state_machine_invokes_only_the_step_function(synthesis: Synthesis) -> None:
    stack = synthesis.fleetwright
    steps_id, _ = function_by_description(stack, FUNCTIONS["termination"])
    _, machine = only(stack.resources("AWS::StepFunctions::StateMachine"))
    statements = _role_statements(stack, logical_id(render(machine["Properties"]["RoleArn"])))
    [invoke] = [s for s in statements if s["Action"] == "lambda:InvokeFunction"]
    assert invoke["Resource"] == ["${" + steps_id + ".Arn}", "${" + steps_id + ".Arn}:*"]
    # the rest is log delivery and X-Ray, which have no resource-level permissions
    others = {a.split(":")[0] for s in statements if s is not invoke for a in _as_list(s["Action"])}
    assert others == {"logs", "xray"}


def _rbac_documents(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def test_each_function_role_joins_its_own_group_the_rbac_manifest_binds(synthesis: Synthesis) -> None:
    stack = synthesis.fleetwright
    manifest = _rbac_documents((REPO_ROOT / "docs" / "rbac.yaml").read_text())
    # The manifest to apply is the one docs/kubernetes.md explains.
    explained = re.search(
        r"## RBAC.*?```yaml\n(.*?)```", (REPO_ROOT / "docs" / "kubernetes.md").read_text(), re.S
    )
    assert explained is not None
    assert manifest == _rbac_documents(explained.group(1))
    roles = {d["metadata"]["name"] for d in manifest if d["kind"] == "ClusterRole"}
    # Each ClusterRole is bound to the one group of the same name, and nothing else is bound.
    bound = {}
    for binding in (d for d in manifest if d["kind"] == "ClusterRoleBinding"):
        [subject] = binding["subjects"]
        assert subject["kind"] == "Group"
        bound[subject["name"]] = binding["roleRef"]["name"]
    assert bound == {name: name for name in roles}

    entries = {
        render(e["Properties"]["PrincipalArn"]): e["Properties"]
        for e in stack.resources("AWS::EKS::AccessEntry").values()
        if e["Properties"]["Type"] == "STANDARD"
    }
    groups = {
        "${" + _function_role(function_by_description(stack, d)[1]) + ".Arn}": [f"fleetwright-{name}"]
        for name, d in FUNCTIONS.items()
    }
    assert {arn: entry["KubernetesGroups"] for arn, entry in entries.items()} == groups
    assert {g for [g] in groups.values()} == roles  # one group per function, every group used
    for entry in entries.values():
        assert entry["ClusterName"] == CLUSTER
        assert "AccessPolicies" not in entry  # permissions come from the ClusterRoles alone
