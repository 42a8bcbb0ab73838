"""EC2 capacity reservations (On-Demand Capacity Reservations and Capacity Blocks) an EC2NodeClass selects.

``DescribeCapacityReservations`` is asked once per selector query (an ``id``, or tags / owner / match
criteria) and kept for a minute at module scope; only ``active`` reservations whose end is still ahead
count. How many instances each reservation still takes is tracked between listings: a launch into it
takes one (unless EC2 already counted it), a refusal empties it until EC2 says otherwise.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from fleetwright.aws.clients import AwsClients, error_code
from fleetwright.aws.request import ReservationTarget
from fleetwright.aws.selectors import tag_filters
from fleetwright.aws.ttlcache import TtlCache
from fleetwright.cloud.nodeclass import ReservationFound
from fleetwright.model import labels as wk

log = logging.getLogger(__name__)

DEFAULT = "default"
CAPACITY_BLOCK = "capacity-block"
RESERVATION_TYPES = (DEFAULT, CAPACITY_BLOCK)
MATCH_CRITERIA = ("open", "targeted")
ACTIVE = "active"
EXPIRING = "expiring"
# EC2 reclaims a Capacity Block's instances before its end; its nodes are drained from this long before.
CAPACITY_BLOCK_EXPIRY_WINDOW = datetime.timedelta(minutes=40)
LISTING_TTL_SECONDS = 60.0
MAX_RESULTS = 1000
NOT_FOUND_CODES = frozenset(
    {"InvalidCapacityReservationId.NotFound", "InvalidCapacityReservationId.Malformed"}
)

_LISTINGS: TtlCache[tuple[dict[str, Any], ...]] = TtlCache(LISTING_TTL_SECONDS)


@dataclass(frozen=True, slots=True)
class CapacityReservation:
    """One usable reservation: one instance type in one zone; ``state`` is ``expiring`` for a Capacity
    Block within :data:`CAPACITY_BLOCK_EXPIRY_WINDOW` of its end."""

    id: str
    instance_type: str
    zone: str
    owner_id: str
    instance_match_criteria: str
    reservation_type: str
    interruptible: bool
    available: int
    end_time: datetime.datetime | None = None
    state: str = ACTIVE

    def found(self) -> ReservationFound:
        """The reservation as the cloud contract reports it for a node class's status."""
        return ReservationFound(
            id=self.id,
            instance_type=self.instance_type,
            zone=self.zone,
            owner_id=self.owner_id,
            instance_match_criteria=self.instance_match_criteria,
            reservation_type=self.reservation_type,
            interruptible=self.interruptible,
            state=self.state,
            end_time=self.end_time.timestamp() if self.end_time is not None else None,
        )


class UnusableReservationError(ValueError):
    """EC2 described a reservation of a kind Fleetwright does not know how to launch into."""


def _as_datetime(value: Any) -> datetime.datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, datetime.datetime):
        return value if value.tzinfo else value.replace(tzinfo=datetime.UTC)
    return datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00"))


def reservation_from_ec2(entry: Mapping[str, Any], now: datetime.datetime) -> CapacityReservation:
    """A :class:`CapacityReservation` from one ``DescribeCapacityReservations`` entry.

    Raises UnusableReservationError for match criteria or reservation types EC2 may add later.
    """
    rid = str(entry.get("CapacityReservationId", ""))
    criteria = str(entry.get("InstanceMatchCriteria", ""))
    if criteria not in MATCH_CRITERIA:
        raise UnusableReservationError(f"{rid}: unsupported instance match criteria {criteria!r}")
    kind = str(entry.get("ReservationType") or DEFAULT)
    if kind not in RESERVATION_TYPES:
        raise UnusableReservationError(f"{rid}: unsupported reservation type {kind!r}")
    end = _as_datetime(entry.get("EndDate"))
    expiring = kind == CAPACITY_BLOCK and end is not None and now >= end - CAPACITY_BLOCK_EXPIRY_WINDOW
    return CapacityReservation(
        id=rid,
        instance_type=str(entry.get("InstanceType", "")),
        zone=str(entry.get("AvailabilityZone", "")),
        owner_id=str(entry.get("OwnerId", "")),
        instance_match_criteria=criteria,
        reservation_type=kind,
        interruptible=bool(entry.get("Interruptible", False)),
        available=int(entry.get("AvailableInstanceCount", 0)),
        end_time=end,
        state=EXPIRING if expiring else ACTIVE,
    )


