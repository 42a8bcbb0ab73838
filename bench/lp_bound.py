"""A true lower bound on the hourly cost of packing pending pods onto new nodes (the LP relaxation).

Usage: python bench/lp_bound.py -f MANIFEST [-f ...] [--instance-types FILE] [--region R]
                                [--time-limit S] [--node-fixed-cost USD]

Pods with identical requests form a class k with demand d_k; every NodePool × instance type is a node
option t with room C_t (allocatable minus DaemonSet overhead, exactly as the scheduler's
``PreparedPool.capacity``) and price p_t (its cheapest allowed offering, plus an optional fixed cost per
node). A pattern (t, a) is a vector of pod counts per class that fits C_t. The LP

    minimise  sum p_t x_(t,a)   subject to   sum a_k x_(t,a) >= d_k,  x >= 0

is solved by Gilmore–Gomory column generation, starting from the homogeneous patterns (as many pods of
one class as fit, per class and option). A restricted master LP (HiGHS via ``scipy.optimize.linprog``)
gives duals pi; pricing is, per option, the integer knapsack max pi·a subject to a fitting C_t and
0 <= a_k <= d_k. Its LP relaxation bounds it for every option; options whose bound is above their
price try the relaxation rounded down and filled greedily, then HiGHS' MILP (``scipy.optimize.milp``).
Every round yields the Farley bound d·pi / max(1, max_t kappa_t / p_t), where kappa_t is an upper bound
on option t's knapsack: pi scaled down that way is dual feasible for the full LP, so the number is a
lower bound at any iteration. When a round proves that no column improves, the bound equals the LP
optimum (within 1e-6 relative) and is reported as "exact LP"; when the time limit stops the loop first
(or a knapsack could not be decided in time) the best Farley bound is reported as "Farley".
Options dominated by another (no more room in any dim, no lower price) are dropped first.

Pod constraints (selectors, affinity, taints, NodePool limits, existing nodes) are ignored: dropping
constraints only enlarges the set of packings, so the result stays a lower bound for the constrained
problem. With a manifest, the bound covers the pods the scheduler placed on new nodes, so it is
directly comparable with the scheduler's $/h.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, linprog, milp

from fleetwright.model.instancetype import InstanceType
from fleetwright.model.pod import Pod
from fleetwright.scheduling import vectors as vec
from fleetwright.scheduling.pools import prepare_pool
from fleetwright.scheduling.types import NodePoolTemplate

EXACT = "exact LP"
FARLEY = "Farley"
# A column enters the master when its reduced cost is below -REL_TOL × its price; the loop stops when
# none does, so "exact LP" means within this relative distance of the LP optimum.
REL_TOL = 1e-6
# Head-room on HiGHS' knapsack dual bounds (its tolerances are around 1e-6).
KNAPSACK_SLACK = 1e-7
# Pricing solves each knapsack to a 1e-4 gap first, then tightly only when the price lies inside that
# gap; both are cut short (the dual bound stays valid) since HiGHS can take minutes on a 200-pod node.
QUICK_GAP = 1e-4
QUICK_SECONDS = 2.0
TIGHT_GAP = 1e-9
TIGHT_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class NodeOption:
    """A node that could be launched: NodePool/instance type, room for pods over the dims, $/h."""

    name: str
    capacity: vec.Vector
    price: float


@dataclass(slots=True, eq=False)
class PackingProblem:
    """Pod classes (request vectors over ``dims``) with their demand, and the node options.

    ``unfit`` counts pods left out because no option can hold even one of them.
    """

    dims: tuple[str, ...]
    classes: list[vec.Vector]
    demand: list[int]
    options: list[NodeOption]
    unfit: int = 0

    @property
    def pods(self) -> int:
        """Number of pods the problem packs."""
        return sum(self.demand)


@dataclass(slots=True, eq=False)
class Pattern:
    """A column of the master LP: how many pods of each class one node of ``option`` holds."""

    option: int
    counts: tuple[int, ...]
    x: float = 0.0


@dataclass(slots=True, eq=False)
class LPBound:
    """The outcome of :func:`lp_bound`.

    ``value`` is always a lower bound on the cost of any packing ($/h); ``kind`` says whether it is the
    LP optimum (:data:`EXACT`) or a Farley bound from a stopped run (:data:`FARLEY`). ``master_value``
    is the last restricted master's optimum (an upper bound on the LP optimum, equal to it when exact).
    ``patterns`` hold the master's last primal solution (x > 0 only). ``duals`` are the demand duals pi
    of the round that gave ``value`` (per class of the problem, unscaled; see :func:`any_demand_prices`).
    """

    value: float
    kind: str
    master_value: float
    iterations: int
    columns: int
    seconds: float
    options: list[NodeOption]
    patterns: list[Pattern] = field(default_factory=list)
    duals: np.ndarray | None = None

    @property
    def nodes(self) -> float:
        """Nodes the LP solution launches (fractional)."""
        return sum(p.x for p in self.patterns)

    def rounded(self) -> tuple[int, float]:
        """Nodes and $/h of the integer packing that launches ceil(x) nodes of every LP pattern.

        It is feasible (each class gets at least its demand), so it is also an upper bound on the optimum.
        """
        nodes = 0
        cost = 0.0
        for pattern in self.patterns:
            count = math.ceil(pattern.x - 1e-9)
            nodes += count
            cost += count * self.options[pattern.option].price
        return nodes, cost


def pod_classes(pods: Iterable[Pod], dims: Sequence[str]) -> tuple[list[vec.Vector], list[int]]:
    """Distinct request vectors (each pod takes one pod slot) and how many pods have each, sorted."""
    counts: dict[vec.Vector, int] = {}
    for pod in pods:
        need = vec.pod_need(pod.requests, dims)
        counts[need] = counts.get(need, 0) + 1
    classes = sorted(counts, reverse=True)
    return classes, [counts[c] for c in classes]


def node_options(
    templates: Sequence[NodePoolTemplate],
    instance_types: list[InstanceType],
    daemonsets: list[Pod],
    dims: tuple[str, ...],
    node_fixed_cost: float = 0.0,
) -> list[NodeOption]:
    """Every NodePool × instance type with an allowed offering: its room for pods and $/h."""
    options: list[NodeOption] = []
    for template in templates:
        pool = prepare_pool(template, instance_types, daemonsets, dims)
        for it, capacity, price in zip(
            pool.types, pool.capacity, pool.prices(pool.requirements), strict=True
        ):
            if price is not None:
                options.append(NodeOption(f"{template.name}/{it.name}", capacity, price + node_fixed_cost))
    return options


def without_dominated(options: Sequence[NodeOption]) -> list[NodeOption]:
    """Drop options another one beats (at least the room in every dim for at most the price).

    Any pattern of a dropped option fits its dominator at no higher cost, so the bound is unchanged.
    """
    ordered = sorted(options, key=lambda o: (o.price, tuple(-c for c in o.capacity), o.name))
    kept: list[NodeOption] = []
    for option in ordered:
        if not any(vec.fits(option.capacity, k.capacity) for k in kept):
            kept.append(option)
    return kept


def packing_problem(
    pods: Iterable[Pod],
    instance_types: list[InstanceType],
    daemonsets: Sequence[Pod] = (),
    templates: Sequence[NodePoolTemplate] | None = None,
    node_fixed_cost: float = 0.0,
) -> PackingProblem:
    """The packing problem of ``pods`` on new nodes of the NodePools (default: one without requirements).

    Dims and capacities are computed as the scheduler does; dominated options are removed.
    """
    pods = [p for p in pods if not p.node_name]
    daemons = list(daemonsets)
    dims = vec.dimensions([p.requests for p in pods] + [d.requests for d in daemons])
    chosen = list(templates) if templates is not None else [NodePoolTemplate(name="default")]
    options = without_dominated(node_options(chosen, instance_types, daemons, dims, node_fixed_cost))
    classes, demand = pod_classes(pods, dims)
    kept = [
        (c, d) for c, d in zip(classes, demand, strict=True) if any(vec.fits(c, o.capacity) for o in options)
    ]
    unfit = sum(demand) - sum(d for _, d in kept)
    return PackingProblem(dims, [c for c, _ in kept], [d for _, d in kept], options, unfit)


def simple_bound(problem: PackingProblem) -> float:
    """max over CPU and memory of (total requested × the cheapest $ per unit of room): a weak lower bound.

    Only options that can hold some pod count (a type whose pod slots the DaemonSets fill sells nothing).
    """
    usable = [o for o in problem.options if any(vec.fits(c, o.capacity) for c in problem.classes)]
    best = 0.0
    for dim in (0, 1):
        total = sum(c[dim] * d for c, d in zip(problem.classes, problem.demand, strict=True))
        rates = [o.price / o.capacity[dim] for o in usable if o.capacity[dim] > 0]
        if total and rates:
            best = max(best, total * min(rates))
    return best


def _fit_limits(capacity: vec.Vector, classes: Sequence[vec.Vector], demand: Sequence[int]) -> np.ndarray:
    """Per class, the most pods of it one node holds (capped by the demand)."""
    limits = []
    for need, wanted in zip(classes, demand, strict=True):
        alone = min((c // n for c, n in zip(capacity, need, strict=True) if n > 0), default=wanted)
        limits.append(max(0, min(wanted, alone)))
    return np.array(limits, dtype=float)


def _relaxation_bound(
    capacity: vec.Vector, needs: np.ndarray, duals: np.ndarray, limits: np.ndarray
) -> tuple[float, np.ndarray]:
    """An upper bound on the knapsack value from its LP relaxation, evaluated exactly, and the
    relaxation's solution (counts per class, fractional).

    For any prices y >= 0 on the dims, y·C + sum_k u_k max(0, pi_k - y·r_k) bounds pi·a over fitting
    a <= u (Lagrangian relaxation), so the bound holds whatever the LP solver's accuracy; HiGHS' row duals
    make it the LP relaxation's value.
    """
    solution = np.zeros(len(duals))
    useful = np.flatnonzero((duals > 0) & (limits > 0))
    if useful.size == 0:
        return 0.0, solution
    raw = np.array(capacity, dtype=float)
    scale = np.where(raw > 0, raw, 1.0)  # a zero-capacity dim only meets classes that do not use it
    matrix = needs[useful].T / scale[:, None]
    result = linprog(
        -duals[useful],
        A_ub=matrix,
        b_ub=raw / scale,
        bounds=list(zip(np.zeros(useful.size), limits[useful], strict=True)),
        method="highs",
    )
    if result.status != 0:  # fall back to "everything up to its limit"
        return float(duals @ limits), solution
    solution[useful] = result.x
    prices = np.maximum(-np.asarray(result.ineqlin.marginals, dtype=float), 0.0) / scale
    gains = np.maximum(duals - needs @ prices, 0.0)
    return float(prices @ raw + gains @ limits), solution


def _rounded_pattern(
    capacity: vec.Vector,
    classes: Sequence[vec.Vector],
    duals: np.ndarray,
    limits: np.ndarray,
    relaxed: np.ndarray,
) -> tuple[tuple[int, ...], float]:
    """A fitting pattern from the LP relaxation: round down, then add pods by dual value while they fit.

    Cheap, and usually good enough to find an improving column without an integer solve.
    """
    counts = [math.floor(v + 1e-9) for v in relaxed]
    _repair(counts, capacity, classes, duals)
    used = [sum(counts[k] * classes[k][j] for k in range(len(counts))) for j in range(len(capacity))]
    for k in sorted(range(len(counts)), key=lambda k: -duals[k]):
        if duals[k] <= 0:
            break
        need = classes[k]
        room = min(
            ((capacity[j] - used[j]) // need[j] for j in range(len(capacity)) if need[j] > 0),
            default=0,
        )
        extra = max(0, min(int(limits[k]) - counts[k], room))
        if extra:
            counts[k] += extra
            used = [u + extra * n for u, n in zip(used, need, strict=True)]
    return tuple(counts), float(sum(duals[k] * counts[k] for k in range(len(counts))))


def _knapsack(
    capacity: vec.Vector,
    classes: Sequence[vec.Vector],
    duals: np.ndarray,
    limits: np.ndarray,
    price: float,
) -> tuple[tuple[int, ...], float, float]:
    """The best pattern for one option: (counts, its value pi·a, an upper bound on the optimum).

    A quick solve (gap QUICK_GAP) usually decides whether some pattern is worth more than ``price``;
    only when the price falls inside the remaining gap is the knapsack solved tightly. Both are cut
    short after a few seconds; the upper bound is HiGHS' dual bound, valid either way.
    """
    useful = np.flatnonzero((duals > 0) & (limits > 0))
    counts = [0] * len(classes)
    if useful.size == 0:
        return tuple(counts), 0.0, 0.0
    needs = np.array([classes[int(k)] for k in useful], dtype=np.int64)
    rows = [j for j in range(len(capacity)) if needs[:, j].any()]
    # Integer rows divided by their gcd (cpu in 50m steps, memory in MiB steps, ...) give HiGHS small
    # exact coefficients; flooring the capacity in those units changes nothing for integer counts.
    units = [math.gcd(*(int(n) for n in needs[:, j])) for j in rows]
    matrix = needs[:, rows].T // np.array(units, dtype=np.int64)[:, None]
    room = np.array([capacity[j] // u for j, u in zip(rows, units, strict=True)], dtype=float)
    best: tuple[tuple[int, ...], float] = (tuple(counts), 0.0)
    upper = float(duals @ limits)
    for gap, limit in ((QUICK_GAP, QUICK_SECONDS), (TIGHT_GAP, TIGHT_SECONDS)):
        with _quiet_stdout():
            result = milp(
                -duals[useful],
                integrality=np.ones(useful.size),
                bounds=Bounds(0, limits[useful]),
                constraints=LinearConstraint(matrix.astype(float), -np.inf, room),
                options={"mip_rel_gap": gap, "time_limit": limit},
            )
        if result.x is not None:
            found = [0] * len(classes)
            for k, amount in zip(useful, np.round(result.x).astype(int), strict=True):
                found[int(k)] = int(amount)
            _repair(found, capacity, classes, duals)
            value = float(sum(duals[k] * found[k] for k in range(len(found))))
            if value > best[1]:
                best = (tuple(found), value)
        dual_bound = getattr(result, "mip_dual_bound", None)
        if dual_bound is not None and np.isfinite(dual_bound):
            upper = min(upper, max(best[1], -float(dual_bound)) * (1 + KNAPSACK_SLACK))
        decided = best[1] > price * (1 + REL_TOL) or upper <= price * (1 + REL_TOL)
        if decided:
            break
    return best[0], best[1], upper


@contextlib.contextmanager
def _quiet_stdout() -> Iterator[None]:
    """Silence file descriptor 1: HiGHS' MIP solver sometimes prints a debug line there from C++."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w", encoding="utf-8") as null:
            os.dup2(null.fileno(), 1)
            yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _repair(
    counts: list[int], capacity: vec.Vector, classes: Sequence[vec.Vector], duals: np.ndarray
) -> None:
    """Remove pods until the pattern fits exactly (the solver's tolerance may overfill by a hair)."""
    while True:
        used = [sum(counts[k] * classes[k][j] for k in range(len(counts))) for j in range(len(capacity))]
        over = [j for j in range(len(capacity)) if used[j] > capacity[j]]
        if not over:
            return
        dim = over[0]
        victims = [k for k in range(len(counts)) if counts[k] > 0 and classes[k][dim] > 0]
        worst = min(victims, key=lambda k: duals[k] / classes[k][dim])
        counts[worst] -= 1


