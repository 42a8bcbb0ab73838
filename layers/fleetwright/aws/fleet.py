"""Launching NodeClaims with EC2 CreateFleet (type ``instant``).

One call per NodeClaim offers EC2 every compatible instance type × zone (at most the 60 cheapest types)
and lets it pick: spot with ``price-capacity-optimized``, on-demand with ``lowest-price``. Offerings EC2
refuses (insufficient capacity, quotas, no free addresses) go into the unavailable-offerings cache for
three minutes and the launch is retried with what remains. The call tags the fleet and its instance with
the claim's id at launch (``fleetwright.io/nodeclaim``), so an instance is never without its claim, and
``ClientToken`` is derived from the claim id: an instance already tagged with a claim's id is returned
instead of launching again, so a retried or crashed launch never doubles up. Failures are typed
(:mod:`fleetwright.cloud.errors`, the EC2 codes sorted by :mod:`fleetwright.aws.failures`); calls made
inside a :func:`~fleetwright.cloud.deadline.deadline_scope` stop at its deadline.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from fleetwright.aws import deadline
from fleetwright.aws.capacityreservations import (
    CAPACITY_BLOCK,
    ReservationAvailability,
    default_availability,
    reservation_labels,
)
from fleetwright.aws.clients import THROTTLING_CODES, AwsClients, error_code, error_message
from fleetwright.aws.failures import UNAVAILABLE_OFFERING_CODES, classify
from fleetwright.aws.instances import find_claimed_instances
from fleetwright.aws.request import ReservationTarget
from fleetwright.aws.tags import merge_tags, ownership_tags, tag_specifications
from fleetwright.aws.unavailable import default_cache
from fleetwright.aws.variants import arch_of, variant_of
from fleetwright.cloud.deadline import current_deadline
from fleetwright.cloud.errors import (
    DEADLINE_EXCEEDED,
    NO_LAUNCHABLE_OFFERING,
    NO_OFFERING_LEFT,
    NODE_CLASS_NOT_READY,
    NOTHING_LAUNCHED,
    FailureKind,
    LaunchError,
    LaunchFailure,
    Offering,
)
from fleetwright.cloud.launch import EFA_RESOURCE, MAX_INSTANCE_TYPES, LaunchedInstance, LaunchRequest
from fleetwright.cloud.offerings import UnavailableOfferings
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.instancetype import Offering as TypeOffering
from fleetwright.model.labels import ON_DEMAND, RESERVED, SPOT

log = logging.getLogger(__name__)

# Re-exported: the dashboards (infra/controller_metrics.py) list these codes.
__all__ = ["UNAVAILABLE_OFFERING_CODES", "FleetLauncher", "LaunchContext", "TemplateChoice"]

MAX_ATTEMPTS = 20
CLIENT_TOKEN_MAX = 64


@dataclass(frozen=True, slots=True)
class TemplateChoice:
    """A launch template and the AMI it boots: its architecture and variant decide which types use it.

    ``variant`` None accepts every variant (custom AMIs); ``efa_count`` set means the template describes
    that many EFA interfaces and serves only types with that many.
    """

    name: str
    image_id: str
    arch: str
    variant: str | None = None
    efa_count: int | None = None

    def accepts(self, instance_type: InstanceType) -> bool:
        """True when this template's AMI can boot the instance type (and its interfaces fit it)."""
        if arch_of(instance_type) != self.arch:
            return False
        if self.efa_count is not None and efa_interfaces(instance_type) != self.efa_count:
            return False
        return self.variant is None or self.variant == variant_of(instance_type)


def efa_interfaces(instance_type: InstanceType) -> int:
    """How many EFA interfaces the type supports (its ``vpc.amazonaws.com/efa`` capacity)."""
    return int(instance_type.capacity.get(EFA_RESOURCE, 0))


