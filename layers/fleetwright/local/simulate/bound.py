"""The lower bound beside the policies: the LP bound of ``bench/lp_bound.py`` (column generation over
the NodePools' instance types, the same bound the packing benches report) of the pods running, integrated
over the trace.

The trace is cut into intervals of ``interval`` seconds; over each, the pods running through the whole
interval (a subset of those running at any moment of it) are packed by the LP relaxation, so each
interval's bound is below the cost of any cluster at any moment of it. Pods that start or end inside an
interval are not in that packing; the LP's duals count them: each solve's demand duals, scaled to be
feasible for any demand (``lp_bound.any_demand_prices``), price the pods running at every moment, and the
bound at a moment is the largest of its interval's LP value and these prices of the pods running then.
Integrated, it is a lower bound on the replay's instance dollars (it ignores node start, the 60 s billing
minimum and every constraint but requests). Nodes are the LP solution's (fractional) node count per
interval; their rises are the launches a clairvoyant cluster following the bound would make
(:func:`~fleetwright.local.simulate.report.nodes_needed`).

The bound needs the repository's ``bench/lp_bound.py`` and scipy (development dependencies):
:func:`load_lp_bound` finds it from the working directory or this package's checkout, or returns None.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fleetwright.local.simulate.engine import pod_object
from fleetwright.local.simulate.report import Figures, Point
from fleetwright.local.simulate.trace import Trace, TracePod
from fleetwright.model.instancetype import InstanceType
from fleetwright.model.kube import pod_from_object
from fleetwright.model.pod import Pod
from fleetwright.scheduling import vectors as vec
from fleetwright.scheduling.types import NodePoolTemplate

if TYPE_CHECKING:
    import numpy as np

DEFAULT_INTERVAL_SECONDS = 300.0
DEFAULT_TIME_LIMIT_SECONDS = 30.0
BOUND_POLICY = "lower bound"

# ($/h, nodes) of packing these pods on new nodes.
BoundFunction = Callable[[Sequence[Pod]], tuple[float, float]]


def _find_bench(start: Path) -> Path | None:
    for base in (start, *start.parents):
        candidate = base / "bench" / "lp_bound.py"
        if candidate.is_file():
            return candidate
    return None


def load_lp_bound() -> Any | None:
    """The ``lp_bound`` module of the repository's benches, or None when it (or scipy) is missing."""
    if "lp_bound" in sys.modules:
        return sys.modules["lp_bound"]
    path = _find_bench(Path.cwd()) or _find_bench(Path(__file__).resolve().parent)
    if path is None:
        return None
    spec = importlib.util.spec_from_file_location("lp_bound", path)
    if spec is None or spec.loader is None:
        return None
    module = importlib.util.module_from_spec(spec)
    try:
        sys.modules["lp_bound"] = module
        spec.loader.exec_module(module)
    except ImportError:  # scipy missing
        sys.modules.pop("lp_bound", None)
        return None
    return module


class LPBoundFunction:
    """The bench's LP bound of pods on new nodes of ``templates`` (one solve per distinct pod mix),
    counting the solves the time limit stopped: their dollars are still a lower bound (a Farley bound),
    but weaker, and their node count is that of the last restricted master, not of the LP optimum, so
    both then depend on how fast the machine was."""

    def __init__(
        self,
        module: Any,
        templates: Sequence[NodePoolTemplate],
        instance_types: list[InstanceType],
        time_limit: float = DEFAULT_TIME_LIMIT_SECONDS,
    ) -> None:
        self.module = module
        self.templates = list(templates)
        self.instance_types = instance_types
        self.time_limit = time_limit
        self.solved: dict[tuple[tuple[Any, ...], tuple[int, ...]], tuple[float, float]] = {}
        self.stopped = 0  # solves the time limit stopped
        # Per solve: its dims and, per class (request vector over them), a price valid for any demand.
        self.prices: list[tuple[tuple[str, ...], dict[tuple[int, ...], float]]] = []

    def __call__(self, pods: Sequence[Pod]) -> tuple[float, float]:
        if not pods:
            return 0.0, 0.0
        problem = self.module.packing_problem(pods, self.instance_types, (), self.templates)
        key = (tuple(problem.classes), tuple(problem.demand))
        if key not in self.solved:
            result = self.module.lp_bound(problem, self.time_limit)
            self.stopped += result.kind != self.module.EXACT
            self.solved[key] = (float(result.value), float(result.nodes))
            duals = getattr(result, "duals", None)
            if duals is not None:
                scaled = self.module.any_demand_prices(problem, duals)
                classes = {tuple(c): float(v) for c, v in zip(problem.classes, scaled, strict=True) if v > 0}
                self.prices.append((tuple(problem.dims), classes))
        return self.solved[key]

    def price_matrix(self, pods: Sequence[Pod]) -> np.ndarray:
        """Per solve (rows), each of ``pods``' price (columns): what one such pod adds to the bound."""
        import numpy as np  # with scipy: a development dependency, as the bench module is

        matrix = np.zeros((len(self.prices), len(pods)))
        for row, (dims, classes) in enumerate(self.prices):
            for column, pod in enumerate(pods):
                matrix[row, column] = classes.get(vec.pod_need(pod.requests, dims), 0.0)
        return matrix

    def note(self) -> str | None:
        """A line for the report when some solve was stopped, else None."""
        if not self.stopped:
            return None
        limit = f"{self.time_limit:g} s"
        return (
            f"{self.stopped} of {len(self.solved)} LP solves stopped at the {limit} time limit: "
            "their intervals have a weaker bound and an approximate node count (--bound-time-limit)"
        )


