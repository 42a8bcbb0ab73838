"""Whether an interruption event may be acted on: the checks every event passes before the controller
cordons, drains, replaces or terminates anything (docs/security.md).

The queue policy lets only this stack's EventBridge rules send to the interruption queue, but the handler
trusts nothing it reads: an event must come from this stack's account and region, name its instance in
both ``detail`` and ``resources``, carry well-formed instance ids, be recent (and not dated in the future),
and, for AWS Health, be an open or upcoming scheduled change of a type Fleetwright acts on, about a bounded
number of instances. :func:`check_event` raises :class:`RejectedEventError` (a :class:`MessageError` whose
``kind`` is the reason) for the first check an event fails; :func:`check_spot` is the check that needs the
instance's description (a spot warning acts only on a spot instance).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from fleetwright.cloud.instances import Instance
from fleetwright.interruption.events import (
    HealthEvent,
    InterruptionEvent,
    MessageError,
    SpotInterruptionEvent,
)

# EC2 instance ids: ``i-`` and 8 (older) or 17 lowercase hexadecimal digits.
INSTANCE_ID = re.compile(r"i-(?:[0-9a-f]{8}|[0-9a-f]{17})")
# ``arn:<partition>:ec2:<region>:<account>:instance/<id>``, as EC2 events list their instance.
_PARTITION = re.compile(r"aws(?:-[a-z]+)*")

# AWS Health: the statuses of an event still to come or under way (``closed`` is over), and the EC2
# scheduled-change types that stop, reboot or retire an instance.
HEALTH_STATUS_CODES = frozenset({"upcoming", "open"})
HEALTH_EVENT_TYPE_CODES = frozenset(
    {
        "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
        "AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED",
        "AWS_EC2_INSTANCE_STOP_SCHEDULED",
        "AWS_EC2_INSTANCE_REBOOT_MAINTENANCE_SCHEDULED",
        "AWS_EC2_INSTANCE_REBOOT_FLEXIBLE_MAINTENANCE_SCHEDULED",
        "AWS_EC2_SYSTEM_REBOOT_MAINTENANCE_SCHEDULED",
        "AWS_EC2_SYSTEM_MAINTENANCE_EVENT",
        "AWS_EC2_MAINTENANCE_SCHEDULED",
    }
)

# Rejection reasons (the ``Reason`` dimension of InterruptionMessagesRejected; parse errors add NotJson,
# NotAnEvent, UnknownEvent and InvalidEvent).
WRONG_ACCOUNT = "WrongAccount"
WRONG_REGION = "WrongRegion"
INVALID_INSTANCE_ID = "InvalidInstanceId"
RESOURCE_MISMATCH = "ResourceMismatch"
TOO_MANY_INSTANCES = "TooManyInstances"
STALE = "Stale"
FROM_THE_FUTURE = "FromTheFuture"
HEALTH_STATUS = "HealthStatusNotActionable"
HEALTH_TYPE = "HealthTypeNotHandled"
NOT_SPOT = "NotSpot"


class RejectedEventError(MessageError):
    """A well-formed event Fleetwright refuses to act on; ``kind`` is the reason."""


@dataclass(frozen=True, slots=True)
class EventOrigin:
    """The account and region this stack runs in: the only ones whose events are acted on."""

    account: str
    region: str


@dataclass(frozen=True, slots=True)
class TrustLimits:
    """How old an event may be (``max_age_seconds``: well past the queue's three receives one visibility
    timeout apart, well short of a dead-letter redrive days later), how far in the future its time may be
    (clock skew), and how many instances one AWS Health event may name."""

    max_age_seconds: float = 3600.0
    clock_skew_seconds: float = 30.0
    max_instances_per_event: int = 10


def check_event(event: InterruptionEvent, origin: EventOrigin, now: float, limits: TrustLimits) -> None:
    """Raise :class:`RejectedEventError` unless ``event`` may be acted on at epoch second ``now``."""
    if event.account != origin.account:
        raise RejectedEventError(WRONG_ACCOUNT, f"event from account {event.account!r}, not {origin.account}")
    if event.region != origin.region:
        raise RejectedEventError(WRONG_REGION, f"event from region {event.region!r}, not {origin.region}")
    _check_time(event, now, limits)
    if isinstance(event, HealthEvent):
        _check_health(event, origin, limits)
    else:
        _check_ec2(event, origin)


def check_spot(event: InterruptionEvent, instance: Instance) -> None:
    """Raise :class:`RejectedEventError` when ``event`` is a spot warning and ``instance``, as the cloud
    provider describes it, is not a spot instance."""
    if isinstance(event, SpotInterruptionEvent) and instance.capacity_type != "spot":
        raise RejectedEventError(
            NOT_SPOT, f"spot interruption warning for {instance.id}, a {instance.capacity_type} instance"
        )


def event_epoch(event: InterruptionEvent) -> float:
    """The event's ``time`` in epoch seconds (UTC when it names no zone)."""
    moment = event.time if event.time.tzinfo else event.time.replace(tzinfo=UTC)
    return moment.timestamp()