def _solve_master(
    patterns: Sequence[Pattern], options: Sequence[NodeOption], demand: np.ndarray
) -> tuple[float, np.ndarray, np.ndarray]:
    """Optimum, primal x and duals pi (>= 0) of the restricted master LP."""
    cover = np.array([p.counts for p in patterns], dtype=float).T
    costs = np.array([options[p.option].price for p in patterns])
    result = linprog(costs, A_ub=-cover, b_ub=-demand, bounds=(0, None), method="highs")
    if result.status != 0:
        raise RuntimeError(f"master LP failed: {result.message}")
    # marginals are d(cost)/d(b_ub) with b_ub = -demand: the demand duals are their negation.
    duals = np.maximum(-np.asarray(result.ineqlin.marginals, dtype=float), 0.0)
    return float(result.fun), np.asarray(result.x, dtype=float), duals


def initial_patterns(problem: PackingProblem) -> list[Pattern]:
    """For each class and option, the homogeneous pattern: as many pods of the class as fit (<= demand)."""
    patterns = []
    for t, option in enumerate(problem.options):
        limits = _fit_limits(option.capacity, problem.classes, problem.demand)
        for k, limit in enumerate(limits):
            if limit >= 1:
                counts = [0] * len(problem.classes)
                counts[k] = int(limit)
                patterns.append(Pattern(t, tuple(counts)))
    return patterns


