"""Makes moto as strict as EC2 for the calls Fleetwright makes.

moto accepts requests EC2 refuses and is never eventually consistent. Each rule here is a small class whose
``install(client)`` registers botocore handlers on one EC2 client and whose docstring names the AWS page it
follows. A refused request raises a botocore ``ClientError`` with EC2's error code before moto executes
anything, so the code under test meets the error EC2 would give it. ``uninstall()`` takes the handlers off
every client again.

:class:`StrictEc2` bundles the rules; ``tests/conftest.py`` installs one bundle per test on every EC2 client
created while the test runs.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, NoReturn

from botocore.awsrequest import AWSResponse
from botocore.exceptions import ClientError
from moto.core.botocore_stubber import MockRawResponse

from tests.aws.faults import UNSERVED_URL

Handler = Callable[..., Any]


def refuse(operation: str, code: str, message: str) -> NoReturn:
    """Raise what botocore raises for an EC2 error answer (HTTP 400)."""
    raise ClientError(
        {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": 400, "RequestId": "strict"},
        },
        operation,
    )


@dataclass
class Rule:
    """Remembers the handlers it registers so :meth:`uninstall` can take them off again."""

    _registered: list[tuple[Any, str, Handler]] = field(default_factory=list, init=False, repr=False)

    def install(self, client: Any) -> None:
        raise NotImplementedError

    def _on(self, client: Any, event: str, handler: Handler, *, first: bool = False) -> None:
        events = client.meta.events
        if first:
            events.register_first(event, handler)
        else:
            events.register(event, handler)
        self._registered.append((client, event, handler))

    def uninstall(self, client: Any | None = None) -> None:
        """Take this rule's handlers off ``client`` (off every client when ``None``)."""
        kept = []
        for registered, event, handler in self._registered:
            if client is None or registered is client:
                registered.meta.events.unregister(event, handler)
            else:
                kept.append((registered, event, handler))
        self._registered[:] = kept


@dataclass
class ParamsRule(Rule):
    """A rule that checks one operation's parameters before moto sees them (its ``_check``)."""

    operation: ClassVar[str] = ""

    def install(self, client: Any) -> None:
        self._on(client, f"provide-client-params.ec2.{self.operation}", self._check)

    def _check(self, params: Mapping[str, Any], **_: Any) -> None:
        raise NotImplementedError

    def refuse(self, code: str, message: str) -> NoReturn:
        """Refuse the request as EC2 would, with ``code``."""
        refuse(self.operation, code, message)


# ---------------------------------------------------------------------------------------------- tags


MAX_TAGS_PER_RESOURCE = 50
MAX_TAG_KEY = 127
MAX_TAG_VALUE = 256


def check_tags(operation: str, tags: Iterable[Mapping[str, Any]]) -> None:
    """EC2's tag restrictions: at most 50 tags, keys ≤ 127 and values ≤ 256 characters, no ``aws:`` keys."""
    tags = list(tags)
    if len(tags) > MAX_TAGS_PER_RESOURCE:
        refuse(
            operation,
            "TagLimitExceeded",
            f"The maximum number of tags per resource is {MAX_TAGS_PER_RESOURCE}",
        )
    for tag in tags:
        key = str(tag.get("Key", ""))
        value = str(tag.get("Value", ""))
        if not key or len(key) > MAX_TAG_KEY:
            refuse(
                operation,
                "InvalidParameterValue",
                f"Tag key '{key[:40]}…' must be 1 to {MAX_TAG_KEY} characters",
            )
        if len(value) > MAX_TAG_VALUE:
            refuse(
                operation,
                "InvalidParameterValue",
                f"Tag value for '{key}' exceeds {MAX_TAG_VALUE} characters",
            )
        if key.lower().startswith("aws:"):
            refuse(operation, "InvalidParameterValue", f"Tag keys starting with 'aws:' are reserved: {key}")


def check_tag_specifications(
    operation: str, specifications: Iterable[Mapping[str, Any]], allowed: Iterable[str], where: str
) -> None:
    """Every ``ResourceType`` in ``allowed``, and every tag list within the tag restrictions."""
    allowed = tuple(allowed)
    for spec in specifications:
        kind = str(spec.get("ResourceType", ""))
        if kind not in allowed:
            refuse(
                operation,
                "InvalidParameterValue",
                f"'{kind}' is not a valid taggable resource type for {where}; allowed: {', '.join(allowed)}",
            )
        check_tags(operation, spec.get("Tags") or [])