def lp_bound_function(
    module: Any,
    templates: Sequence[NodePoolTemplate],
    instance_types: list[InstanceType],
    time_limit: float = DEFAULT_TIME_LIMIT_SECONDS,
) -> LPBoundFunction:
    """The bench's LP bound of pods on new nodes of ``templates`` (one solve per distinct pod mix)."""
    return LPBoundFunction(module, templates, instance_types, time_limit)


def _pods(trace: Trace) -> list[tuple[TracePod, Pod]]:
    converted: dict[tuple[str, str, int], Pod] = {}
    pairs = []
    for item in trace.pods:
        key = (item.cpu, item.memory, item.gpu)
        if key not in converted:
            converted[key] = pod_from_object(pod_object(item))
        pairs.append((item, converted[key]))
    return pairs


def integrate(trace: Trace, bound: BoundFunction, interval: float = DEFAULT_INTERVAL_SECONDS) -> Figures:
    """The bound's dollars, node-hours and peak (fractional) nodes over ``trace``, and its series: one
    point an interval (its nodes and average $/h), and one at the trace's end."""
    pairs = _pods(trace)
    node_hours = peak = 0.0
    intervals: list[tuple[float, float, float, float]] = []  # start, stop, LP $/h, LP nodes
    start = 0.0
    while start < trace.duration:
        stop = min(start + interval, trace.duration)
        running = [
            pod for item, pod in pairs if item.start <= start and (item.end is None or item.end >= stop)
        ]
        hourly, nodes = bound(running)
        intervals.append((start, stop, hourly, nodes))
        node_hours += nodes * (stop - start) / 3600
        peak = max(peak, nodes)
        start = stop
    # An LPBoundFunction's solves also price the pods running at each moment (their duals).
    paid = _priced(pairs, intervals, bound) if isinstance(bound, LPBoundFunction) else None
    dollars = 0.0
    series: list[Point] = []
    for i, (begin, end, hourly, nodes) in enumerate(intervals):
        spent = hourly * (end - begin) / 3600 if paid is None else max(paid[i], hourly * (end - begin) / 3600)
        dollars += spent
        series.append(Point(begin, nodes, spent * 3600 / (end - begin) if end > begin else hourly))
    last = series[-1] if series else Point(0.0, 0.0, 0.0)
    series.append(Point(trace.duration, last.nodes, last.hourly))
    stopped = getattr(bound, "stopped", 0) > 0  # an LPBoundFunction whose time limit stopped a solve
    return Figures(BOUND_POLICY, dollars, node_hours, peak, 0, bound=True, series=series, approximate=stopped)


def _changes(pairs: Sequence[tuple[TracePod, Pod]]) -> tuple[list[Pod], dict[float, dict[int, int]]]:
    """One pod per request shape (cpu, memory, gpu), and at each start or end the change in how many
    pods of each shape run."""
    kinds: dict[tuple[str, str, int], int] = {}
    examples: list[Pod] = []
    changes: dict[float, dict[int, int]] = {}
    for item, pod in pairs:
        key = (item.cpu, item.memory, item.gpu)
        if key not in kinds:
            kinds[key] = len(examples)
            examples.append(pod)
        for at, step in ((item.start, 1), (item.end, -1)):
            if at is not None:
                moment = changes.setdefault(at, {})
                moment[kinds[key]] = moment.get(kinds[key], 0) + step
    return examples, changes


def _priced(
    pairs: Sequence[tuple[TracePod, Pod]],
    intervals: Sequence[tuple[float, float, float, float]],
    bound: LPBoundFunction,
) -> list[float]:
    """Per interval, the dollars of the bound taken at every moment: the larger of the interval's LP
    $/h and the best solve's prices of the pods running at that moment.

    Besides the intervals' solves, one solve of every shape at its peak count prices the shapes that no
    interval's packing holds (pods shorter than an interval)."""
    import numpy as np

    examples, changes = _changes(pairs)
    cuts = sorted({*changes, *(begin for begin, _, _, _ in intervals)})
    counts = np.zeros(len(examples))
    peaks = np.zeros(len(examples))
    for at in cuts:
        for column, step in changes.get(at, {}).items():
            counts[column] += step
        peaks = np.maximum(peaks, counts)
    bound([pod for pod, peak in zip(examples, peaks, strict=True) for _ in range(int(peak))])
    prices = bound.price_matrix(examples)
    counts[:] = 0
    paid = [0.0] * len(intervals)
    index = 0
    for position, at in enumerate(cuts):
        for column, step in changes.get(at, {}).items():
            counts[column] += step
        while index + 1 < len(intervals) and intervals[index][1] <= at:
            index += 1
        begin, end, hourly, _ = intervals[index]
        until = min(cuts[position + 1] if position + 1 < len(cuts) else end, end)
        if until > at >= begin:
            rate = max(hourly, float(np.max(prices @ counts, initial=0.0)))
            paid[index] += rate * (until - at) / 3600
    return paid
