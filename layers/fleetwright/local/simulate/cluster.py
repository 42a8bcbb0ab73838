"""The replay's Kubernetes cluster: the emulator's :class:`Store` in this process, reached by
:class:`~fleetwright.kube.cluster.KubeCluster` through the emulator's own request handler, without HTTP.

:class:`StoreClient` is a :class:`~fleetwright.kube.client.KubeClient` whose requests are answered by
:class:`~fleetwright.local.apiserver.http.RequestHandler` called in-process (same routing, patches,
evictions, validation and errors as over a socket): the capabilities' Kubernetes code runs unchanged.
Watches are not offered: the capabilities read the cluster from their caches, which follow the store
directly (:mod:`~fleetwright.local.simulate.cache`); what is not cached is listed.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

from fleetwright.catalog.loader import format_quantity
from fleetwright.kube.client import KubeClient
from fleetwright.kube.errors import KubeApiError
from fleetwright.local.apiserver.errors import ApiError
from fleetwright.local.apiserver.faults import Faults
from fleetwright.local.apiserver.http import RequestHandler
from fleetwright.local.apiserver.resources import NODES, PODS
from fleetwright.local.apiserver.selectors import FieldSelector
from fleetwright.local.apiserver.store import Store, rfc3339
from fleetwright.local.apiserver.traffic import Traffic
from fleetwright.local.simulate.cloud import SimInstance, node_name
from fleetwright.model import labels as wk
from fleetwright.model.taints import Taint

JsonObject = dict[str, Any]


class _Server:
    """What the request handler reads from its server: the store, no token, no RBAC, no faults."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.token: str | None = None
        self.verbose = False
        self.faults = Faults()
        self.authorizer = None
        self.traffic = Traffic()
        self.bookmark_interval = 60.0


class _Headers(dict[str, str]):
    """Request headers, looked up without regard to case (as ``http.client.HTTPMessage`` does)."""

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key.lower(), default)


class _DirectHandler(RequestHandler):
    """One request answered in-process: the emulator's handler with its reply captured, no socket."""

    def __init__(self, server: _Server, method: str, path: str, body: bytes, content_type: str) -> None:
        # BaseHTTPRequestHandler's constructor would read a socket: set what the handler reads instead.
        self.server = server  # type: ignore[assignment]
        self.command = method
        self.path = path
        self.headers = _Headers(  # type: ignore[assignment]
            {"content-type": content_type, "content-length": str(len(body)), "accept": "application/json"}
        )
        self.rfile = io.BytesIO(body)
        self.status = 0
        self.reply = b""

    def _send_bytes(
        self,
        code: int,
        data: bytes,
        headers: dict[str, str] | None = None,
        warnings: Any = (),
    ) -> None:
        self.status, self.reply = code, data


class StoreClient(KubeClient):
    """A :class:`KubeClient` over ``store`` in this process (no HTTP, no retries: nothing fails in
    transit)."""

    def __init__(self, store: Store) -> None:
        self._server = _Server(store)
        self._token = None
        self.max_attempts = 1
        self.bytes_received = 0
        self.writes = 0
        self.requests = 0

    def close(self) -> None:
        """Nothing to close."""

    def _perform(
        self,
        method: str,
        path: str,
        query: Mapping[str, Any] | None,
        body: Any,
        content_type: str,
        retry_statuses: Collection[int],
        read_timeout: float | None = None,
        stream: bool = False,
    ) -> Any:
        if stream:
            raise KubeApiError(
                405, "MethodNotAllowed", "the in-process client has no watches", method=method, path=path
            )
        params = {k: v for k, v in (query or {}).items() if v is not None}
        target = f"{path}?{urlencode(params)}" if params else path
        raw = b"" if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
        handler = _DirectHandler(self._server, method, target, raw, content_type)
        handler._serve()
        self.requests += 1
        if handler.status >= 300:
            raise KubeApiError.from_response(handler.status, handler.reply, method, path)
        return handler.reply


NOT_READY_TAINT_KEY = "node.kubernetes.io/not-ready"


def _taint(taint: Taint) -> JsonObject:
    return {"key": taint.key, "effect": taint.effect, **({"value": taint.value} if taint.value else {})}


def _ready_condition(status: str, now: str) -> JsonObject:
    reason = "KubeletReady" if status == "True" else "KubeletNotReady"
    return {
        "type": "Ready",
        "status": status,
        "reason": reason,
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }


def _is_ready(node: JsonObject) -> bool:
    conditions = node.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


