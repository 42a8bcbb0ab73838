"""Private clusters: the functions in the cluster's VPC, with their security groups, the VPC endpoints
and the permissions that needs; function sizes from ``functionSizes`` and the near-limit alarms.

One synthesis for the module (the session's default app is in conftest.py)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import aws_cdk as cdk
import pytest
from cdk_nag import AwsSolutionsChecks

import app as cdk_app
from infra.function_network import GATEWAY_ENDPOINT_SERVICES, INTERFACE_ENDPOINT_SERVICES
from infra.settings import SettingsError, settings_from_context
from tests.support.infra import ALARM_TOPIC, REPO_ROOT, Synthesis, function_by_description, render

SUBNETS = ["subnet-0aa11", "subnet-0bb22"]
CONTEXT = {
    "clusterName": "private-cluster",
    "alarmTopicArn": ALARM_TOPIC,
    "vpcId": "vpc-0123",
    "vpcSubnetIds": ",".join(SUBNETS),
    "clusterSecurityGroupId": "sg-0cluster",
    "createVpcEndpoints": "true",
    "vpcRouteTableIds": "rtb-0a,rtb-0b",
    "functionSizes": json.dumps({"disruption": {"memoryMB": 3008, "timeoutSeconds": 120}}),
    "economyMode": "true",
}


@pytest.fixture(scope="module")
def private(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[dict[str, Any], list[tuple[str, str]]]]:
    cwd = os.getcwd()
    os.chdir(REPO_ROOT)
    try:
        app = cdk.App(outdir=str(tmp_path_factory.mktemp("cdk.private")), context=CONTEXT)
        stack = cdk_app.build_app(app)
        cdk.Aspects.of(stack).add(AwsSolutionsChecks())
        artifact = app.synth().get_stack_by_name(stack.stack_name)
    finally:
        os.chdir(cwd)
    messages = [(str(m.level), str(m.entry.data)) for m in artifact.messages]
    yield artifact.template, messages


def _resources(template: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {k: r for k, r in template["Resources"].items() if r["Type"] == kind}


def test_every_function_runs_in_the_subnets_with_the_stacks_security_group(private: Any) -> None:
    template, _ = private
    functions = _resources(template, "AWS::Lambda::Function")
    assert len(functions) == 4
    (group_id, group), *_ = [
        (k, g)
        for k, g in _resources(template, "AWS::EC2::SecurityGroup").items()
        if "functions of EKS" in g["Properties"]["GroupDescription"]
    ]
    for function in functions.values():
        config = render(function["Properties"]["VpcConfig"])
        assert config == {"SubnetIds": SUBNETS, "SecurityGroupIds": [f"${{{group_id}.GroupId}}"]}
    # HTTPS out, nothing else; nothing in.
    assert [
        (e["IpProtocol"], e["FromPort"], e["ToPort"]) for e in group["Properties"]["SecurityGroupEgress"]
    ] == [("tcp", 443, 443)]
    assert "SecurityGroupIngress" not in group["Properties"]
    (ingress,) = _resources(template, "AWS::EC2::SecurityGroupIngress").values()
    assert render(ingress["Properties"]) == {
        "GroupId": "sg-0cluster",
        "IpProtocol": "tcp",
        "FromPort": 443,
        "ToPort": 443,
        "SourceSecurityGroupId": f"${{{group_id}.GroupId}}",
        "Description": "Fleetwright functions to the Kubernetes API server",
    }


def test_lambda_may_attach_the_functions_before_it_creates_them(private: Any) -> None:
    template, _ = private
    (policy_id, policy), *rest = [
        (k, p)
        for k, p in _resources(template, "AWS::IAM::ManagedPolicy").items()
        if "attach" in p["Properties"].get("Description", "")
    ]
    assert rest == []
    (statement,) = policy["Properties"]["PolicyDocument"]["Statement"]
    assert (
        "ec2:CreateNetworkInterface" in statement["Action"]
        and "ec2:DeleteNetworkInterface" in statement["Action"]
    )
    roles = {
        k: r
        for k, r in _resources(template, "AWS::IAM::Role").items()
        if "lambda" in json.dumps(r["Properties"])
    }
    for function in _resources(template, "AWS::Lambda::Function").values():
        role_id = function["Properties"]["Role"]["Fn::GetAtt"][0]
        assert {"Ref": policy_id} in roles[role_id]["Properties"]["ManagedPolicyArns"]
        assert policy_id in function["DependsOn"]


def test_the_vpc_endpoints_the_functions_call(private: Any) -> None:
    template, _ = private
    endpoints = {
        render(e["Properties"]["ServiceName"]).rsplit(".", 1)[1]: e["Properties"]
        for e in _resources(template, "AWS::EC2::VPCEndpoint").values()
    }
    assert sorted(endpoints) == sorted(INTERFACE_ENDPOINT_SERVICES + GATEWAY_ENDPOINT_SERVICES)
    assert sorted(endpoints) == ["dynamodb", "ec2", "eks", "ssm", "states"]
    for service in INTERFACE_ENDPOINT_SERVICES:
        assert (
            endpoints[service]["VpcEndpointType"] == "Interface" and endpoints[service]["PrivateDnsEnabled"]
        )
        assert endpoints[service]["SubnetIds"] == SUBNETS
    assert endpoints["dynamodb"]["VpcEndpointType"] == "Gateway"
    assert endpoints["dynamodb"]["RouteTableIds"] == ["rtb-0a", "rtb-0b"]


def test_function_sizes_and_cdk_nag(private: Any) -> None:
    template, messages = private
    sizes = {
        f["Properties"]["Description"].split(" (")[0]: (
            f["Properties"]["MemorySize"],
            f["Properties"]["Timeout"],
        )
        for f in _resources(template, "AWS::Lambda::Function").values()
    }
    assert sizes == {
        "Fleetwright provisioner": (512, 60),  # the default
        "Fleetwright disruption": (3008, 120),
        "Fleetwright interruption handler": (512, 60),
        "Fleetwright termination workflow steps": (512, 60),
    }
    assert [m for m in messages if "ERROR" in m[0] or "WARNING" in m[0]] == []


def test_economy_mode_makes_the_provisioner_pass_once_per_invocation(
    private: Any, synthesis: Synthesis
) -> None:
    template, _ = private
    (economy,) = [
        f["Properties"]["Environment"]["Variables"]
        for f in _resources(template, "AWS::Lambda::Function").values()
        if f["Properties"]["Description"].startswith("Fleetwright provisioner")
    ]
    assert economy["FLEETWRIGHT_ECONOMY_MODE"] == "true"
    _, watching = function_by_description(synthesis.fleetwright, "Fleetwright provisioner")
    assert watching["Properties"]["Environment"]["Variables"]["FLEETWRIGHT_ECONOMY_MODE"] == "false"


def test_the_default_app_has_no_vpc_and_the_default_sizes(synthesis: Synthesis) -> None:
    stack = synthesis.fleetwright
    assert stack.resources("AWS::EC2::VPCEndpoint") == {} and stack.resources("AWS::EC2::SecurityGroup") == {}
    _, provisioner = function_by_description(stack, "Fleetwright provisioner")
    assert "VpcConfig" not in provisioner["Properties"]
    assert (provisioner["Properties"]["MemorySize"], provisioner["Properties"]["Timeout"]) == (512, 60)


def test_near_limit_alarms_watch_both_shares_at_80_percent(synthesis: Synthesis) -> None:
    alarms = {
        k: a["Properties"]
        for k, a in synthesis.fleetwright.resources("AWS::CloudWatch::Alarm").items()
        if "NearLimits" in k
    }
    assert len(alarms) == 2
    for alarm in alarms.values():
        assert alarm["Threshold"] == 0.8
        assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
        assert [q["Expression"] for q in alarm["Metrics"] if "Expression" in q] == ["MAX([duration, memory])"]
        stats = {
            q["MetricStat"]["Metric"]["MetricName"]: (
                q["MetricStat"]["Stat"],
                q["MetricStat"]["Metric"]["Dimensions"],
            )
            for q in alarm["Metrics"]
            if "MetricStat" in q
        }
        assert set(stats) == {"DurationOfTimeout", "MemoryOfLimit"}
        assert all(stat == "Maximum" for stat, _ in stats.values())
    services = {
        d["Value"]
        for alarm in alarms.values()
        for q in alarm["Metrics"]
        if "MetricStat" in q
        for d in q["MetricStat"]["Metric"]["Dimensions"]
    }
    assert services == {"fleetwright-provisioner", "fleetwright-disruption"}


def test_the_dashboard_graphs_both_shares_per_function_against_the_alarm_line(synthesis: Synthesis) -> None:
    (dashboard,) = synthesis.fleetwright.resources("AWS::CloudWatch::Dashboard").values()
    widgets = json.loads(render(dashboard["Properties"]["DashboardBody"]))["widgets"]
    graphs = {
        w["properties"]["title"]: w["properties"]
        for w in widgets
        if w["type"] == "metric" and "share of the Lambda timeout" in w["properties"].get("title", "")
    }
    assert sorted(title.split(":")[0] for title in graphs) == ["Disruption", "Provisioner"]
    for graph in graphs.values():
        assert sorted(line[1] for line in graph["metrics"]) == ["DurationOfTimeout", "MemoryOfLimit"]
        assert [a["value"] for a in graph["annotations"]["horizontal"]] == [0.8]
    alarm_titles = {
        w["properties"].get("title") for w in widgets if "alarms" in w["properties"].get("annotations", {})
    }
    assert {"Provisioner near its limits", "Disruption near its limits"} <= alarm_titles


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"vpcSubnetIds": "subnet-1"}, "vpcId is needed"),
        (
            {"vpcSubnetIds": "subnet-1", "vpcId": "vpc-1", "createVpcEndpoints": "true"},
            "needs vpcRouteTableIds",
        ),
        ({"vpcSubnetIds": "sub-1", "vpcId": "vpc-1"}, "'sub-1' is not a subnet-... id"),
        ({"createVpcEndpoints": "true"}, "needs vpcSubnetIds"),
        ({"functionSizes": '{"provisoner": {"memoryMB": 2048}}'}, "did you mean 'provisioner'?"),
        ({"functionSizes": {"disruption": {"memoryMB": 64}}}, "from 128 to 10240 MB, got 64"),
        (
            {"functionSizes": {"disruption": {"timeout": 60}}},
            "unknown field 'timeout'; did you mean 'timeoutSeconds'?",
        ),
    ],
)
def test_bad_vpc_and_size_settings_name_what_to_fix(context: dict[str, Any], message: str) -> None:
    with pytest.raises(SettingsError) as raised:
        settings_from_context({"clusterName": "c", **context})
    assert message in str(raised.value)


def test_own_security_groups_need_no_vpc_id() -> None:
    settings = settings_from_context(
        {"clusterName": "c", "vpcSubnetIds": ["subnet-1", "subnet-2"], "vpcSecurityGroupIds": "sg-1"}
    )
    assert settings.vpc is not None and settings.vpc.security_group_ids == ("sg-1",)