@dataclass(frozen=True, slots=True)
class LaunchContext:
    """What a launch needs from the resolved EC2NodeClass: a subnet per zone and the launch templates.

    ``labels`` are what the launch decides for the node (tenancy, placement group); ``fleet_context`` is
    the node class's ``context``, sent as CreateFleet's ``Context``.
    """

    subnets: Mapping[str, str]  # zone → subnet id
    templates: Sequence[TemplateChoice]
    tags: Mapping[str, str]  # the node class's user tags
    labels: Mapping[str, str] = field(default_factory=dict)
    fleet_context: str = ""


class Preparer(Protocol):
    """Resolves a request's node class into subnets and launch templates for one capacity type (and,
    for reserved capacity, the reservation the templates target)."""

    def __call__(
        self, request: LaunchRequest, capacity_type: str, reservation: ReservationTarget | None = None
    ) -> LaunchContext: ...


@dataclass(frozen=True, slots=True)
class Override:
    """One instance type × zone offered to CreateFleet."""

    instance_type: str
    zone: str
    subnet_id: str
    price: float
    template: TemplateChoice
    reservation: ReservationTarget | None = None


def _reservation_usable(request: LaunchRequest, offering: TypeOffering) -> bool:
    return bool(offering.reservation_id) and (
        not request.reservation_ids or offering.reservation_id in request.reservation_ids
    )


def choose_capacity_type(
    request: LaunchRequest, unavailable: UnavailableOfferings, excluded: Iterable[str] = ()
) -> str | None:
    """Reserved capacity when the claim allows it and a reservation remains, else spot when allowed and
    some spot offering remains, else on-demand (as Karpenter)."""
    allowed = (set(request.capacity_types) or {SPOT, ON_DEMAND}) - set(excluded)
    for capacity_type in (RESERVED, SPOT, ON_DEMAND):
        if capacity_type not in allowed:
            continue
        for instance_type in request.instance_types:
            for offering in instance_type.offerings:
                if (
                    offering.capacity_type == capacity_type
                    and offering.available
                    and (capacity_type != RESERVED or _reservation_usable(request, offering))
                    and (not request.zones or offering.zone in request.zones)
                    and not unavailable.is_unavailable(instance_type.name, offering.zone, capacity_type)
                ):
                    return capacity_type
    return None


# Which kind of reservation a launch prefers when prices tie (Karpenter's order).
_RESERVATION_PRIORITY = {("default", False): 0, (CAPACITY_BLOCK, False): 1, ("default", True): 2}


def reserved_choices(
    request: LaunchRequest, unavailable: UnavailableOfferings
) -> list[tuple[InstanceType, TypeOffering]]:
    """The reserved offerings one launch offers EC2.

    One CreateFleet can only ask for one kind of reservation (ordinary, Capacity Block or interruptible):
    the kind of the cheapest offering is kept, and per instance type and zone the reservation with the
    most room.
    """
    usable = [
        (instance_type, offering)
        for instance_type in request.instance_types
        for offering in instance_type.offerings
        if offering.capacity_type == RESERVED
        and offering.available
        and _reservation_usable(request, offering)
        and (not request.zones or offering.zone in request.zones)
        and not unavailable.is_unavailable(instance_type.name, offering.zone, RESERVED)
    ]
    if not usable:
        return []

    def kind(offering: TypeOffering) -> tuple[str, bool]:
        return (offering.reservation_type, offering.reservation_interruptible)

    best = min(usable, key=lambda pair: (pair[1].price, _RESERVATION_PRIORITY.get(kind(pair[1]), 9)))
    chosen: dict[tuple[str, str], tuple[InstanceType, TypeOffering]] = {}
    for instance_type, offering in usable:
        if kind(offering) != kind(best[1]):
            continue
        key = (instance_type.name, offering.zone)
        current = chosen.get(key)
        if current is None or offering.reservation_capacity > current[1].reservation_capacity:
            chosen[key] = (instance_type, offering)
    return list(chosen.values())


def target_of(offering: TypeOffering) -> ReservationTarget:
    """The launch-template target of a reserved offering."""
    return ReservationTarget(
        offering.reservation_id, offering.reservation_type or "default", offering.reservation_interruptible
    )


