"""bench/day.py's traces: the shipped days, cut to their first hours, and a NodePool that admits them."""

from __future__ import annotations

from consolidation import nodepool
from day import SHIPPED, arguments, nodeclass, traces, unfit_shapes

from fleetwright.catalog.loader import builtin_catalog
from fleetwright.local.simulate.trace import Trace, TracePod
from fleetwright.local.simulate.tracefile import read_trace
from fleetwright.local.simulate.world import WorldSpec


def test_the_shipped_traces_are_replayed_by_default_cut_to_the_hours_asked() -> None:
    found = traces(arguments().parse_args(["--hours", "1"]))
    assert [label.split(":")[0] for label, _ in found] == ["azure-vm-day.csv", "diurnal-day.csv"]
    for (_, trace), path in zip(found, SHIPPED, strict=True):
        whole = read_trace(path)
        assert trace.duration == 3600
        assert [p.name for p in trace.pods] == [p.name for p in whole.pods if p.start < 3600]


def test_pods_draws_a_diurnal_trace_instead() -> None:
    [(label, trace)] = traces(arguments().parse_args(["--pods", "150", "--hours", "2", "--seed", "3"]))
    assert len(trace.pods) == 150 and trace.duration == 7200
    assert label.startswith("diurnal: 150 pods over 2 h")


def test_the_bench_nodepool_admits_every_pod_of_the_shipped_traces() -> None:
    spec = WorldSpec([nodepool()], [nodeclass()], builtin_catalog("us-east-1"))
    for path in SHIPPED:
        assert unfit_shapes(spec, read_trace(path)) == [], path
    huge = Trace((TracePod("huge", 0.0, None, "500", "4Ti"),), 60.0)  # no c/m/r instance is that large
    assert unfit_shapes(spec, huge) == ["500/4Ti"]
