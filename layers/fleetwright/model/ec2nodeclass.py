"""EC2NodeClass (``karpenter.k8s.aws/v1``): how Fleetwright launches EC2 instances for a NodePool.

Also home of the plumbing every Karpenter document model shares (base model, object metadata, label,
quantity and duration checks), because ``nodepool`` builds on this module and not the other way round.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from fleetwright.model.kubelet import KubeletOverrides
from fleetwright.model.quantity import NEVER, QuantityError, parse_duration, parse_quantity
from fleetwright.model.resources import parse_resources

EC2NODECLASS_API_VERSION: Final = "karpenter.k8s.aws/v1"
EC2NODECLASS_KIND: Final = "EC2NodeClass"


class KarpenterModel(BaseModel):
    """Base of every Karpenter spec model: camelCase YAML names, unknown fields rejected, strict types."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True, strict=True
    )
    # Fields an older API version had at this place and v1 moved: the hint shown for "unknown field".
    moved_fields: ClassVar[dict[str, str]] = {}


class KarpenterDocument(KarpenterModel):
    """A top-level Karpenter object: ``status`` (written by a controller) is ignored, not rejected."""

    @model_validator(mode="before")
    @classmethod
    def _drop_status(cls, data: Any) -> Any:
        if isinstance(data, dict) and "status" in data:
            return {key: value for key, value in data.items() if key != "status"}
        return data


# --- names, labels, quantities, durations ----------------------------------------------------------

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_GO_DURATION = re.compile(r"^([0-9]+(s|m|h))+$")


def _object_name(value: str) -> str:
    if not value or len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
        raise ValueError(
            f"invalid name {value!r}: use lowercase letters, digits, '-' and '.', "
            "starting and ending with a letter or digit"
        )
    return value


def check_label_key(key: str) -> str | None:
    """Why ``key`` is not a valid label/taint key (``prefix/name``), or None when it is."""
    prefix, _, name = key.rpartition("/")
    if "/" in key and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return f"invalid key {key!r}: the prefix before '/' must be a lowercase DNS subdomain"
    if not name or len(name) > 63 or not _LABEL_NAME.match(name):
        return (
            f"invalid key {key!r}: the name must be 1-63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit"
        )
    return None


def check_label_value(value: str) -> str | None:
    """Why ``value`` is not a valid label value, or None when it is."""
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        return (
            f"invalid value {value!r}: use at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit"
        )
    return None


def _quantity_text(value: Any) -> Any:
    """Accept YAML numbers for quantities (``cpu: 4``) and keep the text; reject non-quantities."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return value  # the str validator reports the wrong type
    try:
        parse_quantity(value)
    except QuantityError as exc:
        raise ValueError(str(exc)) from None
    return value if isinstance(value, str) else str(value)


def _duration(value: str, *, never: bool) -> str:
    if value == NEVER:
        if never:
            return value
        raise ValueError("'Never' is not allowed here; give a duration such as 30s, 10m or 48h")
    if not _GO_DURATION.match(value):
        allowed = "a duration such as 30s, 10m, 1h30m, 720h" + (" or Never" if never else "")
        raise ValueError(f"invalid duration {value!r}: expected {allowed} (whole s, m and h units)")
    parse_duration(value)
    return value


def _duration_or_never(value: str) -> str:
    return _duration(value, never=True)


def _duration_only(value: str) -> str:
    return _duration(value, never=False)


def _not_empty(value: str) -> str:
    if not value:
        raise ValueError("may not be empty")
    return value


Quantity = Annotated[str, BeforeValidator(_quantity_text)]
"""A Kubernetes quantity (``500m``, ``4``, ``16Gi``), kept as text and checked with ``parse_quantity``."""
DurationOrNever = Annotated[str, AfterValidator(_duration_or_never)]
"""A Go duration in whole s/m/h units (``720h``, ``1h30m``) or ``Never``."""
Duration = Annotated[str, AfterValidator(_duration_only)]
"""A Go duration in whole s/m/h units (``30s``, ``48h``)."""
NonEmptyStr = Annotated[str, AfterValidator(_not_empty)]


class ObjectMeta(BaseModel):
    """``metadata``: name is required; namespace, labels and annotations are kept; anything the API
    server writes (uid, resourceVersion, managedFields, ...) is ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True, strict=True)

    name: Annotated[str, AfterValidator(_object_name)]
    namespace: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