def plan_overrides(
    request: LaunchRequest,
    context: LaunchContext,
    capacity_type: str,
    unavailable: UnavailableOfferings,
    max_types: int = MAX_INSTANCE_TYPES,
) -> list[Override]:
    """The overrides for one CreateFleet call, cheapest first.

    Every instance type × zone whose offering of ``capacity_type`` is available, in an allowed zone that
    has a subnet, and bootable by one of the templates; only the ``max_types`` cheapest types are kept.
    When the claim also allows on-demand, spot offerings dearer than the cheapest on-demand one are
    dropped: on-demand would be the better buy.
    """
    ceiling: float | None = None
    if capacity_type == SPOT and ON_DEMAND in (request.capacity_types or (ON_DEMAND,)):
        ceiling = _cheapest(request, context, ON_DEMAND, unavailable)
    by_type: dict[str, list[Override]] = {}
    refused = {(e.instance_type, e.zone, e.capacity_type) for e in unavailable.entries()}
    # Which template boots a type depends only on its architecture, variant and EFA interfaces.
    chosen: dict[tuple[str, str, int], TemplateChoice | None] = {}
    for instance_type in request.instance_types:
        kind = (arch_of(instance_type), variant_of(instance_type), efa_interfaces(instance_type))
        if kind not in chosen:
            chosen[kind] = next((t for t in context.templates if t.accepts(instance_type)), None)
        template = chosen[kind]
        if template is None:
            continue
        for offering in instance_type.offerings:
            if offering.capacity_type != capacity_type or not offering.available:
                continue
            if request.zones and offering.zone not in request.zones:
                continue
            subnet = context.subnets.get(offering.zone)
            if subnet is None:
                continue
            if (instance_type.name, offering.zone, capacity_type) in refused:
                continue
            if ceiling is not None and offering.price > ceiling:
                continue
            by_type.setdefault(instance_type.name, []).append(
                Override(instance_type.name, offering.zone, subnet, offering.price, template)
            )
    cheapest_types = sorted(by_type, key=lambda name: (min(o.price for o in by_type[name]), name))
    overrides = [o for name in cheapest_types[:max_types] for o in by_type[name]]
    return sorted(overrides, key=lambda o: (o.price, o.instance_type, o.zone))


def _cheapest(
    request: LaunchRequest, context: LaunchContext, capacity_type: str, unavailable: UnavailableOfferings
) -> float | None:
    prices = [
        o.price
        for o in plan_overrides(
            request, context, capacity_type, unavailable, max_types=len(request.instance_types)
        )
    ]
    return min(prices) if prices else None


def client_token(nodeclaim: str, attempt: int) -> str:
    """The idempotency token of one CreateFleet call: the claim id itself for its first attempt."""
    suffix = f"-{attempt}" if attempt else ""
    base = nodeclaim
    if len(base) + len(suffix) > CLIENT_TOKEN_MAX:
        base = _digest(base)[: CLIENT_TOKEN_MAX - len(suffix)]
    return base + suffix


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def fleet_request(
    overrides: Sequence[Override],
    capacity_type: str,
    count: int,
    token: str,
    tags: Mapping[str, str],
    context: str = "",
) -> dict[str, Any]:
    """The CreateFleet parameters: one launch template config per template, overrides cheapest first;
    ``context`` (the node class's) becomes ``Context``."""
    configs: dict[str, dict[str, Any]] = {}
    for override in overrides:
        config = configs.setdefault(
            override.template.name,
            {
                "LaunchTemplateSpecification": {
                    "LaunchTemplateName": override.template.name,
                    "Version": "$Latest",
                },
                "Overrides": [],
            },
        )
        config["Overrides"].append(
            {
                "InstanceType": override.instance_type,
                "SubnetId": override.subnet_id,
                "AvailabilityZone": override.zone,
            }
        )
    params: dict[str, Any] = {
        "Type": "instant",
        "ClientToken": token,
        "TargetCapacitySpecification": {
            "TotalTargetCapacity": count,
            "DefaultTargetCapacityType": capacity_type,
        },
        "LaunchTemplateConfigs": list(configs.values()),
        # An instant fleet may tag only itself and its instances (CreateFleet API reference); volumes,
        # network interfaces and spot requests are tagged by the launch template.
        "TagSpecifications": tag_specifications(("fleet", "instance"), tags),
    }
    reservation = overrides[0].reservation if overrides and capacity_type == RESERVED else None
    if context:
        params["Context"] = context
    if capacity_type == SPOT:
        params["SpotOptions"] = {"AllocationStrategy": "price-capacity-optimized"}
    elif reservation is not None and reservation.reservation_type == CAPACITY_BLOCK:
        params["TargetCapacitySpecification"]["DefaultTargetCapacityType"] = "capacity-block"
    elif reservation is not None and reservation.interruptible:
        params["TargetCapacitySpecification"]["DefaultTargetCapacityType"] = "reserved-capacity"
        params["ReservedCapacityOptions"] = {"ReservationTypes": ["interruptible-capacity-reservation"]}
    else:
        if capacity_type == RESERVED:
            # An ordinary reservation is on-demand capacity that the launch template targets.
            params["TargetCapacitySpecification"]["DefaultTargetCapacityType"] = ON_DEMAND
        params["OnDemandOptions"] = {"AllocationStrategy": "lowest-price"}
    return params


