"""Launching NodeClaims with EC2 CreateFleet (type ``instant``).

One call offers EC2 every compatible instance type × zone (at most the 60 cheapest types) and lets it
pick: spot with ``price-capacity-optimized``, on-demand with ``lowest-price``. Offerings EC2 refuses
(insufficient capacity, quotas, no free addresses) go into the unavailable-offerings cache for three
minutes and the launch is retried with what remains. Identical claims share one call with a target
capacity of N. ``ClientToken`` is derived from the claim ids, and instances already tagged with a
claim's id are returned instead of launching again, so a retried or crashed launch never doubles up.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from fleetwright.aws.clients import AwsClients, error_code, error_message
from fleetwright.aws.instances import find_claimed_instances
from fleetwright.aws.request import LaunchedInstance, LaunchError, LaunchRequest
from fleetwright.aws.tags import (
    NAME_TAG,
    NODECLAIM_TAG,
    merge_tags,
    ownership_tags,
    tag_specifications,
    to_aws,
)
from fleetwright.aws.unavailable import UnavailableOfferings, default_cache
from fleetwright.aws.variants import arch_of, variant_of
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.labels import ON_DEMAND, SPOT

log = logging.getLogger(__name__)

MAX_INSTANCE_TYPES = 60
MAX_ATTEMPTS = 20
CLIENT_TOKEN_MAX = 64

# Errors that say "not this offering, not now": remember it and try the others.
UNAVAILABLE_OFFERING_CODES = frozenset(
    {
        "InsufficientInstanceCapacity",
        "InsufficientCapacity",
        "MaxSpotInstanceCountExceeded",
        "VcpuLimitExceeded",
        "UnfulfillableCapacity",
        "InsufficientFreeAddressesInSubnet",
        "Unsupported",
        "SpotMaxPriceTooLow",
        "ReservationCapacityExceeded",
        "InsufficientHostCapacity",
    }
)


@dataclass(frozen=True, slots=True)
class TemplateChoice:
    """A launch template and the AMI it boots: its architecture and variant decide which types use it.

    ``variant`` None accepts every variant (custom AMIs).
    """

    name: str
    image_id: str
    arch: str
    variant: str | None = None

    def accepts(self, instance_type: InstanceType) -> bool:
        """True when this template's AMI can boot the instance type."""
        if arch_of(instance_type) != self.arch:
            return False
        return self.variant is None or self.variant == variant_of(instance_type)


@dataclass(frozen=True, slots=True)
class LaunchContext:
    """What a launch needs from the resolved EC2NodeClass: a subnet per zone and the launch templates."""

    subnets: Mapping[str, str]  # zone → subnet id
    templates: Sequence[TemplateChoice]
    tags: Mapping[str, str]  # the node class's user tags


class Preparer(Protocol):
    """Resolves a request's node class into subnets and launch templates for one capacity type."""

    def __call__(self, request: LaunchRequest, capacity_type: str) -> LaunchContext: ...


MISSING_TEMPLATE_CODES = frozenset(
    {
        "InvalidLaunchTemplateName.NotFoundException",
        "InvalidLaunchTemplateId.NotFound",
        "InvalidLaunchTemplateId.NotFoundException",
    }
)


@dataclass(frozen=True, slots=True)
class Override:
    """One instance type × zone offered to CreateFleet."""

    instance_type: str
    zone: str
    subnet_id: str
    price: float
    template: TemplateChoice


def choose_capacity_type(
    request: LaunchRequest, unavailable: UnavailableOfferings, excluded: Iterable[str] = ()
) -> str | None:
    """Spot when the claim allows it and some spot offering remains, else on-demand (as Karpenter)."""
    allowed = (set(request.capacity_types) or {SPOT, ON_DEMAND}) - set(excluded)
    for capacity_type in (SPOT, ON_DEMAND):
        if capacity_type not in allowed:
            continue
        for instance_type in request.instance_types:
            for offering in instance_type.offerings:
                if (
                    offering.capacity_type == capacity_type
                    and offering.available
                    and (not request.zones or offering.zone in request.zones)
                    and not unavailable.is_unavailable(instance_type.name, offering.zone, capacity_type)
                ):
                    return capacity_type
    return None


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
    for instance_type in request.instance_types:
        template = next((t for t in context.templates if t.accepts(instance_type)), None)
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
            if unavailable.is_unavailable(instance_type.name, offering.zone, capacity_type):
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


