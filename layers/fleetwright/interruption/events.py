"""The EventBridge events the interruption queue carries, as pydantic models (Powertools' ``EventBridgeModel``
envelope with a typed ``detail``).

:func:`parse_message` turns one SQS message body into one of the four event kinds, or raises
:class:`MessageError` saying why it cannot: not JSON, not an EventBridge event, a kind Fleetwright does not
handle, or a known kind with missing fields.
"""

from __future__ import annotations

import email.utils
import enum
import json
from datetime import UTC, datetime
from typing import Literal

from aws_lambda_powertools.utilities.parser.models import EventBridgeModel
from pydantic import BaseModel, ConfigDict, Field, ValidationError

SPOT_INTERRUPTION = "EC2 Spot Instance Interruption Warning"
REBALANCE_RECOMMENDATION = "EC2 Instance Rebalance Recommendation"
STATE_CHANGE = "EC2 Instance State-change Notification"
HEALTH_EVENT = "AWS Health Event"


class EventKind(enum.StrEnum):
    """What an event means for a node; also the workflow's ``reason`` and part of its execution name."""

    SPOT_INTERRUPTION = "SpotInterruption"
    REBALANCE_RECOMMENDATION = "RebalanceRecommendation"
    STATE_CHANGE = "StateChange"
    SCHEDULED_CHANGE = "ScheduledChange"


class MessageError(ValueError):
    """A queue message that is not an event Fleetwright handles; ``kind`` says which way it is wrong."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind  # "NotJson", "NotAnEvent", "UnknownEvent", "InvalidEvent"


class _Detail(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore")


class SpotInterruptionDetail(_Detail):
    """``instance-id`` and ``instance-action`` (terminate, stop or hibernate)."""

    instance_id: str = Field(alias="instance-id", min_length=1)
    instance_action: Literal["terminate", "stop", "hibernate"] = Field(
        alias="instance-action", default="terminate"
    )


class RebalanceDetail(_Detail):
    """``instance-id``."""

    instance_id: str = Field(alias="instance-id", min_length=1)


class StateChangeDetail(_Detail):
    """``instance-id`` and the new ``state``."""

    instance_id: str = Field(alias="instance-id", min_length=1)
    state: Literal["pending", "running", "stopping", "stopped", "shutting-down", "terminated"]


class AffectedEntity(_Detail):
    """One resource an AWS Health event is about (an instance id for EC2)."""

    entity_value: str = Field(alias="entityValue", min_length=1)


class HealthDetail(_Detail):
    """The parts of an AWS Health event Fleetwright reads."""

    service: str
    event_type_category: str = Field(alias="eventTypeCategory")
    event_type_code: str = Field(alias="eventTypeCode", default="")
    status_code: str = Field(alias="statusCode", default="")
    event_region: str = Field(alias="eventRegion", default="")
    affected_account: str = Field(alias="affectedAccount", default="")
    event_arn: str = Field(alias="eventArn", default="")
    start_time: str = Field(alias="startTime", default="")
    affected_entities: list[AffectedEntity] = Field(alias="affectedEntities", default_factory=list)


class _Event(EventBridgeModel):
    # Checked against the stack's account (interruption/trust.py); an event without one is refused there.
    account: str = ""


class SpotInterruptionEvent(_Event):
    """EC2 Spot Instance Interruption Warning: the instance goes two minutes after ``time``."""

    detail: SpotInterruptionDetail

    @property
    def kind(self) -> EventKind:
        return EventKind.SPOT_INTERRUPTION

    @property
    def instance_ids(self) -> list[str]:
        return [self.detail.instance_id]


class RebalanceEvent(_Event):
    """EC2 Instance Rebalance Recommendation: the Spot instance is at elevated risk of interruption."""

    detail: RebalanceDetail

    @property
    def kind(self) -> EventKind:
        return EventKind.REBALANCE_RECOMMENDATION

    @property
    def instance_ids(self) -> list[str]:
        return [self.detail.instance_id]


class StateChangeEvent(_Event):
    """EC2 Instance State-change Notification."""

    detail: StateChangeDetail

    @property
    def kind(self) -> EventKind:
        return EventKind.STATE_CHANGE

    @property
    def instance_ids(self) -> list[str]:
        return [self.detail.instance_id]


class HealthEvent(_Event):
    """AWS Health Event for EC2 in category ``scheduledChange`` (retirement, maintenance)."""

    detail: HealthDetail

    @property
    def kind(self) -> EventKind:
        return EventKind.SCHEDULED_CHANGE

    @property
    def instance_ids(self) -> list[str]:
        ids = [e.entity_value for e in self.detail.affected_entities if e.entity_value.startswith("i-")]
        return list(dict.fromkeys(ids))

    def scheduled_start(self) -> datetime | None:
        """``startTime`` (AWS Health writes RFC 1123, ``Fri, 27 Jan 2023 06:02:51 GMT``; ISO 8601 is also
        accepted); None when absent or unreadable."""
        return parse_time(self.detail.start_time)


InterruptionEvent = SpotInterruptionEvent | RebalanceEvent | StateChangeEvent | HealthEvent

_MODELS: dict[tuple[str, str], type[InterruptionEvent]] = {
    ("aws.ec2", SPOT_INTERRUPTION): SpotInterruptionEvent,
    ("aws.ec2", REBALANCE_RECOMMENDATION): RebalanceEvent,
    ("aws.ec2", STATE_CHANGE): StateChangeEvent,
    ("aws.health", HEALTH_EVENT): HealthEvent,
}


def parse_time(text: str) -> datetime | None:
    """An aware datetime from RFC 1123 or ISO 8601 text; None when empty or unreadable."""
    text = text.strip()
    if not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        try:
            parsed = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def parse_message(body: str) -> InterruptionEvent:
    """The event in one SQS message body; raises :class:`MessageError`."""
    try:
        raw = json.loads(body)
    except (TypeError, ValueError) as error:
        raise MessageError("NotJson", f"message body is not JSON: {error}") from None
    if not isinstance(raw, dict) or "detail-type" not in raw or "source" not in raw:
        raise MessageError("NotAnEvent", "message body is not an EventBridge event (no source/detail-type)")
    key = (str(raw["source"]), str(raw["detail-type"]))
    model = _MODELS.get(key)
    if model is None:
        raise MessageError("UnknownEvent", f"no handler for {key[0]} events of type {key[1]!r}")
    try:
        event = model.model_validate(raw)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors(include_url=False)
        )
        raise MessageError("InvalidEvent", f"{key[1]}: {problems}") from None
    if isinstance(event, HealthEvent) and (
        event.detail.service != "EC2" or event.detail.event_type_category != "scheduledChange"
    ):
        raise MessageError(
            "UnknownEvent",
            f"AWS Health event for {event.detail.service}/{event.detail.event_type_category} is not an EC2 "
            "scheduled change",
        )
    return event
