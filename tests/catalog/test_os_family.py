"""Instance types as a Windows node class boots them, recomputed when the catalog changes."""

from __future__ import annotations

import dataclasses

from fleetwright.catalog.loader import builtin_catalog
from fleetwright.catalog.os_family import for_ami_family
from fleetwright.model import labels as wk


def test_a_catalog_edited_in_place_gets_fresh_windows_views() -> None:
    by_name = {it.name: it for it in builtin_catalog("us-east-1")}
    catalog = [by_name["m5.large"], by_name["c5.large"]]
    first = for_ami_family(catalog, "Windows2022")
    assert [(it.name, it.labels[wk.OS]) for it in first] == [("m5.large", "windows"), ("c5.large", "windows")]
    assert first[0].offerings

    catalog[0] = dataclasses.replace(by_name["m5.large"], offerings=())  # e.g. a refreshed offering list
    second = for_ami_family(catalog, "Windows2022")
    assert [it.name for it in second] == ["m5.large", "c5.large"]
    assert second[0].offerings == ()

    catalog.append(by_name["m6g.large"])  # arm64: no Windows
    assert [it.name for it in for_ami_family(catalog, "Windows2022")] == ["m5.large", "c5.large"]
    assert [it.labels[wk.WINDOWS_BUILD] for it in for_ami_family(catalog, "Windows2019")] == [
        "10.0.17763",
        "10.0.17763",
    ]
