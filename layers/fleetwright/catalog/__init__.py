"""Instance-type catalogs: the built-in per-region catalogs, user catalog files and EC2 conversion."""

from __future__ import annotations

from fleetwright.catalog.from_ec2 import UnsupportedInstanceTypeError, instance_type_from_ec2
from fleetwright.catalog.loader import (
    available_regions,
    builtin_catalog,
    catalog_to_json,
    load_catalog,
    ondemand_prices,
    parse_catalog,
    vpc_limits,
    with_kubelet,
)

__all__ = [
    "UnsupportedInstanceTypeError",
    "available_regions",
    "builtin_catalog",
    "catalog_to_json",
    "instance_type_from_ec2",
    "load_catalog",
    "ondemand_prices",
    "parse_catalog",
    "vpc_limits",
    "with_kubelet",
]
