"""``ApiServer``: the emulator as an object (tests, demo) and as ``fleetwright local apiserver``."""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from pathlib import Path
from types import FrameType, TracebackType
from typing import TYPE_CHECKING, Any

import yaml

from fleetwright.local.apiserver.controllers import (
    Controller,
    DeploymentController,
    DisruptionController,
    PodLifecycleController,
)
from fleetwright.local.apiserver.faults import Faults
from fleetwright.local.apiserver.http import DEFAULT_BOOKMARK_INTERVAL, EmulatorHTTPServer
from fleetwright.local.apiserver.rbac import Authorizer, Policy
from fleetwright.local.apiserver.resources import ResourceType
from fleetwright.local.apiserver.store import GracefulDeletion, JsonObject, Store
from fleetwright.local.apiserver.traffic import Traffic

if TYPE_CHECKING:
    from fleetwright.commands import Subparsers
    from fleetwright.kube.config import ClusterConfig
    from fleetwright.local.kubelet import KubeletOptions

DEFAULT_PORT = 6443


class ApiServer:
    """A Kubernetes API emulator on ``http://HOST:PORT`` backed by an in-memory ``Store``.

    ``port=0`` picks a free port (read it back from ``.port`` or ``.url`` after ``start()``). ``token`` makes
    every request except health checks require ``Authorization: Bearer TOKEN``. The controller flags switch
    the built-in controllers (see ``fleetwright.local.apiserver.controllers``); ``attach_detach``
    (``fleetwright.local.attachdetach``: VolumeAttachments for running pods' volumes, deleted ``detach_delay``
    seconds after the last pod using one leaves) is on by default; ``daemonset_controller``
    (``fleetwright.local.daemonsets``) and ``scheduler`` (``fleetwright.local.kube_scheduler``) are off unless
    asked for, ``node_lifecycle`` (``fleetwright.local.nodelifecycle``: the not-ready / unreachable taints of
    NotReady nodes) is on, and ``kubelet`` (EC2 client, cluster name, node start) adds a
    ``fleetwright.local.kubelet.KubeletSimulator``. ``faults`` (``fleetwright.local.apiserver.faults.Faults``)
    switches an outage or injected error answers on and off while the server runs. ``rbac`` (a manifest of
    ClusterRoles, Roles and their bindings, e.g. ``docs/rbac.yaml``) enforces them on the users ``add_user``
    makes, and records what each requests in ``authorizer``; the administrator (the server's token, or no
    token) keeps full access. ``traffic`` counts the requests, bytes and request-thread CPU time served;
    watches that allow bookmarks get one every ``bookmark_interval`` seconds.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        token: str | None = None,
        store: Store | None = None,
        deployment_controller: bool = True,
        pod_lifecycle: bool = True,
        disruption_controller: bool = True,
        daemonset_controller: bool = False,
        attach_detach: bool = True,
        detach_delay: float = 5.0,
        scheduler: bool = False,
        node_lifecycle: bool = True,
        kubelet: KubeletOptions | None = None,
        graceful_deletion: GracefulDeletion = "immediate",
        watch_history: int = 10_000,
        verbose: bool = False,
        rbac: str | Path | None = None,
        bookmark_interval: float = DEFAULT_BOOKMARK_INTERVAL,
    ) -> None:
        self.host = host
        self.authorizer: Authorizer | None = Authorizer(Policy.load(rbac)) if rbac is not None else None
        self.requested_port = port
        self.token = token
        self.verbose = verbose
        self.store = store or Store(graceful_deletion=graceful_deletion, watch_history=watch_history)
        self.controllers: list[Controller] = []
        if deployment_controller:
            self.controllers.append(DeploymentController(self.store))
        if pod_lifecycle:
            self.controllers.append(PodLifecycleController(self.store))
        if disruption_controller:
            self.controllers.append(DisruptionController(self.store))
        if node_lifecycle:
            from fleetwright.local.nodelifecycle import NodeLifecycleController

            self.controllers.append(NodeLifecycleController(self.store))
        self._add_optional_controllers(daemonset_controller, attach_detach, detach_delay, scheduler, kubelet)
        self.faults = Faults()
        self.traffic = Traffic()
        self.bookmark_interval = bookmark_interval
        self._httpd: EmulatorHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def _add_optional_controllers(
        self,
        daemonset_controller: bool,
        attach_detach: bool,
        detach_delay: float,
        scheduler: bool,
        kubelet: KubeletOptions | None,
    ) -> None:
        """The controllers a bare API server goes without, imported only when asked for."""
        if daemonset_controller:
            from fleetwright.local.daemonsets import DaemonSetController

            self.controllers.append(DaemonSetController(self.store))
        if attach_detach:
            from fleetwright.local.attachdetach import AttachDetachController

            self.controllers.append(AttachDetachController(self.store, detach_delay=detach_delay))
        if scheduler:
            from fleetwright.local.kube_scheduler import KubeScheduler

            self.controllers.append(KubeScheduler(self.store))
        if kubelet is not None:
            from fleetwright.local.kubelet import KubeletSimulator

            self.controllers.append(
                KubeletSimulator(
                    self.store,
                    kubelet.ec2_client,
                    kubelet.cluster_name,
                    start=kubelet.start,
                    poll_interval=kubelet.poll_interval,
                    startup_taint_keys=kubelet.startup_taint_keys,
                )
            )

    @property
    def port(self) -> int:
        """The port listened on (only meaningful once started)."""
        if self._httpd is None:
            return self.requested_port
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:41234``."""
        return f"http://{self.host}:{self.port}"

    def listen(self) -> EmulatorHTTPServer:
        """Bind the socket and start the controllers, without serving requests yet."""
        if self._httpd is None:
            self._httpd = EmulatorHTTPServer(
                (self.host, self.requested_port),
                self.store,
                self.token,
                self.verbose,
                self.faults,
                self.authorizer,
                self.traffic,
                self.bookmark_interval,
            )
            for controller in self.controllers:
                controller.start()
        return self._httpd

    def start(self) -> ApiServer:
        """Listen and serve on a background daemon thread; returns self."""
        httpd = self.listen()
        if self._thread is None:
            self._thread = threading.Thread(
                target=httpd.serve_forever, name="fleetwright-apiserver", daemon=True
            )
            self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve on the calling thread until ``stop()`` (or KeyboardInterrupt)."""
        self.listen().serve_forever()

    def stop(self) -> None:
        """Stop serving, end open watches and unsubscribe the controllers."""
        for controller in self.controllers:
            controller.stop()
        self.store.stop()
        if self._httpd is not None:
            self._httpd.stopping.set()
            if self._thread is not None:
                self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> ApiServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def seed(self, rt: ResourceType, objects: list[JsonObject], *, keep_status: bool = True) -> int:
        """Create many objects at once without HTTP (``Store.seed``); returns how many."""
        return self.store.seed(rt, objects, keep_status=keep_status)

    def add_user(self, name: str, groups: tuple[str, ...] = (), token: str | None = None) -> str:
        """Make a user in ``groups``, held to the ``rbac`` manifest; returns its bearer token."""
        if self.authorizer is None:
            raise ValueError("RBAC is not enforced: start the ApiServer with rbac=<manifest>")
        return self.authorizer.add_user(name, groups, token)

    def cluster_config(self, token: str | None = None) -> ClusterConfig:
        """A ``ClusterConfig`` for this server, as the user of ``token`` (default: the administrator)."""
        from fleetwright.kube.config import ClusterConfig, StaticToken

        value = token or self.token
        return ClusterConfig(server=self.url, token=StaticToken(value) if value else None)

    def kubeconfig(self, context: str = "fleetwright-local", token: str | None = None) -> dict[str, Any]:
        """A kubeconfig document pointing at this server, with ``token`` (a user's from ``add_user``)
        or the server's own token, if any."""
        value = token or self.token
        user: dict[str, Any] = {"token": value} if value else {}
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": {"server": self.url}}],
            "users": [{"name": context, "user": user}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
            "current-context": context,
            "preferences": {},
        }

    def write_kubeconfig(
        self, path: str | Path, context: str = "fleetwright-local", token: str | None = None
    ) -> Path:
        """Write ``kubeconfig(context, token)`` to ``path`` and return it."""
        target = Path(path)
        target.write_text(yaml.safe_dump(self.kubeconfig(context, token), sort_keys=False))
        return target


def add_cli(subparsers: Subparsers) -> None:
    """Register ``fleetwright local apiserver`` on the top-level ``subparsers`` (sets ``handler``)."""
    from fleetwright.commands import command_group

    local_commands = command_group(
        subparsers, "local", "local stand-ins for the cloud: Kubernetes API emulator, simulators"
    )
    parser = local_commands.add_parser(
        "apiserver",
        help="run the Kubernetes API emulator",
        description="Serve an in-memory Kubernetes API (see docs/emulator.md) until interrupted.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0 = any)"
    )
    parser.add_argument("--token", help="require this bearer token on every request")
    parser.add_argument("--kubeconfig", help="write a kubeconfig for the emulator to this path")
    parser.add_argument(
        "--graceful-deletion",
        choices=("immediate", "timed"),
        default="immediate",
        help="remove pods deleted with a grace period at once (default) or after the period",
    )
    parser.add_argument("--no-controllers", action="store_true", help="disable the built-in controllers")
    parser.add_argument("--daemonsets", action="store_true", help="run the DaemonSet controller")
    parser.add_argument("--scheduler", action="store_true", help="run the scheduler (binds pending pods)")
    parser.add_argument(
        "--kubelet-cluster",
        metavar="NAME",
        help="simulate kubelets: a Node for each running EC2 instance tagged fleetwright.io/cluster=NAME",
    )
    parser.add_argument(
        "--ec2-endpoint", metavar="URL", help="EC2 endpoint for the kubelets (e.g. moto_server)"
    )
    parser.add_argument(
        "--region", default="us-east-1", help="EC2 region for the kubelets (default us-east-1)"
    )
    parser.add_argument(
        "--node-start-scale",
        type=float,
        default=1.0,
        help="the kubelets' node start (boot, registration, Ready, startup taints) times this "
        "(default 1: EKS's published figures, docs/emulator.md)",
    )
    parser.add_argument(
        "--karpenter-crds",
        action="store_true",
        help="install the NodePool, NodeClaim and EC2NodeClass CRDs of docs/crds at start",
    )
    parser.add_argument("--verbose", action="store_true", help="log every request")
    parser.set_defaults(handler=run_cli)


def run_cli(args: argparse.Namespace) -> int:
    """Body of ``fleetwright local apiserver``: serve until interrupted."""
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    enabled = not args.no_controllers
    kubelet = None
    if args.kubelet_cluster and enabled:
        import boto3  # type: ignore[import-untyped]

        from fleetwright.local.kubelet import KubeletOptions
        from fleetwright.local.nodestart import NodeStart

        ec2 = boto3.client("ec2", region_name=args.region, endpoint_url=args.ec2_endpoint)
        kubelet = KubeletOptions(
            ec2, args.kubelet_cluster, start=NodeStart.default.scaled(args.node_start_scale)
        )
    server = ApiServer(
        args.host,
        args.port,
        token=args.token,
        deployment_controller=enabled,
        pod_lifecycle=enabled,
        disruption_controller=enabled,
        daemonset_controller=enabled and args.daemonsets,
        scheduler=enabled and args.scheduler,
        kubelet=kubelet,
        graceful_deletion=args.graceful_deletion,
        verbose=args.verbose,
    )

    def interrupt(_signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    # A background job ignores SIGINT, so SIGTERM must end it cleanly too.
    signal.signal(signal.SIGTERM, interrupt)
    if args.karpenter_crds:
        from fleetwright.local.apiserver.karpenter import install_karpenter_crds

        print(f"installed {', '.join(install_karpenter_crds(server.store))}", flush=True)
    server.listen()
    print(f"Kubernetes API emulator listening on {server.url}", flush=True)
    if args.kubeconfig:
        print(f"kubeconfig written to {server.write_kubeconfig(args.kubeconfig)}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0
