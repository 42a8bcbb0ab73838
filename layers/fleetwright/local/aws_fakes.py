"""Stand-ins for what moto does not emulate, shared by the local sandbox and the tests: a spot market,
the public EKS AMI parameters in SSM, capacity reservations and an instance's ``pending`` phase; and the
discovery-tagged network every sandbox, test and benchmark account starts from. Each hooks into boto3's
event system or moto's backend, so the code under test makes its real calls. ``thread_safe_moto`` makes
moto's subnet address pool safe for concurrent launches."""

from __future__ import annotations

import datetime
import fnmatch
import functools
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from botocore.awsrequest import AWSResponse  # type: ignore[import-untyped]
from moto.core import DEFAULT_ACCOUNT_ID  # type: ignore[attr-defined]
from moto.core.botocore_stubber import MockRawResponse


def _http(status: int = 200, body: str = "") -> AWSResponse:
    return AWSResponse("https://fake", status, {}, MockRawResponse(body))


@dataclass
class SpotMarket:
    """Answers DescribeSpotPriceHistory from a table instead of moto's flat 0.00001.

    Each (type, zone) gets ``price(type, zone)``; an hour-old entry with a different price precedes it,
    so only code that keeps the latest entry gets it right.
    """

    offerings: Mapping[str, frozenset[str]]
    price: Callable[[str, str], float]
    calls: int = 0

    def install(self, ec2: Any) -> None:
        ec2.meta.events.register_first("before-call.ec2.DescribeSpotPriceHistory", self._answer)

    def _answer(self, params: Mapping[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        self.calls += 1
        now = datetime.datetime.now(datetime.UTC)
        history = []
        for name, zones in sorted(self.offerings.items()):
            for zone in sorted(zones):
                current = self.price(name, zone)
                history.append(self._entry(name, zone, current * 3, now - datetime.timedelta(hours=1)))
                history.append(self._entry(name, zone, current, now))
        return _http(), {"SpotPriceHistory": history}

    @staticmethod
    def _entry(name: str, zone: str, price: float, when: datetime.datetime) -> dict[str, Any]:
        return {
            "InstanceType": name,
            "AvailabilityZone": zone,
            "ProductDescription": "Linux/UNIX",
            "SpotPrice": f"{price:.6f}",
            "Timestamp": when,
        }


def seed_discovery_network(ec2: Any, cluster: str, zones: Sequence[str], *, prefix: int = 20) -> list[str]:
    """One VPC (10.0.0.0/16) with a subnet of size ``/prefix`` per zone and a security group
    ``<cluster>-nodes``, all tagged ``karpenter.sh/discovery: <cluster>`` as Karpenter's getting-started
    guide tags them; returns the subnet ids in the order of ``zones``."""
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    tags = [{"Key": "karpenter.sh/discovery", "Value": cluster}]
    step = 2 ** (24 - prefix)  # third-octet stride of one subnet
    subnets = [
        ec2.create_subnet(
            VpcId=vpc,
            CidrBlock=f"10.0.{i * step}.0/{prefix}",
            AvailabilityZone=zone,
            TagSpecifications=[{"ResourceType": "subnet", "Tags": tags}],
        )["Subnet"]["SubnetId"]
        for i, zone in enumerate(zones)
    ]
    ec2.create_security_group(
        GroupName=f"{cluster}-nodes",
        Description="nodes",
        VpcId=vpc,
        TagSpecifications=[{"ResourceType": "security-group", "Tags": tags}],
    )
    return [str(s) for s in subnets]


_SUBNET_ADDRESSES = threading.RLock()


def thread_safe_moto() -> None:
    """Serialize moto's handing out of subnet addresses (idempotent).

    moto draws a subnet's private addresses from one generator shared by every request, so two launches in
    the same subnet at once (the provisioner's CreateFleet calls run in a thread pool) can fail with
    ``ValueError: generator already executing``, an error EC2 never gives. Taking, requesting and freeing
    an address then hold one lock, so concurrent launches behave as they do against EC2.
    """
    from moto.ec2.models.subnets import Subnet

    for name in ("get_available_subnet_ip", "request_ip", "del_subnet_ip"):
        method = getattr(Subnet, name)
        if getattr(method, "_fleetwright_locked", False):
            continue
        setattr(Subnet, name, _locked(method))


def _locked(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def locked(*args: Any, **kwargs: Any) -> Any:
        with _SUBNET_ADDRESSES:
            return method(*args, **kwargs)

    locked._fleetwright_locked = True  # type: ignore[attr-defined]
    return locked


class _BootingState:
    """An instance's state that reads ``pending`` until ``running_at`` on ``clock``, then ``running``; once
    moto sets a state (stop, terminate), that state holds. Copies (moto's "previous state") are plain."""

    def __init__(self, clock: Callable[[], float], running_at: float) -> None:
        self._clock = clock
        self._running_at = running_at
        self._name: str | None = None
        self._code: int | None = None

    def _booted(self) -> bool:
        return self._clock() >= self._running_at

    @property
    def name(self) -> str:
        if self._name is not None:
            return self._name
        return "running" if self._booted() else "pending"

    @name.setter
    def name(self, value: str) -> None:
        self._name = value

    @property
    def code(self) -> int:
        if self._code is not None:
            return self._code
        return 16 if self._booted() else 0

    @code.setter
    def code(self, value: int) -> None:
        self._code = value

    def __copy__(self) -> Any:
        from moto.ec2.models.instances import InstanceState

        return InstanceState(self.name, self.code)


_BOOTS: list[InstanceBoot] = []
_BOOTS_LOCK = threading.Lock()


@dataclass
class InstanceBoot:
    """EC2's ``pending`` phase, which moto skips: while installed, every instance moto creates (RunInstances,
    CreateFleet) is ``pending`` (code 0) for ``boot_seconds`` on ``clock``, then ``running`` (16), in
    DescribeInstances, its filters and every other answer, as EC2 shows a booting instance.

    It patches moto's instance model, not a boto3 client, so it holds for every client of this process's
    moto: ``mock_aws`` and a ``ThreadedMotoServer`` served over HTTP alike (a moto_server in another process
    is out of its reach). Installs nest; the latest one installed decides. ``with InstanceBoot(...):``
    installs it for the block.
    https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-lifecycle.html
    """

    boot_seconds: float
    clock: Callable[[], float] = time.monotonic

    def install(self) -> InstanceBoot:
        _patch_moto_instances()
        with _BOOTS_LOCK:
            _BOOTS.append(self)
        return self

    def uninstall(self) -> None:
        with _BOOTS_LOCK:
            if self in _BOOTS:
                _BOOTS.remove(self)

    def __enter__(self) -> InstanceBoot:
        return self.install()

    def __exit__(self, *_: object) -> None:
        self.uninstall()

    def state(self) -> _BootingState:
        """The state of an instance created now."""
        return _BootingState(self.clock, self.clock() + self.boot_seconds)


def _patch_moto_instances() -> None:
    """Give each instance moto creates the installed :class:`InstanceBoot`'s state (idempotent)."""
    from moto.ec2.models.instances import Instance

    original = Instance.__init__
    if getattr(original, "_fleetwright_boot", False):
        return

    @functools.wraps(original)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        with _BOOTS_LOCK:
            boot = _BOOTS[-1] if _BOOTS else None
        if boot is not None:
            self._state = boot.state()

    init._fleetwright_boot = True  # type: ignore[attr-defined]
    Instance.__init__ = init  # type: ignore[method-assign]


def seed_ssm_parameter(name: str, value: str, region: str = "us-east-1") -> None:
    """Create a parameter under ``/aws/`` (which PutParameter refuses) in moto's SSM backend."""
    from moto.ssm.models import Parameter, ssm_backends

    backend = ssm_backends[DEFAULT_ACCOUNT_ID][region]
    backend._parameters[name].append(
        Parameter(  # type: ignore[abstract]
            account_id=DEFAULT_ACCOUNT_ID,
            name=name,
            value=value,
            parameter_type="String",
            description=None,
            allowed_pattern=None,
            keyid=None,
            last_modified_date=datetime.datetime.now(),
            version=1,
            data_type="aws:ec2:image",
        )
    )


def seed_eks_amis(ec2: Any, k8s_version: str, region: str = "us-east-1") -> dict[tuple[str, str], str]:
    """Register EKS AL2023 images in moto and publish them under their public SSM parameter names
    (``alias al2023@latest``); returns ``{(arch, variant): image id}``."""
    from fleetwright.aws.amis import alias_parameters

    ids: dict[tuple[str, str], str] = {}
    for parameter, arch, variant in alias_parameters("al2023@latest", k8s_version):
        image = ec2.register_image(
            Name=f"amazon-eks-node-al2023-{arch}-{variant}-{k8s_version}-v20261101",
            Architecture="x86_64" if arch == "amd64" else "arm64",
            RootDeviceName="/dev/xvda",
        )["ImageId"]
        seed_ssm_parameter(parameter, str(image), region)
        ids[(arch, variant)] = str(image)
    return ids


_RESERVATION_FILTERS = frozenset(
    {
        "state",
        "owner-id",
        "instance-match-criteria",
        "instance-type",
        "availability-zone",
        "reservation-type",
        "tag-key",
    }
)


def _ec2_error(operation: str, code: str, message: str) -> Exception:
    from botocore.exceptions import ClientError  # type: ignore[import-untyped]

    error: Exception = ClientError(
        {"Error": {"Code": code, "Message": message}, "ResponseMetadata": {"HTTPStatusCode": 400}},
        operation,
    )
    return error


@dataclass
class CapacityReservations:
    """EC2 capacity reservations, which moto lacks: DescribeCapacityReservations and launches into them.

    DescribeCapacityReservations answers from ``reservations`` (EC2's response shape) with its filters
    (``state``, ``owner-id``, ``instance-match-criteria``, ``instance-type``, ``availability-zone``,
    ``reservation-type``, ``tag:<key>``, ``tag-key``); ``CapacityReservationIds`` naming an unknown id
    is refused with ``InvalidCapacityReservationId.NotFound``, and cannot be combined with
    ``MaxResults`` (1-1000). A launch template whose ``CapacityReservationSpecification`` targets a
    reservation launches only into it: an override of another type or zone, a reservation that is not
    ``active``, or a ``capacity-block`` market type for an ordinary reservation come back as CreateFleet
    ``Errors``, and a full one as ``ReservationCapacityExceeded``; each launch uses one of its
    ``AvailableInstanceCount``. DescribeInstances shows the reservation of instances launched into one
    (``CapacityReservationId``; ``InstanceLifecycle`` ``capacity-block`` for Capacity Blocks) until
    :meth:`end` ends it, after which they run on as on-demand instances.

    DescribeCapacityReservations:
    https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeCapacityReservations.html
    CapacityReservation: https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CapacityReservation.html
    LaunchTemplateCapacityReservationSpecificationRequest:
    https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_LaunchTemplateCapacityReservationSpecificationRequest.html
    """

    owner_id: str = DEFAULT_ACCOUNT_ID
    reservations: dict[str, dict[str, Any]] = field(default_factory=dict)
    targets: dict[str, tuple[str, str]] = field(default_factory=dict)  # template → (reservation, market)
    placed: dict[str, str] = field(default_factory=dict)  # instance id → reservation id
    calls: int = 0

    def add(
        self,
        instance_type: str,
        zone: str,
        count: int,
        *,
        tags: Mapping[str, str] | None = None,
        match: str = "targeted",
        reservation_type: str | None = None,
        end: datetime.datetime | None = None,
        state: str = "active",
        interruptible: bool = False,
        owner_id: str | None = None,
    ) -> str:
        """A reservation of ``count`` instances; ``reservation_type`` None leaves the field out, as EC2
        does for ordinary reservations. Returns its id."""
        rid = f"cr-{len(self.reservations) + 1:017x}"
        entry: dict[str, Any] = {
            "CapacityReservationId": rid,
            "OwnerId": owner_id or self.owner_id,
            "InstanceType": instance_type,
            "InstancePlatform": "Linux/UNIX",
            "AvailabilityZone": zone,
            "Tenancy": "default",
            "TotalInstanceCount": count,
            "AvailableInstanceCount": count,
            "State": state,
            "InstanceMatchCriteria": match,
            "EndDateType": "limited" if end else "unlimited",
            "Tags": [{"Key": k, "Value": v} for k, v in sorted((tags or {}).items())],
            "Interruptible": interruptible,
        }
        if end is not None:
            entry["EndDate"] = end
        if reservation_type is not None:
            entry["ReservationType"] = reservation_type
        self.reservations[rid] = entry
        return rid

    def end(self, reservation_id: str) -> None:
        """The reservation ends (``expired``): its instances keep running as on-demand instances."""
        self.reservations[reservation_id]["State"] = "expired"
        for instance_id in [i for i, r in self.placed.items() if r == reservation_id]:
            del self.placed[instance_id]

    def install(self, ec2: Any) -> None:
        events = ec2.meta.events
        events.register_first("provide-client-params.ec2.DescribeCapacityReservations", self._describe)
        events.register_first("before-call.ec2.DescribeCapacityReservations", self._answer)
        events.register("provide-client-params.ec2.CreateLaunchTemplate", self._template)
        events.register_first("provide-client-params.ec2.CreateFleet", self._fleet_request)
        events.register_first("before-call.ec2.CreateFleet", self._fleet_short_circuit)
        events.register("after-call.ec2.CreateFleet", self._fleet_answer)
        events.register("after-call.ec2.DescribeInstances", self._instances)

    # -- DescribeCapacityReservations

    def _answer(self, context: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        return _http(), {"CapacityReservations": context.pop("capacity_reservations", [])}

    def _describe(self, params: Mapping[str, Any], context: dict[str, Any], **_: Any) -> None:
        op = "DescribeCapacityReservations"
        self.calls += 1
        ids = list(params.get("CapacityReservationIds") or [])
        limit = params.get("MaxResults")
        if ids and limit is not None:
            raise _ec2_error(op, "InvalidParameterCombination", "MaxResults cannot be used with ids")
        if limit is not None and not 1 <= int(limit) <= 1000:
            raise _ec2_error(op, "InvalidParameterValue", "MaxResults must be between 1 and 1000")
        unknown = [i for i in ids if i not in self.reservations]
        if unknown:
            raise _ec2_error(
                op,
                "InvalidCapacityReservationId.NotFound",
                f"The capacity reservation ID '{unknown[0]}' does not exist",
            )
        found = [self.reservations[i] for i in ids] if ids else list(self.reservations.values())
        for item in params.get("Filters") or []:
            name = str(item["Name"])
            values = {str(v) for v in item.get("Values") or []}
            if name not in _RESERVATION_FILTERS and not name.startswith("tag:"):
                raise _ec2_error(op, "InvalidParameterValue", f"The filter '{name}' is invalid")
            found = [r for r in found if self._matches(r, name, values)]
        context["capacity_reservations"] = [dict(r) for r in found]

    @staticmethod
    def _matches(reservation: Mapping[str, Any], name: str, values: set[str]) -> bool:
        tags = {t["Key"]: t["Value"] for t in reservation.get("Tags") or []}
        if name.startswith("tag:"):
            key = name[len("tag:") :]
            return key in tags and any(fnmatch.fnmatchcase(tags[key], v) for v in values)
        if name == "tag-key":
            return any(k in values for k in tags)
        field_name = {
            "state": "State",
            "owner-id": "OwnerId",
            "instance-match-criteria": "InstanceMatchCriteria",
            "instance-type": "InstanceType",
            "availability-zone": "AvailabilityZone",
            "reservation-type": "ReservationType",
        }[name]
        value = reservation.get(field_name, "default" if field_name == "ReservationType" else "")
        return str(value) in values

    # -- launches

    def _template(self, params: Mapping[str, Any], **_: Any) -> None:
        data = params.get("LaunchTemplateData") or {}
        target = ((data.get("CapacityReservationSpecification") or {}).get("CapacityReservationTarget")) or {}
        rid = target.get("CapacityReservationId")
        if rid:
            market = str((data.get("InstanceMarketOptions") or {}).get("MarketType", ""))
            self.targets[str(params["LaunchTemplateName"])] = (str(rid), market)

    def _refusal(self, rid: str, market: str, instance_type: str, zone: str) -> tuple[str, str] | None:
        reservation = self.reservations.get(rid)
        if reservation is None or reservation["State"] != "active":
            return (
                "InvalidCapacityReservationId.NotFound",
                f"The capacity reservation ID '{rid}' does not exist",
            )
        if reservation["InstanceType"] != instance_type or reservation["AvailabilityZone"] != zone:
            return (
                "InvalidParameterValue",
                f"Capacity reservation {rid} is for {reservation['InstanceType']} in "
                f"{reservation['AvailabilityZone']}, not {instance_type} in {zone}",
            )
        block = reservation.get("ReservationType") == "capacity-block"
        if block != (market == "capacity-block"):
            return "InvalidParameterValue", f"MarketType {market or 'none'} does not match reservation {rid}"
        if int(reservation["AvailableInstanceCount"]) <= 0:
            return "ReservationCapacityExceeded", f"Capacity reservation {rid} has no available capacity"
        return None

    def _fleet_request(self, params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        errors: list[dict[str, Any]] = []
        for config in params.get("LaunchTemplateConfigs") or []:
            name = str(config["LaunchTemplateSpecification"].get("LaunchTemplateName", ""))
            if name not in self.targets:
                continue
            rid, market = self.targets[name]
            kept = []
            for override in config["Overrides"]:
                refusal = self._refusal(rid, market, override["InstanceType"], override["AvailabilityZone"])
                if refusal is None:
                    kept.append(override)
                    continue
                errors.append(
                    {
                        "LaunchTemplateAndOverrides": {
                            "LaunchTemplateSpecification": config["LaunchTemplateSpecification"],
                            "Overrides": override,
                        },
                        "Lifecycle": "on-demand",
                        "ErrorCode": refusal[0],
                        "ErrorMessage": refusal[1],
                    }
                )
            config["Overrides"] = kept
        params["LaunchTemplateConfigs"] = [c for c in params["LaunchTemplateConfigs"] if c["Overrides"]]
        target = params["TargetCapacitySpecification"]
        if target["DefaultTargetCapacityType"] in ("capacity-block", "reserved-capacity"):
            # moto launches only spot and on-demand; reserved capacity is on-demand capacity held apart.
            target["DefaultTargetCapacityType"] = "on-demand"
            params.pop("ReservedCapacityOptions", None)
        context["reservation_errors"] = errors
        context["reservation_nothing_left"] = not params["LaunchTemplateConfigs"]

    def _fleet_short_circuit(
        self, context: dict[str, Any], **_: Any
    ) -> tuple[AWSResponse, dict[str, Any]] | None:
        if not context.get("reservation_nothing_left"):
            return None
        context["reservation_answered"] = True
        return _http(), {
            "FleetId": "fleet-reserved",
            "Instances": [],
            "Errors": context["reservation_errors"],
        }

    def _fleet_answer(self, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        if context.get("reservation_answered"):
            return
        for entry in parsed.get("Instances") or []:
            spec = entry.get("LaunchTemplateAndOverrides") or {}
            name = str((spec.get("LaunchTemplateSpecification") or {}).get("LaunchTemplateName", ""))
            if name not in self.targets:
                continue
            rid = self.targets[name][0]
            for instance_id in entry.get("InstanceIds") or []:
                self.reservations[rid]["AvailableInstanceCount"] -= 1
                self.placed[str(instance_id)] = rid
        if context.get("reservation_errors"):
            parsed.setdefault("Errors", []).extend(context["reservation_errors"])

    def _instances(self, parsed: dict[str, Any], **_: Any) -> None:
        for group in parsed.get("Reservations") or []:
            for instance in group.get("Instances") or []:
                rid = self.placed.get(str(instance.get("InstanceId", "")))
                if rid is None:
                    continue
                instance["CapacityReservationId"] = rid
                if self.reservations[rid].get("ReservationType") == "capacity-block":
                    instance["InstanceLifecycle"] = "capacity-block"


def seed_windows_amis(ec2: Any, k8s_version: str, region: str = "us-east-1") -> dict[str, str]:
    """Register EKS-optimized Windows Server Core images (2019, 2022, and 2025 from Kubernetes 1.35) and
    publish them under their public SSM parameter names; returns ``{family: image id}``."""
    from fleetwright.aws.amis import WINDOWS_2025_MIN_MINOR, windows_alias_parameter
    from fleetwright.catalog.os_family import WINDOWS_RELEASES

    ids: dict[str, str] = {}
    minor = int(k8s_version.partition(".")[2] or 0)
    for family, (release, _) in WINDOWS_RELEASES.items():
        if release == "2025" and minor < WINDOWS_2025_MIN_MINOR:
            continue
        image = ec2.register_image(
            Name=f"Windows_Server-{release}-English-Core-EKS_Optimized-{k8s_version}-2026.11.01",
            Architecture="x86_64",
            RootDeviceName="/dev/sda1",
        )["ImageId"]
        seed_ssm_parameter(windows_alias_parameter(family, k8s_version), str(image), region)
        ids[family] = str(image)
    return ids


@dataclass
class PlacementGroups:
    """Answers DescribePlacementGroups (moto lacks it) from ``groups``, as the API reference says EC2 does.

    ``GroupIds`` and ``GroupNames`` select groups, and a name or id that matches none is refused with
    ``InvalidPlacementGroup.Unknown``; filters ``state``, ``strategy``, ``group-name`` and
    ``spread-level`` narrow the answer; no selection lists every group. Each group is a dict of the
    response's fields (``GroupName``, ``GroupId``, ``Strategy``, ``State``, ``PartitionCount`` …).
    https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribePlacementGroups.html
    """

    groups: list[dict[str, Any]]
    calls: int = 0
    _asked: dict[str, Any] = field(default_factory=dict, repr=False)

    def install(self, ec2: Any) -> None:
        # before-call sees the serialized request; the parameters as sent are kept one step earlier.
        ec2.meta.events.register_first("provide-client-params.ec2.DescribePlacementGroups", self._keep)
        ec2.meta.events.register_first("before-call.ec2.DescribePlacementGroups", self._answer)

    def _keep(self, params: Mapping[str, Any], **_: Any) -> None:
        self._asked = dict(params)

    def add(
        self, name: str, strategy: str, *, partitions: int = 0, state: str = "available", group_id: str = ""
    ) -> str:
        """Create a group; returns its id."""
        group_id = group_id or f"pg-{len(self.groups) + 1:017x}"
        group: dict[str, Any] = {"GroupName": name, "GroupId": group_id, "Strategy": strategy, "State": state}
        if strategy == "partition":
            group["PartitionCount"] = partitions or 2
        self.groups.append(group)
        return group_id

    def _answer(self, **_: Any) -> tuple[AWSResponse, dict[str, Any]]:
        self.calls += 1
        params = self._asked
        found = list(self.groups)
        for field_name, key in (("GroupIds", "GroupId"), ("GroupNames", "GroupName")):
            wanted = list(params.get(field_name) or [])
            if not wanted:
                continue
            unknown = [value for value in wanted if value not in {g[key] for g in self.groups}]
            if unknown:
                body = (
                    "<Response><Errors><Error><Code>InvalidPlacementGroup.Unknown</Code><Message>"
                    f"The Placement Group '{unknown[0]}' is unknown.</Message></Error></Errors></Response>"
                )
                return _http(400, body), {
                    "Error": {
                        "Code": "InvalidPlacementGroup.Unknown",
                        "Message": f"The Placement Group '{unknown[0]}' is unknown.",
                    },
                    "ResponseMetadata": {"HTTPStatusCode": 400},
                }
            found = [g for g in found if g[key] in wanted]
        filters = {
            "state": "State",
            "strategy": "Strategy",
            "group-name": "GroupName",
            "spread-level": "SpreadLevel",
        }
        for entry in params.get("Filters") or []:
            attribute = filters.get(str(entry.get("Name")))
            if attribute is not None:
                found = [g for g in found if str(g.get(attribute, "")) in entry.get("Values", [])]
        return _http(), {"PlacementGroups": [dict(g) for g in found]}