@dataclass
class TagRestrictions(ParamsRule):
    """CreateTags keeps EC2's tag limits: 50 tags per resource, keys up to 127 characters, values up to
    256, and no key beginning with ``aws:`` (:class:`FleetTagging` and :class:`LaunchTemplateRules` apply
    the same limits to the tags those calls carry).

    Tag restrictions: https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/Using_Tags.html#tag-restrictions
    """

    operation = "CreateTags"

    def _check(self, params: Mapping[str, Any], **_: Any) -> None:
        check_tags(self.operation, params.get("Tags") or [])


# ------------------------------------------------------------------------------------------- CreateFleet


INSTANT_FLEET_TAGGABLE = ("fleet", "instance", "volume", "network-interface")
FLEET_TAGGABLE = ("fleet",)
CLIENT_TOKEN_MAX = 64
MAX_LAUNCH_TEMPLATE_CONFIGS = 50
MAX_OVERRIDES_REQUEST_MAINTAIN = 300


@dataclass
class FleetTagging(ParamsRule):
    """CreateFleet ``TagSpecifications``: an ``instant`` fleet tags only the fleet, its instances, their
    volumes and network interfaces; a ``request``/``maintain`` fleet tags only the fleet. Spot instance
    requests are tagged through the launch template. moto accepts any resource type.

    CreateFleet (TagSpecifications): https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateFleet.html
    """

    instant_taggable: tuple[str, ...] = INSTANT_FLEET_TAGGABLE

    operation = "CreateFleet"

    def _check(self, params: Mapping[str, Any], **_: Any) -> None:
        kind = str(params.get("Type", "maintain"))
        allowed = self.instant_taggable if kind == "instant" else FLEET_TAGGABLE
        check_tag_specifications(
            self.operation, params.get("TagSpecifications") or [], allowed, f"an EC2 Fleet of type {kind}"
        )


@dataclass
class FleetRequestLimits(ParamsRule):
    """CreateFleet request shape: ``ClientToken`` at most 64 ASCII characters; at most 50
    ``LaunchTemplateConfigs``; a launch template named by id or by name, not both; an override names
    ``AvailabilityZone`` or ``AvailabilityZoneId``, not both, and ``InstanceType`` or
    ``InstanceRequirements``, not both; ``request``/``maintain`` fleets at most 300 overrides in all; a
    positive ``TotalTargetCapacity`` for fleets that are not ``maintain``.

    CreateFleet: https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateFleet.html
    FleetData.ClientToken: https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_FleetData.html
    FleetLaunchTemplateConfigRequest:
    https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_FleetLaunchTemplateConfigRequest.html
    FleetLaunchTemplateOverridesRequest:
    https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_FleetLaunchTemplateOverridesRequest.html
    """

    operation = "CreateFleet"

    def _check(self, params: Mapping[str, Any], **_: Any) -> None:
        token = params.get("ClientToken")
        if token is not None and (len(str(token)) > CLIENT_TOKEN_MAX or not str(token).isascii()):
            self.refuse(
                "InvalidParameterValue",
                f"ClientToken must be at most {CLIENT_TOKEN_MAX} ASCII characters",
            )
        configs = list(params.get("LaunchTemplateConfigs") or [])
        if len(configs) > MAX_LAUNCH_TEMPLATE_CONFIGS:
            self.refuse(
                "InvalidParameterValue",
                f"{len(configs)} LaunchTemplateConfigs; at most {MAX_LAUNCH_TEMPLATE_CONFIGS} are allowed",
            )
        overrides = 0
        for config in configs:
            spec = config.get("LaunchTemplateSpecification") or {}
            if ("LaunchTemplateId" in spec) == ("LaunchTemplateName" in spec):
                self.refuse(
                    "InvalidParameterCombination",
                    "Specify either LaunchTemplateId or LaunchTemplateName, but not both",
                )
            for override in config.get("Overrides") or []:
                overrides += 1
                if "AvailabilityZone" in override and "AvailabilityZoneId" in override:
                    self.refuse(
                        "InvalidParameterCombination",
                        "AvailabilityZone and AvailabilityZoneId cannot both be specified",
                    )
                if "InstanceType" in override and "InstanceRequirements" in override:
                    self.refuse(
                        "InvalidParameterCombination",
                        "InstanceType and InstanceRequirements cannot both be specified",
                    )
        kind = str(params.get("Type", "maintain"))
        if kind != "instant" and overrides > MAX_OVERRIDES_REQUEST_MAINTAIN:
            self.refuse(
                "InvalidParameterValue",
                f"{overrides} overrides; at most {MAX_OVERRIDES_REQUEST_MAINTAIN}",
            )
        target = params.get("TargetCapacitySpecification") or {}
        if kind != "maintain" and int(target.get("TotalTargetCapacity", 0)) < 1:
            self.refuse("InvalidTargetCapacitySpecification", "TotalTargetCapacity must be at least 1")