def _check_time(event: InterruptionEvent, now: float, limits: TrustLimits) -> None:
    age = now - event_epoch(event)
    if age < -limits.clock_skew_seconds:
        raise RejectedEventError(
            FROM_THE_FUTURE, f"event dated {_iso(event_epoch(event))}, {-age:.0f} s ahead"
        )
    oldest = limits.max_age_seconds
    if age > oldest:
        raise RejectedEventError(
            STALE, f"event dated {_iso(event_epoch(event))} is {age:.0f} s old (at most {oldest:.0f} s)"
        )


def _check_instance_id(instance_id: str) -> None:
    if not INSTANCE_ID.fullmatch(instance_id):
        raise RejectedEventError(INVALID_INSTANCE_ID, f"{instance_id[:64]!r} is not an EC2 instance id")


def _check_ec2(event: InterruptionEvent, origin: EventOrigin) -> None:
    """An EC2 event names one instance in ``detail`` and exactly its ARN in ``resources``."""
    [instance_id] = event.instance_ids
    _check_instance_id(instance_id)
    resources = list(event.resources)
    if len(resources) != 1 or not _is_instance_arn(resources[0], origin, instance_id):
        raise RejectedEventError(
            RESOURCE_MISMATCH, f"resources {resources[:3]!r} do not name instance {instance_id} alone"
        )


def _is_instance_arn(arn: str, origin: EventOrigin, instance_id: str) -> bool:
    parts = arn.split(":", 5)
    return (
        len(parts) == 6
        and parts[0] == "arn"
        and _PARTITION.fullmatch(parts[1]) is not None
        and parts[2:5] == ["ec2", origin.region, origin.account]
        and parts[5] == f"instance/{instance_id}"
    )


def _check_health(event: HealthEvent, origin: EventOrigin, limits: TrustLimits) -> None:
    """An AWS Health event: an actionable status and type, this account and region, at most
    ``max_instances_per_event`` well-formed instances, each also listed in ``resources``."""
    detail = event.detail
    if detail.status_code not in HEALTH_STATUS_CODES:
        raise RejectedEventError(HEALTH_STATUS, f"AWS Health event status {detail.status_code!r} is not open")
    if detail.event_type_code not in HEALTH_EVENT_TYPE_CODES:
        raise RejectedEventError(
            HEALTH_TYPE, f"AWS Health event type {detail.event_type_code[:80]!r} not handled"
        )
    if detail.event_region and detail.event_region != origin.region:
        raise RejectedEventError(WRONG_REGION, f"AWS Health event for region {detail.event_region!r}")
    if detail.affected_account and detail.affected_account != origin.account:
        raise RejectedEventError(WRONG_ACCOUNT, f"AWS Health event for account {detail.affected_account!r}")
    entities = [e.entity_value for e in detail.affected_entities]
    if len(entities) > limits.max_instances_per_event:
        raise RejectedEventError(
            TOO_MANY_INSTANCES,
            f"AWS Health event names {len(entities)} entities (at most {limits.max_instances_per_event})",
        )
    for entity in entities:
        _check_instance_id(entity)
    unlisted = sorted(set(entities) - set(event.resources))
    if unlisted:
        raise RejectedEventError(
            RESOURCE_MISMATCH, f"instances {unlisted[:3]} are not in the event's resources"
        )


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
