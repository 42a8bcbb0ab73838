"""The strict EC2 rules refuse what EC2 refuses, and the faults behave like EC2's: a throttled attempt has
no side effect, a partial fleet launches only part of its target, a just-launched instance is not
visible at once."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from fleetwright.aws.clients import AwsClients
from tests.aws.faults import FailCall, PartialFleet, SlowCall, Throttle
from tests.aws.strict import EventualConsistency, StrictEc2
from tests.support.aws import REGION, Aws, SeededAmis
from tests.support.clock import FakeClock

TAGS = [{"Key": "fleetwright.io/cluster", "Value": "demo"}]


@pytest.fixture(autouse=True)
def no_backoff_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("botocore.endpoint.time.sleep", lambda seconds: None)


def _template(aws: Aws, amis: SeededAmis) -> str:
    image = next(iter(amis.ids.values()))
    aws.clients.ec2.create_launch_template(
        LaunchTemplateName="strict-test",
        LaunchTemplateData={"ImageId": image},
        TagSpecifications=[{"ResourceType": "launch-template", "Tags": TAGS}],
    )
    return "strict-test"


def _fleet(template: str, aws: Aws, count: int = 1, token: str = "token-1", **extra: Any) -> dict[str, Any]:
    params: dict[str, Any] = {
        "Type": "instant",
        "ClientToken": token,
        "TargetCapacitySpecification": {
            "TotalTargetCapacity": count,
            "DefaultTargetCapacityType": "on-demand",
        },
        "LaunchTemplateConfigs": [
            {
                "LaunchTemplateSpecification": {"LaunchTemplateName": template, "Version": "$Latest"},
                "Overrides": [
                    {
                        "InstanceType": "m5.large",
                        "SubnetId": aws.subnets["b"],
                        "AvailabilityZone": "us-east-1b",
                    }
                ],
            }
        ],
        "TagSpecifications": [{"ResourceType": "instance", "Tags": TAGS}],
    }
    params.update(extra)
    return params


def _running(aws: Aws, strict: StrictEc2) -> list[str]:
    strict.consistency.settle()
    reservations = aws.clients.ec2.describe_instances(
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}]
    )["Reservations"]
    return [i["InstanceId"] for r in reservations for i in r["Instances"]]


def _code(error: pytest.ExceptionInfo[ClientError]) -> str:
    return str(error.value.response["Error"]["Code"])


# ------------------------------------------------------------------------------------------- faults


def test_a_throttled_create_fleet_retried_three_times_launches_exactly_one_instance(
    aws: Aws, amis: SeededAmis, strict_ec2: StrictEc2
) -> None:
    template = _template(aws, amis)
    throttle = Throttle("CreateFleet", times=3)
    throttle.install(aws.clients.ec2)

    answer = aws.clients.ec2.create_fleet(**_fleet(template, aws))

    assert throttle.attempts == 4
    assert _running(aws, strict_ec2) == answer["Instances"][0]["InstanceIds"]


def test_throttling_beyond_the_retry_budget_launches_nothing(
    aws: Aws, amis: SeededAmis, strict_ec2: StrictEc2
) -> None:
    template = _template(aws, amis)
    clients = AwsClients(REGION, retry_mode="standard", max_attempts=3)
    Throttle("CreateFleet", times=5).install(clients.ec2)

    with pytest.raises(ClientError) as error:
        clients.ec2.create_fleet(**_fleet(template, aws))

    assert _code(error) == "RequestLimitExceeded"
    assert _running(aws, strict_ec2) == []


def test_a_partial_fleet_launches_what_it_can_and_reports_the_rest(
    aws: Aws, amis: SeededAmis, strict_ec2: StrictEc2
) -> None:
    template = _template(aws, amis)
    PartialFleet(fulfil=1).install(aws.clients.ec2)

    answer = aws.clients.ec2.create_fleet(**_fleet(template, aws, count=3))

    assert len(_running(aws, strict_ec2)) == 1
    assert [e["ErrorCode"] for e in answer["Errors"]] == ["InsufficientInstanceCapacity"]


def test_a_fleet_with_no_capacity_launches_nothing_and_says_why(
    aws: Aws, amis: SeededAmis, strict_ec2: StrictEc2
) -> None:
    template = _template(aws, amis)
    PartialFleet(fulfil=0, code="InsufficientCapacity").install(aws.clients.ec2)

    answer = aws.clients.ec2.create_fleet(**_fleet(template, aws, count=2))

    assert answer["Instances"] == []
    assert [e["ErrorCode"] for e in answer["Errors"]] == ["InsufficientCapacity"]
    assert _running(aws, strict_ec2) == []


def test_fail_call_fails_only_the_nth_call_and_it_has_no_effect(
    aws: Aws, amis: SeededAmis, strict_ec2: StrictEc2
) -> None:
    template = _template(aws, amis)
    [instance] = aws.clients.ec2.create_fleet(**_fleet(template, aws))["Instances"][0]["InstanceIds"]
    strict_ec2.consistency.settle()
    FailCall("CreateTags", code="UnauthorizedOperation", nth=2).install(aws.clients.ec2)

    def tag(key: str) -> None:
        aws.clients.ec2.create_tags(Resources=[instance], Tags=[{"Key": key, "Value": "x"}])

    tag("first")
    with pytest.raises(ClientError) as error:
        tag("second")
    tag("third")

    assert _code(error) == "UnauthorizedOperation"
    described = aws.clients.ec2.describe_instances(InstanceIds=[instance])["Reservations"][0]["Instances"][0]
    keys = {t["Key"] for t in described["Tags"]}
    assert {"first", "third"} <= keys and "second" not in keys


def test_slow_call_waits_on_the_given_clock_before_each_call(aws: Aws) -> None:
    clock = FakeClock()
    start = clock()
    SlowCall("DescribeSubnets", seconds=7.5, sleep=clock.advance).install(aws.clients.ec2)

    aws.clients.ec2.describe_subnets()
    aws.clients.ec2.describe_subnets()

    assert clock() - start == 15.0


# -------------------------------------------------------------------------------------------- rules


def test_an_instant_fleet_refuses_to_tag_spot_requests_and_launches_nothing(
    aws: Aws, amis: SeededAmis, strict_ec2: StrictEc2
) -> None:
    template = _template(aws, amis)
    params = _fleet(
        template, aws, TagSpecifications=[{"ResourceType": "spot-instances-request", "Tags": TAGS}]
    )

    with pytest.raises(ClientError) as error:
        aws.clients.ec2.create_fleet(**params)

    assert _code(error) == "InvalidParameterValue"
    assert _running(aws, strict_ec2) == []


def test_a_maintain_fleet_may_tag_only_itself(aws: Aws, amis: SeededAmis) -> None:
    template = _template(aws, amis)
    with pytest.raises(ClientError) as error:
        aws.clients.ec2.create_fleet(**_fleet(template, aws, Type="maintain"))
    assert _code(error) == "InvalidParameterValue"


def test_create_fleet_refuses_a_client_token_longer_than_64_characters(aws: Aws, amis: SeededAmis) -> None:
    template = _template(aws, amis)
    with pytest.raises(ClientError) as error:
        aws.clients.ec2.create_fleet(**_fleet(template, aws, token="t" * 65))
    assert _code(error) == "InvalidParameterValue"


def test_create_fleet_refuses_more_than_50_launch_template_configs(aws: Aws, amis: SeededAmis) -> None:
    template = _template(aws, amis)
    params = _fleet(template, aws)
    params["LaunchTemplateConfigs"] = params["LaunchTemplateConfigs"] * 51
    with pytest.raises(ClientError) as error:
        aws.clients.ec2.create_fleet(**params)
    assert _code(error) == "InvalidParameterValue"


def test_a_retried_create_fleet_with_the_same_token_launches_once(
    aws: Aws, amis: SeededAmis, strict_ec2: StrictEc2
) -> None:
    template = _template(aws, amis)
    first = aws.clients.ec2.create_fleet(**_fleet(template, aws, count=2))
    again = aws.clients.ec2.create_fleet(**_fleet(template, aws, count=2))

    assert again["Instances"] == first["Instances"]
    assert len(_running(aws, strict_ec2)) == 2
    with pytest.raises(ClientError) as error:
        aws.clients.ec2.create_fleet(**_fleet(template, aws, count=3))
    assert _code(error) == "IdempotentParameterMismatch"


@pytest.mark.parametrize(
    ("change", "code"),
    [
        ({"LaunchTemplateName": "has space"}, "InvalidLaunchTemplateName.MalformedException"),
        ({"TagSpecifications": [{"ResourceType": "instance", "Tags": TAGS}]}, "InvalidParameterValue"),
        (
            {
                "LaunchTemplateData": {
                    "TagSpecifications": [{"ResourceType": "launch-template", "Tags": TAGS}]
                }
            },
            "InvalidParameterValue",
        ),
        ({"LaunchTemplateData": {"UserData": "not base64!"}}, "InvalidUserData.Malformed"),
        (
            {
                "TagSpecifications": [
                    {"ResourceType": "launch-template", "Tags": [{"Key": "aws:x", "Value": "1"}]}
                ]
            },
            "InvalidParameterValue",
        ),
    ],
)
def test_create_launch_template_refuses_what_ec2_refuses(aws: Aws, change: dict[str, Any], code: str) -> None:
    params: dict[str, Any] = {"LaunchTemplateName": "fine", "LaunchTemplateData": {"ImageId": "ami-12345678"}}
    params.update(change)
    with pytest.raises(ClientError) as error:
        aws.clients.ec2.create_launch_template(**params)
    assert _code(error) == code
    assert aws.clients.ec2.describe_launch_templates()["LaunchTemplates"] == []


def test_create_tags_refuses_more_than_50_tags(aws: Aws) -> None:
    tags = [{"Key": f"k{i}", "Value": "v"} for i in range(51)]
    with pytest.raises(ClientError) as error:
        aws.clients.ec2.create_tags(Resources=[aws.vpc_id], Tags=tags)
    assert _code(error) == "TagLimitExceeded"


def test_describe_instances_refuses_max_results_with_instance_ids(aws: Aws) -> None:
    with pytest.raises(ClientError) as error:
        aws.clients.ec2.describe_instances(InstanceIds=["i-0123456789abcdef0"], MaxResults=5)
    assert _code(error) == "InvalidParameterCombination"


def test_describe_instances_refuses_more_than_200_filter_values(aws: Aws) -> None:
    ids = [f"i-{n:017x}" for n in range(201)]
    with pytest.raises(ClientError) as error:
        aws.clients.ec2.describe_instances(Filters=[{"Name": "instance-id", "Values": ids}])
    assert _code(error) == "FilterLimitExceeded"


def test_terminate_instances_refuses_more_than_1000_ids(aws: Aws) -> None:
    with pytest.raises(ClientError) as error:
        aws.clients.ec2.terminate_instances(InstanceIds=[f"i-{n:017x}" for n in range(1001)])
    assert _code(error) == "InvalidParameterValue"


def test_clients_the_code_builds_itself_are_strict_too(aws: Aws) -> None:
    own = AwsClients(REGION)  # a new boto3 session, as the Lambda handlers build
    with pytest.raises(ClientError) as error:
        own.ec2.describe_instances(InstanceIds=["i-0123456789abcdef0"], MaxResults=5)
    assert _code(error) == "InvalidParameterCombination"


def test_uninstalled_rules_leave_moto_as_lenient_as_before(aws: Aws, strict_ec2: StrictEc2) -> None:
    strict_ec2.uninstall()
    answer = aws.clients.ec2.describe_instances(
        InstanceIds=[],
        MaxResults=5,
        Filters=[{"Name": "instance-id", "Values": [f"i-{n:017x}" for n in range(201)]}],
    )
    assert answer["Reservations"] == []


# ------------------------------------------------------------------------------ eventual consistency


def test_a_just_launched_instance_is_missing_from_the_first_describe(
    aws: Aws, amis: SeededAmis, strict_ec2: StrictEc2
) -> None:
    template = _template(aws, amis)
    [instance] = aws.clients.ec2.create_fleet(**_fleet(template, aws))["Instances"][0]["InstanceIds"]

    def by_filter() -> list[str]:
        answer = aws.clients.ec2.describe_instances(Filters=[{"Name": "instance-id", "Values": [instance]}])
        return [i["InstanceId"] for r in answer["Reservations"] for i in r["Instances"]]

    assert by_filter() == []
    assert by_filter() == [instance]


def test_a_just_launched_instance_named_by_id_is_not_found_then_found(
    aws: Aws, amis: SeededAmis, strict_ec2: StrictEc2
) -> None:
    template = _template(aws, amis)
    [instance] = aws.clients.ec2.create_fleet(**_fleet(template, aws))["Instances"][0]["InstanceIds"]

    with pytest.raises(ClientError) as error:
        aws.clients.ec2.terminate_instances(InstanceIds=[instance])
    assert _code(error) == "InvalidInstanceID.NotFound"
    answer = aws.clients.ec2.describe_instances(InstanceIds=[instance])
    assert answer["Reservations"][0]["Instances"][0]["State"]["Name"] in ("pending", "running")


def test_with_a_clock_an_instance_appears_once_the_lag_has_passed(
    aws: Aws, amis: SeededAmis, strict_ec2: StrictEc2
) -> None:
    strict_ec2.consistency.uninstall()
    clock = FakeClock()
    lagging = EventualConsistency(hidden_calls=None, clock=clock, lag_seconds=3.0)
    lagging.install(aws.clients.ec2)
    template = _template(aws, amis)
    [instance] = aws.clients.ec2.create_fleet(**_fleet(template, aws))["Instances"][0]["InstanceIds"]

    for _ in range(3):
        with pytest.raises(ClientError):
            aws.clients.ec2.describe_instances(InstanceIds=[instance])
    clock.advance(3.0)
    aws.clients.ec2.describe_instances(InstanceIds=[instance])
    assert lagging.hidden == [instance] * 3


@pytest.mark.lenient_ec2("EventualConsistency", reason="shows that the marker turns one rule off")
def test_a_test_can_turn_one_rule_off_with_a_reason(
    aws: Aws, amis: SeededAmis, strict_ec2: StrictEc2
) -> None:
    assert "EventualConsistency" not in strict_ec2.rules
    template = _template(aws, amis)
    [instance] = aws.clients.ec2.create_fleet(**_fleet(template, aws))["Instances"][0]["InstanceIds"]
    aws.clients.ec2.describe_instances(InstanceIds=[instance])


def test_a_followed_clock_moving_on_shows_an_instance_before_its_calls_run_out(
    aws: Aws, amis: SeededAmis, strict_ec2: StrictEc2
) -> None:
    clock = FakeClock()
    strict_ec2.consistency.hidden_calls = 5
    strict_ec2.consistency.follow(clock, lag_seconds=2.0)
    template = _template(aws, amis)
    [instance] = aws.clients.ec2.create_fleet(**_fleet(template, aws))["Instances"][0]["InstanceIds"]

    with pytest.raises(ClientError):
        aws.clients.ec2.describe_instances(InstanceIds=[instance])
    clock.advance(2.0)
    aws.clients.ec2.describe_instances(InstanceIds=[instance])
    assert strict_ec2.consistency.hidden == [instance]


def test_an_exempt_observer_sees_the_instance_and_leaves_the_lag_to_the_code(
    aws: Aws, amis: SeededAmis, strict_ec2: StrictEc2
) -> None:
    template = _template(aws, amis)
    [instance] = aws.clients.ec2.create_fleet(**_fleet(template, aws))["Instances"][0]["InstanceIds"]
    observer = boto3.client("ec2", region_name=REGION)
    strict_ec2.exempt(observer)

    observer.describe_instances(InstanceIds=[instance])
    with pytest.raises(ClientError) as error:
        aws.clients.ec2.describe_instances(InstanceIds=[instance])
    assert _code(error) == "InvalidInstanceID.NotFound"
