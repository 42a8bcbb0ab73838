"""Catalog files: loading, validation errors, kubelet adjustment and the JSON round trip."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fleetwright.catalog import catalog_to_json, load_catalog, with_kubelet
from fleetwright.model.errors import DocumentError
from fleetwright.model.kubelet import KubeletOverrides

MI = 2**20
GI = 2**30
P = "karpenter.k8s.aws/"


def entry(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": "m5.large",
        "capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
        "offerings": [{"zone": "us-east-1a", "capacityType": "on-demand", "price": 0.096, "available": True}],
    }
    base.update(overrides)
    return base


def write(tmp_path: Path, document: Any, name: str = "catalog.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(document) if not isinstance(document, str) else document)
    return path


def test_minimal_file(tmp_path):
    (it,) = load_catalog(write(tmp_path, {"instanceTypes": [entry()]}))
    assert it.name == "m5.large"
    assert it.capacity == {"cpu": 2000, "memory": 8 * GI, "pods": 29}
    assert it.allocatable["cpu"] == 1930
    assert it.allocatable["pods"] == 29
    assert it.offerings[0].price == 0.096
    assert it.offerings[0].capacity_type == "on-demand"
    assert not it.explicit_allocatable


def test_labels_are_derived_from_name_and_capacity(tmp_path):
    path = write(
        tmp_path,
        {
            "instanceTypes": [
                entry(),
                entry(name="c7gn.16xlarge", capacity={"cpu": 64, "memory": "128Gi"}),
                entry(name="u-6tb1.112xlarge", capacity={"cpu": 448, "memory": "6Ti"}),
            ]
        },
    )
    m5, c7gn, u6tb = load_catalog(path)
    assert m5.labels == {
        "node.kubernetes.io/instance-type": "m5.large",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        P + "instance-family": "m5",
        P + "instance-category": "m",
        P + "instance-generation": "5",
        P + "instance-size": "large",
        P + "instance-cpu": "2",
        P + "instance-memory": "8192",
        P + "instance-capability-flex": "false",
    }
    assert c7gn.labels["kubernetes.io/arch"] == "arm64"
    assert c7gn.labels[P + "instance-family"] == "c7gn"
    assert c7gn.labels[P + "instance-memory"] == "131072"
    assert u6tb.labels[P + "instance-category"] == "u"
    assert u6tb.labels[P + "instance-generation"] == "1"


def test_given_labels_override_derived_ones(tmp_path):
    labels = {"kubernetes.io/arch": "arm64", "team": "ml"}
    (it,) = load_catalog(write(tmp_path, {"instanceTypes": [entry(labels=labels)]}))
    assert it.labels["kubernetes.io/arch"] == "arm64"
    assert it.labels["team"] == "ml"


def test_eni_limits_give_pods_when_capacity_omits_them(tmp_path):
    doc = entry(
        capacity={"cpu": "96", "memory": "384Gi"}, eniLimits={"interfaces": 15, "ipv4PerInterface": 50}
    )
    (it,) = load_catalog(write(tmp_path, {"instanceTypes": [doc]}))
    assert it.capacity["pods"] == 737
    assert it.eni_limits == (15, 50)
    (no_limits,) = load_catalog(
        write(tmp_path, {"instanceTypes": [entry(capacity={"cpu": 2, "memory": "8Gi"})]})
    )
    assert no_limits.capacity["pods"] == 110


def test_verbatim_allocatable(tmp_path):
    doc = entry(allocatable={"cpu": "1500m", "memory": "6Gi", "pods": 20})
    (it,) = load_catalog(write(tmp_path, {"instanceTypes": [doc]}))
    assert it.allocatable == {"cpu": 1500, "memory": 6 * GI, "pods": 20}
    assert it.explicit_allocatable
    (same,) = with_kubelet([it], KubeletOverrides(max_pods=110))
    assert same.allocatable == it.allocatable


@pytest.mark.parametrize(
    ("document", "path", "words"),
    [
        (
            {
                "instanceTypes": [
                    entry(),
                    entry(
                        name="c5.large",
                        offerings=[{"zone": "us-east-1a", "capacityType": "spot", "price": "cheap"}],
                    ),
                ]
            },
            "instanceTypes[1].offerings[0].price",
            "number",
        ),
        (
            {"instanceTypes": [entry(offerings=[{"zone": "a", "capacityType": "spot", "price": -0.1}])]},
            "instanceTypes[0].offerings[0].price",
            "greater than or equal to 0",
        ),
        (
            {"instanceTypes": [{"capacity": {"cpu": "2", "memory": "8Gi"}}]},
            "instanceTypes[0].name",
            "required",
        ),
        ({"instanceTypes": [entry(cpus=2)]}, "instanceTypes[0].cpus", "not permitted"),
        ({"instanceTypes": [entry(capacity={"cpu": "2"})]}, "instanceTypes[0].capacity", "missing memory"),
        (
            {"instanceTypes": [entry(capacity={"cpu": "two", "memory": "8Gi"})]},
            "instanceTypes[0].capacity",
            "invalid quantity",
        ),
        (
            {"instanceTypes": [entry(offerings=[{"zone": "a", "capacityType": "spot-ish", "price": 1}])]},
            "instanceTypes[0].offerings[0].capacityType",
            "on-demand",
        ),
        ({"instanceTypes": [entry(), entry()]}, "instanceTypes[1].name", "duplicate"),
        ({"types": []}, "instanceTypes", "required"),
    ],
)
def test_bad_files_name_file_and_field(tmp_path, document, path, words):
    file = write(tmp_path, document, "bad.json")
    with pytest.raises(DocumentError) as caught:
        load_catalog(file)
    message = str(caught.value)
    line = next((line for line in message.splitlines() if f": {path}: " in line), None)
    assert line is not None, message
    assert str(file) in line
    assert words in line


def test_invalid_json_and_missing_file(tmp_path):
    with pytest.raises(DocumentError, match=r"bad\.json.*not valid JSON"):
        load_catalog(write(tmp_path, '{"instanceTypes": [', "bad.json"))
    with pytest.raises(DocumentError, match=r"nope\.json.*cannot read"):
        load_catalog(tmp_path / "nope.json")


def test_with_kubelet_adjusts_pods_and_allocatable(tmp_path):
    doc = entry(eniLimits={"interfaces": 3, "ipv4PerInterface": 10})
    (it,) = load_catalog(write(tmp_path, {"instanceTypes": [doc]}))
    kubelet = KubeletOverrides(max_pods=110, eviction_hard={"memory.available": "10%"})
    (adjusted,) = with_kubelet([it], kubelet)
    assert adjusted.capacity["pods"] == 110
    assert adjusted.allocatable["pods"] == 110
    node_memory = (8192 - 615) * MI
    assert adjusted.allocatable["memory"] == node_memory - 574 * MI - -(-node_memory // 10)
    assert it.capacity["pods"] == 29  # the original is untouched
    assert with_kubelet([it], None)[0].allocatable == it.allocatable


def test_json_round_trip(tmp_path):
    original = [
        entry(labels={"team": "ml"}, eniLimits={"interfaces": 3, "ipv4PerInterface": 10}),
        entry(
            name="g5.xlarge",
            capacity={"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": 1, "ephemeral-storage": "100Gi"},
            allocatable={"cpu": "3920m", "memory": "14Gi", "nvidia.com/gpu": "1", "pods": "58"},
            offerings=[
                {"zone": "us-east-1b", "capacityType": "spot", "price": 0.4, "available": False},
                {"zone": "us-east-1a", "capacityType": "on-demand", "price": 1.006},
            ],
        ),
    ]
    first = sorted(load_catalog(write(tmp_path, {"instanceTypes": original}, "a.json")), key=lambda t: t.name)
    for minimal in (False, True):
        document = catalog_to_json(first, minimal_labels=minimal)
        again = load_catalog(write(tmp_path, document, "b.json"))
        assert [
            (t.name, t.capacity, t.allocatable, t.labels, set(t.offerings), t.eni_limits) for t in again
        ] == [(t.name, t.capacity, t.allocatable, t.labels, set(t.offerings), t.eni_limits) for t in first]
        assert [t.explicit_allocatable for t in again] == [True, False]  # g5.xlarge, m5.large