def lp_bound(
    problem: PackingProblem,
    time_limit: float = 60.0,
    max_iterations: int = 10_000,
    knapsacks_per_round: int = 8,
) -> LPBound:
    """Column generation for the LP relaxation; the result's ``value`` is always a true lower bound.

    Each round bounds every option's knapsack by its LP relaxation, then solves integer knapsacks for
    the most promising options (highest bound per dollar) until ``knapsacks_per_round`` improving
    columns are found. After ``time_limit`` seconds no further knapsack is started (one may still run
    for up to QUICK_SECONDS + TIGHT_SECONDS) and the best Farley bound so far is returned.
    """
    start = time.perf_counter()
    options = problem.options
    if not problem.classes:
        return LPBound(0.0, EXACT, 0.0, 0, 0, time.perf_counter() - start, list(options))
    demand = np.array(problem.demand, dtype=float)
    limits = [_fit_limits(o.capacity, problem.classes, problem.demand) for o in options]
    needs = np.array(problem.classes, dtype=float)
    patterns = initial_patterns(problem)
    seen = {(p.option, p.counts) for p in patterns}
    best = 0.0
    best_duals: np.ndarray | None = None
    kind = FARLEY
    iterations = 0
    x = np.zeros(0)
    while True:
        master, x, duals = _solve_master(patterns, options, demand)
        iterations += 1
        relaxations = [_relaxation_bound(o.capacity, needs, duals, limits[t]) for t, o in enumerate(options)]
        ratios = [upper / o.price for (upper, _), o in zip(relaxations, options, strict=True)]
        entering, undecided = _price_columns(
            problem, duals, limits, relaxations, ratios, seen, knapsacks_per_round, (start, time_limit)
        )
        # pi / max(1, theta) is dual feasible for the full LP: a lower bound whatever happens next.
        theta = max(ratios, default=0.0)
        value = float(demand @ duals) / max(1.0, theta)
        if best_duals is None or value > best:
            best, best_duals = value, duals
        if not entering:
            if not undecided:
                kind = EXACT
            break
        patterns.extend(entering)
        if time.perf_counter() - start >= time_limit or iterations >= max_iterations:
            break
    # After a stop, x is the last master's solution (without the columns that just entered).
    used = [Pattern(p.option, p.counts, float(v)) for p, v in zip(patterns, x, strict=False) if v > 1e-9]
    return LPBound(
        best,
        kind,
        master,
        iterations,
        len(patterns),
        time.perf_counter() - start,
        list(options),
        used,
        best_duals,
    )


