"""The lower bound counts the pods that start and end inside one of its intervals: the LP solves'
duals price the pods running at every moment, and the bound stays below what any cluster pays."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from fleetwright.local.simulate.bound import integrate, load_lp_bound, lp_bound_function
from fleetwright.local.simulate.report import figures
from fleetwright.local.simulate.runner import catalog_for, replay
from fleetwright.local.simulate.trace import TracePod
from fleetwright.local.simulate.world import START_EPOCH, WorldSpec
from fleetwright.model.pod import Pod
from fleetwright.scheduling.templates import nodepool_templates
from tests.support.simulate import nodepool, trace

M5_LARGE = 0.096  # on-demand $/h in the built-in us-east-1 catalog; one 1-CPU pod fills its room

SpecFor = Callable[..., WorldSpec]


def _solver(spec: WorldSpec):  # type: ignore[no-untyped-def]
    module = load_lp_bound()
    assert module is not None, "bench/lp_bound.py and scipy are development dependencies"
    templates = nodepool_templates(spec.nodepools, spec.nodeclasses, [])
    return lp_bound_function(module, templates, catalog_for(spec), time_limit=30.0)


def _short_pods() -> list[TracePod]:
    # Six 1-CPU pods of 300 s, one every 100 s: never one through a whole 900-s interval, up to 3 at once.
    return [TracePod(f"p{i}", 100.0 * (i + 1), 100.0 * (i + 1) + 300, "1", "1Gi") for i in range(6)]


def test_pods_shorter_than_an_interval_are_priced_at_every_moment(spec_for: SpecFor) -> None:
    spec = spec_for(nodepool())
    day = trace(_short_pods(), 3600.0)

    def intervals_only(running: Sequence[Pod]) -> tuple[float, float]:
        return (M5_LARGE * len(running), float(len(running)))

    assert integrate(day, intervals_only, 900.0).instance_dollars == 0  # no pod runs a whole interval
    bound = integrate(day, _solver(spec), 900.0)
    # Each pod needs an m5.large of its own while it runs: 1,800 pod-seconds at $0.096/h.
    assert bound.instance_dollars == pytest.approx(6 * 300 * M5_LARGE / 3600, rel=1e-6)
    paid = figures("default", replay(spec, day), START_EPOCH).instance_dollars
    assert 0 < bound.instance_dollars <= paid


def test_the_bound_is_never_below_the_intervals_packing_nor_above_the_bill(spec_for: SpecFor) -> None:
    spec = spec_for(nodepool(types=("m5.large", "m5.xlarge", "c5.xlarge")))
    items = [
        *(TracePod(f"long{i}", 0.0, None, "1500m", "2Gi") for i in range(3)),
        *(TracePod(f"short{i}", 60.0 * i, 60.0 * i + 120, "500m", "6Gi") for i in range(10)),
        *(TracePod(f"late{i}", 950.0 + 30 * i, 1700.0, "1", "1Gi") for i in range(4)),
    ]
    day = trace(items, 1800.0)
    solver = _solver(spec)

    def intervals_only(running: Sequence[Pod]) -> tuple[float, float]:
        return solver(running)  # the same solves, without the prices of the pods between them

    coarse = integrate(day, intervals_only, 900.0)
    bound = integrate(day, solver, 900.0)
    assert coarse.instance_dollars > 0
    assert bound.instance_dollars > coarse.instance_dollars  # the late pods start inside an interval
    assert [p.nodes for p in bound.series] == [p.nodes for p in coarse.series]
    paid = figures("default", replay(spec, day), START_EPOCH).instance_dollars
    assert bound.instance_dollars <= paid