# --- selector terms --------------------------------------------------------------------------------


def _selector_tags(tags: dict[str, str]) -> dict[str, str]:
    if not tags:
        raise ValueError("tags may not be empty")
    if len(tags) > 20:
        raise ValueError(f"at most 20 tags per term, got {len(tags)}")
    empty = [key for key, value in tags.items() if not key or not value]
    if empty:
        raise ValueError(f"empty tag keys or values are not supported ({', '.join(map(repr, empty))})")
    return tags


SelectorTags = Annotated[dict[str, str], AfterValidator(_selector_tags)]
"""Tags a resource must carry; ``"*"`` as a value matches any value of that key."""


def _pattern(regex: str, what: str) -> Any:
    compiled = re.compile(regex)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise ValueError(f"invalid {what} {value!r}")
        return value

    return AfterValidator(check)


ALIAS_FAMILIES = {
    "al2": "AL2",
    "al2023": "AL2023",
    "bottlerocket": "Bottlerocket",
    "windows2019": "Windows2019",
    "windows2022": "Windows2022",
    "windows2025": "Windows2025",
}
AMI_FAMILIES = ("AL2", "AL2023", "Bottlerocket", "Windows2019", "Windows2022", "Windows2025", "Custom")
AmiFamily = Literal["AL2", "AL2023", "Bottlerocket", "Windows2019", "Windows2022", "Windows2025", "Custom"]


class AMISelectorTerm(KarpenterModel):
    """One way to pick AMIs; terms are ORed, the fields inside a term ANDed."""

    alias: str | None = None
    id: Annotated[str, _pattern(r"ami-[0-9a-z]+", "AMI id")] | None = None
    name: str | None = None
    owner: str | None = None
    tags: SelectorTags | None = None
    ssm_parameter: NonEmptyStr | None = None

    @field_validator("alias")
    @classmethod
    def _alias(cls, value: str | None) -> str | None:
        if value is None:
            return None
        family, sep, version = value.partition("@")
        if len(value) > 30 or not sep or not family.isalnum() or not version:
            raise ValueError(f"alias {value!r} must look like family@version, e.g. al2023@latest")
        if family not in ALIAS_FAMILIES:
            raise ValueError(f"alias family {family!r} is not one of {', '.join(ALIAS_FAMILIES)}")
        if family.startswith("windows") and version != "latest":
            raise ValueError(f"windows aliases only support the version 'latest', not {version!r}")
        return value

    @model_validator(mode="after")
    def _exclusive(self) -> AMISelectorTerm:
        fields = {name for name in type(self).model_fields if getattr(self, name) is not None}
        if not fields & {"alias", "id", "name", "tags", "ssm_parameter"}:
            raise ValueError("a term needs one of alias, id, name, tags or ssmParameter")
        # As Karpenter's CRD: alias excludes id, name, owner and tags but not ssmParameter, which the
        # resolution then ignores (the alias alone picks the AMIs).
        if "alias" in fields and fields & {"id", "name", "owner", "tags"}:
            raise ValueError("alias cannot be combined with id, name, owner or tags in an amiSelectorTerm")
        if "id" in fields and fields & {"name", "owner", "tags"}:
            raise ValueError("id cannot be combined with other fields in an amiSelectorTerm")
        return self

    def alias_family(self) -> str | None:
        """The AMI family an alias names (``al2023@latest`` → ``AL2023``)."""
        return ALIAS_FAMILIES[self.alias.partition("@")[0]] if self.alias else None


class SubnetSelectorTerm(KarpenterModel):
    """Subnets by tags or by id."""

    tags: SelectorTags | None = None
    id: Annotated[str, _pattern(r"subnet-[0-9a-z]+", "subnet id")] | None = None

    @model_validator(mode="after")
    def _exclusive(self) -> SubnetSelectorTerm:
        if self.id is None and self.tags is None:
            raise ValueError("a subnet term needs tags or id")
        return self

    def id_combined(self) -> bool:
        """True when ``id`` is given with ``tags`` (refused only when every term does so)."""
        return self.id is not None and self.tags is not None