@dataclass(frozen=True, slots=True)
class Query:
    """One DescribeCapacityReservations call a selector term asks for."""

    id: str = ""
    owner_id: str = ""
    tags: tuple[tuple[str, str], ...] = ()
    instance_match_criteria: str = ""

    def params(self) -> dict[str, Any]:
        """The request: always only ``active`` reservations; ids are asked for without MaxResults."""
        filters: list[dict[str, Any]] = [{"Name": "state", "Values": [ACTIVE]}]
        if self.id:
            return {"CapacityReservationIds": [self.id], "Filters": filters}
        if self.owner_id:
            filters.append({"Name": "owner-id", "Values": [self.owner_id]})
        filters.extend(tag_filters(dict(self.tags)))
        if self.instance_match_criteria:
            filters.append({"Name": "instance-match-criteria", "Values": [self.instance_match_criteria]})
        return {"Filters": filters, "MaxResults": MAX_RESULTS}


def queries_from_terms(terms: Iterable[Any]) -> list[Query]:
    """The queries of ``capacityReservationSelectorTerms``: a term's ``id`` is one query, its tags /
    owner / match criteria another (as Karpenter reads them)."""
    queries: list[Query] = []
    for term in terms:
        if term.id:
            queries.append(Query(id=term.id))
        if term.tags or term.instance_match_criteria:
            queries.append(
                Query(
                    owner_id=term.owner_id or "",
                    tags=tuple(sorted((term.tags or {}).items())),
                    instance_match_criteria=term.instance_match_criteria or "",
                )
            )
    return list(dict.fromkeys(queries))


class ReservationAvailability:
    """Instances each reservation still takes, between EC2's answers (shared by a warm Lambda).

    A launch counts against a reservation only when it happened after EC2's last count; a refusal sets
    it to zero; the next listing replaces both with EC2's figure.
    """

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._entries: dict[str, tuple[int, float]] = {}
        self._lock = threading.Lock()

    def sync(self, counts: Mapping[str, int]) -> None:
        """EC2's ``AvailableInstanceCount`` per reservation id, as of now."""
        now = self._clock()
        with self._lock:
            for rid, count in counts.items():
                self._entries[rid] = (max(0, count), now)

    def available(self, reservation_id: str) -> int:
        """What the reservation still takes (0 when never listed)."""
        with self._lock:
            return self._entries.get(reservation_id, (0, 0.0))[0]

    def mark_launched(self, reservation_id: str, launched_at: float | None = None) -> None:
        """One instance launched into the reservation."""
        when = self._clock() if launched_at is None else launched_at
        with self._lock:
            entry = self._entries.get(reservation_id)
            if entry is not None and entry[1] <= when and entry[0] > 0:
                self._entries[reservation_id] = (entry[0] - 1, entry[1])

    def mark_unavailable(self, reservation_id: str) -> None:
        """EC2 refused a launch into the reservation: it takes nothing more until EC2 says otherwise."""
        with self._lock:
            entry = self._entries.get(reservation_id)
            if entry is not None:
                self._entries[reservation_id] = (0, entry[1])

    def clear(self) -> None:
        """Forget everything (tests)."""
        with self._lock:
            self._entries.clear()


_AVAILABILITY = ReservationAvailability()


def default_availability() -> ReservationAvailability:
    """The process-wide availability counts."""
    return _AVAILABILITY


def _describe(clients: AwsClients, query: Query) -> tuple[dict[str, Any], ...]:
    found: list[dict[str, Any]] = []
    params = query.params()
    try:
        if query.id:
            found.extend(clients.ec2.describe_capacity_reservations(**params).get("CapacityReservations", []))
        else:
            paginator = clients.ec2.get_paginator("describe_capacity_reservations")
            for page in paginator.paginate(**params):
                found.extend(page.get("CapacityReservations", []))
    except Exception as error:
        if query.id and error_code(error) in NOT_FOUND_CODES:
            log.warning("capacity reservation %s not found", query.id)
            return ()
        raise
    return tuple(found)