def _canonical(params: Mapping[str, Any]) -> str:
    return json.dumps({k: v for k, v in params.items() if k != "ClientToken"}, sort_keys=True, default=str)


@dataclass
class ClientTokenIdempotency(Rule):
    """A CreateFleet retried with the same ``ClientToken`` and parameters returns the first answer and
    launches nothing more; the same token with other parameters fails with
    ``IdempotentParameterMismatch``. moto ignores the token and launches again.

    Ensuring idempotency: https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-idempotency.html
    """

    operations: tuple[str, ...] = ("CreateFleet",)
    _answers: dict[tuple[str, str], tuple[str, dict[str, Any]]] = field(default_factory=dict, init=False)

    def install(self, client: Any) -> None:
        for op in self.operations:
            self._on(client, f"provide-client-params.ec2.{op}", self._remember_request)
            self._on(client, f"before-call.ec2.{op}", self._replay, first=True)
            self._on(client, f"after-call.ec2.{op}", self._remember_answer)

    def _remember_request(
        self, params: Mapping[str, Any], model: Any, context: dict[str, Any], **_: Any
    ) -> None:
        token = params.get("ClientToken")
        if not token:
            return
        key = (model.name, str(token))
        canonical = _canonical(params)
        context["idempotency_key"] = (key, canonical)
        known = self._answers.get(key)
        if known is None:
            return
        if known[0] != canonical:
            refuse(
                model.name,
                "IdempotentParameterMismatch",
                f"The client token {token} was already used with different parameters",
            )
        context["idempotency_replay"] = known[1]

    def _replay(self, context: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        answer = context.get("idempotency_replay")
        if answer is None:
            return None
        return AWSResponse(UNSERVED_URL, 200, {}, MockRawResponse("")), json.loads(json.dumps(answer))

    def _remember_answer(
        self, http_response: Any, parsed: dict[str, Any], context: dict[str, Any], **_: Any
    ) -> None:
        remembered = context.get("idempotency_key")
        if remembered is None or "idempotency_replay" in context or http_response.status_code >= 300:
            return
        key, canonical = remembered
        answer = {k: v for k, v in parsed.items() if k != "ResponseMetadata"}
        self._answers[key] = (canonical, json.loads(json.dumps(answer, default=str)))


# ------------------------------------------------------------------------------------ CreateLaunchTemplate


LAUNCH_TEMPLATE_DATA_TAGGABLE = ("instance", "volume", "network-interface", "spot-instances-request")
LAUNCH_TEMPLATE_NAME = re.compile(r"[a-zA-Z0-9().\-/_]{3,128}")
USER_DATA_MAX_BYTES = 16 * 1024
LAUNCH_TEMPLATE_CLIENT_TOKEN_MAX = 128


@dataclass
class LaunchTemplateRules(ParamsRule):
    """CreateLaunchTemplate: the name is 3–128 characters of letters, digits and ``( ) . - / _``; the
    request's own ``TagSpecifications`` tag only the ``launch-template``; ``LaunchTemplateData``'s tag only
    ``instance``, ``volume``, ``network-interface`` or ``spot-instances-request``; user data is base64 of
    at most 16 KB; ``ClientToken`` at most 128 ASCII characters.

    CreateLaunchTemplate: https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateLaunchTemplate.html
    LaunchTemplateTagSpecificationRequest:
    https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_LaunchTemplateTagSpecificationRequest.html
    RequestLaunchTemplateData (UserData):
    https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_RequestLaunchTemplateData.html
    """

    operation = "CreateLaunchTemplate"

    def _check(self, params: Mapping[str, Any], **_: Any) -> None:
        name = str(params.get("LaunchTemplateName", ""))
        if not LAUNCH_TEMPLATE_NAME.fullmatch(name):
            self.refuse(
                "InvalidLaunchTemplateName.MalformedException",
                f"Launch template name is malformed: {name!r}",
            )
        token = params.get("ClientToken")
        if token is not None and (
            len(str(token)) > LAUNCH_TEMPLATE_CLIENT_TOKEN_MAX or not str(token).isascii()
        ):
            self.refuse("InvalidParameterValue", "ClientToken must be at most 128 ASCII characters")
        check_tag_specifications(
            self.operation,
            params.get("TagSpecifications") or [],
            ("launch-template",),
            "CreateLaunchTemplate",
        )
        data = params.get("LaunchTemplateData") or {}
        check_tag_specifications(
            self.operation,
            data.get("TagSpecifications") or [],
            LAUNCH_TEMPLATE_DATA_TAGGABLE,
            "launch template data",
        )
        user_data = data.get("UserData")
        if user_data is not None:
            try:
                raw = base64.b64decode(str(user_data), validate=True)
            except (binascii.Error, ValueError):
                self.refuse("InvalidUserData.Malformed", "User data must be base64-encoded")
            if len(raw) > USER_DATA_MAX_BYTES:
                self.refuse("InvalidParameterValue", f"User data is limited to {USER_DATA_MAX_BYTES} bytes")


# ------------------------------------------------------------------------------ capacity reservations


CAPACITY_RESERVATION_PREFERENCES = ("capacity-reservations-only", "open", "none")
CAPACITY_RESERVATION_ID = re.compile(r"cr-[0-9a-f]{17}")
RESERVATION_MARKET_TYPES = ("capacity-block", "interruptible-capacity-reservation")


@dataclass
class ReservationTargets(ParamsRule):
    """CreateLaunchTemplate: ``CapacityReservationPreference`` is ``capacity-reservations-only``, ``open`` or
    ``none``; a ``CapacityReservationTarget`` names a reservation id (``cr-`` and 17 hex digits) and goes
    with no preference other than ``capacity-reservations-only``; ``capacity-reservations-only`` needs a
    target; the ``capacity-block`` and ``interruptible-capacity-reservation`` market types launch only into
    a targeted reservation. Which reservations exist, and whether an instance type and zone match one, is
    EC2's state: the ``CapacityReservations`` fake (``fleetwright.local.aws_fakes``) refuses those.

    LaunchTemplateCapacityReservationSpecificationRequest:
    https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_LaunchTemplateCapacityReservationSpecificationRequest.html
    CapacityReservationTarget:
    https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CapacityReservationTarget.html
    LaunchTemplateInstanceMarketOptionsRequest:
    https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_LaunchTemplateInstanceMarketOptionsRequest.html
    """

    operation = "CreateLaunchTemplate"

    def _check(self, params: Mapping[str, Any], **_: Any) -> None:
        data = params.get("LaunchTemplateData") or {}
        spec = data.get("CapacityReservationSpecification")
        market = str((data.get("InstanceMarketOptions") or {}).get("MarketType", ""))
        target: Mapping[str, Any] = {}
        if spec is not None:
            preference = spec.get("CapacityReservationPreference")
            target = spec.get("CapacityReservationTarget") or {}
            if preference is not None and preference not in CAPACITY_RESERVATION_PREFERENCES:
                self.refuse("InvalidParameterValue", f"Invalid CapacityReservationPreference: {preference}")
            if target and preference not in (None, "capacity-reservations-only"):
                self.refuse(
                    "InvalidParameterCombination",
                    f"CapacityReservationTarget goes with no CapacityReservationPreference {preference}",
                )
            if preference == "capacity-reservations-only" and not target:
                self.refuse(
                    "MissingParameter", "capacity-reservations-only needs a CapacityReservationTarget"
                )
            rid = target.get("CapacityReservationId")
            if target and not CAPACITY_RESERVATION_ID.fullmatch(str(rid or "")):
                self.refuse("InvalidCapacityReservationId.Malformed", f"Invalid id: {rid!r}")
        if market in RESERVATION_MARKET_TYPES and not target:
            self.refuse(
                "InvalidParameterCombination", f"MarketType {market} needs a CapacityReservationTarget"
            )


# ------------------------------------------------------------------------ launch template launch fields


INTERFACE_TYPES = ("interface", "efa", "efa-only")
TENANCIES = ("default", "dedicated", "host")
CONNECTION_TRACKING_RANGES = {
    "TcpEstablishedTimeout": (60, 432000),
    "UdpStreamTimeout": (60, 180),
    "UdpTimeout": (30, 60),
}
VOLUME_INITIALIZATION_RATE = (100, 300)


@dataclass
class LaunchTemplateFieldRules(ParamsRule):
    """CreateLaunchTemplate's network, CPU, placement and EBS fields as EC2 checks them.

    Security groups go on the network interfaces once any is described, never on both levels; each
    (network card, device index) slot is used once; an ``efa-only`` interface carries no IP addresses,
    prefixes, public IP or connection tracking; ``Ipv4PrefixCount`` is not combined with ``Ipv4Prefixes``
    or secondary private addresses; connection tracking timeouts stay within 60–432000 (TCP established),
    60–180 (UDP stream) and 30–60 seconds (UDP); ``CpuOptions.NestedVirtualization`` is ``enabled`` or
    ``disabled``; ``Placement.Tenancy`` is ``default``, ``dedicated`` or ``host`` and a
    ``PartitionNumber`` needs a placement group; ``VolumeInitializationRate`` is 100–300 MiB/s and only
    for a volume created from a snapshot.

    RequestLaunchTemplateData:
    https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_RequestLaunchTemplateData.html
    LaunchTemplateInstanceNetworkInterfaceSpecificationRequest:
    https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_LaunchTemplateInstanceNetworkInterfaceSpecificationRequest.html
    ConnectionTrackingSpecificationRequest:
    https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_ConnectionTrackingSpecificationRequest.html
    LaunchTemplateCpuOptionsRequest:
    https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_LaunchTemplateCpuOptionsRequest.html
    LaunchTemplatePlacementRequest:
    https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_LaunchTemplatePlacementRequest.html
    LaunchTemplateEbsBlockDeviceRequest:
    https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_LaunchTemplateEbsBlockDeviceRequest.html
    """

    operation = "CreateLaunchTemplate"

    def _check(self, params: Mapping[str, Any], **_: Any) -> None:
        data = params.get("LaunchTemplateData") or {}
        self._interfaces(data)
        self._cpu(data.get("CpuOptions"))
        self._placement(data.get("Placement"))
        for mapping in data.get("BlockDeviceMappings") or []:
            self._ebs(mapping.get("Ebs") or {})

    @staticmethod
    def _interfaces(data: Mapping[str, Any]) -> None:
        op = "CreateLaunchTemplate"
        interfaces = data.get("NetworkInterfaces") or []
        if not interfaces:
            return
        if data.get("SecurityGroupIds") or data.get("SecurityGroups"):
            refuse(
                op,
                "InvalidParameterCombination",
                "Network interfaces and an instance-level security groups may not be specified on the same "
                "request",
            )
        slots = [(i.get("NetworkCardIndex", 0), i.get("DeviceIndex")) for i in interfaces]
        if len(set(slots)) != len(slots):
            refuse(op, "InvalidParameterValue", "Each network card and device index may be used once")
        for interface in interfaces:
            kind = interface.get("InterfaceType", "interface")
            if kind not in INTERFACE_TYPES:
                refuse(op, "InvalidParameterValue", f"Invalid interface type {kind!r}")
            if kind == "efa-only":
                addressing = [
                    name
                    for name in (
                        "Ipv4PrefixCount",
                        "Ipv4Prefixes",
                        "SecondaryPrivateIpAddressCount",
                        "AssociatePublicIpAddress",
                        "ConnectionTrackingSpecification",
                        "PrivateIpAddress",
                    )
                    if name in interface
                ]
                if addressing:
                    refuse(
                        op,
                        "InvalidParameterCombination",
                        f"An EFA-only network interface cannot have {', '.join(addressing)}",
                    )
            if "Ipv4PrefixCount" in interface and (
                "Ipv4Prefixes" in interface or "SecondaryPrivateIpAddressCount" in interface
            ):
                refuse(
                    op,
                    "InvalidParameterCombination",
                    "Ipv4PrefixCount cannot be combined with Ipv4Prefixes or SecondaryPrivateIpAddressCount",
                )
            tracking = interface.get("ConnectionTrackingSpecification") or {}
            for name, value in tracking.items():
                low, high = CONNECTION_TRACKING_RANGES[name]
                if not low <= int(value) <= high:
                    refuse(op, "InvalidParameterValue", f"{name} must be between {low} and {high}")

    @staticmethod
    def _cpu(options: Mapping[str, Any] | None) -> None:
        if not options:
            return
        nested = options.get("NestedVirtualization")
        if nested is not None and nested not in ("enabled", "disabled"):
            refuse(
                "CreateLaunchTemplate", "InvalidParameterValue", f"Invalid NestedVirtualization {nested!r}"
            )

    @staticmethod
    def _placement(placement: Mapping[str, Any] | None) -> None:
        if not placement:
            return
        op = "CreateLaunchTemplate"
        tenancy = placement.get("Tenancy")
        if tenancy is not None and tenancy not in TENANCIES:
            refuse(op, "InvalidParameterValue", f"Invalid tenancy {tenancy!r}")
        if "PartitionNumber" in placement and not (placement.get("GroupId") or placement.get("GroupName")):
            refuse(op, "InvalidParameterCombination", "PartitionNumber requires a placement group")

    @staticmethod
    def _ebs(ebs: Mapping[str, Any]) -> None:
        rate = ebs.get("VolumeInitializationRate")
        if rate is None:
            return
        low, high = VOLUME_INITIALIZATION_RATE
        if not low <= int(rate) <= high:
            refuse(
                "CreateLaunchTemplate",
                "InvalidParameterValue",
                f"VolumeInitializationRate must be between {low} and {high} MiB/s",
            )
        if not ebs.get("SnapshotId"):
            refuse(
                "CreateLaunchTemplate",
                "InvalidParameterCombination",
                "VolumeInitializationRate can be specified only for volumes created from a snapshot",
            )


# ----------------------------------------------------------------------------------- instance id lists


MAX_IDS = 1000
DESCRIBE_MAX_RESULTS = (5, 1000)
MAX_FILTER_VALUES = 200


@dataclass
class InstanceCallLimits(Rule):
    """DescribeInstances: ``MaxResults`` (5–1000) cannot be combined with ``InstanceIds``
    (``InvalidParameterCombination``); a call carries at most 200 filter values (``FilterLimitExceeded``).
    TerminateInstances and CreateTags: at most 1,000 ids per call.

    DescribeInstances: https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstances.html
    TerminateInstances: https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_TerminateInstances.html
    CreateTags: https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CreateTags.html
    Error codes (FilterLimitExceeded): https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html
    """

    def install(self, client: Any) -> None:
        self._on(client, "provide-client-params.ec2.DescribeInstances", self._describe)
        self._on(client, "provide-client-params.ec2.TerminateInstances", self._terminate)
        self._on(client, "provide-client-params.ec2.CreateTags", self._tag)

    def _describe(self, params: Mapping[str, Any], **_: Any) -> None:
        op = "DescribeInstances"
        limit = params.get("MaxResults")
        if limit is not None:
            if params.get("InstanceIds"):
                refuse(
                    op,
                    "InvalidParameterCombination",
                    "The parameter instancesSet cannot be used with the parameter maxResults",
                )
            low, high = DESCRIBE_MAX_RESULTS
            if not low <= int(limit) <= high:
                refuse(op, "InvalidParameterValue", f"MaxResults must be between {low} and {high}")
        values = sum(len(f.get("Values") or []) for f in params.get("Filters") or [])
        if values > MAX_FILTER_VALUES:
            refuse(
                op,
                "FilterLimitExceeded",
                f"The maximum number of filter values specified on a single call is {MAX_FILTER_VALUES}",
            )

    def _terminate(self, params: Mapping[str, Any], **_: Any) -> None:
        if len(params.get("InstanceIds") or []) > MAX_IDS:
            refuse("TerminateInstances", "InvalidParameterValue", f"At most {MAX_IDS} instance ids per call")

    def _tag(self, params: Mapping[str, Any], **_: Any) -> None:
        if len(params.get("Resources") or []) > MAX_IDS:
            refuse("CreateTags", "InvalidParameterValue", f"At most {MAX_IDS} resource ids per call")


# --------------------------------------------------------------------------------- eventual consistency


def _not_found(operation: str, ids: list[str]) -> NoReturn:
    if len(ids) == 1:
        refuse(operation, "InvalidInstanceID.NotFound", f"The instance ID '{ids[0]}' does not exist")
    refuse(operation, "InvalidInstanceID.NotFound", f"The instance IDs '{', '.join(ids)}' do not exist")


@dataclass
class EventualConsistency(Rule):
    """An instance just launched by CreateFleet or RunInstances is not visible yet: DescribeInstances by
    filter leaves it out, and DescribeInstances by id, TerminateInstances and CreateTags naming it fail
    with ``InvalidInstanceID.NotFound``.

    It stays hidden from the first ``hidden_calls`` calls that would have shown or touched it (``None``:
    no count) and, with a ``clock``, until ``lag_seconds`` after its launch on that clock; it shows once
    either has run out (with both ``None`` it never hides). :meth:`follow` attaches a test's fake clock
    later, so time a test moves forward also makes instances visible. :meth:`settle` makes everything
    launched so far visible.

    Eventual consistency in the EC2 API: https://docs.aws.amazon.com/ec2/latest/devguide/eventual-consistency.html
    """

    hidden_calls: int | None = 1
    clock: Callable[[], float] | None = None
    lag_seconds: float = 2.0
    _remaining: dict[str, int] = field(default_factory=dict, init=False)
    _visible_at: dict[str, float] = field(default_factory=dict, init=False)
    hidden: list[str] = field(default_factory=list, init=False)  # every id hidden from a call, in order

    def install(self, client: Any) -> None:
        self._on(client, "after-call.ec2.CreateFleet", self._fleet_launched)
        self._on(client, "after-call.ec2.RunInstances", self._instances_launched)
        self._on(client, "provide-client-params.ec2.DescribeInstances", self._describe_by_id)
        self._on(client, "after-call.ec2.DescribeInstances", self._describe_by_filter)
        self._on(client, "provide-client-params.ec2.TerminateInstances", self._terminate)
        self._on(client, "provide-client-params.ec2.CreateTags", self._tag)

    def follow(self, clock: Callable[[], float], lag_seconds: float | None = None) -> None:
        """From now on, instances also show once ``lag_seconds`` have passed on ``clock``."""
        self.clock = clock
        if lag_seconds is not None:
            self.lag_seconds = lag_seconds
        now = clock()
        for instance_id in self._remaining:
            self._visible_at.setdefault(instance_id, now + self.lag_seconds)

    def settle(self) -> None:
        """Everything launched so far becomes visible (as it does after a few seconds in EC2)."""
        self._remaining.clear()
        self._visible_at.clear()

    def _launched(self, ids: Iterable[str]) -> None:
        for instance_id in ids:
            if instance_id in self._remaining or instance_id in self._visible_at:
                continue
            if self.hidden_calls is None and self.clock is None:
                continue
            if self.hidden_calls is not None:
                if self.hidden_calls <= 0:
                    continue
                self._remaining[instance_id] = self.hidden_calls
            if self.clock is not None:
                self._visible_at[instance_id] = self.clock() + self.lag_seconds

    def _fleet_launched(self, parsed: Mapping[str, Any], **_: Any) -> None:
        self._launched(i for entry in parsed.get("Instances") or [] for i in entry.get("InstanceIds") or [])

    def _instances_launched(self, parsed: Mapping[str, Any], **_: Any) -> None:
        self._launched(str(entry["InstanceId"]) for entry in parsed.get("Instances") or [])

    def _forget(self, instance_id: str) -> None:
        self._remaining.pop(instance_id, None)
        self._visible_at.pop(instance_id, None)

    def _is_hidden(self, instance_id: str) -> bool:
        counted = instance_id in self._remaining
        timed = instance_id in self._visible_at
        if not counted and not timed:
            return False
        if timed and self.clock is not None and self.clock() >= self._visible_at[instance_id]:
            self._forget(instance_id)
            return False
        return True

    def _hide(self, ids: Iterable[str]) -> list[str]:
        """The ids among ``ids`` still hidden; each counts one call against its lag."""
        hidden = [i for i in dict.fromkeys(ids) if self._is_hidden(i)]
        for instance_id in hidden:
            self.hidden.append(instance_id)
            if instance_id in self._remaining:
                self._remaining[instance_id] -= 1
                if self._remaining[instance_id] <= 0:
                    self._forget(instance_id)
        return hidden

    def _describe_by_id(self, params: Mapping[str, Any], **_: Any) -> None:
        hidden = self._hide(str(i) for i in params.get("InstanceIds") or [])
        if hidden:
            _not_found("DescribeInstances", hidden)

    def _describe_by_filter(self, parsed: dict[str, Any], **_: Any) -> None:
        reservations = parsed.get("Reservations")
        if not reservations:
            return
        shown = [str(i["InstanceId"]) for r in reservations for i in r.get("Instances") or []]
        hidden = set(self._hide(shown))
        if not hidden:
            return
        kept = []
        for reservation in reservations:
            reservation["Instances"] = [
                i for i in reservation.get("Instances") or [] if i["InstanceId"] not in hidden
            ]
            if reservation["Instances"]:
                kept.append(reservation)
        parsed["Reservations"] = kept

    def _terminate(self, params: Mapping[str, Any], **_: Any) -> None:
        hidden = self._hide(str(i) for i in params.get("InstanceIds") or [])
        if hidden:
            _not_found("TerminateInstances", hidden)

    def _tag(self, params: Mapping[str, Any], **_: Any) -> None:
        hidden = self._hide(str(r) for r in params.get("Resources") or [] if str(r).startswith("i-"))
        if hidden:
            _not_found("CreateTags", hidden)


# ------------------------------------------------------------------------------------------- bundle


RULES: dict[str, Callable[[], Rule]] = {
    "TagRestrictions": TagRestrictions,
    "FleetTagging": FleetTagging,
    "FleetRequestLimits": FleetRequestLimits,
    "ClientTokenIdempotency": ClientTokenIdempotency,
    "LaunchTemplateRules": LaunchTemplateRules,
    "ReservationTargets": ReservationTargets,
    "LaunchTemplateFieldRules": LaunchTemplateFieldRules,
    "InstanceCallLimits": InstanceCallLimits,
    "EventualConsistency": EventualConsistency,
}


@dataclass
class StrictEc2:
    """Every rule in :data:`RULES` except those named in ``skip``, installed together on EC2 clients and
    sharing their state across clients (EC2's consistency is account-wide, not per client)."""

    skip: frozenset[str] = frozenset()
    rules: dict[str, Rule] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = set(self.skip) - set(RULES)
        if unknown:
            raise ValueError(f"unknown strict EC2 rules: {', '.join(sorted(unknown))}")
        for name, make in RULES.items():
            if name not in self.skip and name not in self.rules:
                self.rules[name] = make()

    def install(self, client: Any) -> None:
        for rule in self.rules.values():
            rule.install(client)

    def uninstall(self) -> None:
        for rule in self.rules.values():
            rule.uninstall()

    def exempt(self, client: Any) -> None:
        """Lift the rules off one client: a test's own observer, which should see EC2 as it is without
        using up the lag the code under test is meant to meet."""
        for rule in self.rules.values():
            rule.uninstall(client)

    @property
    def consistency(self) -> EventualConsistency:
        rule = self.rules["EventualConsistency"]
        assert isinstance(rule, EventualConsistency)
        return rule


__all__ = [
    "RULES",
    "ClientTokenIdempotency",
    "EventualConsistency",
    "FleetRequestLimits",
    "FleetTagging",
    "InstanceCallLimits",
    "LaunchTemplateFieldRules",
    "LaunchTemplateRules",
    "ReservationTargets",
    "Rule",
    "StrictEc2",
    "TagRestrictions",
    "check_tags",
    "refuse",
]