@dataclass(slots=True)
class FleetOutcome:
    """What one CreateFleet call gave: instances (type, zone, capacity type, id, template) and failures
    (offerings EC2 refused, and other errors)."""

    launched: list[tuple[str, str, str, str, TemplateChoice | None]]
    failures: list[LaunchFailure]

    @property
    def refused(self) -> list[LaunchFailure]:
        """The offerings EC2 refused for capacity or quota."""
        return [
            f for f in self.failures if f.offering is not None and f.kind == FailureKind.INSUFFICIENT_CAPACITY
        ]

    @property
    def other_errors(self) -> list[LaunchFailure]:
        """Everything else that went wrong."""
        refused = self.refused
        return [f for f in self.failures if f not in refused]


def parse_fleet_response(
    response: Mapping[str, Any], overrides: Sequence[Override], capacity_type: str
) -> FleetOutcome:
    """Split a CreateFleet response into launched instances and typed failures."""
    zone_of_subnet = {o.subnet_id: o.zone for o in overrides}
    templates = {o.template.name: o.template for o in overrides}
    launched = []
    for entry in response.get("Instances") or []:
        spec = entry.get("LaunchTemplateAndOverrides") or {}
        chosen = spec.get("Overrides") or {}
        name = (spec.get("LaunchTemplateSpecification") or {}).get("LaunchTemplateName", "")
        zone = chosen.get("AvailabilityZone") or zone_of_subnet.get(chosen.get("SubnetId", ""), "")
        lifecycle = capacity_type if capacity_type == RESERVED else entry.get("Lifecycle") or capacity_type
        instance_type = entry.get("InstanceType") or chosen.get("InstanceType", "")
        for instance_id in entry.get("InstanceIds") or []:
            launched.append((instance_type, zone, lifecycle, instance_id, templates.get(name)))
    failures = []
    for error in response.get("Errors") or []:
        spec = error.get("LaunchTemplateAndOverrides") or {}
        chosen = spec.get("Overrides") or {}
        code = str(error.get("ErrorCode", ""))
        message = str(error.get("ErrorMessage", ""))
        instance_type = chosen.get("InstanceType", "")
        zone = chosen.get("AvailabilityZone") or zone_of_subnet.get(chosen.get("SubnetId", ""), "")
        lifecycle = capacity_type if capacity_type == RESERVED else error.get("Lifecycle") or capacity_type
        offering = Offering(instance_type, zone, lifecycle) if instance_type and zone else None
        failures.append(classify(code, message, offering))
    return FleetOutcome(launched, failures)