def client_token(nodeclaims: Sequence[str], attempt: int) -> str:
    """The idempotency token of one CreateFleet call: the claim id itself for a single first attempt."""
    base = nodeclaims[0] if len(nodeclaims) == 1 else "batch-" + _digest(",".join(sorted(nodeclaims)))
    suffix = f"-{attempt}" if attempt else ""
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
) -> dict[str, Any]:
    """The CreateFleet parameters: one launch template config per template, overrides cheapest first."""
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
    if capacity_type == SPOT:
        params["SpotOptions"] = {"AllocationStrategy": "price-capacity-optimized"}
    else:
        params["OnDemandOptions"] = {"AllocationStrategy": "lowest-price"}
    return params


@dataclass(slots=True)
class FleetOutcome:
    """What one CreateFleet call gave: instances (type, zone, capacity type, id) and refused offerings."""

    launched: list[tuple[str, str, str, str, TemplateChoice | None]]
    refused: list[tuple[str, str, str, str, str]]  # type, zone, capacity type, code, message
    other_errors: list[str]


def parse_fleet_response(
    response: Mapping[str, Any], overrides: Sequence[Override], capacity_type: str
) -> FleetOutcome:
    """Split a CreateFleet response into launched instances and refused offerings."""
    zone_of_subnet = {o.subnet_id: o.zone for o in overrides}
    templates = {o.template.name: o.template for o in overrides}
    launched = []
    for entry in response.get("Instances") or []:
        spec = entry.get("LaunchTemplateAndOverrides") or {}
        chosen = spec.get("Overrides") or {}
        name = (spec.get("LaunchTemplateSpecification") or {}).get("LaunchTemplateName", "")
        zone = chosen.get("AvailabilityZone") or zone_of_subnet.get(chosen.get("SubnetId", ""), "")
        lifecycle = entry.get("Lifecycle") or capacity_type
        instance_type = entry.get("InstanceType") or chosen.get("InstanceType", "")
        for instance_id in entry.get("InstanceIds") or []:
            launched.append((instance_type, zone, lifecycle, instance_id, templates.get(name)))
    refused = []
    others = []
    for error in response.get("Errors") or []:
        spec = error.get("LaunchTemplateAndOverrides") or {}
        chosen = spec.get("Overrides") or {}
        code = str(error.get("ErrorCode", ""))
        message = str(error.get("ErrorMessage", ""))
        instance_type = chosen.get("InstanceType", "")
        zone = chosen.get("AvailabilityZone") or zone_of_subnet.get(chosen.get("SubnetId", ""), "")
        lifecycle = error.get("Lifecycle") or capacity_type
        if code in UNAVAILABLE_OFFERING_CODES and instance_type and zone:
            refused.append((instance_type, zone, lifecycle, code, message))
        else:
            where = f" ({instance_type} in {zone})" if instance_type else ""
            others.append(f"{code}{where}: {message}")
    return FleetOutcome(launched, refused, others)


