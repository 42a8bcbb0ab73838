"""Instance-type catalogs: read and write the catalog JSON, the built-in catalogs and reference tables.

The JSON contract is described in ``docs/catalog.md``.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Mapping
from functools import cache, lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationError,
    field_validator,
)

from fleetwright.catalog.from_ec2 import arch_from_name, name_labels
from fleetwright.model import labels as wk
from fleetwright.model.allocatable import (
    allocatable_for,
    default_max_pods,
    instance_type_allocatable,
    max_pods,
    node_capacity,
)
from fleetwright.model.errors import DocumentError, DocumentRef
from fleetwright.model.instancetype import InstanceType, Offering
from fleetwright.model.kubelet import KubeletOverrides
from fleetwright.model.quantity import CPU, MEMORY, PODS, QuantityError, parse_resource
from fleetwright.model.resources import ResourceList

DATA_DIR = Path(__file__).resolve().parent / "data"
ONDEMAND_PRICES_FILE = DATA_DIR / "ondemand-prices.json"
VPC_LIMITS_FILE = DATA_DIR / "vpc-limits.json"
ZONE_IDS_FILE = DATA_DIR / "zone-ids.json"
_REGION_FILE = re.compile(r"^[a-z]{2}(?:-[a-z]+)+-\d+\.json$")

Quantity = Annotated[str | StrictInt | StrictFloat, Field(union_mode="left_to_right")]
Price = Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)]
Count = Annotated[int, Field(strict=True, ge=0)]


@lru_cache(maxsize=4096)
def _parse(name: str, value: str | int | float) -> int:
    # Catalogs repeat the same few quantities ("20Gi", "2", "29") thousands of times.
    return parse_resource(name, value)


def _parse_resources(raw: Mapping[str, str | int | float]) -> ResourceList:
    return {name: _parse(name, value) for name, value in raw.items()}


def _check_resources(value: dict[str, str | int | float]) -> dict[str, str | int | float]:
    problems = []
    for name, amount in value.items():
        try:
            if _parse(name, amount) < 0:
                problems.append(f"{name}: must not be negative")
        except QuantityError as error:
            problems.append(f"{name}: {error}")
    if problems:
        raise ValueError("; ".join(problems))
    return value


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class OfferingDoc(_Model):
    """One offering: zone × capacity type, with its hourly USD price."""

    zone: str = Field(min_length=1)
    capacityType: Literal["on-demand", "spot", "reserved"]  # noqa: N815 - JSON field name
    price: Price
    available: StrictBool = True
    # A reserved offering: the capacity reservation, its type and how many instances it still takes.
    reservationID: str = ""  # noqa: N815 - JSON field name
    reservationType: Literal["", "default", "capacity-block"] = ""  # noqa: N815 - JSON field name
    reservationInterruptible: StrictBool = False  # noqa: N815 - JSON field name
    reservationCapacity: Count = 0  # noqa: N815 - JSON field name


class EniLimitsDoc(_Model):
    """ENI limits used to compute max pods and the default kube-reserved memory."""

    interfaces: Count
    ipv4PerInterface: Annotated[int, Field(strict=True, ge=1)]  # noqa: N815 - JSON field name


class InstanceTypeDoc(_Model):
    """One instance type of a catalog file."""

    name: str = Field(min_length=1, pattern=r"^\S+$")
    capacity: dict[str, Quantity]
    allocatable: dict[str, Quantity] | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    offerings: list[OfferingDoc] = Field(default_factory=list)
    eniLimits: EniLimitsDoc | None = None  # noqa: N815 - JSON field name

    @field_validator("capacity")
    @classmethod
    def _capacity(cls, value: dict[str, str | int | float]) -> dict[str, str | int | float]:
        missing = [name for name in (CPU, MEMORY) if name not in value]
        if missing:
            raise ValueError(f"missing {' and '.join(missing)}")
        return _check_resources(value)

    @field_validator("allocatable")
    @classmethod
    def _allocatable(cls, value: dict[str, str | int | float] | None) -> dict[str, str | int | float] | None:
        return None if value is None else _check_resources(value)


class CatalogDoc(_Model):
    """A catalog file: ``{"instanceTypes": [...]}``."""

    instanceTypes: list[InstanceTypeDoc]  # noqa: N815 - JSON field name


def _field_path(loc: Iterable[int | str]) -> str:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else part
    return path


def _derived_labels(name: str, capacity: Mapping[str, int]) -> dict[str, str]:
    derived = name_labels(name)
    derived[wk.ARCH] = arch_from_name(name)
    derived[wk.OS] = "linux"
    derived[wk.INSTANCE_CPU] = str(-(-capacity.get(CPU, 0) // 1000))
    derived[wk.INSTANCE_MEMORY] = str(capacity.get(MEMORY, 0) // 2**20)
    return derived


def _instance_type(doc: InstanceTypeDoc, zone_ids: Mapping[str, str]) -> InstanceType:
    capacity = _parse_resources(doc.capacity)
    eni_limits = (doc.eniLimits.interfaces, doc.eniLimits.ipv4PerInterface) if doc.eniLimits else None
    if PODS not in capacity:
        capacity[PODS] = default_max_pods(capacity, eni_limits)
    type_labels = _derived_labels(doc.name, capacity)
    type_labels.update(doc.labels)
    type_labels[wk.INSTANCE_TYPE] = doc.name
    if doc.allocatable is not None:
        allocatable = _parse_resources(doc.allocatable)
    else:
        allocatable = allocatable_for(capacity, None, eni_limits, arch=type_labels[wk.ARCH])
    return InstanceType(
        name=doc.name,
        capacity=capacity,
        allocatable=allocatable,
        labels=type_labels,
        offerings=tuple(
            Offering(
                zone=o.zone,
                capacity_type=o.capacityType,
                price=o.price,
                available=o.available,
                reservation_id=o.reservationID,
                reservation_type=(o.reservationType or "default") if o.reservationID else "",
                reservation_interruptible=o.reservationInterruptible,
                reservation_capacity=o.reservationCapacity,
                zone_id=zone_ids.get(o.zone, ""),
            )
            for o in doc.offerings
        ),
        eni_limits=eni_limits,
        explicit_allocatable=doc.allocatable is not None,
    )


def parse_catalog(raw: str | bytes, source: str = "<catalog>") -> list[InstanceType]:
    """Instance types from catalog JSON text; errors name ``source`` and the field path."""
    ref = DocumentRef(file=source)
    try:
        doc = CatalogDoc.model_validate_json(raw)
    except ValidationError as error:
        problems = []
        for item in error.errors(include_url=False):
            message = item["msg"].removeprefix("Value error, ")
            if item["type"] == "json_invalid":
                message = f"not valid JSON: {item.get('ctx', {}).get('error', message)}"
            elif item["type"] != "value_error" and isinstance(item.get("input"), str | int | float):
                message = f"{message} (got {item['input']!r})"
            problems.append((_field_path(item["loc"]), message))
        raise DocumentError(ref, problems) from None
    seen: dict[str, int] = {}
    duplicates = []
    for index, entry in enumerate(doc.instanceTypes):
        if entry.name in seen:
            duplicates.append(
                (f"instanceTypes[{index}].name", f"duplicate {entry.name!r} (first at [{seen[entry.name]}])")
            )
        seen.setdefault(entry.name, index)
    if duplicates:
        raise DocumentError(ref, duplicates)
    ids = builtin_zone_ids()
    return [_instance_type(entry, ids) for entry in doc.instanceTypes]


def load_catalog(path: str | Path) -> list[InstanceType]:
    """Read a catalog JSON file (see ``docs/catalog.md``).

    Raises :class:`DocumentError` naming the file and each bad field
    (``instanceTypes[3].offerings[0].price``).
    """
    file = Path(path)
    try:
        raw = file.read_bytes()
    except OSError as error:
        raise DocumentError(DocumentRef(file=str(path)), [("", f"cannot read: {error.strerror}")]) from None
    return parse_catalog(raw, str(path))


def available_regions() -> list[str]:
    """Regions with a built-in catalog."""
    return sorted(p.stem for p in DATA_DIR.glob("*.json") if _REGION_FILE.match(p.name))


@cache
def _builtin(region: str) -> tuple[InstanceType, ...]:
    file = DATA_DIR / f"{region}.json"
    if region not in available_regions():
        raise ValueError(
            f"no built-in instance-type catalog for region {region!r}; available: "
            f"{', '.join(available_regions())} (pass your own catalog file instead)"
        )
    return tuple(parse_catalog(file.read_bytes(), str(file)))


def builtin_catalog(region: str = "us-east-1") -> list[InstanceType]:
    """The instance types shipped with Fleetwright for ``region`` (parsed once per process).

    Spot prices in built-in catalogs are estimates; see ``docs/catalog.md``. The returned
    instance types are shared: do not mutate their resource lists.
    """
    return list(_builtin(region))


def with_kubelet(types: Iterable[InstanceType], kubelet: KubeletOverrides | None) -> list[InstanceType]:
    """Copies of ``types`` whose pods capacity and allocatable reflect a node class's kubelet settings.

    Types whose allocatable the catalog gave verbatim are returned unchanged. Apply this to catalog
    types, not to types already adjusted for another node class.
    """
    result = []
    for item in types:
        if item.explicit_allocatable or kubelet is None:
            result.append(item)
            continue
        capacity = node_capacity(item, kubelet)
        capacity[PODS] = max_pods(item.capacity, kubelet, item.eni_limits)
        allocatable = instance_type_allocatable(item, kubelet)
        result.append(dataclasses.replace(item, capacity=capacity, allocatable=allocatable))
    return result


def format_quantity(name: str, amount: int) -> str:
    """An exact Kubernetes quantity string (``2``, ``1930m``, ``8Gi``, ``7577Mi``, ``29``)."""
    if name == CPU:
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if amount:
        for suffix, factor in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if amount % factor == 0:
                return f"{amount // factor}{suffix}"
    return str(amount)


def _resources_json(resources: Mapping[str, int]) -> dict[str, str]:
    return {name: format_quantity(name, amount) for name, amount in sorted(resources.items())}


def catalog_to_json(types: Iterable[InstanceType], *, minimal_labels: bool = False) -> dict[str, Any]:
    """The catalog JSON document for ``types`` (inverse of :func:`load_catalog`).

    Allocatable is written only when it was given verbatim (otherwise it is recomputed on load).
    ``minimal_labels`` leaves out labels the loader derives identically from the name and capacity.
    """
    entries = []
    for item in sorted(types, key=lambda t: t.name):
        entry: dict[str, Any] = {"name": item.name, "capacity": _resources_json(item.capacity)}
        if item.explicit_allocatable:
            entry["allocatable"] = _resources_json(item.allocatable)
        type_labels = dict(item.labels)
        if minimal_labels:
            derived = _derived_labels(item.name, item.capacity)
            type_labels = {k: v for k, v in type_labels.items() if derived.get(k) != v}
        if type_labels:
            entry["labels"] = dict(sorted(type_labels.items()))
        entry["offerings"] = [
            {"zone": o.zone, "capacityType": o.capacity_type, "price": o.price, "available": o.available}
            for o in sorted(item.offerings, key=lambda o: (o.zone, o.capacity_type))
        ]
        if item.eni_limits is not None:
            entry["eniLimits"] = {"interfaces": item.eni_limits[0], "ipv4PerInterface": item.eni_limits[1]}
        entries.append(entry)
    return {"instanceTypes": entries}


@cache
def _json_table(path: Path) -> Any:
    return json.loads(path.read_text())


def ondemand_prices(region: str = "us-east-1") -> dict[str, float]:
    """Bundled Linux on-demand prices (USD/hour) by instance type; empty for regions not bundled."""
    table: dict[str, dict[str, float]] = _json_table(ONDEMAND_PRICES_FILE)
    return dict(table.get(region, {}))


def builtin_zone_ids() -> dict[str, str]:
    """Zone name → zone id for the regions with a built-in catalog (moto's us-east-1 mapping; see the
    data README). Zone names map to different ids in each AWS account: the AWS provider asks
    DescribeAvailabilityZones instead."""
    table: dict[str, dict[str, str]] = _json_table(ZONE_IDS_FILE)
    return {zone: zone_id for zones in table.values() for zone, zone_id in zones.items()}


def vpc_limits() -> dict[str, dict[str, Any]]:
    """Bundled VPC limits by instance type: ``interfaces``, ``ipv4_per_interface``, ``trunking``,
    ``branch_interfaces`` (the latter two give ``vpc.amazonaws.com/pod-eni``)."""
    table: dict[str, dict[str, Any]] = _json_table(VPC_LIMITS_FILE)
    return table
