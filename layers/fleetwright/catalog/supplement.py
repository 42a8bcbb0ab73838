"""Instance types moto's stored EC2 data lacks, rebuilt from Karpenter's generated instance-type tables.

Development tool only (nothing at runtime imports it): ``python -m fleetwright.catalog.supplement
NEWEST.md [OLDER.md ...]`` reads Karpenter's ``website/content/en/<version>/reference/instance-types.md``
pages (aws/karpenter-provider-aws, Apache-2.0; a type is taken from the first page listing it) and
writes ``data/supplement-us-east-1.json``: one ``DescribeInstanceTypes``-shaped entry per wanted type,
plus the zones it is offered in. :mod:`fleetwright.catalog.generate` merges it under moto's data.

The tables give labels and resources, not zones nor usage classes: each type borrows those of a moto
type of a related family (``SIBLINGS``), as ``data/README.md`` says.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fleetwright.catalog.loader import DATA_DIR
from fleetwright.model import labels as wk

SUPPLEMENT_FILE = DATA_DIR / "supplement-us-east-1.json"

# Family of a missing type → a moto type whose zones and usage classes it borrows.
SIBLINGS = {
    "dl1": "p4d.24xlarge",
    "f1": "f2.12xlarge",
    "g3": "g4dn.xlarge",
    "g3s": "g4dn.xlarge",
    "g4ad": "g4dn.xlarge",
    "i3": "i3.16xlarge",
    "p2": "p3dn.24xlarge",
    "p3": "p3dn.24xlarge",
    "u-9tb1": "u-6tb1.112xlarge",
    "u-12tb1": "u-6tb1.112xlarge",
    "u-18tb1": "u-6tb1.112xlarge",
    "u-24tb1": "u-6tb1.112xlarge",
}

_HEADING = re.compile(r"^### `(?P<name>[^`]+)`$")
_ROW = re.compile(r"^\s*\|(?P<key>[^|]+)\|(?P<value>[^|]*)\|\s*$")
_KUBE_TO_EC2_ARCH = {"amd64": "x86_64", "arm64": "arm64"}


def parse_tables(markdown: str) -> dict[str, tuple[dict[str, str], dict[str, str]]]:
    """``{type: (labels, resources)}`` from one instance-types page."""
    found: dict[str, tuple[dict[str, str], dict[str, str]]] = {}
    current: tuple[dict[str, str], dict[str, str]] | None = None
    section = 0
    for line in markdown.splitlines():
        heading = _HEADING.match(line)
        if heading:
            current = ({}, {})
            found[heading["name"]] = current
            section = 0
        elif line.startswith("#### Labels"):
            section = 0
        elif line.startswith("#### Resources"):
            section = 1
        elif line.startswith("## "):
            current = None
        elif current is not None:
            row = _ROW.match(line)
            if row and row["key"].strip() not in ("Label", "Resource", "--"):
                current[section][row["key"].strip()] = row["value"].strip()
    return found


def ec2_entry(
    name: str, labels: Mapping[str, str], resources: Mapping[str, str], sibling: Mapping[str, Any]
) -> dict[str, Any]:
    """A ``DescribeInstanceTypes`` entry holding what the tables say (fields they do not give are left
    out; ENI limits then come from the VPC limits table)."""
    entry: dict[str, Any] = {
        "InstanceType": name,
        "VCpuInfo": {"DefaultVCpus": int(labels[wk.INSTANCE_CPU])},
        "MemoryInfo": {"SizeInMiB": int(labels[wk.INSTANCE_MEMORY])},
        "Hypervisor": labels.get(wk.INSTANCE_HYPERVISOR, ""),
        "SupportedVirtualizationTypes": ["hvm"],
        "SupportedUsageClasses": list(sibling.get("SupportedUsageClasses") or ["on-demand"]),
    }
    processor: dict[str, Any] = {"SupportedArchitectures": [_KUBE_TO_EC2_ARCH[labels[wk.ARCH]]]}
    if wk.INSTANCE_CPU_MANUFACTURER in labels:
        processor["Manufacturer"] = labels[wk.INSTANCE_CPU_MANUFACTURER]
    if wk.INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ in labels:
        processor["SustainedClockSpeedInGhz"] = int(labels[wk.INSTANCE_CPU_SUSTAINED_CLOCK_SPEED_MHZ]) / 1000
    entry["ProcessorInfo"] = processor
    network: dict[str, Any] = {
        "EncryptionInTransitSupported": labels.get(wk.INSTANCE_ENCRYPTION_IN_TRANSIT_SUPPORTED) == "true"
    }
    if wk.INSTANCE_NETWORK_BANDWIDTH in labels:
        gbps = int(labels[wk.INSTANCE_NETWORK_BANDWIDTH]) / 1000
        network["NetworkCards"] = [{"NetworkCardIndex": 0, "BaselineBandwidthInGbps": gbps}]
    if resources.get("vpc.amazonaws.com/efa"):
        network["EfaInfo"] = {"MaximumEfaInterfaces": int(resources["vpc.amazonaws.com/efa"])}
    entry["NetworkInfo"] = network
    if wk.INSTANCE_GPU_COUNT in labels:
        entry["GpuInfo"] = {
            "Gpus": [
                {
                    "Name": labels[wk.INSTANCE_GPU_NAME],
                    "Manufacturer": labels[wk.INSTANCE_GPU_MANUFACTURER],
                    "Count": int(labels[wk.INSTANCE_GPU_COUNT]),
                    "MemoryInfo": {"SizeInMiB": int(labels[wk.INSTANCE_GPU_MEMORY])},
                }
            ]
        }
    if wk.INSTANCE_LOCAL_NVME in labels:
        entry["InstanceStorageInfo"] = {
            "TotalSizeInGB": int(labels[wk.INSTANCE_LOCAL_NVME]),
            "NvmeSupport": "required",
        }
    if wk.INSTANCE_EBS_BANDWIDTH in labels:
        entry["EbsInfo"] = {
            "EbsOptimizedSupport": "default",
            "EbsOptimizedInfo": {"MaximumBandwidthInMbps": int(labels[wk.INSTANCE_EBS_BANDWIDTH])},
        }
    return entry


def build_supplement(
    pages: Sequence[tuple[str, str]],
    wanted: Sequence[str],
    moto_infos: Mapping[str, Mapping[str, Any]],
    moto_zones: Mapping[str, Sequence[str]],
) -> dict[str, Any]:
    """The supplement document for ``wanted`` types, from ``(source, markdown)`` pages, newest first."""
    tables = [(source, parse_tables(text)) for source, text in pages]
    entries: list[dict[str, Any]] = []
    zones: dict[str, list[str]] = {}
    sources: dict[str, str] = {}
    for name in sorted(wanted):
        found = next(((source, table[name]) for source, table in tables if name in table), None)
        sibling = SIBLINGS.get(name.partition(".")[0])
        if found is None or sibling is None or sibling not in moto_infos:
            continue
        source, (labels, resources) = found
        entries.append(ec2_entry(name, labels, resources, moto_infos[sibling]))
        zones[name] = sorted(moto_zones.get(sibling, ()))
        sources[name] = f"{source}; zones and usage classes of {sibling}"
    return {"instanceTypes": entries, "zones": zones, "sources": sources}


def main(argv: Sequence[str] | None = None) -> int:
    """Write ``data/supplement-us-east-1.json`` for the priced types moto lacks."""
    from fleetwright.catalog.generate import _moto_resource
    from fleetwright.catalog.loader import ondemand_prices

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("pages", nargs="+", type=Path, help="instance-types.md pages, newest first")
    args = parser.parse_args(argv)
    infos = _moto_resource("instance_types.json")
    zones_by_type: dict[str, list[str]] = {}
    for row in _moto_resource("instance_type_offerings/availability-zone/us-east-1.json"):
        zones_by_type.setdefault(row["InstanceType"], []).append(row["Location"])
    wanted = [name for name in ondemand_prices("us-east-1") if name not in infos]
    pages = [(f"Karpenter {page.parent.parent.name} {page.name}", page.read_text()) for page in args.pages]
    document = build_supplement(pages, wanted, infos, zones_by_type)
    SUPPLEMENT_FILE.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    names = [e["InstanceType"] for e in document["instanceTypes"]]
    print(f"wrote {SUPPLEMENT_FILE}: {len(names)} types: {', '.join(names)}")
    missing = sorted(set(wanted) - set(names))
    if missing:
        print(f"not found in the pages: {', '.join(missing)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