class FleetLauncher:
    """Launches NodeClaims through CreateFleet for one cluster, one call per claim.

    ``prepare`` resolves a request's EC2NodeClass into subnets and launch templates
    (:class:`fleetwright.aws.nodeclass.NodeClassResolver` in production). The EC2 client gets the
    deadline handlers (:mod:`fleetwright.aws.deadline`), so launches made inside a deadline scope stop
    at its deadline.
    """

    def __init__(
        self,
        clients: AwsClients,
        cluster: str,
        prepare: Preparer,
        *,
        unavailable: UnavailableOfferings | None = None,
        max_instance_types: int = MAX_INSTANCE_TYPES,
        reservations: ReservationAvailability | None = None,
    ) -> None:
        self.clients = clients
        self.cluster = cluster
        self.prepare = prepare
        self.unavailable = unavailable if unavailable is not None else default_cache()
        self.reservations = reservations if reservations is not None else default_availability()
        self.max_instance_types = max_instance_types
        deadline.install(clients.ec2)

    def launch(self, request: LaunchRequest) -> LaunchedInstance:
        """Launch one NodeClaim (or return the instance already launched for it); raises LaunchError.

        Runs out of time with a :data:`~fleetwright.aws.failures.FailureKind.DEADLINE_EXCEEDED` failure
        when called inside a deadline scope.
        """
        failures: list[LaunchFailure] = []
        if not request.nodepool:
            # Its instance would lack the NodePool tag ownership needs: nothing could ever terminate it.
            message = "a launch needs its NodePool: the instance's karpenter.sh/nodepool tag makes it ours"
            failures.append(LaunchFailure(FailureKind.INVALID_REQUEST, NOTHING_LAUNCHED, message))
            raise LaunchError(request.nodeclaim, failures, may_have_launched=False)
        try:
            existing = find_claimed_instances(self.clients, self.cluster, [request.nodeclaim])
            if request.nodeclaim in existing:
                return existing[request.nodeclaim]
            return self._launch(request, failures)
        except deadline.DeadlineExceededError as exceeded:
            failures.append(LaunchFailure(FailureKind.DEADLINE_EXCEEDED, DEADLINE_EXCEEDED, str(exceeded)))
            raise LaunchError(request.nodeclaim, failures, may_have_launched=exceeded.uncertain) from None

    def launch_many(self, requests: Sequence[LaunchRequest]) -> list[LaunchedInstance | LaunchError]:
        """Launch several NodeClaims one after the other (one CreateFleet each): each claim's instance,
        or its LaunchError, in the order of ``requests``."""
        results: list[LaunchedInstance | LaunchError] = []
        for request in requests:
            try:
                results.append(self.launch(request))
            except LaunchError as error:
                results.append(error)
        return results

    def _launch(self, request: LaunchRequest, failures: list[LaunchFailure]) -> LaunchedInstance:
        excluded: set[str] = set()
        templates_renewed = False
        for attempt in range(MAX_ATTEMPTS):
            capacity_type = choose_capacity_type(request, self.unavailable, excluded)
            if capacity_type is None:
                failures.append(
                    LaunchFailure(FailureKind.INSUFFICIENT_CAPACITY, NO_OFFERING_LEFT, _nothing_left(request))
                )
                break
            context, overrides = self._overrides(request, capacity_type, failures)
            if not overrides:
                # No remaining offering of this capacity type has a subnet and a bootable AMI.
                failures.append(_no_launchable_offering(capacity_type, context))
                excluded.add(capacity_type)
                continue
            outcome = self._create_fleet(request, overrides, capacity_type, context, attempt)
            if capacity_type == RESERVED:
                outcome = _per_override(outcome, overrides)
            self._mark_refused(outcome, overrides)
            failures.extend(outcome.failures)
            if outcome.launched:
                return self._launched(request, outcome, overrides, context)
            if not templates_renewed and self._renew_templates(outcome, context):
                templates_renewed = True
                continue
            if not outcome.refused:
                # Nothing launched and nothing to rule out: trying again would ask for the same thing.
                if not outcome.failures:
                    failures.append(
                        LaunchFailure(
                            FailureKind.UNKNOWN,
                            NOTHING_LAUNCHED,
                            "CreateFleet launched no instance and reported no error",
                        )
                    )
                break
        raise LaunchError(request.nodeclaim, failures, may_have_launched=_uncertain())

    def _overrides(
        self, request: LaunchRequest, capacity_type: str, failures: list[LaunchFailure]
    ) -> tuple[LaunchContext, list[Override]]:
        """The resolved node class and the offerings to ask CreateFleet for, cheapest first."""
        if capacity_type == RESERVED:
            return self._reserved_overrides(request, failures)
        context = self._prepare(request, capacity_type, failures)
        return context, plan_overrides(
            request, context, capacity_type, self.unavailable, self.max_instance_types
        )

    def _mark_refused(self, outcome: FleetOutcome, overrides: Sequence[Override]) -> None:
        """Offerings EC2 refused are unavailable for a while; so is a reservation that refused."""
        targets = _targets(overrides)
        for refused in outcome.refused:
            assert refused.offering is not None
            o = refused.offering
            self.unavailable.mark(
                o.instance_type, o.zone, o.capacity_type, f"{refused.code}: {refused.message}"
            )
            target = targets.get((o.instance_type, o.zone))
            if target is not None:
                self.reservations.mark_unavailable(target.id)
                log.info(
                    "capacity reservation %s refused the launch (%s); using other offerings",
                    target.id,
                    refused.code,
                )

    def _launched(
        self,
        request: LaunchRequest,
        outcome: FleetOutcome,
        overrides: Sequence[Override],
        context: LaunchContext,
    ) -> LaunchedInstance:
        """The first instance CreateFleet launched (counted against its reservation, if any)."""
        instance_type, zone, lifecycle, instance_id, template = outcome.launched[0]
        target = _targets(overrides).get((instance_type, zone))
        if target is not None:
            self.reservations.mark_launched(target.id)
        prices = {(o.instance_type, o.zone): o.price for o in overrides}
        return LaunchedInstance(
            nodeclaim=request.nodeclaim,
            instance_id=instance_id,
            instance_type=instance_type,
            zone=zone,
            capacity_type=lifecycle,
            image_id=template.image_id if template else "",
            launch_template=template.name if template else "",
            price=prices.get((instance_type, zone)),
            labels={**context.labels, **(reservation_labels(target) if target is not None else {})},
        )

    def _renew_templates(self, outcome: FleetOutcome, context: LaunchContext) -> bool:
        """True when a launch template this process knew was deleted meanwhile (garbage collection of
        unused templates) and its name is forgotten, so the next attempt creates it again."""
        missing = [f for f in outcome.other_errors if f.kind == FailureKind.LAUNCH_TEMPLATE_MISSING]
        forget = getattr(self.prepare, "forget_templates", None)
        if not missing or forget is None:
            return False
        forget([t.name for t in context.templates])
        log.warning("launch template missing; creating it again: %s", missing[0].render())
        return True

    def _reserved_overrides(
        self, request: LaunchRequest, failures: list[LaunchFailure]
    ) -> tuple[LaunchContext, list[Override]]:
        """The overrides of a reserved launch: each reservation gets its own launch template targeting it,
        and only its own instance type and zone."""
        contexts: dict[str, LaunchContext] = {}
        overrides: list[Override] = []
        for instance_type, offering in reserved_choices(request, self.unavailable):
            target = target_of(offering)
            context = contexts.get(target.id)
            if context is None:
                context = self._prepare(request, RESERVED, failures, target)
                contexts[target.id] = context
            template = next((t for t in context.templates if t.accepts(instance_type)), None)
            subnet = context.subnets.get(offering.zone)
            if template is None or subnet is None:
                continue
            overrides.append(
                Override(instance_type.name, offering.zone, subnet, offering.price, template, target)
            )
        if not contexts:
            return LaunchContext(subnets={}, templates=(), tags={}), []
        overrides.sort(key=lambda o: (o.price, o.instance_type, o.zone))
        return next(iter(contexts.values())), overrides[: self.max_instance_types]

    def _prepare(
        self,
        request: LaunchRequest,
        capacity_type: str,
        failures: list[LaunchFailure],
        target: ReservationTarget | None = None,
    ) -> LaunchContext:
        """The node class resolved for this launch (for a reserved one, with templates targeting
        ``target``); a node class that cannot be resolved (no subnet, AMI or placement group; a lookup EC2
        refused) fails the claim before any CreateFleet of this attempt."""
        try:
            if target is None:
                return self.prepare(request, capacity_type)
            return self.prepare(request, RESERVED, target)
        except deadline.DeadlineExceededError:
            raise
        except Exception as error:
            log.warning("cannot prepare the launch of %s: %s", request.nodeclaim, error)
            failures.append(LaunchFailure(FailureKind.INVALID_REQUEST, NODE_CLASS_NOT_READY, str(error)))
            raise LaunchError(request.nodeclaim, failures, may_have_launched=_uncertain()) from error

    def _create_fleet(
        self,
        request: LaunchRequest,
        overrides: list[Override],
        capacity_type: str,
        context: LaunchContext,
        attempt: int,
    ) -> FleetOutcome:
        ownership = ownership_tags(self.cluster, request.nodepool, request.nodeclaim, request.node_class_name)
        params = fleet_request(
            overrides,
            capacity_type,
            1,
            client_token(request.nodeclaim, attempt),
            merge_tags(context.tags, ownership),
            context.fleet_context,
        )
        try:
            response = self.clients.ec2.create_fleet(**params)
        except deadline.DeadlineExceededError:
            raise
        except Exception as error:
            code = error_code(error)
            if not code:
                raise
            log.warning("CreateFleet failed: %s", error)
            failure = classify(code, error_message(error))
            status = int(
                (getattr(error, "response", {}).get("ResponseMetadata") or {}).get("HTTPStatusCode", 0)
            )
            if status >= 500 and code not in THROTTLING_CODES:
                # EC2 failed internally: the fleet may exist. Only its tag can tell.
                raise LaunchError(request.nodeclaim, [failure], may_have_launched=True) from None
            return FleetOutcome([], [failure])
        return parse_fleet_response(response, overrides, capacity_type)