class SecurityGroupSelectorTerm(KarpenterModel):
    """Security groups by tags, id or name."""

    tags: SelectorTags | None = None
    id: Annotated[str, _pattern(r"sg-[0-9a-z]+", "security group id")] | None = None
    name: NonEmptyStr | None = None

    @model_validator(mode="after")
    def _exclusive(self) -> SecurityGroupSelectorTerm:
        if not self.given():
            raise ValueError("a security group term needs tags, id or name")
        return self

    def given(self) -> list[str]:
        """The fields this term sets, in schema order."""
        return [name for name in ("tags", "id", "name") if getattr(self, name) is not None]

    def id_combined(self) -> bool:
        """True when ``id`` is given with another field (refused only when every term does so)."""
        return self.id is not None and len(self.given()) > 1

    def name_combined(self) -> bool:
        """True when ``name`` is given with another field (refused only when every term does so)."""
        return self.name is not None and len(self.given()) > 1


class CapacityReservationSelectorTerm(KarpenterModel):
    """On-Demand Capacity Reservations (or Capacity Blocks) by tags or id, optionally of one owner."""

    tags: SelectorTags | None = None
    id: Annotated[str, _pattern(r"cr-[0-9a-z]+", "capacity reservation id")] | None = None
    owner_id: Annotated[str, _pattern(r"[0-9]{12}", "owner account id")] | None = Field(
        default=None, alias="ownerID"
    )
    instance_match_criteria: Literal["open", "targeted"] | None = None

    @model_validator(mode="after")
    def _something(self) -> CapacityReservationSelectorTerm:
        if self.id is None and self.tags is None and self.instance_match_criteria is None:
            raise ValueError("a capacity reservation term needs tags, id or instanceMatchCriteria")
        return self

    def id_combined(self) -> bool:
        """True when ``id`` is given with another field (refused only when every term does so)."""
        return self.id is not None and any(
            value is not None for value in (self.tags, self.owner_id, self.instance_match_criteria)
        )


class PlacementGroupSelector(KarpenterModel):
    """The placement group instances launch into, by name or id."""

    name: NonEmptyStr | None = None
    id: Annotated[str, _pattern(r"pg-[0-9a-z]+", "placement group id")] | None = None

    @model_validator(mode="after")
    def _one(self) -> PlacementGroupSelector:
        if (self.name is None) == (self.id is None):
            raise ValueError("placementGroupSelector needs exactly one of name or id")
        return self


class NetworkInterface(KarpenterModel):
    """One network interface of the launch template (e.g. EFA-only interfaces on extra cards)."""

    network_card_index: int = Field(ge=0)
    device_index: int = Field(ge=0)
    interface_type: Literal["interface", "efa-only"]


def _network_interfaces(interfaces: list[NetworkInterface]) -> list[NetworkInterface]:
    if interfaces and not any(
        i.device_index == 0 and i.network_card_index == 0 and i.interface_type == "interface"
        for i in interfaces
    ):
        raise ValueError(
            "networkInterfaces must include the primary interface "
            "(networkCardIndex 0, deviceIndex 0, interfaceType interface)"
        )
    slots = [(i.network_card_index, i.device_index) for i in interfaces]
    if len(set(slots)) != len(slots):
        raise ValueError("networkInterfaces repeat a networkCardIndex/deviceIndex pair")
    efa_cards = [i.network_card_index for i in interfaces if i.interface_type == "efa-only"]
    if len(set(efa_cards)) != len(efa_cards):
        raise ValueError("networkInterfaces may have at most one efa-only interface per network card")
    return interfaces


class ConnectionTracking(KarpenterModel):
    """Idle timeouts (seconds) of tracked connections on the primary interface."""

    tcp_established_timeout: int | None = Field(default=None, ge=60, le=432000)
    udp_stream_timeout: int | None = Field(default=None, ge=60, le=180)
    udp_timeout: int | None = Field(default=None, ge=30, le=60)

    @model_validator(mode="after")
    def _something(self) -> ConnectionTracking:
        if (
            self.tcp_established_timeout is None
            and self.udp_stream_timeout is None
            and self.udp_timeout is None
        ):
            raise ValueError("connectionTracking needs tcpEstablishedTimeout, udpStreamTimeout or udpTimeout")
        return self


class CPUOptions(KarpenterModel):
    """CPU features of the instances (nested virtualization narrows the instance types)."""

    nested_virtualization: Literal["enabled", "disabled"] | None = None


