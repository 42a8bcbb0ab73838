"""The deployed infrastructure: what exists and how it is configured."""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from fleetwright.interruption.trust import HEALTH_EVENT_TYPE_CODES
from infra.nodepools import load_nodepool_config
from tests.support.infra import CLUSTER, REPO_ROOT, Synthesis, node_role, only, render

FUNCTIONS = 4  # provisioner, interruption handler, termination steps, disruption


def test_stack_holds_the_whole_autoscaler(synthesis: Synthesis) -> None:
    counts = {
        "AWS::Lambda::LayerVersion": 1,
        "AWS::DynamoDB::Table": 1,
        "AWS::SQS::Queue": 3,  # the interruption queue, its dead-letter queue, the rules' delivery one
        "AWS::SQS::QueuePolicy": 3,
        "AWS::Events::Rule": 4 + 2,  # the interruption rules; the provisioner's and disruption's schedules
        "AWS::IAM::Role": 1 + FUNCTIONS + 1,  # nodes, one per function, the state machine
        # each role's own grants (logs, workflow, queue); the step function's StartExecution on its state
        # machine (a policy of its own: in the role's default policy it would make a dependency cycle)
        "AWS::IAM::Policy": FUNCTIONS + 2,
        "AWS::IAM::InstanceProfile": 1,
        "AWS::EKS::AccessEntry": 1 + FUNCTIONS,  # nodes, one per function role
        "AWS::IAM::ManagedPolicy": FUNCTIONS,  # each function's own (docs/iam.md)
        "AWS::SSM::Parameter": 1,
        "AWS::CloudWatch::Dashboard": 1,
        # dead letters, workflow failures, provisioner, interruption handler and disruption errors,
        # failing provisioning passes, registration timeouts, failing disruption, the provisioner and the
        # disruption function near their timeout or memory, the launch rate
        "AWS::CloudWatch::Alarm": 14,
        "AWS::Lambda::Function": FUNCTIONS,
        "AWS::Logs::LogGroup": FUNCTIONS + 1,  # and the state machine's execution log
        "AWS::Lambda::EventInvokeConfig": 2,  # the scheduled functions': no retries of a scheduled run
        "AWS::Lambda::Permission": 2,  # each schedule may invoke its function
        "AWS::Lambda::EventSourceMapping": 1,  # the queue feeds the interruption handler
        "AWS::StepFunctions::StateMachine": 1,
    }
    for resource_type, count in counts.items():
        synthesis.fleetwright.template.resource_count_is(resource_type, count)
    assert len(synthesis.fleetwright.raw["Resources"]) == sum(counts.values())


def test_state_table(synthesis: Synthesis) -> None:
    logical_id, table = only(synthesis.fleetwright.resources("AWS::DynamoDB::Table"))
    props = table["Properties"]
    assert props["KeySchema"] == [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ]
    assert props["AttributeDefinitions"] == [
        {"AttributeName": "pk", "AttributeType": "S"},
        {"AttributeName": "sk", "AttributeType": "S"},
    ]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expiresAt", "Enabled": True}
    assert props["SSESpecification"] == {"SSEEnabled": True}
    assert table["DeletionPolicy"] == "Retain", logical_id


def _queues(synthesis: Synthesis) -> tuple[str, dict[str, Any], str, dict[str, Any]]:
    queues = synthesis.fleetwright.resources("AWS::SQS::Queue")
    main_id = next(k for k, q in queues.items() if "RedrivePolicy" in q["Properties"])
    dlq_id = render(queues[main_id]["Properties"]["RedrivePolicy"])["deadLetterTargetArn"][2:-5]
    return main_id, queues[main_id]["Properties"], dlq_id, queues[dlq_id]["Properties"]


def test_interruption_queue_and_dead_letter_queue(synthesis: Synthesis) -> None:
    _, queue, dlq_id, dlq = _queues(synthesis)
    # A failing message is received three times, one visibility timeout apart, and must then reach the
    # dead-letter queue rather than expire on the way.
    assert queue["MessageRetentionPeriod"] == 4 * 24 * 3600
    assert queue["VisibilityTimeout"] * 3 < queue["MessageRetentionPeriod"] / 10
    assert queue["SqsManagedSseEnabled"] is True
    assert render(queue["RedrivePolicy"]) == {
        "deadLetterTargetArn": "${" + dlq_id + ".Arn}",
        "maxReceiveCount": 3,
    }
    assert dlq["MessageRetentionPeriod"] == 14 * 24 * 3600
    assert dlq["SqsManagedSseEnabled"] is True


