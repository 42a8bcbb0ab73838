"""``fleetwright simulate``: replay a workload trace against NodePools and compare packing policies.

The NodePool / EC2NodeClass files and the instance-type catalog are read as ``fleetwright plan`` reads
them; the trace as ``fleetwright trace`` writes it (:func:`~fleetwright.local.simulate.tracefile.read_trace`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any, TextIO

from fleetwright.commands import Subparsers
from fleetwright.local.simulate.tracefile import TraceError, read_trace

EXIT_OK = 0
EXIT_USAGE = 2
POLICIES = {"default": None, "FewerNodes": "FewerNodes", "LowestCost": "LowestCost"}


def _progress(stream: TextIO) -> Callable[[str | None, float], None] | None:
    """A one-line progress bar on ``stream`` when it is a terminal."""
    if not stream.isatty():
        return None

    def show(policy: str | None, done: float) -> None:
        filled = int(done * 30)
        stream.write(f"\r{policy or 'default':>12} [{'#' * filled}{'.' * (30 - filled)}] {done:4.0%}")
        if done >= 1.0:
            stream.write("\n")
        stream.flush()

    return show


def _simulate(args: argparse.Namespace) -> int:
    from fleetwright.local.simulate.report import render_table, report_json
    from fleetwright.model.errors import DocumentError
    from fleetwright.plan import PlanError

    try:
        if args.plot:
            from fleetwright.local.simulate.plot import check_target

            check_target(args.plot)
        rows, notes, duration = _run(args)
    except (DocumentError, PlanError, TraceError, ValueError) as error:
        print(str(error) if isinstance(error, DocumentError) else f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    if args.output == "json":
        json.dump(report_json(rows, duration, notes), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_table(rows, duration))
        for key, value in notes.items():
            print(f"{key}: {value}")
    return _plot(args, rows, duration) if args.plot else EXIT_OK


def _plot(args: argparse.Namespace, rows: list[Any], duration: float) -> int:
    """Draw the plot after the report is out (a plot that fails to write loses no figures)."""
    from pathlib import Path

    from fleetwright.local.simulate.plot import PlotError, plot

    try:
        plot(rows, args.plot, title=f"{Path(args.trace).name}: {duration / 3600:.2f} h replayed")
    except PlotError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_OK


def _run(args: argparse.Namespace) -> tuple[list[Any], dict[str, Any], float]:
    from fleetwright.local.nodestart import NodeStart
    from fleetwright.local.simulate.bound import BOUND_POLICY, integrate, load_lp_bound
    from fleetwright.local.simulate.report import figures
    from fleetwright.local.simulate.runner import replay_policies
    from fleetwright.local.simulate.world import START_EPOCH

    spec = _spec(
        args,
        NodeStart(args.boot_seconds, args.register_seconds, args.ready_seconds, args.startup_taint_seconds),
    )
    trace = read_trace(args.trace)
    if args.until is not None:
        trace = trace.cut(args.until)
    names = [name.strip() for name in args.policies.split(",") if name.strip()]
    unknown = [name for name in names if name not in POLICIES]
    if unknown:
        raise ValueError(f"unknown policy {', '.join(unknown)} (choose from {', '.join(POLICIES)})")
    outcomes = replay_policies(
        spec,
        trace,
        tuple(POLICIES[n] for n in names),
        seed=args.seed,
        progress=_progress(sys.stderr),
        jobs=args.jobs,
    )
    rows = [figures(name, outcomes[POLICIES[name]], START_EPOCH, args.region) for name in names]
    notes: dict[str, Any] = {
        "billing": "instances per second while running, 60 s minimum; volumes and public IPv4 over the same "
        "seconds at the node bill's prices; CPU credits: not modelled yet",
        "nodeStart": _start_json(spec.start),
    }
    if not args.no_bound:
        module = load_lp_bound()
        if module is None:
            notes[BOUND_POLICY] = "not computed: bench/lp_bound.py and scipy are needed"
        else:
            solver = _bound_function(module, spec, args.bound_time_limit)
            rows.append(integrate(trace, solver, args.bound_interval))
            if solver.note():
                notes[BOUND_POLICY] = solver.note()
    for name, outcome in zip(names, (outcomes[POLICIES[n]] for n in names), strict=True):
        for error in outcome.errors[:5]:
            print(f"warning: {name}: {error}", file=sys.stderr)
    return rows, notes, trace.duration


def _start_json(start: Any) -> dict[str, float]:
    return {
        "bootSeconds": start.boot_seconds,
        "registerSeconds": start.register_seconds,
        "readySeconds": start.ready_seconds,
        "startupTaintSeconds": start.startup_taint_seconds,
    }


def _spec(args: argparse.Namespace, start: Any) -> Any:
    from fleetwright.local.simulate.world import WorldSpec, daemonset_documents
    from fleetwright.manifests import load_manifests
    from fleetwright.model.karpenter import check_references
    from fleetwright.plan import PlanError, instance_types_for

    manifests = load_manifests(args.files)
    problems = check_references(manifests.nodepools, manifests.nodeclasses)
    if problems:
        raise PlanError("\n".join(problems))
    if not manifests.nodepools:
        raise PlanError("no NodePool in the manifests: nothing can be launched")
    catalog = instance_types_for(args.instance_types, args.region)
    return WorldSpec(
        manifests.nodepools,
        manifests.nodeclasses,
        catalog,
        region=args.region,
        start=start,
        daemonsets=daemonset_documents(args.files),
        spot_interruptions=args.spot_interruptions,
    )


def _bound_function(module: Any, spec: Any, time_limit: float) -> Any:
    from fleetwright.local.simulate.bound import lp_bound_function
    from fleetwright.local.simulate.runner import catalog_for
    from fleetwright.scheduling.templates import nodepool_templates

    catalog = catalog_for(spec)
    templates = nodepool_templates(spec.nodepools, spec.nodeclasses, [])
    return lp_bound_function(module, templates, catalog, time_limit)


def add_cli(subparsers: Subparsers) -> None:
    """Register ``fleetwright simulate``."""
    parser = subparsers.add_parser(
        "simulate",
        help="replay a workload trace and compare what it costs under each packing policy",
        description="Replay a workload trace through the provisioner, the disruption controller and the "
        "termination workflows on a virtual clock (in-memory cluster, cloud and state table), once per "
        "packing policy, and print cost, nodes, launches, pod pending times, evictions and disruptions "
        "side by side with a lower bound. Nothing is launched.",
    )
    parser.add_argument("-f", "--filename", dest="files", action="append", required=True, metavar="PATH")
    parser.add_argument(
        "--instance-types", metavar="FILE", help="instance-type catalog JSON (docs/catalog.md)"
    )
    parser.add_argument("--region", default="us-east-1", help="region of the built-in catalog")
    parser.add_argument("--trace", required=True, metavar="FILE", help="the workload trace (CSV)")
    parser.add_argument(
        "--until", type=float, metavar="SECONDS", help="replay only the trace's first SECONDS seconds"
    )
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")
    parser.add_argument(
        "--plot",
        metavar="FILE.png",
        help="draw nodes and $/h over time per policy and the bound (needs matplotlib)",
    )
    parser.add_argument(
        "--policies", default="default,FewerNodes", help="comma-separated (default, FewerNodes, LowestCost)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the replay's random choices")
    parser.add_argument(
        "--jobs", type=int, default=1, help="policies replayed at once, one process each (no progress bar)"
    )
    parser.add_argument("--no-bound", action="store_true", help="skip the LP lower bound")
    parser.add_argument("--bound-interval", type=float, default=300.0, metavar="SECONDS")
    parser.add_argument(
        "--bound-time-limit",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="time limit of each LP solve of the bound (a stopped solve gives a weaker bound)",
    )
    _add_start_options(parser)
    parser.add_argument(
        "--spot-interruptions",
        type=float,
        default=0.0,
        metavar="RATE",
        help="interruption warnings per spot instance per hour, through the interruption handler",
    )
    parser.set_defaults(handler=_simulate)


def _add_start_options(parser: argparse.ArgumentParser) -> None:
    """The node start's phases, the emulator's by default (docs/emulator.md)."""
    from fleetwright.local.nodestart import NodeStart

    start = NodeStart.default
    parser.add_argument(
        "--boot-seconds", type=float, default=start.boot_seconds, help="EC2 pending → running"
    )
    parser.add_argument(
        "--register-seconds", type=float, default=start.register_seconds, help="running → Node registered"
    )
    parser.add_argument(
        "--ready-seconds", type=float, default=start.ready_seconds, help="registration → Ready"
    )
    parser.add_argument(
        "--startup-taint-seconds",
        type=float,
        default=start.startup_taint_seconds,
        help="Ready → startup taints removed",
    )
