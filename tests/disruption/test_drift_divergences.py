"""Drift judged as Karpenter judges it: requirement drift per node (custom labels included),
InstanceTypeNotFound, capacity reservations per instance rather than in the hash, the AMI family hashed as
resolved."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fleetwright.config.settings import ProvisionerConfig
from fleetwright.disruption.inputs import InputReader
from fleetwright.disruption.planner import plan
from fleetwright.disruption.types import DRIFT, NodeState, Plan
from fleetwright.model import labels as wk
from fleetwright.model.hashes import nodeclass_hash
from tests.disruption.plan_builders import SMALL_TYPES, busy, catalog, node, nodeclass, planner_input, pool


def _drifted(result: Plan) -> list[str]:
    return result.command.node_names if result.command is not None and result.command.method == DRIFT else []


def _with_requirements(*extra: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {"key": wk.INSTANCE_TYPE, "operator": "In", "values": SMALL_TYPES},
        {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
        *extra,
    ]


def _teamed(team: str) -> NodeState:
    return node("n", "m5.xlarge", pods=busy("w", 4), labels={"team": team})


def test_requirements_drifted_when_a_custom_label_value_is_no_longer_allowed() -> None:
    narrowed = pool(requirements=_with_requirements({"key": "team", "operator": "In", "values": ["b"]}))
    result = plan(planner_input([_teamed("a")], [narrowed]))
    assert _drifted(result) == ["n"]
    assert result.command is not None and "label team=a no longer meets" in result.command.explanation
    kept = pool(requirements=_with_requirements({"key": "team", "operator": "In", "values": ["a", "b"]}))
    assert _drifted(plan(planner_input([_teamed("a")], [kept]))) == []


def test_requirements_drifted_when_a_custom_label_the_nodepool_now_sets_is_missing() -> None:
    required = pool(requirements=_with_requirements({"key": "team", "operator": "In", "values": ["a"]}))
    bare = node("n", "m5.xlarge", pods=busy("w", 4))
    result = plan(planner_input([bare], [required]))
    assert _drifted(result) == ["n"]
    assert result.command is not None and "label team is missing" in result.command.explanation
    assert result.command.replacements[0].labels.get("team") == "a"  # the replacement carries it


def test_a_custom_label_allowed_several_values_is_not_required_on_nodes_without_it() -> None:
    # Fleetwright puts no label on a node for a requirement allowing several values, so a replacement would
    # lack it too: holding it against the node would replace it again and again.
    several = pool(requirements=_with_requirements({"key": "team", "operator": "In", "values": ["a", "b"]}))
    assert _drifted(plan(planner_input([node("n", "m5.xlarge", pods=busy("w", 4))], [several]))) == []
    excluded = pool(requirements=_with_requirements({"key": "team", "operator": "DoesNotExist"}))
    assert _drifted(plan(planner_input([_teamed("a")], [excluded]))) == ["n"]


def test_instance_type_not_found_when_the_node_class_no_longer_boots_it() -> None:
    nodes = [node("n", "m5.xlarge", pods=busy("w", 4))]
    result = plan(planner_input(nodes, bootable={"default": {"c5.xlarge", "m5.large"}}))
    assert _drifted(result) == ["n"]
    assert result.command is not None
    assert (
        "instance type m5.xlarge is no longer offered for EC2NodeClass default" in result.command.explanation
    )
    assert _drifted(plan(planner_input(nodes, bootable={"default": {"m5.xlarge"}}))) == []
    assert _drifted(plan(planner_input(nodes))) == []  # the class's types unknown this pass: no drift


def _catalog_without(
    type_name: str, zone: str, capacity_type: str, *, unavailable: bool = False
) -> list[Any]:
    types = []
    for itype in catalog():
        if itype.name == type_name:
            kept = []
            for o in itype.offerings:
                if o.zone == zone and o.capacity_type == capacity_type:
                    if not unavailable:
                        continue
                    o = replace(o, available=False)
                kept.append(o)
            itype = replace(itype, offerings=tuple(kept))
        types.append(itype)
    return types


def test_instance_type_not_found_when_its_offering_is_gone_but_not_when_it_is_only_unavailable() -> None:
    nodes = [node("n", "m5.xlarge", pods=busy("w", 4), zone="us-east-1a")]
    bootable = {"default": {t.name for t in catalog()}}
    gone = planner_input(nodes, bootable=bootable)
    gone.instance_types = _catalog_without("m5.xlarge", "us-east-1a", "on-demand")
    result = plan(gone)
    assert _drifted(result) == ["n"]
    assert result.command is not None and "no on-demand offering in us-east-1a" in result.command.explanation
    refused = planner_input(nodes, bootable=bootable)
    refused.instance_types = _catalog_without("m5.xlarge", "us-east-1a", "on-demand", unavailable=True)
    assert _drifted(plan(refused)) == []


RESERVING_POOL = pool(capacity_types=[wk.RESERVED, wk.ON_DEMAND])


def _reserved(name: str, reservation: str) -> NodeState:
    labels = {wk.CAPACITY_TYPE: wk.RESERVED, wk.CAPACITY_RESERVATION_ID: reservation}
    return replace(node(name, "m5.xlarge", pods=busy(name, 4), labels=labels), capacity_type=wk.RESERVED)


def test_capacity_reservation_terms_edit_drifts_only_nodes_in_reservations_no_longer_selected() -> None:
    before = nodeclass()
    after = nodeclass(capacityReservationSelectorTerms=[{"id": "cr-0123456789abcdef1"}])
    launched = nodeclass_hash(before)
    nodes = [
        _reserved("a-reserved", "cr-0123456789abcdef0"),
        node("b-plain", "m5.xlarge", pods=busy("p", 4), nodeclass_hash=launched),
    ]
    nodes[0].nodeclass_hash = launched
    inp = planner_input(
        nodes,
        [RESERVING_POOL],
        nodeclasses=[after],
        nodeclass_hashes={"default": nodeclass_hash(after)},
        reservations={"default": {"cr-0123456789abcdef1"}},
    )
    result = plan(inp)
    assert _drifted(result) == ["a-reserved"]
    assert result.command is not None
    assert "capacity reservation cr-0123456789abcdef0 is no longer selected" in result.command.explanation
    inp.nodes = [nodes[1]]
    assert _drifted(plan(inp)) == []


def test_a_reservation_still_selected_or_not_resolved_is_no_drift() -> None:
    nodes = [_reserved("r", "cr-1")]
    selected = planner_input(nodes, [RESERVING_POOL], reservations={"default": {"cr-1"}})
    assert _drifted(plan(selected)) == []
    assert _drifted(plan(planner_input(nodes, [RESERVING_POOL]))) == []
    dropped = planner_input(nodes, [RESERVING_POOL], reservations={"default": set()})
    assert _drifted(plan(dropped)) == ["r"]


def test_spelling_out_the_alias_family_does_not_drift_the_nodes() -> None:
    before, after = nodeclass(), nodeclass(amiFamily="AL2023")
    nodes = [node("n", "m5.xlarge", pods=busy("w", 4), nodeclass_hash=nodeclass_hash(before))]
    inp = planner_input(nodes, nodeclasses=[after], nodeclass_hashes={"default": nodeclass_hash(after)})
    assert _drifted(plan(inp)) == []


def test_reservations_a_node_class_selects_are_known_only_when_resolved() -> None:
    plain = nodeclass("plain")
    reserving = nodeclass("reserving", capacityReservationSelectorTerms=[{"id": "cr-0123456789abcdef0"}])
    config = ProvisionerConfig(cluster_name="c", nodepools=[pool()], nodeclasses=[plain, reserving])
    selected: dict[str, set[str]] = {}
    reader = InputReader(
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        config,
        catalogs=lambda: ([], {}),
        class_reservations=lambda: selected,
    )
    # Terms that resolved to nothing this pass: unknown. No terms: none selected.
    assert reader._selected_reservations() == {"plain": set()}
    selected["reserving"] = {"cr-0123456789abcdef0"}
    assert reader._selected_reservations() == {"plain": set(), "reserving": {"cr-0123456789abcdef0"}}


def test_instance_type_not_found_when_the_nodepool_requirements_no_longer_allow_the_type() -> None:
    # The node lacks the instance-generation label, but its type (m5: generation 5) is no longer allowed.
    bare = node("n", "m5.xlarge", pods=busy("w", 4))
    del bare.node.labels["karpenter.k8s.aws/instance-generation"]
    newer = pool(
        requirements=[
            {"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["m5.xlarge", "m6i.xlarge"]},
            {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]},
            {"key": "karpenter.k8s.aws/instance-generation", "operator": "Gt", "values": ["5"]},
        ]
    )
    result = plan(planner_input([bare], [newer]))
    assert _drifted(result) == ["n"]
    assert result.command is not None
    assert "instance type m5.xlarge is no longer allowed by NodePool default's requirements" in (
        result.command.explanation
    )
