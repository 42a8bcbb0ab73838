"""``export_catalog``: the region's instance types as a catalog document the loader reads back."""

from __future__ import annotations

import json

from fleetwright.aws.catalog_export import export_catalog
from fleetwright.aws.clients import reset_clients
from fleetwright.catalog.loader import parse_catalog
from fleetwright.model import labels as wk
from tests.support.aws import REGION, Aws, node_class


def test_export_round_trips_through_the_catalog_loader(aws: Aws) -> None:
    reset_clients()
    # The module-scope clients of the region are used; give them the same fake spot market.
    from fleetwright.aws.clients import clients_for

    aws.spot.install(clients_for(REGION).ec2)
    document = export_catalog(
        REGION, node_class(amiSelectorTerms=[{"alias": "al2@latest"}], kubelet={"maxPods": 20})
    )
    types = {t.name: t for t in parse_catalog(json.dumps(document))}
    assert "m5.large" in types
    assert not any(
        t.labels.get(wk.ARCH) == "arm64" and wk.INSTANCE_GPU_COUNT in t.labels for t in types.values()
    )
    m5 = types["m5.large"]
    assert m5.capacity["pods"] == 20
    spot = {o.zone: o.price for o in m5.offerings if o.capacity_type == "spot"}
    assert spot["us-east-1a"] == aws.spot_price("m5.large", "us-east-1a")
    reset_clients()


def test_cli_exports_a_catalog_that_plan_reads(aws: Aws, tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from fleetwright.aws.clients import clients_for
    from fleetwright.cli import main

    reset_clients()
    aws.spot.install(clients_for(REGION).ec2)
    assert main(["catalog", "export", "--region", REGION, "-f", "examples/inflate/"]) == 0
    catalog = tmp_path / "catalog.json"
    catalog.write_text(capsys.readouterr().out)
    assert main(["plan", "-f", "examples/inflate/", "--instance-types", str(catalog), "-o", "json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert [c["instanceTypes"][0] for c in plan["nodeClaims"]] == ["m5.large"]
    reset_clients()


def test_cli_export_needs_one_node_class(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from fleetwright.cli import main

    empty = tmp_path / "empty.yaml"
    empty.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: x}]}\n"
    )
    assert main(["catalog", "export", "--region", REGION, "-f", str(empty)]) == 2
    assert "expected exactly one EC2NodeClass" in capsys.readouterr().err


def test_export_for_a_windows_node_class_lists_windows_nodes(aws: Aws) -> None:
    from fleetwright.aws.clients import clients_for

    reset_clients()
    aws.spot.install(clients_for(REGION).ec2)
    document = export_catalog(
        REGION, node_class(amiSelectorTerms=[{"alias": "windows2022@latest"}], kubelet={"maxPods": 50})
    )
    types = {t.name: t for t in parse_catalog(json.dumps(document))}
    assert "m5.large" in types and "m6g.large" not in types
    m5 = types["m5.large"]
    assert m5.labels[wk.OS] == "windows" and m5.labels[wk.WINDOWS_BUILD] == "10.0.20348"
    assert m5.capacity["pods"] == 50  # maxPods over Windows' 110
    assert m5.capacity["vpc.amazonaws.com/PrivateIPv4Address"] == 9
    reset_clients()
