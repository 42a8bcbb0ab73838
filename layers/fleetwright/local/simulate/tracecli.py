"""``fleetwright trace generate | convert-azure | info``: make and inspect the workload traces
``fleetwright simulate`` replays (docs/simulate.md, "Traces"). Also runs as
``python -m fleetwright.local.simulate.tracecli``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from fleetwright.commands import Subparsers, command_group

if TYPE_CHECKING:
    from fleetwright.local.simulate.trace import Trace

EXIT_OK = 0
EXIT_USAGE = 2


def _generate(args: argparse.Namespace) -> int:
    from fleetwright.local.simulate.generate import DayOptions, generate_day

    options = DayOptions(
        pods=args.pods,
        seed=args.seed,
        web_share=args.web_share,
        deployments=args.deployments,
        peak_to_trough=args.peak_to_trough,
        peak_hour=args.peak_hour,
        gpu_jobs=args.gpu_jobs,
    )
    try:
        trace = generate_day(options)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    return _write(trace, args.output)


def _convert_azure(args: argparse.Namespace) -> int:
    from fleetwright.local.simulate.convert_azure import AzureInput, AzureOptions, convert_azure
    from fleetwright.local.simulate.tracefile import TraceError

    try:
        source = AzureInput.locate(Path(args.resources), args.split)
        trace = convert_azure(source, AzureOptions(day=args.day, sample=args.sample, seed=args.seed))
    except TraceError as err:
        print(err, file=sys.stderr)
        return EXIT_USAGE
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    return _write(trace, args.output)


def _write(trace: Trace, output: str) -> int:
    from fleetwright.local.simulate.tracefile import write_pods, write_trace

    if output == "-":
        write_pods(trace.pods, sys.stdout)
        return EXIT_OK
    try:
        write_trace(trace, output)
    except OSError as err:
        print(f"error: cannot write {output}: {err.strerror or err}", file=sys.stderr)
        return EXIT_USAGE
    print(f"wrote {len(trace.pods)} pods over {trace.duration / 3600:.2f} h to {output}", file=sys.stderr)
    return EXIT_OK


def _info(args: argparse.Namespace) -> int:
    from fleetwright.local.simulate.tracefile import TraceError, read_trace
    from fleetwright.local.simulate.tracestats import summarize

    try:
        trace = read_trace(args.trace)
    except TraceError as err:
        print(err, file=sys.stderr)
        return EXIT_USAGE
    print(summarize(trace).render())
    return EXIT_OK


def add_cli(subparsers: Subparsers) -> None:
    """Register ``fleetwright trace generate``, ``trace convert-azure`` and ``trace info``."""
    trace = command_group(subparsers, "trace", "make and inspect workload traces for `fleetwright simulate`")
    _add_generate(trace)
    _add_convert_azure(trace)
    info = trace.add_parser(
        "info",
        help="check a trace file and show its size and peaks",
        description="Read a trace (every field checked) and show its pods, duration, the pods running at "
        "its start and end, and its peak concurrent pods and requests.",
    )
    info.add_argument("trace", metavar="TRACE", help="trace CSV file")
    info.set_defaults(handler=_info)


def _add_generate(trace: Subparsers) -> None:
    parser = trace.add_parser(
        "generate",
        help="generate a diurnal day of web Deployments and batch Jobs",
        description="Generate 24 h of pods: web Deployments whose replicas follow a diurnal curve as an "
        "autoscaler would, and batch Jobs arriving in bursts. The same options and seed give the same "
        "file.",
    )
    parser.add_argument("--pods", type=int, default=10_000, help="pods in the day (default %(default)s)")
    parser.add_argument("--seed", type=int, default=1, help="random seed (default %(default)s)")
    parser.add_argument(
        "--web-share", type=float, default=0.6, help="share of the pods that are web pods (default 0.6)"
    )
    parser.add_argument("--deployments", type=int, default=12, help="web Deployments (default 12)")
    parser.add_argument(
        "--peak-to-trough", type=float, default=3.0, help="web load at its peak over its trough (default 3)"
    )
    parser.add_argument("--peak-hour", type=float, default=15.0, help="hour of the web peak (default 15)")
    parser.add_argument("--gpu-jobs", type=int, default=0, help="GPU Jobs among the batch (default 0)")
    parser.add_argument("-o", "--output", required=True, help="trace CSV to write ('-': stdout)")
    parser.set_defaults(handler=_generate)


def _add_convert_azure(trace: Subparsers) -> None:
    parser = trace.add_parser(
        "convert-azure",
        help="convert a day of the Azure Public Dataset VM trace to a pod trace",
        description="Read a split of the reprocessed Azure VM trace (the resources/ directory of "
        "huaweicloud/trace_generation_rnn) and write one day of it as pods: cores as cpu, memory as "
        "memory, a tenant's VMs of one 5-minute bin as one owner.",
    )
    parser.add_argument("resources", metavar="RESOURCES", help="the dataset's resources/ directory")
    parser.add_argument("--split", default="test", help="train, dev or test (default %(default)s)")
    parser.add_argument("--day", type=int, default=4, help="day of the split, from 0 (default %(default)s)")
    parser.add_argument(
        "--sample", type=float, default=0.02, help="share of tenant arrivals kept (default %(default)s)"
    )
    parser.add_argument("--seed", type=int, default=1, help="random seed (default %(default)s)")
    parser.add_argument("-o", "--output", required=True, help="trace CSV to write ('-': stdout)")
    parser.set_defaults(handler=_convert_azure)


def main(argv: list[str] | None = None) -> int:
    """The ``trace`` commands alone (``python -m fleetwright.local.simulate.tracecli generate ...``)."""
    parser = argparse.ArgumentParser(prog="fleetwright", description="Fleetwright workload traces.")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_cli(subparsers)
    try:
        args = parser.parse_args(["trace", *(sys.argv[1:] if argv is None else argv)])
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