def _terms_not_all_combined(what: str, detail: str, method: str = "id_combined") -> Any:
    """Karpenter's rule: refuse ``id`` combined with other fields only when *every* term does so."""

    def check(terms: list[Any]) -> list[Any]:
        if terms and all(getattr(term, method)() for term in terms):
            raise ValueError(f"{detail} cannot be combined in every term of {what}s")
        return terms

    return AfterValidator(check)


# --- block devices, metadata options ---------------------------------------------------------------

_VOLUME_SIZE = re.compile(r"^[1-9][0-9]*(Gi|G|Ti|T)$")
_MAX_VOLUME_BYTES = 64 * 10**12


def _volume_size(value: str) -> str:
    if not _VOLUME_SIZE.match(value) or parse_quantity(value) > _MAX_VOLUME_BYTES:
        raise ValueError(f"invalid volumeSize {value!r}: expected a whole number of Gi, G, Ti or T up to 64T")
    return value


class BlockDevice(KarpenterModel):
    """EBS settings of one block device mapping."""

    volume_size: Annotated[str, AfterValidator(_volume_size)] | None = None
    volume_type: Literal["standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"] | None = None
    iops: int | None = Field(default=None, ge=0)
    throughput: int | None = Field(default=None, ge=0)
    encrypted: bool | None = None
    kms_key_id: str | None = Field(default=None, alias="kmsKeyID")
    delete_on_termination: bool | None = None
    snapshot_id: str | None = Field(default=None, alias="snapshotID")
    volume_initialization_rate: int | None = Field(default=None, ge=100, le=300)

    @model_validator(mode="after")
    def _size_or_snapshot(self) -> BlockDevice:
        if self.volume_size is None and self.snapshot_id is None:
            raise ValueError("ebs needs volumeSize or snapshotID")
        if self.volume_initialization_rate is not None and not self.snapshot_id:
            raise ValueError(
                "volumeInitializationRate needs snapshotID (it is the rate the snapshot is read at)"
            )
        return self

    def volume_size_bytes(self) -> int | None:
        """The volume size in bytes, when given."""
        return int(parse_quantity(self.volume_size)) if self.volume_size else None


class BlockDeviceMapping(KarpenterModel):
    """A device attached at launch; ``rootVolume`` marks the one holding the kubelet's root dir."""

    device_name: str | None = None
    root_volume: bool = False
    ebs: BlockDevice | None = None


class MetadataOptions(KarpenterModel):
    """Instance Metadata Service settings of the launch template (defaults: IMDSv2 only, hop limit 1)."""

    http_endpoint: Literal["enabled", "disabled"] = "enabled"
    http_protocol_ipv6: Literal["enabled", "disabled"] = Field(default="disabled", alias="httpProtocolIPv6")
    http_put_response_hop_limit: int = Field(default=1, ge=1, le=64)
    http_tokens: Literal["required", "optional"] = "required"


# --- kubelet ----------------------------------------------------------------------------------------

EVICTION_SIGNALS = (
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
)
RESERVED_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pid")
_PERCENT = re.compile(r"^(\d{1,2}(\.\d{1,2})?|100(\.0{1,2})?)%$")


def _reserved(values: dict[str, str]) -> dict[str, str]:
    bad = [key for key in values if key not in RESERVED_RESOURCES]
    if bad:
        raise ValueError(f"unsupported keys {bad}; allowed: {', '.join(RESERVED_RESOURCES)}")
    negative = [key for key, value in values.items() if parse_quantity(value) < 0]
    if negative:
        raise ValueError(f"reserved amounts cannot be negative ({', '.join(negative)})")
    return values


def _signals(values: dict[str, str]) -> dict[str, str]:
    bad = [key for key in values if key not in EVICTION_SIGNALS]
    if bad:
        raise ValueError(f"unsupported eviction signals {bad}; allowed: {', '.join(EVICTION_SIGNALS)}")
    return values


def _thresholds(values: dict[str, str]) -> dict[str, str]:
    for key, value in _signals(values).items():
        if _PERCENT.match(value):
            continue
        try:
            parse_quantity(value)
        except QuantityError:
            raise ValueError(
                f"{key}: {value!r} is neither a percentage (10%) nor a quantity (500Mi)"
            ) from None
    return values


def _grace_periods(values: dict[str, str]) -> dict[str, str]:
    for key, value in _signals(values).items():
        try:
            parse_duration(value)
        except QuantityError as exc:
            raise ValueError(f"{key}: {exc}") from None
    return values