def _targets(overrides: Sequence[Override]) -> dict[tuple[str, str], ReservationTarget]:
    """The reservation each reserved offering (instance type, zone) targets."""
    return {(o.instance_type, o.zone): o.reservation for o in overrides if o.reservation}


def _no_launchable_offering(capacity_type: str, context: LaunchContext) -> LaunchFailure:
    cheaper = " and cheaper than on-demand" if capacity_type == SPOT else ""
    return LaunchFailure(
        FailureKind.INVALID_REQUEST,
        NO_LAUNCHABLE_OFFERING,
        f"no available {capacity_type} offering is in a zone with a subnet "
        f"({', '.join(sorted(context.subnets)) or 'none found'}), "
        f"bootable by an AMI{cheaper}",
    )


def _per_override(outcome: FleetOutcome, overrides: Sequence[Override]) -> FleetOutcome:
    """A reserved launch refused as a whole (``ReservationCapacityExceeded`` as the call's error) refused
    each reservation it offered: the refusal is spread over the overrides so each is remembered."""
    whole = [
        f
        for f in outcome.failures
        if f.offering is None and f.kind == FailureKind.INSUFFICIENT_CAPACITY and f.code != NO_OFFERING_LEFT
    ]
    if outcome.launched or not whole:
        return outcome
    spread = [
        LaunchFailure(f.kind, f.code, f.message, Offering(o.instance_type, o.zone, RESERVED))
        for f in whole[:1]
        for o in overrides
    ]
    return FleetOutcome([], [f for f in outcome.failures if f not in whole] + spread)


def _uncertain() -> bool:
    """True when a request of the current deadline scope may have taken effect without an answer."""
    scope = current_deadline()
    return scope is not None and scope.uncertain


def _nothing_left(request: LaunchRequest) -> str:
    allowed = ", ".join(sorted(request.capacity_types)) or "any capacity type"
    zones = ", ".join(sorted(request.zones)) or "any zone"
    return (
        f"no available offering left among {len(request.instance_types)} instance types ({allowed}; {zones})"
    )
