"""``fleetwright plan``: load manifests and an instance-type catalog, run the scheduler, render the result.

The JSON rendering is a stable contract, described in ``docs/plan.md``.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from fleetwright.catalog.bill import DEFAULT_REGION, HOURS_PER_MONTH, NodeBill, ebs_prices_known
from fleetwright.catalog.loader import builtin_catalog, load_catalog
from fleetwright.manifests import Manifests, load_manifests
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.karpenter import check_references
from fleetwright.model.volumes import volume_requirements
from fleetwright.scheduling.scheduler import schedule
from fleetwright.scheduling.templates import nodepool_templates
from fleetwright.scheduling.types import NewNodeClaim, Results, SchedulingInput

TABLE_WIDTH = 100


class PlanError(ValueError):
    """Inputs that are individually valid but cannot be planned together (e.g. a missing EC2NodeClass)."""


@dataclass(slots=True, eq=False)
class Plan:
    """A scheduling decision with the input it was made from and the notes gathered on the way."""

    input: SchedulingInput
    results: Results
    warnings: list[str] = field(default_factory=list)  # one rendered line each, for stderr


def scheduling_input(
    manifests: Manifests,
    instance_types: list[InstanceType],
    region: str = DEFAULT_REGION,
    public_subnets: bool = False,
) -> SchedulingInput:
    """The scheduler's input for loaded manifests; raises :class:`PlanError` on dangling references.

    Node bills are priced in ``region``; ``public_subnets`` says whether the subnets assign public IPv4
    addresses on launch (offline, nothing tells: the default assumes private subnets).
    """
    problems = check_references(manifests.nodepools, manifests.nodeclasses)
    if problems:
        raise PlanError("\n".join(problems))
    return SchedulingInput(
        pods=list(manifests.pods),
        nodepools=nodepool_templates(
            manifests.nodepools,
            manifests.nodeclasses,
            manifests.nodes,
            region=region,
            public_subnets=public_subnets,
        ),
        instance_types=instance_types,
        nodes=list(manifests.nodes),
        daemonsets=list(manifests.daemonsets),
        volumes=volume_requirements(manifests.pvcs, manifests.pvs, manifests.storageclasses),
        namespace_labels=dict(manifests.namespace_labels),
    )


def instance_types_for(instance_types_file: str | None, region: str) -> list[InstanceType]:
    """The catalog file when given, else the built-in catalog of ``region``."""
    if instance_types_file:
        return load_catalog(instance_types_file)
    try:
        return builtin_catalog(region)
    except ValueError as err:  # a region without a built-in catalog
        raise PlanError(str(err)) from None


def make_plan(
    paths: Sequence[str],
    instance_types_file: str | None = None,
    region: str = DEFAULT_REGION,
    public_subnets: bool = False,
) -> Plan:
    """Load ``paths`` and the catalog, and schedule the pending pods (``public_subnets``: see
    :func:`scheduling_input`).

    Raises :class:`~fleetwright.model.errors.DocumentError` for bad documents or catalogs and
    :class:`PlanError` for inputs that do not fit together.
    """
    manifests = load_manifests(paths)
    types = instance_types_for(instance_types_file, region)
    inp = scheduling_input(manifests, types, region, public_subnets)
    warnings = [warning.render() for warning in manifests.warnings]
    if inp.pods and not inp.nodepools:
        warnings.append("warning: no NodePool in the manifests: pending pods can only go on existing nodes")
    if not ebs_prices_known(region):
        warnings.append(
            f"warning: no EBS prices for {region}: node volumes are priced at {DEFAULT_REGION}'s "
            "(docs/catalog.md)"
        )
    return Plan(inp, schedule(inp), warnings)


# --- JSON ------------------------------------------------------------------------------------------------


def _price(value: float) -> float:
    # Sums of binary floats print as 0.30000000000000004; six decimals is finer than any EC2 price.
    return round(value, 6)


def bill_json(bill: NodeBill) -> dict[str, float]:
    """A node bill (or a sum of them) by part, USD per hour."""
    return {
        "instance": _price(bill.instance),
        "volumes": _price(bill.volumes),
        "publicIPv4": _price(bill.address),
        "cpuCredits": _price(bill.credits),
        "total": _price(bill.total),
    }


def claim_json(claim: NewNodeClaim) -> dict[str, Any]:
    """One entry of ``nodeClaims`` in the JSON contract."""
    return {
        "name": claim.name,
        "nodePool": claim.nodepool,
        "instanceTypes": [it.name for it in claim.instance_types],
        "zones": sorted(claim.zones),
        "capacityTypes": list(claim.capacity_types),
        "labels": dict(sorted(claim.labels.items())),
        "taints": [taint.render() for taint in claim.taints],
        "pods": [pod.key for pod in claim.pods],
        "price": _price(claim.price),
        "bill": bill_json(claim.bill),
    }


def plan_json(plan: Plan) -> dict[str, Any]:
    """The plan as the JSON document described in ``docs/plan.md``."""
    results = plan.results
    return {
        "nodeClaims": [claim_json(claim) for claim in results.new_claims],
        "existingNodes": [
            {"name": placement.node, "pods": [pod.key for pod in placement.pods]}
            for placement in results.existing
        ],
        "unschedulable": [{"pod": error.pod.key, "reason": error.reason} for error in results.errors],
        "summary": {
            "pods": len(plan.input.pods),
            "scheduled": results.scheduled,
            "newNodeClaims": len(results.new_claims),
            "hourlyCost": _price(results.hourly_cost),
            "hourlyBill": bill_json(results.bill),
        },
    }


def write_plan_json(plan: Plan, out: TextIO) -> None:
    """Write :func:`plan_json` to ``out`` as ``json.dump(..., indent=2)`` would, with a final newline.

    Built as one string, each list of strings (instance types, pods) joined in one step and written
    once per distinct list: node claims share a few instance-type lists, and the standard library's
    indented writer, pure Python, costs seconds at thousands of node claims.
    """
    out.write(_indented(plan_json(plan), "", {}))
    out.write("\n")


_encode_string = json.encoder.encode_basestring_ascii


def _indented(value: Any, indent: str, written: dict[tuple[str, ...], str]) -> str:
    """``value`` as JSON text indented by two spaces per level from ``indent``.

    ``written`` remembers the text of lists of strings already written at this indent.
    """
    if isinstance(value, str):
        return _encode_string(value)
    if isinstance(value, dict):
        if not value:
            return "{}"
        inner = indent + "  "
        items = [
            f"{inner}{_encode_string(key)}: {_indented(item, inner, written)}" for key, item in value.items()
        ]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        if type(value[0]) is not str:
            return _items(value, indent, written)
        inner = indent + "  "
        try:  # TypeError: an item is not a string (nor hashable)
            key = (indent, *value)
            text = written.get(key)
            if text is None:
                text = "[\n" + inner + (",\n" + inner).join(map(_encode_string, value)) + "\n" + indent + "]"
                written[key] = text
        except TypeError:
            return _items(value, indent, written)
        return text
    return json.dumps(value)


def _items(value: list[Any] | tuple[Any, ...], indent: str, written: dict[tuple[str, ...], str]) -> str:
    inner = indent + "  "
    lines = (",\n" + inner).join(_indented(item, inner, written) for item in value)
    return "[\n" + inner + lines + "\n" + indent + "]"


# --- Table -----------------------------------------------------------------------------------------------


def _zones(zones: Sequence[str]) -> str:
    """``us-east-1a`` / ``us-east-1a,b,c`` (zones of a region differ only in their last letter)."""
    ordered = sorted(zones)
    if not ordered:
        return "-"
    if len(ordered) == 1:
        return ordered[0]
    prefix = ordered[0][:-1]
    if all(zone[:-1] == prefix for zone in ordered):
        return prefix + ",".join(zone[-1] for zone in ordered)
    return ",".join(ordered)


def _types(claim: NewNodeClaim) -> str:
    if not claim.instance_types:
        return "-"
    more = len(claim.instance_types) - 1
    return claim.instance_types[0].name + (f" (+{more} more)" if more else "")


def _rows(header: Sequence[str], rows: Sequence[Sequence[str]], right: Collection[int] = ()) -> list[str]:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    lines = []
    for row in [header, *rows]:
        cells = [
            cell.rjust(w) if i in right else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells).rstrip())
    return lines


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


_BILL_HEADER = ["INSTANCE", "VOLUMES", "IPV4", "CREDITS", "$/HOUR"]


def _bill_cells(bill: NodeBill) -> list[str]:
    return [f"{part:.4f}" for part in (bill.instance, bill.volumes, bill.address, bill.credits, bill.total)]


def _new_nodes(results: Results) -> list[str]:
    """One row per new node: where and what it is, its pods and its hourly bill by part."""
    if not results.new_claims:
        return ["No new nodes needed."]
    rows = [
        [
            claim.nodepool,
            _types(claim),
            _zones(claim.zones),
            ",".join(claim.capacity_types),
            str(len(claim.pods)),
            *_bill_cells(claim.bill),
        ]
        for claim in results.new_claims
    ]
    header = ["NODEPOOL", "INSTANCE TYPE", "ZONES", "CAPACITY", "PODS", *_BILL_HEADER]
    return ["New nodes:", *_rows(header, rows, right=range(4, len(header)))]


def render_table(plan: Plan) -> str:
    """The plan for people: new nodes, pods placed on existing nodes, unschedulable pods, totals."""
    results = plan.results
    lines = _new_nodes(results)
    if results.existing:
        lines += ["", "Pods placed on existing nodes:"]
        lines += _rows(
            ["NODE", "PODS"],
            [[placement.node, str(len(placement.pods))] for placement in results.existing],
            (1,),
        )
    if results.errors:
        lines += ["", "Unschedulable pods:"]
        for error in results.errors:
            lines += textwrap.wrap(
                f"{error.pod.key}: {error.reason}",
                width=TABLE_WIDTH,
                initial_indent="  ",
                subsequent_indent="      ",
                break_on_hyphens=False,
            )
    on_existing = sum(len(placement.pods) for placement in results.existing)
    on_new = results.scheduled - on_existing
    bill = results.bill
    cost = bill.total
    lines += [
        "",
        f"Pods: {len(plan.input.pods)} pending, {results.scheduled} scheduled "
        f"({on_new} on {_plural(len(results.new_claims), 'new node')}, {on_existing} on existing nodes), "
        f"{len(results.errors)} unschedulable",
        f"Cost of new nodes: ${cost:.4f}/hour (${cost * HOURS_PER_MONTH:.2f}/month) "
        f"for {_plural(len(results.new_claims), 'node')}",
        f"  instances ${bill.instance:.4f}, volumes ${bill.volumes:.4f}, public IPv4 ${bill.address:.4f}, "
        f"CPU credits ${bill.credits:.4f}",
    ]
    return "\n".join(lines) + "\n"