class SharedLists:
    """The store as the kube-scheduler reads it: LISTs hand out the stored objects themselves, not
    copies (it only reads them; its writes go through ``mutate``), which saves most of a pass."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def list(self, rt: Any, namespace: str | None = None, labels: Any = None, fields: Any = None) -> Any:
        """The matching stored objects (shared: never modify them) and the resourceVersion."""
        page = self._store.list_page(rt, namespace, labels, fields)
        return list(page.items), page.resource_version


class SimKubelet:
    """The kubelets and the node lifecycle controller of the replay's instances, moved by the engine.

    :meth:`register` makes the Node a kubelet registers (NotReady, with the not-ready taint the node
    lifecycle controller adds, and the claim's taints and startup taints); :meth:`ready` reports Ready
    and lifts the not-ready taint; :meth:`clear_startup_taints` stands in for the agent that removes
    them; :meth:`run_pods` starts the pods bound to Ready nodes; :meth:`remove` deletes the pods and the
    Node of an instance that is gone (a Node holding a finalizer stays Terminating).
    """

    def __init__(self, store: Store, region: str = "us-east-1") -> None:
        self.store = store
        self.region = region
        self.started: dict[str, float] = {}  # pod uid → when it started running

    def _now(self) -> str:
        return rfc3339(self.store.clock())

    def register(self, instance: SimInstance) -> str:
        """Register the instance's Node; returns its name."""
        name = node_name(instance.id)
        launched, request = instance.launched, instance.request
        instance_type = next(t for t in request.instance_types if t.name == launched.instance_type)
        arch = instance_type.labels.get(wk.ARCH, "amd64")
        labels = {
            **request.labels,
            **launched.labels,
            wk.HOSTNAME: name,
            wk.OS: "linux",
            wk.ARCH: arch,
            wk.INSTANCE_TYPE: launched.instance_type,
            wk.ZONE: launched.zone,
            wk.REGION: self.region,
        }
        taints = [*request.taints, *request.startup_taints]
        node: JsonObject = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": {
                "providerID": launched.provider_id,
                "taints": [
                    *(_taint(t) for t in taints),
                    {"key": NOT_READY_TAINT_KEY, "effect": "NoSchedule"},
                ],
            },
            "status": {
                "capacity": {k: format_quantity(k, v) for k, v in sorted(instance_type.capacity.items())},
                "allocatable": {
                    k: format_quantity(k, v) for k, v in sorted(instance_type.allocatable.items())
                },
                "conditions": [_ready_condition("False", self._now())],
                "nodeInfo": {"architecture": arch, "operatingSystem": "linux", "systemUUID": instance.id},
            },
        }
        self.store.create(NODES, node)
        return name

    def _node_change(self, name: str, change: Callable[[JsonObject], JsonObject], sub: str | None) -> None:
        with contextlib.suppress(ApiError):
            self.store.mutate(NODES, None, name, change, sub)

    def ready(self, name: str) -> None:
        """The kubelet reports Ready; the node lifecycle controller lifts the not-ready taint."""
        now = self._now()

        def status(obj: JsonObject) -> JsonObject:
            obj["status"]["conditions"] = [_ready_condition("True", now)]
            return obj

        self._node_change(name, status, "status")
        self._untaint(name, {NOT_READY_TAINT_KEY})

    def clear_startup_taints(self, name: str, taints: Sequence[Taint]) -> None:
        """The agent owning the startup taints removes them."""
        if taints:
            self._untaint(name, {t.key for t in taints})

    def _untaint(self, name: str, keys: set[str]) -> None:
        def change(obj: JsonObject) -> JsonObject:
            spec = obj.setdefault("spec", {})
            spec["taints"] = [t for t in spec.get("taints") or [] if t.get("key") not in keys]
            return obj

        self._node_change(name, change, None)

    def run_pods(self, nodes: Iterable[str]) -> list[str]:
        """Start the Pending pods bound to those of ``nodes`` that are Ready; the uids started."""
        started = []
        now = self._now()
        with self.store.transaction():
            for name in sorted(set(nodes)):
                node = self.store.try_get(NODES, None, name)
                if node is None or not _is_ready(node):
                    continue
                on_node = FieldSelector((("spec.nodeName", True, name),))
                for pod in self.store.list_page(PODS, fields=on_node).items:
                    if (
                        pod["metadata"].get("deletionTimestamp")
                        or pod.get("status", {}).get("phase", "Pending") != "Pending"
                    ):
                        continue
                    self._start(pod, now)
                    started.append(str(pod["metadata"]["uid"]))
        return started

    def _start(self, pod: JsonObject, now: str) -> JsonObject:
        def running(obj: JsonObject) -> JsonObject:
            status = obj.setdefault("status", {})
            status["phase"] = "Running"
            status["startTime"] = now
            status["conditions"] = [
                *(
                    c
                    for c in status.get("conditions") or []
                    if c.get("type") not in ("Ready", "ContainersReady")
                ),
                {"type": "Ready", "status": "True", "lastTransitionTime": now},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
            ]
            return obj

        meta = pod["metadata"]
        self.started[meta["uid"]] = self.store.clock()
        return self.store.mutate(PODS, meta["namespace"], meta["name"], running, "status")

    def remove(self, instance_id: str) -> None:
        """The instance is gone: its pods and its Node go (the Node stays while a finalizer holds it)."""
        name = node_name(instance_id)
        on_node = FieldSelector((("spec.nodeName", True, name),))
        for pod in self.store.list(PODS, fields=on_node)[0]:
            with contextlib.suppress(ApiError):
                self.store.delete(PODS, pod["metadata"]["namespace"], pod["metadata"]["name"], grace_period=0)
        with contextlib.suppress(ApiError):
            self.store.delete(NODES, None, name)