def _listing(
    clients: AwsClients, query: Query, counts: ReservationAvailability
) -> tuple[dict[str, Any], ...]:
    """One query's answer (cached); a fresh answer resets the tracked counts to EC2's."""
    fresh = False

    def compute() -> tuple[dict[str, Any], ...]:
        nonlocal fresh
        fresh = True
        return _describe(clients, query)

    answer = _LISTINGS.get_or_compute((clients.region, query), compute)
    if fresh:
        counts.sync(
            {str(e["CapacityReservationId"]): int(e.get("AvailableInstanceCount", 0)) for e in answer}
        )
    return answer


def list_capacity_reservations(
    clients: AwsClients,
    terms: Sequence[Any] | None,
    *,
    availability: ReservationAvailability | None = None,
    now: datetime.datetime | None = None,
) -> list[CapacityReservation]:
    """The active reservations the selector terms select, by id; each query's answer cached a minute.

    Fresh answers update ``availability``; ended reservations and kinds Fleetwright cannot launch into
    are left out (the latter logged). ``available`` is the tracked count, not EC2's last figure.
    """
    if not terms:
        return []
    counts = availability if availability is not None else default_availability()
    moment = now or datetime.datetime.now(datetime.UTC)
    entries: dict[str, dict[str, Any]] = {}
    for query in queries_from_terms(terms):
        for entry in _listing(clients, query, counts):
            entries.setdefault(str(entry.get("CapacityReservationId", "")), entry)
    found: list[CapacityReservation] = []
    for rid, entry in sorted(entries.items()):
        try:
            reservation = reservation_from_ec2(entry, moment)
        except UnusableReservationError as error:
            log.warning("skipping capacity reservation: %s", error)
            continue
        if reservation.end_time is not None and reservation.end_time <= moment:
            continue
        found.append(replace(reservation, available=counts.available(rid)))
    return found


def forget_listings() -> None:
    """Drop the cached listings (the next call asks EC2 again)."""
    _LISTINGS.invalidate()


def reservation_labels(target: ReservationTarget) -> dict[str, str]:
    """The capacity-reservation labels of a node launched into ``target``."""
    return {
        wk.CAPACITY_RESERVATION_ID: target.id,
        wk.CAPACITY_RESERVATION_TYPE: target.reservation_type,
        wk.CAPACITY_RESERVATION_INTERRUPTIBLE: "true" if target.interruptible else "false",
    }


# Launches that are not meant for a reservation stay out of open ones: they would use up capacity the
# scheduler counts on for reserved nodes.
OUTSIDE_RESERVATIONS: dict[str, Any] = {
    "CapacityReservationSpecification": {"CapacityReservationPreference": "none"}
}


def template_fields(target: ReservationTarget | None) -> dict[str, Any]:
    """Launch template data of a launch for ``target`` (or, when None, of one outside reservations).

    Only the targeted reservation may take the instance (``capacity-reservations-only``); Capacity Blocks
    and interruptible reservations also need their market type.
    """
    if target is None:
        return dict(OUTSIDE_RESERVATIONS)
    fields: dict[str, Any] = {
        "CapacityReservationSpecification": {
            "CapacityReservationPreference": "capacity-reservations-only",
            "CapacityReservationTarget": {"CapacityReservationId": target.id},
        }
    }
    if target.reservation_type == CAPACITY_BLOCK:
        fields["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
    elif target.interruptible:
        fields["InstanceMarketOptions"] = {"MarketType": "interruptible-capacity-reservation"}
    return fields


def expiring_capacity_blocks(
    clients: AwsClients,
    reservation_ids: Iterable[str],
    *,
    availability: ReservationAvailability | None = None,
    now: datetime.datetime | None = None,
) -> list[CapacityReservation]:
    """The Capacity Blocks among ``reservation_ids`` that are within their expiry window."""
    counts = availability if availability is not None else default_availability()
    moment = now or datetime.datetime.now(datetime.UTC)
    found = []
    for rid in sorted(set(reservation_ids)):
        for entry in _listing(clients, Query(id=rid), counts):
            try:
                reservation = reservation_from_ec2(entry, moment)
            except UnusableReservationError:
                continue
            if reservation.reservation_type == CAPACITY_BLOCK and reservation.state == EXPIRING:
                found.append(reservation)
    return found