class FleetLauncher:
    """Launches NodeClaims through CreateFleet for one cluster.

    ``prepare`` resolves a request's EC2NodeClass into subnets and launch templates
    (:class:`fleetwright.aws.nodeclass.NodeClassResolver` in production).
    """

    def __init__(
        self,
        clients: AwsClients,
        cluster: str,
        prepare: Preparer | Callable[[LaunchRequest, str], LaunchContext],
        *,
        unavailable: UnavailableOfferings | None = None,
        max_instance_types: int = MAX_INSTANCE_TYPES,
    ) -> None:
        self.clients = clients
        self.cluster = cluster
        self.prepare = prepare
        self.unavailable = unavailable if unavailable is not None else default_cache()
        self.max_instance_types = max_instance_types

    def launch(self, request: LaunchRequest) -> LaunchedInstance:
        """Launch one NodeClaim (or return the instance already launched for it); raises LaunchError."""
        result = self.launch_many([request])[0]
        if isinstance(result, LaunchError):
            raise result
        return result

    def launch_many(self, requests: Sequence[LaunchRequest]) -> list[LaunchedInstance | LaunchError]:
        """Launch several NodeClaims, one CreateFleet per group of identical requests.

        The result lists, in the order of ``requests``, each claim's instance or its LaunchError.
        """
        existing = find_claimed_instances(self.clients, self.cluster, [r.nodeclaim for r in requests])
        results: dict[str, LaunchedInstance | LaunchError] = {}
        groups: dict[tuple[Any, ...], list[LaunchRequest]] = {}
        for request in requests:
            if request.nodeclaim in existing:
                results[request.nodeclaim] = existing[request.nodeclaim]
            else:
                groups.setdefault(request.batch_key(), []).append(request)
        for group in groups.values():
            results.update(self._launch_group(group))
        return [results[r.nodeclaim] for r in requests]

    def _launch_group(self, group: list[LaunchRequest]) -> dict[str, LaunchedInstance | LaunchError]:
        template_request = group[0]
        pending = [r.nodeclaim for r in group]
        results: dict[str, LaunchedInstance | LaunchError] = {}
        reasons: list[str] = []
        excluded: set[str] = set()
        templates_renewed = False
        for attempt in range(MAX_ATTEMPTS):
            if not pending:
                break
            capacity_type = choose_capacity_type(template_request, self.unavailable, excluded)
            if capacity_type is None:
                reasons.append(_nothing_left(template_request))
                break
            context = self.prepare(template_request, capacity_type)
            overrides = plan_overrides(
                template_request, context, capacity_type, self.unavailable, self.max_instance_types
            )
            if not overrides:
                # No remaining offering of this capacity type has a subnet and a bootable AMI.
                cheaper = " and cheaper than on-demand" if capacity_type == SPOT else ""
                reasons.append(
                    f"no available {capacity_type} offering is in a zone with a subnet "
                    f"({', '.join(sorted(context.subnets)) or 'none found'}), bootable by an AMI{cheaper}"
                )
                excluded.add(capacity_type)
                continue
            outcome = self._create_fleet(
                template_request, pending, overrides, capacity_type, context, attempt
            )
            for instance_type, zone, lifecycle, code, message in outcome.refused:
                self.unavailable.mark(instance_type, zone, lifecycle, f"{code}: {message}")
                reasons.append(f"{code} for {instance_type} ({lifecycle}) in {zone}")
            reasons.extend(outcome.other_errors)
            prices = {(o.instance_type, o.zone): o.price for o in overrides}
            fresh: list[LaunchedInstance] = []
            for instance_type, zone, lifecycle, instance_id, template in outcome.launched:
                if not pending:
                    break
                nodeclaim = pending.pop(0)
                results[nodeclaim] = launched = LaunchedInstance(
                    nodeclaim=nodeclaim,
                    instance_id=instance_id,
                    instance_type=instance_type,
                    zone=zone,
                    capacity_type=lifecycle,
                    image_id=template.image_id if template else "",
                    launch_template=template.name if template else "",
                    price=prices.get((instance_type, zone)),
                )
                fresh.append(launched)
            if fresh and len(fresh) + len(pending) > 1:
                self._tag_claims(fresh)
            if pending and not templates_renewed and _template_missing(outcome.other_errors):
                # A launch template this process knew was deleted meanwhile (garbage collection of unused
                # templates): forget the names and try once more, which creates them again.
                templates_renewed = True
                forget = getattr(self.prepare, "forget_templates", None)
                if forget is not None:
                    forget([t.name for t in context.templates])
                    log.warning("launch template missing; creating it again: %s", outcome.other_errors[0])
                    continue
            if pending and not outcome.refused:
                # Nothing launched and nothing to rule out: trying again would ask for the same thing.
                if not outcome.other_errors:
                    reasons.append(
                        "CreateFleet launched fewer instances than requested and reported no error"
                    )
                break
        for nodeclaim in pending:
            results[nodeclaim] = LaunchError(nodeclaim, _unique(reasons))
        return results

    def _create_fleet(
        self,
        request: LaunchRequest,
        pending: list[str],
        overrides: list[Override],
        capacity_type: str,
        context: LaunchContext,
        attempt: int,
    ) -> FleetOutcome:
        ownership = ownership_tags(
            self.cluster,
            request.nodepool,
            pending[0] if len(pending) == 1 else "",
            request.node_class_name,
        )
        params = fleet_request(
            overrides,
            capacity_type,
            len(pending),
            client_token(pending, attempt),
            merge_tags(context.tags, ownership),
        )
        try:
            response = self.clients.ec2.create_fleet(**params)
        except Exception as error:
            code = error_code(error)
            if not code:
                raise
            log.warning("CreateFleet failed: %s", error)
            return FleetOutcome([], [], [f"{code}: {error_message(error)}"])
        return parse_fleet_response(response, overrides, capacity_type)

    def _tag_claims(self, launched: list[LaunchedInstance]) -> None:
        # A batched CreateFleet cannot tag each instance with its own claim; tag them right after.
        for instance in launched:
            if instance.reused:
                continue
            self.clients.ec2.create_tags(
                Resources=[instance.instance_id],
                Tags=to_aws({NODECLAIM_TAG: instance.nodeclaim, NAME_TAG: instance.nodeclaim}),
            )


def _template_missing(errors: Iterable[str]) -> bool:
    """True when CreateFleet said a launch template does not exist."""
    return any(e.split(":", 1)[0].split(" ", 1)[0] in MISSING_TEMPLATE_CODES for e in errors)


def _nothing_left(request: LaunchRequest) -> str:
    allowed = ", ".join(sorted(request.capacity_types)) or "any capacity type"
    zones = ", ".join(sorted(request.zones)) or "any zone"
    return (
        f"no available offering left among {len(request.instance_types)} instance types ({allowed}; {zones})"
    )


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))
