"""The ``fleetwright explain pod|node`` subcommands: arguments, reading the view, printing (table or JSON).

Imported when the command line is built, so the heavy modules load only when a command runs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING, Any

from fleetwright.commands import Subparsers, command_group

if TYPE_CHECKING:
    from fleetwright.explain.view import View

EXIT_OK = 0
EXIT_FAILED = 1  # the cluster could not be read
EXIT_USAGE = 2  # bad input: unreadable manifests, no such pod or node


def add_cli(subparsers: Subparsers) -> None:
    """Register ``fleetwright explain pod`` and ``fleetwright explain node``."""
    commands = command_group(
        subparsers,
        "explain",
        "why a pod is pending and why a node stays, in the scheduler's and disruption planner's words",
    )
    pod = commands.add_parser(
        "pod",
        help="which NodePools and instance types could run a pod, and what the provisioner would do",
        description="Say where the scheduler would put the pod (a node there is, a new node, or nowhere "
        "and why), and for each NodePool whether a new node of it could run the pod and why not. "
        "Read-only: nothing is written to the cluster.",
    )
    pod.add_argument("pod", metavar="NAMESPACE/NAME")
    _common(pod)
    pod.set_defaults(handler=_explain_pod)
    node = commands.add_parser(
        "node",
        help="which disruption methods apply to a node, what blocks each, and where its pods would go",
        description="Say which disruption methods (expiration, emptiness, drift, consolidation) apply to "
        "the node, what blocks each (budgets, PodDisruptionBudgets, do-not-disrupt, consolidateAfter, "
        "savings), and simulate its removal pod by pod. Read-only: nothing is written to the cluster.",
    )
    node.add_argument("node", metavar="NAME")
    _common(node)
    node.set_defaults(handler=_explain_node)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-f",
        "--filename",
        dest="files",
        action="append",
        metavar="PATH",
        help="read manifests (YAML file or directory; repeat for several) instead of the cluster",
    )
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    parser.add_argument("--context", help="kubeconfig context (default: the current context)")
    parser.add_argument(
        "--instance-types",
        metavar="FILE",
        help="instance-type catalog JSON (docs/catalog.md); default: the built-in catalog of the region",
    )
    parser.add_argument(
        "--region",
        help="region of the built-in catalog (default: the nodes' topology.kubernetes.io/region, else "
        "us-east-1)",
    )
    parser.add_argument(
        "--now",
        metavar="TIME",
        help="judge ages and waits as of this RFC 3339 time (default: now)",
    )
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")


def _err(message: str) -> None:
    print(message, file=sys.stderr)


def _read(args: argparse.Namespace) -> View:
    """The view the arguments name: manifests with ``-f``, else the kubeconfig's cluster."""
    from fleetwright.explain.view import from_cluster, from_files

    if args.files:
        return from_files(args.files)
    from fleetwright.kube.client import KubeClient
    from fleetwright.kube.cluster import KubeCluster

    client = KubeClient.from_kubeconfig(args.kubeconfig, args.context)
    return from_cluster(KubeCluster(client), source=f"cluster at {client.configuration.host}")


def _run(args: argparse.Namespace, explain: Any) -> int:
    """Read the view, call ``explain(view, types, region, now)``, print its (json, text) pair."""
    from fleetwright.catalog.bill import DEFAULT_REGION
    from fleetwright.explain.pod import ExplainError
    from fleetwright.kube.errors import KubeError
    from fleetwright.model.errors import DocumentError
    from fleetwright.model.kube import timestamp
    from fleetwright.plan import PlanError, instance_types_for

    now = time.time()
    if args.now:
        parsed = timestamp(args.now)
        if parsed is None:
            _err(f"error: --now {args.now!r} is not an RFC 3339 time")
            return EXIT_USAGE
        now = parsed
    try:
        view = _read(args)
        region = args.region or view.region(DEFAULT_REGION)
        document, text = explain(view, instance_types_for(args.instance_types, region), region, now)
    except DocumentError as error:
        _err(error.render())
        return EXIT_USAGE
    except (ExplainError, PlanError) as error:
        _err(f"error: {error}")
        return EXIT_USAGE
    except KubeError as error:
        _err(f"error: cannot read the cluster: {error}")
        return EXIT_FAILED
    for warning in view.warnings:
        _err(warning)
    if args.output == "json":
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(text)
    return EXIT_OK


def _explain_pod(args: argparse.Namespace) -> int:
    from fleetwright.explain.pod import explain_pod, pod_json, render_pod

    def explain(view: View, types: Any, region: str, now: float) -> tuple[Any, str]:
        found = explain_pod(view, args.pod, types, region)
        return pod_json(found), render_pod(found)

    return _run(args, explain)


def _explain_node(args: argparse.Namespace) -> int:
    from fleetwright.explain.node import explain_node, node_json, render_node

    def explain(view: View, types: Any, region: str, now: float) -> tuple[Any, str]:
        found = explain_node(view, args.node, types, region, now)
        return node_json(found), render_node(found)

    return _run(args, explain)
