"""The cluster over time that the report keeps for each policy and the lower bound (what
``fleetwright simulate --plot`` draws), and "nodes needed", the launches a cluster following the lower
bound would make."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import SimpleNamespace

import pytest

from fleetwright.local.simulate.bound import integrate, lp_bound_function
from fleetwright.local.simulate.report import Figures, Point, figures, nodes_needed, render_table
from fleetwright.local.simulate.runner import replay
from fleetwright.local.simulate.trace import TracePod
from fleetwright.local.simulate.world import START_EPOCH, WorldSpec
from fleetwright.model.pod import Pod
from tests.scheduling.builders import pod
from tests.support.simulate import nodepool, pods, trace

M5_LARGE = 0.096  # on-demand $/h in the built-in us-east-1 catalog
ROOT_VOLUME = 20 * 0.08 / 730  # AL2023's default 20 GiB gp3 root volume, $ per hour

SpecFor = Callable[..., WorldSpec]


def test_one_pod_gives_one_node_for_its_life(spec_for: SpecFor) -> None:
    # The pod arrives at 5; its m5.large is launched at 6, runs (and bills) from 16, and is removed by
    # the first disruption pass after the pod's end at 605 plus consolidateAfter 5 min: 960.
    outcome = replay(spec_for(nodepool()), trace(pods(1, 5.0, 605.0), 3600.0))
    series = figures("default", outcome, START_EPOCH).series
    hourly = M5_LARGE + ROOT_VOLUME
    assert [(p.at, p.nodes) for p in series] == [(0, 0), (6, 1), (16, 1), (960, 0), (3600, 0)]
    assert [p.hourly for p in series] == pytest.approx([0, 0, hourly, 0, 0])


def test_the_series_adds_up_to_the_bill(spec_for: SpecFor) -> None:
    outcome = replay(spec_for(nodepool()), trace(pods(3, 5.0, 605.0), 3600.0))
    result = figures("default", outcome, START_EPOCH)
    steps = zip(result.series, result.series[1:], strict=False)
    integral = sum(a.hourly * (b.at - a.at) / 3600 for a, b in steps)
    assert integral == pytest.approx(result.instance_dollars + result.volume_dollars + result.address_dollars)
    assert max(p.nodes for p in result.series) == result.peak_nodes == 3


def test_nodes_needed_counts_the_first_whole_nodes_and_every_rise() -> None:
    nodes = [0.5, 2.0000001, 1.2, 3.4, 3.0]
    series = [Point(300 * i, count, 1.0) for i, count in enumerate(nodes)]
    # ceil: 1, 2 (a ten-millionth over 2 is LP noise), 2, 4, 3: 1 at first, +1, +0, +2, +0.
    assert nodes_needed(series) == 4
    assert nodes_needed([]) == 0
    assert nodes_needed([Point(0, 0, 0), Point(300, 2.5, 1), Point(600, 0, 0), Point(900, 1, 1)]) == 4


def test_the_bound_series_is_its_figure_per_interval() -> None:
    items = [*pods(2, 0.0, 900.0), *(TracePod(f"q{i}", 300.0, None, "1", "1Gi") for i in range(3))]

    def bound(running: Sequence[Pod]) -> tuple[float, float]:
        return 0.1 * len(running), 0.5 * len(running)

    result = integrate(trace(items, 1000.0), bound, 300.0)
    # [0,300): p0 p1; [300,600): 5 pods; [600,900): 5 pods; [900,1000): the 3 q pods.
    assert result.series == [
        Point(0, 1.0, pytest.approx(0.2)),
        Point(300, 2.5, pytest.approx(0.5)),
        Point(600, 2.5, pytest.approx(0.5)),
        Point(900, 1.5, pytest.approx(0.3)),
        Point(1000, 1.5, pytest.approx(0.3)),
    ]
    assert result.nodes_needed == 3  # 1, then 3


def test_the_table_divides_launches_by_the_nodes_needed() -> None:
    bound = Figures("lower bound", 1.0, 1.0, 2.5, 0, bound=True, series=[Point(0, 1, 1), Point(300, 2.5, 2)])
    policy = Figures("default", 2.0, 2.0, 4, 12)
    table = render_table([policy, bound], 600.0)
    row = next(line for line in table.splitlines() if line.startswith("launches / node needed"))
    assert row.split()[-3:] == ["4.00", "3", "needed"]  # 12 launches / 3 nodes needed
    assert policy.as_json(bound.nodes_needed)["launchesPerNodeNeeded"] == 4.0
    assert "launches / node needed" not in render_table([policy], 600.0)


def test_solves_stopped_by_the_time_limit_are_counted_and_noted() -> None:
    class Result:
        def __init__(self, kind: str) -> None:
            self.kind, self.value, self.nodes = kind, 1.0, 1.0

    class Module:
        EXACT = "exact LP"

        @staticmethod
        def packing_problem(pods: Sequence[Pod], *_: object) -> SimpleNamespace:
            return SimpleNamespace(classes=[len(pods)], demand=[len(pods)])

        @staticmethod
        def lp_bound(problem: SimpleNamespace, time_limit: float) -> Result:
            return Result("Farley" if problem.classes[0] > 1 else "exact LP")

    solver = lp_bound_function(Module(), [], [], time_limit=2.0)
    assert solver.note() is None
    one, two = (pod(f"p{i}") for i in range(2))
    for mix in ([one], [one, two], [one, two]):  # the same mix twice is solved once
        solver(mix)
    assert solver.stopped == 1
    bound = integrate(trace(pods(2, 0.0, None), 600.0), solver, 300.0)
    assert bound.approximate  # marked in the table: "~1 needed"
    assert "~1 needed" in render_table([bound], 600.0)
    assert solver.note() == (
        "1 of 2 LP solves stopped at the 2 s time limit: their intervals have a weaker bound and an "
        "approximate node count (--bound-time-limit)"
    )