def any_demand_prices(problem: PackingProblem, duals: np.ndarray) -> np.ndarray:
    """Prices per class of ``problem`` that are dual feasible for the LP of ANY demand of these classes.

    The LP's duals pi are feasible only for patterns of at most the problem's demand. Scaled by
    max(1, max_t kappa_t / p_t), with kappa_t bounding option t's knapsack when each class is capped
    only by how many of its pods one node holds, they are feasible for every pattern, so for any demand
    vector n the cost of packing n pods is at least n·pi': a bound for the pods running at any moment,
    from a solve made for other pods (zero for a class the problem does not have).
    """
    needs = np.array(problem.classes, dtype=float)
    unlimited = [10**9] * len(problem.classes)  # no cap but what fits
    # pi·limits bounds each knapsack too: solve the relaxations in that order, and stop where it is
    # below the largest ratio found (those options cannot raise theta).
    candidates = []
    for option in problem.options:
        limits = _fit_limits(option.capacity, problem.classes, unlimited)
        candidates.append((float(duals @ limits) / option.price, option, limits))
    theta = 0.0
    for crude, option, limits in sorted(candidates, key=lambda c: -c[0]):
        if crude <= max(theta, 1.0):
            break
        upper, _ = _relaxation_bound(option.capacity, needs, duals, limits)
        theta = max(theta, upper / option.price)
    return np.asarray(duals, dtype=float) / max(1.0, theta)


