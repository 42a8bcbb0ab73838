"""Fixture local to the replay tests: the WorldSpec of a NodePool document (builders are in
``tests/support/simulate.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetwright.catalog.loader import builtin_catalog
from fleetwright.local.simulate.world import WorldSpec
from fleetwright.manifests import load_manifests
from tests.support.simulate import NODECLASS


@pytest.fixture
def spec_for(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A function making the WorldSpec of a NodePool document (with the default EC2NodeClass)."""

    def make(pool: str, **options: object) -> WorldSpec:
        path = tmp_path / "pools.yaml"
        path.write_text(pool + "\n---\n" + NODECLASS)
        manifests = load_manifests([str(path)])
        return WorldSpec(manifests.nodepools, manifests.nodeclasses, builtin_catalog("us-east-1"), **options)  # type: ignore[arg-type]

    return make