class KubeletConfiguration(KarpenterModel):
    """``spec.kubelet``: kubelet flags for the nodes; the reservations and pod limits change what
    a node can hold, so the scheduler sees them through :meth:`overrides`."""

    # Any strings, as Karpenter's CRD takes them; the kubelet judges them on the node.
    cluster_dns: list[str] | None = Field(default=None, alias="clusterDNS")
    max_pods: int | None = Field(default=None, ge=0)
    pods_per_core: int | None = Field(default=None, ge=0)
    system_reserved: Annotated[dict[str, Quantity], AfterValidator(_reserved)] | None = None
    kube_reserved: Annotated[dict[str, Quantity], AfterValidator(_reserved)] | None = None
    eviction_hard: Annotated[dict[str, str], AfterValidator(_thresholds)] | None = None
    eviction_soft: Annotated[dict[str, str], AfterValidator(_thresholds)] | None = None
    eviction_soft_grace_period: Annotated[dict[str, str], AfterValidator(_grace_periods)] | None = None
    eviction_max_pod_grace_period: int | None = None
    image_gc_high_threshold_percent: int | None = Field(
        default=None, ge=0, le=100, alias="imageGCHighThresholdPercent"
    )
    image_gc_low_threshold_percent: int | None = Field(
        default=None, ge=0, le=100, alias="imageGCLowThresholdPercent"
    )
    cpu_cfs_quota: bool | None = Field(default=None, alias="cpuCFSQuota")

    @model_validator(mode="after")
    def _consistent(self) -> KubeletConfiguration:
        high, low = self.image_gc_high_threshold_percent, self.image_gc_low_threshold_percent
        if high is not None and low is not None and high <= low:
            raise ValueError(
                f"imageGCHighThresholdPercent ({high}) must be greater than "
                f"imageGCLowThresholdPercent ({low})"
            )
        soft = set(self.eviction_soft or {})
        grace = set(self.eviction_soft_grace_period or {})
        if soft - grace:
            raise ValueError(f"evictionSoft {sorted(soft - grace)} need a matching evictionSoftGracePeriod")
        if grace - soft:
            raise ValueError(f"evictionSoftGracePeriod {sorted(grace - soft)} need a matching evictionSoft")
        return self

    def overrides(self) -> KubeletOverrides:
        """The settings that change a node's allocatable resources."""
        return KubeletOverrides(
            max_pods=self.max_pods,
            pods_per_core=self.pods_per_core,
            kube_reserved=parse_resources(self.kube_reserved),
            system_reserved=parse_resources(self.system_reserved),
            eviction_hard=dict(self.eviction_hard or {}),
            eviction_soft=dict(self.eviction_soft or {}),
        )


# --- the node class ---------------------------------------------------------------------------------

_RESTRICTED_TAGS = frozenset(
    {
        "karpenter.sh/nodepool",
        "karpenter.sh/nodeclaim",
        "karpenter.k8s.aws/ec2nodeclass",
        "eks:eks-cluster-name",
    }
)


def _instance_tags(tags: dict[str, str]) -> dict[str, str]:
    for key in tags:
        if not key:
            raise ValueError("empty tag keys are not supported")
        if key.startswith("kubernetes.io/cluster") or key in _RESTRICTED_TAGS:
            raise ValueError(f"tag {key!r} is restricted: Fleetwright sets it itself")
    return tags


