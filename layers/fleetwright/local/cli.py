"""``fleetwright demo`` and ``fleetwright local up``: the sandbox from the command line (and, from
:mod:`fleetwright.local.simulate.cli`, ``fleetwright simulate``)."""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from fleetwright.commands import Subparsers


def _demo(args: argparse.Namespace) -> int:
    from fleetwright.local.demo import DEMO_NODE_START, run_demo
    from fleetwright.local.sandbox import SandboxOptions
    from fleetwright.model.errors import DocumentError

    steps = tuple(int(s) for s in args.steps.split(","))
    default = ["examples/inflate-spot"] if args.interrupt else ["examples/inflate"]
    try:
        return run_demo(
            steps=steps,
            timeout=args.timeout,
            options=SandboxOptions(manifests=args.filename or default, node_start=DEMO_NODE_START),
            interrupt=args.interrupt,
            scale_down=not args.no_scale_down,
            fast_forward=not args.real_time,
        )
    except DocumentError as err:
        print(err, file=sys.stderr)
        return 2


def _up(args: argparse.Namespace) -> int:
    from fleetwright.model.errors import DocumentError

    try:
        return _run_up(args)
    except DocumentError as err:  # a manifest that cannot be read: say which, as validate does
        print(err, file=sys.stderr)
        return 2


def _run_up(args: argparse.Namespace) -> int:
    from fleetwright.local.nodestart import NodeStart
    from fleetwright.local.sandbox import SandboxOptions, sandbox, shown_path

    kubeconfig_dir = Path(args.kubeconfig or tempfile.mkdtemp(prefix="fleetwright-"))
    options = SandboxOptions(
        manifests=args.filename or ["examples/inflate"],
        moto_port=args.moto_port or -1,
        apiserver_port=args.port,
        kubeconfig_dir=str(kubeconfig_dir),
        node_start=NodeStart.default.scaled(args.node_start_scale),
        aws_request_log=args.aws_log,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with sandbox(options) as box:
        box.start_provisioner()
        box.start_disruption(args.disruption_interval)
        files = " ".join(f"-f {shown_path(path)}" for path in box.nodepool_files()) or "-f nodepool.yaml"
        print(
            f"""Fleetwright sandbox running (cluster {box.options.cluster_name}), with Karpenter's CRDs and no
NodePool yet: the provisioner and the disruption loop read NodePools from the cluster. New nodes start
in phases: {box.options.node_start.describe()}. In another shell:

  export KUBECONFIG={box.kubeconfig_path}
  export AWS_ENDPOINT_URL={box.moto_url} AWS_DEFAULT_REGION={box.options.region}
  export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing
  kubectl apply {files}
  kubectl scale deployment/inflate --replicas=5
  kubectl get nodeclaims,nodepools
  kubectl get events --field-selector involvedObject.kind=Pod
  kubectl get nodes,pods -o wide
  aws ec2 describe-instances --query 'Reservations[].Instances[].[InstanceId,InstanceType,State.Name]'

Ctrl-C stops everything.""",
            flush=True,
        )
        try:
            while not stop.wait(1.0):
                pass
        except KeyboardInterrupt:
            pass
    return 0


def add_cli(subparsers: Subparsers) -> None:
    """Register ``fleetwright demo``, ``fleetwright local up`` and ``fleetwright simulate``."""
    from fleetwright.commands import command_group
    from fleetwright.local.simulate.cli import add_cli as add_simulate

    add_simulate(subparsers)

    demo = subparsers.add_parser(
        "demo",
        help="replay the scale-up and scale-down walkthrough on a local sandbox (moto + Kubernetes API "
        "emulator)",
        description="Start moto, the Kubernetes API emulator (scheduler, kubelet simulator) and the "
        "provisioner in this process, scale the example Deployment, delete it, let the disruption "
        "controller remove the empty nodes, and print a timeline.",
    )
    demo.add_argument("-f", "--filename", action="append", help="manifests (default examples/inflate)")
    demo.add_argument("--steps", default="5,30", help="replica counts to scale to, in order (default 5,30)")
    demo.add_argument("--timeout", type=float, default=60.0, help="seconds each step may take (default 60)")
    demo.add_argument(
        "--interrupt",
        action="store_true",
        help="then send a spot interruption to the busiest node (default manifests: examples/inflate-spot)",
    )
    demo.add_argument(
        "--no-scale-down",
        action="store_true",
        help="stop after scaling up (do not delete the Deployment and remove the empty nodes)",
    )
    demo.add_argument(
        "--real-time",
        action="store_true",
        help="wait the NodePool's real consolidateAfter before empty nodes go (default: the demo moves "
        "the disruption controller's clock ahead)",
    )
    demo.set_defaults(handler=_demo)

    local = command_group(
        subparsers, "local", "local stand-ins for the cloud: Kubernetes API emulator, simulators"
    )
    _add_up(local)


def _node_start_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--node-start-scale",
        type=float,
        default=1.0,
        help="new nodes' start (EC2 boot, registration, Ready, startup taints) times this (default 1: "
        "EKS's published figures, about 50 s; docs/emulator.md)",
    )


def _add_up(local: Any) -> None:
    """Register ``fleetwright local up``."""
    up = local.add_parser(
        "up",
        help="run the sandbox (moto server, API emulator, provisioner) until interrupted",
        description="Start moto as an HTTP server, the Kubernetes API emulator with Karpenter's CRDs, and "
        "the provisioner and disruption loops (which read NodePools from the cluster), print the "
        "kubeconfig and environment to use them, and run until Ctrl-C.",
    )
    up.add_argument("-f", "--filename", action="append", help="manifests (default examples/inflate)")
    up.add_argument("--port", type=int, default=6443, help="API server port (default 6443)")
    up.add_argument("--moto-port", type=int, default=0, help="moto server port (default: any free port)")
    up.add_argument("--kubeconfig", help="directory for the kubeconfig (default: a new temporary one)")
    up.add_argument(
        "--aws-log", action="store_true", help="print the moto server's line per AWS request (default off)"
    )
    up.add_argument(
        "--disruption-interval",
        type=float,
        default=10.0,
        help="seconds between disruption passes (default 10; the Lambda runs every minute)",
    )
    _node_start_option(up)
    up.set_defaults(handler=_up)
