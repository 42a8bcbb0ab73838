"""Regenerate a built-in catalog: ``python -m fleetwright.catalog.generate [--region us-east-1]``.

Development tool only (needs moto, a dev dependency; nothing at runtime imports this module). Sources:

* instance type data and per-zone offerings: moto's stored copies of ``DescribeInstanceTypes`` and
  ``DescribeInstanceTypeOfferings`` (``moto/ec2/resources/``);
* on-demand prices and VPC limits: ``data/ondemand-prices.json`` and ``data/vpc-limits.json``
  (provenance in ``data/README.md``);
* types moto lacks: ``data/supplement-us-east-1.json``, rebuilt from Karpenter's generated
  instance-type tables by :mod:`fleetwright.catalog.supplement`;
* zone ids: ``data/zone-ids.json`` (moto's ``DescribeAvailabilityZones`` mapping), added on load.

Spot prices are **estimates**: moto's spot prices are placeholders, so each (type, zone) gets the
on-demand price times a stable pseudo-random factor in [0.30, 0.45].
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import hashlib
import json
import sys
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fleetwright.catalog.from_ec2 import UnsupportedInstanceTypeError, instance_type_from_ec2
from fleetwright.catalog.loader import DATA_DIR, catalog_to_json, ondemand_prices, vpc_limits
from fleetwright.model import labels as wk
from fleetwright.model.instancetype import InstanceType, Offering

SPOT_FACTOR_LOW = 0.30
SPOT_FACTOR_HIGH = 0.45


def estimated_spot_price(instance_type: str, zone: str, on_demand: float) -> float:
    """A deterministic spot price estimate: on-demand × a factor in [0.30, 0.45] hashed from (type, zone)."""
    digest = hashlib.sha256(f"{instance_type}/{zone}".encode()).digest()
    fraction = int.from_bytes(digest[:4], "big") / 0xFFFFFFFF
    factor = SPOT_FACTOR_LOW + (SPOT_FACTOR_HIGH - SPOT_FACTOR_LOW) * fraction
    return max(round(on_demand * factor, 6), 0.000001)


def _moto_resource(relative: str) -> Any:
    import moto

    base = Path(moto.__file__).resolve().parent / "ec2" / "resources"
    for candidate in (base / relative, base / f"{relative}.gz"):
        if candidate.exists():
            opener = gzip.open if candidate.suffix == ".gz" else open
            with opener(candidate, "rt") as handle:
                return json.load(handle)
    raise FileNotFoundError(f"moto has no {relative} under {base}")


def build_catalog(
    infos: Mapping[str, Mapping[str, Any]],
    zones_by_type: Mapping[str, Sequence[str]],
    prices: Mapping[str, float],
    limits: Mapping[str, Mapping[str, Any]],
) -> tuple[list[InstanceType], dict[str, list[str]]]:
    """Instance types with offerings, and the names skipped grouped by reason."""
    kept: list[InstanceType] = []
    skipped: dict[str, list[str]] = defaultdict(list)
    for name in sorted(zones_by_type):
        info = infos.get(name)
        price = prices.get(name)
        if info is None:
            skipped["no DescribeInstanceTypes data"].append(name)
            continue
        if price is None or price <= 0:
            skipped["no on-demand price"].append(name)
            continue
        offerings = []
        for zone in sorted(zones_by_type[name]):
            offerings.append(Offering(zone=zone, capacity_type="on-demand", price=price))
            if "spot" in (info.get("SupportedUsageClasses") or []):
                offerings.append(
                    Offering(zone=zone, capacity_type="spot", price=estimated_spot_price(name, zone, price))
                )
        try:
            kept.append(instance_type_from_ec2(info, limits.get(name), offerings))
        except UnsupportedInstanceTypeError:
            skipped["unsupported data (architecture, vCPU or memory)"].append(name)
    return kept, dict(skipped)


def add_supplement(infos: dict[str, Any], zones_by_type: dict[str, list[str]], region: str) -> set[str]:
    """Merge ``data/supplement-<region>.json`` under moto's data (moto wins); the names it added."""
    path = DATA_DIR / f"supplement-{region}.json"
    if not path.exists():
        return set()
    document = json.loads(path.read_text())
    added = set()
    for entry in document["instanceTypes"]:
        name = entry["InstanceType"]
        if name not in infos:
            infos[name] = entry
            zones_by_type[name] = list(document["zones"].get(name, ()))
            added.add(name)
    return added


def _without_unknown_clock(instance_type: InstanceType) -> InstanceType:
    """Tables that do not give the sustained clock speed leave it unknown, not 0."""
    if instance_type.labels.get(wk.INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ) != "0":
        return instance_type
    labels = {k: v for k, v in instance_type.labels.items() if k != wk.INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ}
    return dataclasses.replace(instance_type, labels=labels)


def region_catalog(
    infos: Mapping[str, Mapping[str, Any]],
    zones_by_type: Mapping[str, Sequence[str]],
    prices: Mapping[str, float],
    region: str,
) -> tuple[list[InstanceType], dict[str, list[str]], set[str]]:
    """The built-in catalog of ``region`` from moto's data plus the supplement: kept types, skipped
    names by reason, and the names the supplement added."""
    all_infos = dict(infos)
    all_zones = {name: list(zones) for name, zones in zones_by_type.items()}
    supplemented = add_supplement(all_infos, all_zones, region)
    kept, skipped = build_catalog(all_infos, all_zones, prices, vpc_limits())
    kept = [_without_unknown_clock(t) if t.name in supplemented else t for t in kept]
    return kept, skipped, supplemented


def main(argv: Sequence[str] | None = None) -> int:
    """Write ``data/<region>.json`` and print what was kept and skipped."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--output", type=Path, default=None, help="default: the package's data directory")
    args = parser.parse_args(argv)

    infos: dict[str, Any] = _moto_resource("instance_types.json")
    offerings = _moto_resource(f"instance_type_offerings/availability-zone/{args.region}.json")
    zones_by_type: dict[str, list[str]] = defaultdict(list)
    for row in offerings:
        zones_by_type[row["InstanceType"]].append(row["Location"])
    prices = ondemand_prices(args.region)
    if not prices:
        parser.error(f"no on-demand prices for {args.region} in {DATA_DIR / 'ondemand-prices.json'}")

    kept, skipped, supplemented = region_catalog(infos, zones_by_type, prices, args.region)
    output: Path = args.output or DATA_DIR / f"{args.region}.json"
    document = catalog_to_json(kept, minimal_labels=True)
    output.write_text(json.dumps(document, separators=(",", ":"), sort_keys=True) + "\n")
    print(f"wrote {output}: {len(kept)} instance types ({output.stat().st_size:,} bytes)")
    if supplemented:
        print(f"from Karpenter's tables ({len(supplemented)}): {', '.join(sorted(supplemented))}")
    for reason, names in sorted(skipped.items()):
        print(f"skipped {len(names)} ({reason}): {', '.join(names)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