def test_only_the_interruption_queue_may_use_its_dead_letter_queue(synthesis: Synthesis) -> None:
    _, queue, _, dlq = _queues(synthesis)
    # The redrive-allow policy names the interruption queue by an ARN built from its fixed name (a
    # reference to the queue would be a cycle: the queue's redrive policy refers to the dead-letter queue).
    name = queue["QueueName"]
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,80}", name) and name.endswith("-interruptions")
    assert render(dlq["RedriveAllowPolicy"]) == {
        "redrivePermission": "byQueue",
        "sourceQueueArns": [f"arn:${{AWS::Partition}}:sqs:${{AWS::Region}}:${{AWS::AccountId}}:{name}"],
    }


def test_the_interruption_queue_name_is_stable_unique_to_its_stack_and_within_sqs_limits() -> None:
    import aws_cdk as cdk
    from constructs import Construct

    from infra.interruption_queue import interruption_queue_name

    def name(stack_name: str, construct_id: str = "Interruption") -> str:
        return interruption_queue_name(Construct(cdk.Stack(cdk.App(), stack_name), construct_id))

    assert name("Fleetwright-a") == name("Fleetwright-a")
    names = {
        name("Fleetwright-a"),
        name("Fleetwright-b"),
        name("Fleetwrighta"),
        name("Fleetwright-a", "Other"),
    }
    assert len(names) == 4
    long = name("F" * 128)
    assert len(long) <= 80 and re.fullmatch(r"[A-Za-z0-9_-]+", long)


def _interruption_rules(synthesis: Synthesis) -> dict[str, dict[str, Any]]:
    """The event rules (those with an event pattern; the schedules have none)."""
    rules = synthesis.fleetwright.resources("AWS::Events::Rule")
    return {k: r for k, r in rules.items() if "EventPattern" in r["Properties"]}


def test_event_rules_send_the_four_event_kinds_to_the_queue(synthesis: Synthesis) -> None:
    main_id, _, _, _ = _queues(synthesis)
    rules = _interruption_rules(synthesis).values()
    patterns = []
    for rule in rules:
        props = rule["Properties"]
        assert props["State"] == "ENABLED"
        assert render([t["Arn"] for t in props["Targets"]]) == ["${" + main_id + ".Arn}"]
        patterns.append(props["EventPattern"])
    by_type = {p["detail-type"][0]: p for p in patterns}
    assert sorted(by_type) == [
        "AWS Health Event",
        "EC2 Instance Rebalance Recommendation",
        "EC2 Instance State-change Notification",
        "EC2 Spot Instance Interruption Warning",
    ]
    assert by_type["AWS Health Event"] == {
        "source": ["aws.health"],
        "detail-type": ["AWS Health Event"],
        "detail": {
            "service": ["EC2"],
            "eventTypeCategory": ["scheduledChange"],
            "eventTypeCode": sorted(HEALTH_EVENT_TYPE_CODES),
            "statusCode": ["open", "upcoming"],
        },
    }
    assert by_type["EC2 Instance State-change Notification"]["detail"] == {
        "state": ["stopping", "stopped", "shutting-down", "terminated"]
    }
    for kind in ("EC2 Spot Instance Interruption Warning", "EC2 Instance Rebalance Recommendation"):
        assert by_type[kind] == {"source": ["aws.ec2"], "detail-type": [kind]}


def test_queue_policy_lets_only_the_rules_send_and_requires_tls(synthesis: Synthesis) -> None:
    main_id, _, _, _ = _queues(synthesis)
    policies = [
        p["Properties"]
        for p in synthesis.fleetwright.resources("AWS::SQS::QueuePolicy").values()
        if render(p["Properties"]["Queues"]) == ["${" + main_id + "}"]
    ]
    assert len(policies) == 1
    statements = render(policies[0]["PolicyDocument"]["Statement"])
    rule_arns = sorted("${" + k + ".Arn}" for k in _interruption_rules(synthesis))
    sends = [s for s in statements if s["Effect"] == "Allow"]
    assert all(s["Principal"] == {"Service": "events.amazonaws.com"} for s in sends)
    assert all(s["Action"] == ["sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl"] for s in sends)
    assert sorted(s["Condition"]["ArnEquals"]["aws:SourceArn"] for s in sends) == rule_arns
    denies = [s for s in statements if s["Effect"] == "Deny"]
    assert [s["Condition"] for s in denies] == [
        {"Bool": {"aws:SecureTransport": "false"}},
        # Nobody else may send (test_interruption_handling.py has the details).
        {"ArnNotEquals": {"aws:SourceArn": [s["Condition"]["ArnEquals"]["aws:SourceArn"] for s in sends]}},
    ]


