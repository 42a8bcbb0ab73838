"""EventBridge events shaped as AWS sends them, for the local demo (``fleetwright demo --interrupt``)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from fleetwright.interruption.events import (
    HEALTH_EVENT,
    REBALANCE_RECOMMENDATION,
    SPOT_INTERRUPTION,
    STATE_CHANGE,
)

ACCOUNT = "123456789012"


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ec2_event(
    detail_type: str, instance_id: str, detail: dict[str, Any], region: str, at: datetime
) -> dict[str, Any]:
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": detail_type,
        "source": "aws.ec2",
        "account": ACCOUNT,
        "time": _iso(at),
        "region": region,
        "resources": [f"arn:aws:ec2:{region}:{ACCOUNT}:instance/{instance_id}"],
        "detail": {"instance-id": instance_id, **detail},
    }


def spot_interruption(instance_id: str, region: str, at: datetime | None = None) -> dict[str, Any]:
    """An EC2 Spot Instance Interruption Warning (action ``terminate``)."""
    at = at or datetime.now(UTC)
    return _ec2_event(SPOT_INTERRUPTION, instance_id, {"instance-action": "terminate"}, region, at)


def rebalance_recommendation(instance_id: str, region: str, at: datetime | None = None) -> dict[str, Any]:
    """An EC2 Instance Rebalance Recommendation."""
    return _ec2_event(REBALANCE_RECOMMENDATION, instance_id, {}, region, at or datetime.now(UTC))


def state_change(instance_id: str, state: str, region: str, at: datetime | None = None) -> dict[str, Any]:
    """An EC2 Instance State-change Notification."""
    return _ec2_event(STATE_CHANGE, instance_id, {"state": state}, region, at or datetime.now(UTC))


def scheduled_change(
    instance_id: str, region: str, start: datetime, at: datetime | None = None
) -> dict[str, Any]:
    """An AWS Health scheduled change (instance retirement) starting at ``start``."""
    at = at or datetime.now(UTC)
    code = "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": HEALTH_EVENT,
        "source": "aws.health",
        "account": ACCOUNT,
        "time": _iso(at),
        "region": region,
        "resources": [instance_id],
        "detail": {
            "eventArn": f"arn:aws:health:{region}::event/EC2/{code}/{code}_{uuid.uuid4().hex[:12]}",
            "service": "EC2",
            "eventTypeCode": code,
            "eventTypeCategory": "scheduledChange",
            "statusCode": "upcoming",
            "eventRegion": region,
            "affectedAccount": ACCOUNT,
            "startTime": start.astimezone(UTC).strftime("%a, %d %b %Y %H:%M:%S GMT"),
            "eventDescription": [{"language": "en_US", "latestDescription": "The instance will be retired."}],
            "affectedEntities": [{"entityValue": instance_id}],
        },
    }
