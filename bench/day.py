"""A day of an autoscaled cluster, replayed (``fleetwright simulate``): cost and pod wait per packing policy.

Usage: python bench/day.py [--shipped | --trace FILE ... | --pods N] [--hours H] [--seed 42]
                           [--policies default,FewerNodes] [--bound-interval 300]
                           [--bound-time-limit 30] [--no-bound]
                           [--plot-dir DIR] [--profile]

The traces: by default (``--shipped``) the two shipped days, examples/traces/azure-vm-day.csv (Azure VMs
as pods: 1 to 16 cores, 768Mi to 112Gi, mostly long-lived) and examples/traces/diurnal-day.csv (web
Deployments and batch Jobs); ``--trace FILE`` (repeatable) replays others; ``--hours H`` cuts each to its
first H hours (``Trace.cut``: later pods dropped, pods running at the cut left running). ``--pods N``
instead draws one trace with the seed: N pods over ``--hours`` hours (24 by default), arriving with a
diurnal rate (a sine, peak at mid-day, 10% of the peak at night), from 40 workloads each with one of
bench/scheduling.py's CPU and memory requests; a tenth run the whole day, the others for an exponential
time (mean 45 min).

The NodePool is bench/consolidation.py's (on-demand c/m/r amd64 of every size, consolidateAfter 30s,
default budget) with an AL2023 EC2NodeClass, on the built-in us-east-1 catalog: it admits every pod of
both shipped traces (a 16-core/112Gi VM fits an m or r 8xlarge); the bench says so, or names the pod
shapes no instance type holds, before replaying. For each trace it prints the table of ``fleetwright
simulate`` (default packing, FewerNodes, the LP lower bound) and the seconds each replay took, then the
machine; ``--plot-dir`` writes each trace's plot there; ``--profile`` adds the functions that took the
most time in the first replay.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import math
import pstats
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

from consolidation import nodepool
from scheduling import CPUS, MEMORIES, machine

from fleetwright.catalog.loader import builtin_catalog
from fleetwright.local.simulate.bound import integrate, load_lp_bound, lp_bound_function
from fleetwright.local.simulate.engine import pod_object
from fleetwright.local.simulate.report import Figures, figures, render_table
from fleetwright.local.simulate.runner import catalog_for, replay
from fleetwright.local.simulate.trace import Trace, TracePod
from fleetwright.local.simulate.tracefile import read_trace
from fleetwright.local.simulate.world import START_EPOCH, WorldSpec
from fleetwright.model.ec2nodeclass import EC2NodeClass
from fleetwright.model.kube import pod_from_object
from fleetwright.scheduling.templates import nodepool_templates

WORKLOADS = 40
LONG_RUNNING = 0.1
MEAN_SECONDS = 45 * 60.0
NIGHT = 0.1  # the arrival rate at night, as a fraction of the peak
ROOT = Path(__file__).resolve().parent.parent
SHIPPED = (ROOT / "examples/traces/azure-vm-day.csv", ROOT / "examples/traces/diurnal-day.csv")


def nodeclass() -> EC2NodeClass:
    return EC2NodeClass.model_validate(
        {
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {
                "role": "KarpenterNodeRole-bench",
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}],
                "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "bench"}}],
            },
        }
    )


def diurnal_trace(count: int, hours: float, seed: int) -> Trace:
    """``count`` pods over ``hours`` hours (see the module's docstring)."""
    rng = random.Random(seed)
    duration = hours * 3600
    shapes = [(rng.choice(CPUS), rng.choice(MEMORIES)) for _ in range(WORKLOADS)]

    def rate(t: float) -> float:  # relative to the peak: a sine from 06:00 to 24:00, NIGHT before
        day = (t % 86400) / 86400
        if day < 0.25:
            return NIGHT
        return NIGHT + (1 - NIGHT) * max(0.0, math.sin(math.pi * (day - 0.25) / 0.75))

    starts: list[float] = []
    while len(starts) < count:  # thinning: uniform arrivals kept with the rate's probability
        t = rng.uniform(0, duration)
        if rng.random() < rate(t):
            starts.append(t)
    pods = []
    for i, start in enumerate(sorted(starts)):
        workload = rng.randrange(WORKLOADS)
        cpu, memory = shapes[workload]
        end = None if rng.random() < LONG_RUNNING else start + rng.expovariate(1 / MEAN_SECONDS)
        pods.append(TracePod(f"w{workload}-{i}", round(start, 3), end, cpu, memory, owner=f"w{workload}"))
    return Trace(tuple(pods), duration)


def arguments() -> argparse.ArgumentParser:
    """The bench's options (see the module's docstring)."""
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--shipped", action="store_true", help="the shipped traces (the default)")
    parser.add_argument("--trace", action="append", default=[], metavar="FILE", help="a trace (repeatable)")
    parser.add_argument("--pods", type=int, help="draw one diurnal trace of this many pods instead")
    parser.add_argument("--hours", type=float, help="cut each trace to its first H hours (drawn: 24)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--policies", default="default,FewerNodes")
    parser.add_argument("--bound-interval", type=float, default=300.0)
    parser.add_argument("--bound-time-limit", type=float, default=30.0, help="seconds per LP solve")
    parser.add_argument("--no-bound", action="store_true")
    parser.add_argument("--plot-dir", metavar="DIR", help="write each trace's plot (PNG) there")
    parser.add_argument("--profile", action="store_true")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = arguments().parse_args(argv)
    spec = WorldSpec([nodepool()], [nodeclass()], builtin_catalog("us-east-1"))
    for label, trace in traces(args):
        print(f"trace: {label}", flush=True)
        unfit = unfit_shapes(spec, trace)
        if unfit:
            print(f"  the NodePool admits no node for pods of {', '.join(unfit)}", flush=True)
        rows, seconds = [], []
        for i, name in enumerate(n for n in args.policies.split(",") if n):  # --policies "": the bound only
            started = time.perf_counter()
            rows.append(_replay(spec, trace, name, args.seed, args.profile and i == 0))
            seconds.append(f"{name} {time.perf_counter() - started:.1f} s")
        if not args.no_bound:
            started = time.perf_counter()
            rows.append(_bound(spec, trace, args.bound_interval, args.bound_time_limit))
            seconds.append(f"lower bound {time.perf_counter() - started:.1f} s")
        sys.stdout.write(render_table(rows, trace.duration))
        print(f"seconds per replay: {', '.join(seconds)}\n", flush=True)
        if args.plot_dir:
            from fleetwright.local.simulate.plot import plot

            target = Path(args.plot_dir) / f"{label.split(':')[0].removesuffix('.csv')}.png"
            plot(rows, target, title=label)
            print(f"plot: {target}", flush=True)
    print(f"machine: {machine()}")
    return 0


def traces(args: argparse.Namespace) -> list[tuple[str, Trace]]:
    """The traces the options ask for, each with a line saying what it is."""
    if args.pods is not None:
        hours = 24.0 if args.hours is None else args.hours
        trace = diurnal_trace(args.pods, hours, args.seed)
        return [(f"diurnal: {len(trace.pods)} pods over {hours:g} h, seed {args.seed}", trace)]
    paths = [Path(p) for p in args.trace] or list(SHIPPED)
    found = []
    for path in paths:
        whole = read_trace(path)
        trace = whole if args.hours is None else whole.cut(args.hours * 3600)
        label = f"{path.name}: {len(trace.pods)} of its {len(whole.pods)} pods, {trace.duration / 3600:g} h"
        found.append((label, trace))
    return found


def unfit_shapes(spec: WorldSpec, trace: Trace) -> list[str]:
    """The pod shapes (cpu/memory/gpu) no instance type of the NodePool holds (LP bound's fit check)."""
    module = load_lp_bound()
    if module is None:
        return []
    catalog = catalog_for(spec)
    templates = nodepool_templates(spec.nodepools, spec.nodeclasses, [])
    shapes = {(p.cpu, p.memory, p.gpu): p for p in trace.pods}
    unfit = []
    for (cpu, memory, gpu), item in sorted(shapes.items()):
        problem = module.packing_problem([pod_from_object(pod_object(item))], catalog, (), templates)
        if problem.unfit:
            unfit.append(f"{cpu}/{memory}" + (f"/{gpu} GPU" if gpu else ""))
    return unfit


def _replay(spec: WorldSpec, trace: Trace, name: str, seed: int, profile: bool) -> Figures:
    """One policy's replay (``default``: the NodePool's own packing), timed, optionally profiled."""
    packing = None if name == "default" else name
    profiler = cProfile.Profile() if profile else None
    started = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    marks = iter(i / 20 for i in range(1, 21))
    mark = next(marks)

    def progress(done: float) -> None:  # a line every 5% of the trace, with the seconds so far
        nonlocal mark
        while done >= mark:
            print(
                f"  {name}: {mark:.0%} after {time.perf_counter() - started:.0f} s",
                file=sys.stderr,
                flush=True,
            )
            mark = next(marks, 2.0)

    outcome = replay(replace(spec, packing=packing), trace, seed=seed, progress=progress)
    if profiler is not None:
        profiler.disable()
    seconds = time.perf_counter() - started
    print(
        f"{name}: replayed in {seconds:.1f} s ({outcome.passes} provisioning passes, "
        f"{len(outcome.errors)} errors)",
        file=sys.stderr,
    )
    if profiler is not None:
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(40)
        print(text.getvalue(), file=sys.stderr)
    result = figures(name, outcome, START_EPOCH)
    # Each policy's figures as soon as they are known (a long run stopped early keeps them).
    print(json.dumps(result.as_json()), file=sys.stderr, flush=True)
    return result


def _bound(spec: WorldSpec, trace: Trace, interval: float, time_limit: float) -> Figures:
    """The LP lower bound of the trace (bench/lp_bound.py), integrated over it."""
    module = load_lp_bound()
    catalog = catalog_for(spec)
    templates = nodepool_templates(spec.nodepools, spec.nodeclasses, [])
    started = time.perf_counter()
    solver = lp_bound_function(module, templates, catalog, time_limit)
    result = integrate(trace, solver, interval)
    print(f"lower bound: {time.perf_counter() - started:.1f} s", file=sys.stderr)
    if solver.note():
        print(f"lower bound: {solver.note()}", flush=True)
    return result


if __name__ == "__main__":
    sys.exit(main())