def _price_columns(
    problem: PackingProblem,
    duals: np.ndarray,
    limits: list[np.ndarray],
    relaxations: list[tuple[float, np.ndarray]],
    ratios: list[float],
    seen: set[tuple[int, tuple[int, ...]]],
    knapsacks_per_round: int,
    clock: tuple[float, float],
) -> tuple[list[Pattern], int]:
    """One pricing round: improving columns for the most promising options (best bound per dollar first),
    up to ``knapsacks_per_round`` or until ``clock`` (start, time limit) runs out; also how many options
    stay undecided (they might still improve, no proof either way). Tightens ``ratios`` in place."""
    start, time_limit = clock
    options = problem.options
    promising = sorted((t for t, r in enumerate(ratios) if r > 1 + REL_TOL), key=lambda t: -ratios[t])
    entering: list[Pattern] = []
    undecided = 0
    for position, t in enumerate(promising):
        if len(entering) >= knapsacks_per_round or time.perf_counter() - start >= time_limit:
            undecided += len(promising) - position
            break
        price = options[t].price
        capacity = options[t].capacity
        counts, value = _rounded_pattern(capacity, problem.classes, duals, limits[t], relaxations[t][1])
        if value > price * (1 + REL_TOL) and (t, counts) not in seen:
            seen.add((t, counts))
            entering.append(Pattern(t, counts))
            continue
        counts, value, upper = _knapsack(capacity, problem.classes, duals, limits[t], price)
        ratios[t] = min(ratios[t], upper / price)
        if value > price * (1 + REL_TOL) and (t, counts) not in seen:
            seen.add((t, counts))
            entering.append(Pattern(t, counts))
        elif ratios[t] > 1 + REL_TOL:
            undecided += 1  # the tight solve ran out of time (or repeated a column): no proof
    return entering, undecided


