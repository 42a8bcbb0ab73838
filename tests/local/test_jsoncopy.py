"""The store's JSON copy: what a caller changes in a copy never reaches the stored object."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from fleetwright.local.apiserver.jsoncopy import json_copy


def test_changing_the_copy_leaves_the_original_alone() -> None:
    def made() -> dict[str, Any]:
        return {"metadata": {"labels": {"a": "1"}, "finalizers": ["x"]}, "spec": {"n": 1.5, "ok": True}}

    original = made()
    copied = json_copy(original)
    copied["metadata"]["labels"]["a"] = "2"
    copied["metadata"]["finalizers"].append("y")
    assert original == made()
    assert copied["spec"] == {"n": 1.5, "ok": True}


def test_values_json_does_not_have_are_deep_copied_too() -> None:
    inner = [1, 2]
    original: dict[str, Any] = {"pair": (inner, "b"), "amount": Decimal("1.25"), "none": None}
    copied = json_copy(original)
    copied["pair"][0].append(3)
    assert inner == [1, 2]
    assert copied == {"pair": ([1, 2, 3], "b"), "amount": Decimal("1.25"), "none": None}
