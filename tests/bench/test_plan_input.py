"""bench/plan_input.py writes manifests that ``fleetwright plan`` reads as intended."""

from __future__ import annotations

from pathlib import Path

from plan_input import manifests

from fleetwright.model import resources as res
from fleetwright.model.labels import INSTANCE_FAMILY
from fleetwright.plan import make_plan


def test_the_manifests_plan_every_pod_within_the_limit_and_min_values(tmp_path: Path) -> None:
    path = tmp_path / "input.yaml"
    path.write_text(manifests(300, limit_cpu=1000, min_values=3, packing=None))
    plan = make_plan([str(path)])
    (pool,) = plan.input.nodepools
    assert pool.limits == {"cpu": 1_000_000}
    assert pool.packing == "LowestCost"
    assert pool.requirements.get(INSTANCE_FAMILY).min_values == 3  # type: ignore[union-attr]
    assert [d.name for d in plan.input.daemonsets] == ["agent"]
    assert len(plan.input.pods) == 300 and plan.results.scheduled == 300
    counted = res.add(*(res.maximum(it.capacity for it in c.instance_types) for c in plan.results.new_claims))
    assert counted["cpu"] <= 1_000_000
    for claim in plan.results.new_claims:
        assert len({it.labels[INSTANCE_FAMILY] for it in claim.instance_types}) >= 3


def test_the_packing_annotation_is_written_when_asked(tmp_path: Path) -> None:
    path = tmp_path / "input.yaml"
    path.write_text(manifests(50, limit_cpu=None, min_values=None, packing="FewerNodes"))
    plan = make_plan([str(path)])
    (pool,) = plan.input.nodepools
    assert pool.packing == "FewerNodes" and pool.limits is None
    assert plan.results.scheduled == 50