def test_node_role_instance_profile_and_access_entry(synthesis: Synthesis) -> None:
    role_id, role = node_role(synthesis.fleetwright)
    props = render(role["Properties"])
    assert props["AssumeRolePolicyDocument"]["Statement"] == [
        {"Action": "sts:AssumeRole", "Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}}
    ]
    assert sorted(props["ManagedPolicyArns"]) == sorted(
        f"arn:${{AWS::Partition}}:iam::aws:policy/{name}"
        for name in (
            "AmazonEKSWorkerNodePolicy",
            "AmazonEKS_CNI_Policy",
            "AmazonEC2ContainerRegistryReadOnly",
            "AmazonSSMManagedInstanceCore",
        )
    )
    # The example EC2NodeClass names this role, so the stack creates it under that name.
    assert props["RoleName"] == "KarpenterNodeRole-my-cluster"
    _, profile = only(synthesis.fleetwright.resources("AWS::IAM::InstanceProfile"))
    assert render(profile["Properties"]["Roles"]) == ["${" + role_id + "}"]
    _, entry = only(
        {
            k: e
            for k, e in synthesis.fleetwright.resources("AWS::EKS::AccessEntry").items()
            if e["Properties"]["Type"] == "EC2_LINUX"
        }
    )
    assert render(entry["Properties"]) == {
        "ClusterName": CLUSTER,
        "PrincipalArn": "${" + role_id + ".Arn}",
        "Type": "EC2_LINUX",
    }


def test_dead_letter_alarm_and_dashboard(synthesis: Synthesis) -> None:
    _, _, dlq_id, _ = _queues(synthesis)
    alarms = [
        render(a["Properties"]) for a in synthesis.fleetwright.resources("AWS::CloudWatch::Alarm").values()
    ]
    [props] = [a for a in alarms if "AWS/SQS" in json.dumps(a.get("Metrics"))]
    # The dead-letter queue's messages plus those EventBridge could not deliver (the rules' own DLQ).
    [expression] = [m for m in props["Metrics"] if "Expression" in m]
    assert expression["Expression"] == "dead + undelivered" and expression.get("ReturnData", True)
    stats = {m["Id"]: m["MetricStat"]["Metric"] for m in props["Metrics"] if "MetricStat" in m}
    assert (
        stats["dead"]["MetricName"]
        == stats["undelivered"]["MetricName"]
        == "ApproximateNumberOfMessagesVisible"
    )
    assert stats["dead"]["Dimensions"] == [{"Name": "QueueName", "Value": "${" + dlq_id + ".QueueName}"}]
    assert props["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert props["Threshold"] == 1
    assert props["TreatMissingData"] == "notBreaching"
    _, dashboard = only(synthesis.fleetwright.resources("AWS::CloudWatch::Dashboard"))
    assert dashboard["Properties"]["DashboardName"] == f"Fleetwright-{CLUSTER}"
    body = json.loads(render(dashboard["Properties"]["DashboardBody"]))
    titles = [w["properties"].get("title") for w in body["widgets"]]
    assert {"Interruption queue", "Dead-lettered interruption events", "State table"} <= set(titles)


def test_outputs_name_what_an_operator_needs(synthesis: Synthesis) -> None:
    outputs = synthesis.fleetwright.raw["Outputs"]
    assert sorted(outputs) == [
        "DashboardName",
        "DisruptionLogGroup",
        "InterruptionHandlerLogGroup",
        "InterruptionQueueUrl",
        "NodeInstanceProfileName",
        "NodePoolsParameterName",
        "NodeRoleArn",
        "NodeRoleName",
        "ProvisionerLogGroup",
        "StateTableName",
        "TerminationStateMachineArn",
        "TerminationStepsLogGroup",
    ]
    dashboard_id, _ = only(synthesis.fleetwright.resources("AWS::CloudWatch::Dashboard"))
    assert render(outputs["DashboardName"]["Value"]) == "${" + dashboard_id + "}"


def test_nodepool_parameter_holds_the_validated_documents(synthesis: Synthesis) -> None:
    _, parameter = only(synthesis.fleetwright.resources("AWS::SSM::Parameter"))
    props = parameter["Properties"]
    assert props["Name"] == f"/fleetwright/{CLUSTER}/nodepools"
    assert props["Type"] == "String"
    assert props["Tier"] == "Standard"
    documents = list(yaml.safe_load_all(props["Value"]))
    expected = [
        yaml.safe_load((REPO_ROOT / "examples" / "inflate" / name).read_text(encoding="utf-8"))
        for name in ("ec2nodeclass.yaml", "nodepool.yaml")
    ]
    assert documents == expected  # the Deployment next to them is left out
    # What the provisioner will read passes `fleetwright validate` again.
    path = REPO_ROOT / "examples" / "inflate"
    assert [n.name for n in load_nodepool_config([str(path)]).nodepools] == ["default"]
