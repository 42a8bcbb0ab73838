"""Running a replay: the world it builds holds what the trace's pods need."""

from __future__ import annotations

from collections.abc import Callable

from fleetwright.local.simulate.runner import replay
from fleetwright.local.simulate.trace import TracePod
from fleetwright.local.simulate.world import WorldSpec
from tests.support.simulate import nodepool, trace

SpecFor = Callable[..., WorldSpec]


def test_pods_in_their_own_namespaces_run(spec_for: SpecFor) -> None:
    # The shipped diurnal day puts its pods in namespaces web and batch: the replay creates them.
    items = [
        TracePod("frontend-1", 5.0, 300.0, "1", "1Gi", owner="frontend", namespace="web"),
        TracePod("etl-1", 5.0, 300.0, "1", "1Gi", owner="etl", namespace="batch"),
    ]
    outcome = replay(spec_for(nodepool()), trace(items, 600.0))
    assert outcome.errors == []
    # Launched at 6, Ready at 51: both pods run then.
    assert [life.started for life in outcome.lives.values()] == [[51.0], [51.0]]
