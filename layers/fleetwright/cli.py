"""The ``fleetwright`` command line.

Subcommands here: ``plan``, ``validate``, ``catalog export`` and ``explain`` (``fleetwright.explain``).
Other packages add theirs with an ``add_cli(subparsers)`` function declared as a ``fleetwright.commands``
entry point (``pyproject.toml``); one whose module is not installed is skipped. A subcommand sets ``handler``
(``Callable[[argparse.Namespace], int]``, returning the exit code) with ``set_defaults``; commands grouped
under one word (``fleetwright local ...``) use :func:`fleetwright.commands.command_group`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from importlib.metadata import entry_points

from fleetwright import __version__
from fleetwright.commands import Subparsers, command_group
from fleetwright.model.errors import DocumentError
from fleetwright.validation import validate  # re-exported for callers of fleetwright.cli.validate

Handler = Callable[[argparse.Namespace], int]

# The entry-point group of the packages' ``add_cli(subparsers)`` functions, loaded when the parser is built.
COMMANDS_GROUP = "fleetwright.commands"

EXIT_OK = 0
EXIT_USAGE = 2  # bad input: unreadable or invalid manifests, catalogs or arguments
EXIT_BROKEN_PIPE = 141  # stdout closed by its reader: 128 + SIGPIPE, as shells report it


def _err(message: str) -> None:
    print(message, file=sys.stderr)


# --- plan ------------------------------------------------------------------------------------------------


def _plan(args: argparse.Namespace) -> int:
    from fleetwright.plan import PlanError, make_plan, render_table, write_plan_json

    try:
        plan = make_plan(args.files, args.instance_types, args.region, public_subnets=args.public_subnets)
    except (DocumentError, PlanError) as err:
        _err(f"error: {err}" if not isinstance(err, DocumentError) else str(err))
        return EXIT_USAGE
    for warning in plan.warnings:
        _err(warning)
    if args.output == "json":
        write_plan_json(plan, sys.stdout)
    else:
        sys.stdout.write(render_table(plan))
    return EXIT_OK


def _add_plan(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "plan",
        help="show the nodes Fleetwright would launch for the pending pods in manifests",
        description="Schedule the pending pods found in the manifests onto the NodePools' instance types "
        "and show the nodes that would be launched. Nothing is launched.",
    )
    parser.add_argument(
        "-f",
        "--filename",
        dest="files",
        action="append",
        required=True,
        metavar="PATH",
        help="YAML file or directory (searched recursively); repeat for several",
    )
    parser.add_argument(
        "--instance-types",
        metavar="FILE",
        help="instance-type catalog JSON (docs/catalog.md); default: the built-in catalog of --region",
    )
    parser.add_argument(
        "--region", default="us-east-1", help="region of the built-in catalog (default: %(default)s)"
    )
    parser.add_argument(
        "--public-subnets",
        action="store_true",
        help="bill a public IPv4 address on nodes whose EC2NodeClass leaves associatePublicIPAddress unset "
        "(their subnets assign one on launch); default: they do not",
    )
    parser.add_argument(
        "-o",
        "--output",
        choices=("table", "json"),
        default="table",
        help="output format (default: %(default)s)",
    )
    parser.set_defaults(handler=_plan)


# --- validate --------------------------------------------------------------------------------------------


def _validate(args: argparse.Namespace) -> int:
    report, warnings, errors = validate(args.files)
    for line in report:
        print(line)
    for line in warnings + errors:
        _err(line)
    return EXIT_USAGE if errors else EXIT_OK


def _add_validate(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "validate",
        help="check NodePool and EC2NodeClass manifests",
        description="Check every NodePool and EC2NodeClass document (Karpenter v1, or older versions, "
        "which are converted with a warning). Other kinds are skipped.",
    )
    parser.add_argument(
        "-f",
        "--filename",
        dest="files",
        action="append",
        required=True,
        metavar="PATH",
        help="YAML file or directory",
    )
    parser.set_defaults(handler=_validate)


# --- entry point -----------------------------------------------------------------------------------------


def _add_optional(subparsers: Subparsers) -> None:
    for entry in sorted(entry_points(group=COMMANDS_GROUP), key=lambda e: e.name):
        module_name = entry.module
        try:
            add_cli = entry.load()
        except ModuleNotFoundError as err:
            # Absent from this installation: leave its commands out. Other import errors are bugs.
            if err.name is not None and (module_name == err.name or module_name.startswith(err.name + ".")):
                continue
            raise
        add_cli(subparsers)


# --- catalog export --------------------------------------------------------------------------------------


def _catalog_export(args: argparse.Namespace) -> int:
    import json

    from fleetwright.aws.catalog_export import export_catalog

    node_class = None
    if args.filename:
        from fleetwright.manifests import load_manifests
        from fleetwright.model.errors import DocumentError

        try:
            classes = load_manifests(args.filename).nodeclasses
        except DocumentError as exc:
            _err(str(exc))
            return EXIT_USAGE
        matching = [nc for nc in classes if not args.node_class or nc.name == args.node_class]
        if len(matching) != 1:
            names = ", ".join(nc.name for nc in classes) or "none"
            _err(f"expected exactly one EC2NodeClass (use --node-class NAME); found: {names}")
            return EXIT_USAGE
        node_class = matching[0]
    document = export_catalog(args.region, node_class)
    json.dump(document, sys.stdout, indent=None, separators=(",", ":"), sort_keys=True)
    sys.stdout.write("\n")
    return EXIT_OK


def _add_catalog(subparsers: Subparsers) -> None:
    commands = command_group(subparsers, "catalog", "instance-type catalogs for `fleetwright plan`")
    parser = commands.add_parser(
        "export",
        help="write the region's instance types, offerings and prices as a catalog (JSON) on stdout",
        description="Describe the region's instance types through EC2 (AWS credentials needed) and print "
        "them in the catalog format that `fleetwright plan --instance-types` reads (docs/catalog.md).",
    )
    parser.add_argument("--region", required=True, help="AWS region, e.g. us-east-1")
    parser.add_argument(
        "-f",
        "--filename",
        action="append",
        help="YAML with an EC2NodeClass whose AMI family and kubelet apply",
    )
    parser.add_argument("--node-class", help="which EC2NodeClass of the files to use")
    parser.set_defaults(handler=_catalog_export)


# --- explain ---------------------------------------------------------------------------------------------


def _add_explain(subparsers: Subparsers) -> None:
    from fleetwright.explain.command import add_cli

    add_cli(subparsers)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every subcommand."""
    parser = argparse.ArgumentParser(
        prog="fleetwright", description="Fleetwright: a serverless node autoscaler for Amazon EKS."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_plan(subparsers)
    _add_validate(subparsers)
    _add_catalog(subparsers)
    _add_explain(subparsers)
    _add_optional(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code (2 for bad input or usage)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits on --help and on usage errors
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    handler: Handler = args.handler
    try:
        code = handler(args)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
    except BrokenPipeError:
        return _closed_pipe()
    return code


def _closed_pipe() -> int:
    """The reader went away (``| head``): stop quietly, as a process killed by SIGPIPE would.

    stdout is pointed at /dev/null so the interpreter's final flush cannot raise again; the exit
    status is 141 (128 + SIGPIPE), what shells report for ``cat``, ``yes`` and others in that case.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_BROKEN_PIPE


if __name__ == "__main__":
    sys.exit(main())