class EC2NodeClassSpec(KarpenterModel):
    """``EC2NodeClass.spec``."""

    # Declared before amiFamily (and role before instanceProfile) so the validators of the later field
    # can check the pair while every other field's problems are still collected.
    ami_selector_terms: list[AMISelectorTerm] = Field(min_length=1, max_length=30)
    ami_family: AmiFamily | None = Field(default=None, validate_default=True)
    subnet_selector_terms: Annotated[
        list[SubnetSelectorTerm], _terms_not_all_combined("subnetSelectorTerm", "id and tags")
    ] = Field(min_length=1, max_length=30)
    security_group_selector_terms: Annotated[
        list[SecurityGroupSelectorTerm],
        _terms_not_all_combined("securityGroupSelectorTerm", "id and other fields"),
        _terms_not_all_combined("securityGroupSelectorTerm", "name and other fields", "name_combined"),
    ] = Field(min_length=1, max_length=30)
    capacity_reservation_selector_terms: (
        Annotated[
            list[CapacityReservationSelectorTerm],
            _terms_not_all_combined("capacityReservationSelectorTerm", "id and other fields"),
        ]
        | None
    ) = Field(default=None, max_length=30)
    placement_group_selector: PlacementGroupSelector | None = None
    network_interfaces: Annotated[list[NetworkInterface], AfterValidator(_network_interfaces)] | None = Field(
        default=None, max_length=150
    )
    ip_prefix_count: int | None = Field(default=None, ge=0)
    connection_tracking: ConnectionTracking | None = None
    cpu_options: CPUOptions | None = None
    role: NonEmptyStr | None = None
    instance_profile: NonEmptyStr | None = Field(default=None, validate_default=True)
    user_data: str | None = None
    tags: Annotated[dict[str, str], AfterValidator(_instance_tags)] | None = None
    block_device_mappings: list[BlockDeviceMapping] | None = Field(default=None, max_length=50)
    metadata_options: MetadataOptions = Field(default_factory=MetadataOptions)
    kubelet: KubeletConfiguration | None = None
    detailed_monitoring: bool | None = None
    associate_public_ip_address: bool | None = Field(default=None, alias="associatePublicIPAddress")
    instance_store_policy: Literal["RAID0"] | None = None
    context: str | None = None

    @field_validator("ami_selector_terms")
    @classmethod
    def _alias_alone(cls, terms: list[AMISelectorTerm]) -> list[AMISelectorTerm]:
        if len(terms) > 1 and any(term.alias for term in terms):
            raise ValueError("an alias term cannot be combined with other amiSelectorTerms")
        return terms

    @field_validator("block_device_mappings")
    @classmethod
    def _one_root(cls, mappings: list[BlockDeviceMapping] | None) -> list[BlockDeviceMapping] | None:
        if mappings and sum(1 for mapping in mappings if mapping.root_volume) > 1:
            raise ValueError("at most one blockDeviceMapping may set rootVolume: true")
        return mappings

    @field_validator("ami_family")
    @classmethod
    def _family_fits_alias(cls, family: str | None, info: ValidationInfo) -> str | None:
        terms: list[AMISelectorTerm] | None = info.data.get("ami_selector_terms")
        if terms is None:
            return family  # the terms themselves are wrong; that is reported there
        alias_family = next((t.alias_family() for t in terms if t.alias), None)
        if alias_family is None and family is None:
            raise ValueError("amiFamily is required when amiSelectorTerms has no alias")
        if alias_family and family not in (None, "Custom", alias_family):
            raise ValueError(
                f"amiFamily {family} does not match the alias family {alias_family}; "
                f"use {alias_family}, Custom or leave it out"
            )
        return family

    @field_validator("instance_profile")
    @classmethod
    def _role_or_profile(cls, profile: str | None, info: ValidationInfo) -> str | None:
        if "role" not in info.data:
            return profile  # role itself is wrong; that is reported there
        if (info.data["role"] is None) == (profile is None):
            both = "both are set" if profile is not None else "neither is set"
            raise ValueError(f"specify exactly one of role or instanceProfile ({both})")
        return profile

    def resolved_ami_family(self) -> str:
        """``amiFamily``, or the family the alias names when it is left out."""
        if self.ami_family is not None:
            return self.ami_family
        return next((t.alias_family() for t in self.ami_selector_terms if t.alias), None) or "Custom"


class EC2NodeClass(KarpenterDocument):
    """A ``karpenter.k8s.aws/v1`` EC2NodeClass."""

    api_version: Literal["karpenter.k8s.aws/v1"] = EC2NODECLASS_API_VERSION
    kind: Literal["EC2NodeClass"] = EC2NODECLASS_KIND
    metadata: ObjectMeta
    spec: EC2NodeClassSpec

    @property
    def name(self) -> str:
        """``metadata.name``."""
        return self.metadata.name

    def kubelet_overrides(self) -> KubeletOverrides:
        """The kubelet settings that change allocatable resources (EKS defaults when unset), with the
        instance store as ephemeral storage under ``instanceStorePolicy: RAID0``."""
        overrides = self.spec.kubelet.overrides() if self.spec.kubelet else KubeletOverrides()
        if self.spec.instance_store_policy == "RAID0":
            overrides = dataclasses.replace(overrides, instance_store_raid0=True)
        return overrides
