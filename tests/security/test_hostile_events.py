"""Hostile messages on the interruption queue, each through the real handler (Lambda entry point, SQS batch)
against moto and the Kubernetes API emulator: every one is rejected with its reason (metric and log line),
deleted from the queue, and drains, cordons, replaces or terminates nothing (docs/security.md lists them).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.support.interruption import (
    ACCOUNT,
    REBALANCE,
    SCHEDULED_CHANGE,
    SPOT_WARNING,
    STATE_CHANGE,
    Interruptions,
    claimed_node,
    for_instance,
)
from tests.support.termination import Harness

CLAIM = "default-abcd1234"
NOW = datetime(2027, 1, 15, 8, 0, 0, tzinfo=UTC)  # the harness clock
OTHER_INSTANCE = "i-0123456789abcdef0"

Mutation = Callable[[dict[str, Any], str], None]


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _rfc1123(moment: datetime) -> str:
    return moment.strftime("%a, %d %b %Y %H:%M:%S GMT")


def _health(instance_ids: list[str], **detail: Any) -> dict[str, Any]:
    """A genuine AWS Health retirement of ``instance_ids`` (``detail`` fields replaced)."""
    event = for_instance(SCHEDULED_CHANGE, instance_ids[0])
    event["resources"] = list(instance_ids)
    event["detail"]["affectedEntities"] = [{"entityValue": i, "status": "IMPAIRED"} for i in instance_ids]
    event["detail"].update(detail)
    return event


def _set(field: str, value: Any) -> Mutation:
    def mutate(event: dict[str, Any], _instance_id: str) -> None:
        event[field] = value

    return mutate


def _set_detail(field: str, value: Any) -> Mutation:
    def mutate(event: dict[str, Any], _instance_id: str) -> None:
        event["detail"][field] = value

    return mutate


def _drop(field: str) -> Mutation:
    def mutate(event: dict[str, Any], _instance_id: str) -> None:
        del event[field]

    return mutate


def _instance_id(value: str) -> Mutation:
    def mutate(event: dict[str, Any], _instance_id: str) -> None:
        event["detail"]["instance-id"] = value
        event["resources"] = [f"arn:aws:ec2:us-east-1:{ACCOUNT}:instance/{value}"]

    return mutate


# (name, template, mutation, reason): each is a genuine event for the node's spot instance, made hostile.
HOSTILE: list[tuple[str, dict[str, Any], Mutation, str]] = [
    ("another account", SPOT_WARNING, _set("account", "999999999999"), "WrongAccount"),
    ("no account", SPOT_WARNING, _drop("account"), "WrongAccount"),
    ("another region", SPOT_WARNING, _set("region", "eu-north-1"), "WrongRegion"),
    ("dated 2001", SPOT_WARNING, _set("time", "2001-01-01T00:00:00Z"), "Stale"),
    ("dated two hours ago", REBALANCE, _set("time", _iso(NOW - timedelta(hours=2))), "Stale"),
    ("dated an hour ahead", SPOT_WARNING, _set("time", _iso(NOW + timedelta(hours=1))), "FromTheFuture"),
    ("instance id i-*", SPOT_WARNING, _instance_id("i-*"), "InvalidInstanceId"),
    ("instance id upper-case", STATE_CHANGE, _instance_id("i-1234567890ABCDEF0"), "InvalidInstanceId"),
    ("instance id 12 hex digits", SPOT_WARNING, _instance_id("i-1234567890ab"), "InvalidInstanceId"),
    ("no resources", SPOT_WARNING, _set("resources", []), "ResourceMismatch"),
    (
        "resources name another instance",
        SPOT_WARNING,
        _set("resources", [f"arn:aws:ec2:us-east-1:{ACCOUNT}:instance/{OTHER_INSTANCE}"]),
        "ResourceMismatch",
    ),
    ("resources name the bare id", REBALANCE, lambda e, i: e.update(resources=[i]), "ResourceMismatch"),
    (
        "resources in another account",
        SPOT_WARNING,
        lambda e, i: e.update(resources=[f"arn:aws:ec2:us-east-1:999999999999:instance/{i}"]),
        "ResourceMismatch",
    ),
    (
        "resources add a second instance",
        STATE_CHANGE,
        lambda e, i: e["resources"].append(f"arn:aws:ec2:us-east-1:{ACCOUNT}:instance/{OTHER_INSTANCE}"),
        "ResourceMismatch",
    ),
    ("forged source", SPOT_WARNING, _set("source", "custom.ec2"), "UnknownEvent"),
    ("unknown instance action", SPOT_WARNING, _set_detail("instance-action", "explode"), "InvalidEvent"),
    ("Health: closed", SCHEDULED_CHANGE, _set_detail("statusCode", "closed"), "HealthStatusNotActionable"),
    (
        "Health: no status",
        SCHEDULED_CHANGE,
        lambda e, i: e["detail"].pop("statusCode"),
        "HealthStatusNotActionable",
    ),
    (
        "Health: operational issue",
        SCHEDULED_CHANGE,
        _set_detail("eventTypeCode", "AWS_EC2_OPERATIONAL_ISSUE"),
        "HealthTypeNotHandled",
    ),
    (
        "Health: another event region",
        SCHEDULED_CHANGE,
        _set_detail("eventRegion", "eu-north-1"),
        "WrongRegion",
    ),
    (
        "Health: another affected account",
        SCHEDULED_CHANGE,
        _set_detail("affectedAccount", "999999999999"),
        "WrongAccount",
    ),
    ("Health: instance not in resources", SCHEDULED_CHANGE, _set("resources", []), "ResourceMismatch"),
    (
        "Health: entity i-*",
        SCHEDULED_CHANGE,
        lambda e, i: e.update(
            resources=["i-*"], detail={**e["detail"], "affectedEntities": [{"entityValue": "i-*"}]}
        ),
        "InvalidInstanceId",
    ),
    (
        "Health: issue category",
        SCHEDULED_CHANGE,
        _set_detail("eventTypeCategory", "issue"),
        "UnknownEvent",
    ),
]


def _spot_node(harness: Harness, *, spot: bool = True, pods: int = 2) -> tuple[str, str, str]:
    """A node of the cluster (instance id, node name, zone) running ``pods`` pods."""
    instance = claimed_node(harness, CLAIM, spot=spot)
    for i in range(pods):
        harness.pod(f"web-{i}", "node-a")
    return str(instance["InstanceId"]), "node-a", str(instance["Placement"]["AvailabilityZone"])


def assert_untouched(interruptions: Interruptions, instance_id: str, node: str, zone: str) -> None:
    """Nothing was done about the instance: no workflow, record, replacement, cordon, eviction, terminate
    or unavailable offering."""
    harness = interruptions.harness
    assert interruptions.executions() == []
    assert interruptions.controller.records.all() == []
    assert [r.id for r in harness.world.state.nodeclaims.list()] == [CLAIM]
    obj = harness.world.kube.get_node(node)
    assert obj is not None and not (obj.get("spec") or {}).get("unschedulable")
    assert harness.pods_on(node) == ["web-0", "web-1"]
    assert harness.instance_state(instance_id) == "running"
    assert not harness.world.state.unavailable.is_unavailable("m5.large", zone, "spot")


def _rejections(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        str(getattr(r, "reason", ""))
        for r in caplog.records
        if r.getMessage() == "interruption message rejected"
    ]


@pytest.mark.parametrize(
    ("template", "mutate", "reason"), [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE]
)
def test_a_hostile_event_is_rejected_and_touches_nothing(
    interruptions: Interruptions,
    caplog: pytest.LogCaptureFixture,
    template: dict[str, Any],
    mutate: Mutation,
    reason: str,
) -> None:
    instance_id, node, zone = _spot_node(interruptions.harness)
    event = for_instance(template, instance_id)
    mutate(event, instance_id)

    with caplog.at_level(logging.INFO):
        response = interruptions.deliver(event)

    assert response == {"batchItemFailures": []}  # deleted: the same message would be refused again
    assert interruptions.metrics.total("InterruptionMessagesRejected", Reason=reason) == 1
    assert interruptions.metrics.total("InterruptionMessagesRejected") == 1
    assert _rejections(caplog) == [reason]
    assert_untouched(interruptions, instance_id, node, zone)


def test_a_spot_warning_for_an_on_demand_instance_is_rejected(
    interruptions: Interruptions, caplog: pytest.LogCaptureFixture
) -> None:
    instance_id, node, zone = _spot_node(interruptions.harness, spot=False)

    with caplog.at_level(logging.INFO):
        response = interruptions.deliver(for_instance(SPOT_WARNING, instance_id))

    assert response == {"batchItemFailures": []}
    assert interruptions.metrics.total("InterruptionMessagesRejected", Reason="NotSpot") == 1
    assert _rejections(caplog) == ["NotSpot"]
    assert_untouched(interruptions, instance_id, node, zone)


def test_a_health_event_naming_too_many_instances_is_rejected(interruptions: Interruptions) -> None:
    instance_id, node, zone = _spot_node(interruptions.harness)
    others = [f"i-{n:017x}" for n in range(1, 11)]

    response = interruptions.deliver(_health([instance_id, *others]))

    assert response == {"batchItemFailures": []}
    assert interruptions.metrics.total("InterruptionMessagesRejected", Reason="TooManyInstances") == 1
    assert_untouched(interruptions, instance_id, node, zone)


def test_a_hostile_message_in_a_batch_leaves_the_genuine_one_working(interruptions: Interruptions) -> None:
    harness = interruptions.harness
    instance_id, node, _ = _spot_node(harness)
    forged = for_instance(SPOT_WARNING, instance_id)
    forged["account"] = "999999999999"

    response = interruptions.deliver(forged, for_instance(REBALANCE, instance_id))

    assert response == {"batchItemFailures": []}
    assert interruptions.metrics.total("InterruptionMessagesRejected", Reason="WrongAccount") == 1
    assert interruptions.metrics.total("RebalanceRecommendations") == 1
    assert interruptions.executions() == [] and harness.pods_on(node) == ["web-0", "web-1"]


def test_a_spot_warning_for_an_instance_tagged_with_the_cluster_tag_alone_is_ignored(
    interruptions: Interruptions,
) -> None:
    harness = interruptions.harness
    instance_id, node, zone = _spot_node(harness)
    # Its NodePool tag removed: it carries the cluster tag as anyone's hand could put it there.
    harness.world.aws.clients.ec2.delete_tags(
        Resources=[instance_id], Tags=[{"Key": "karpenter.sh/nodepool"}]
    )

    response = interruptions.deliver(for_instance(SPOT_WARNING, instance_id))

    assert response == {"batchItemFailures": []}
    assert interruptions.metrics.total("InterruptionEventsIgnored", Reason="NotOwned") == 1
    assert_untouched(interruptions, instance_id, node, zone)