def main(argv: list[str] | None = None) -> int:
    """Schedule the manifests' pods and print the bound for the pods placed on new nodes."""
    from fleetwright.plan import make_plan

    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("-f", "--filename", dest="files", action="append", required=True)
    parser.add_argument("--instance-types", default=None, help="catalog file (default: built-in)")
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--node-fixed-cost", type=float, default=0.0, help="USD/h added to every node")
    args = parser.parse_args(argv)
    plan = make_plan(args.files, args.instance_types, args.region)
    placed = [pod for claim in plan.results.new_claims for pod in claim.pods]
    problem = packing_problem(
        placed,
        plan.input.instance_types,
        plan.input.daemonsets,
        plan.input.nodepools,
        args.node_fixed_cost,
    )
    bound = lp_bound(problem, args.time_limit)
    scheduler = plan.results.hourly_cost + args.node_fixed_cost * len(plan.results.new_claims)
    nodes, cost = bound.rounded()
    print(
        f"pods on new nodes: {problem.pods} in {len(problem.classes)} classes; "
        f"undominated node options: {len(problem.options)}"
    )
    print(f"scheduler: {len(plan.results.new_claims)} nodes, ${scheduler:.4f}/h")
    print(
        f"lower bound: ${bound.value:.4f}/h ({bound.kind}, {bound.iterations} rounds, "
        f"{bound.columns} columns, {bound.seconds:.2f} s); LP solution: {bound.nodes:.1f} nodes"
    )
    if bound.value > 0:
        print(f"scheduler / bound: {scheduler / bound.value:.3f}")
    print(f"LP rounded up: {nodes} nodes, ${cost:.4f}/h; simple bound ${simple_bound(problem):.4f}/h")
    for pattern in sorted(bound.patterns, key=lambda p: -p.x):
        option = bound.options[pattern.option]
        print(f"  {pattern.x:10.3f} × {option.name} (${option.price:.4f}/h): {_describe(problem, pattern)}")
    return 0


def _describe(problem: PackingProblem, pattern: Pattern) -> str:
    parts = []
    for need, count in zip(problem.classes, pattern.counts, strict=True):
        if count:
            parts.append(f"{count}×({need[0]}m, {need[1] / 2**20:.0f}Mi)")
    return " + ".join(parts)


if __name__ == "__main__":
    sys.exit(main())
