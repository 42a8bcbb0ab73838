"""HTTP front end: routes Kubernetes REST paths to the store, with JSON, Table and watch-stream responses."""

from __future__ import annotations

import json
import logging
import select
import socket
import struct
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from fleetwright.local.apiserver import errors
from fleetwright.local.apiserver.controllers import selector_string
from fleetwright.local.apiserver.crds import field_validation
from fleetwright.local.apiserver.errors import ApiError
from fleetwright.local.apiserver.eviction import evict
from fleetwright.local.apiserver.faults import Faults
from fleetwright.local.apiserver.paging import ContinueToken
from fleetwright.local.apiserver.patch import APPLY_PATCH, apply_patch
from fleetwright.local.apiserver.rbac import ADMIN, Attributes, Authorizer, User, request_verb
from fleetwright.local.apiserver.resources import PODS, SERVER_VERSION, ResourceType
from fleetwright.local.apiserver.selectors import (
    FieldSelector,
    LabelSelector,
    parse_field_selector,
    parse_label_selector,
)
from fleetwright.local.apiserver.store import Store, Watch, WatchEvent, rfc3339
from fleetwright.local.apiserver.table import to_table, wants_table
from fleetwright.local.apiserver.traffic import Traffic

JsonObject = dict[str, Any]

log = logging.getLogger(__name__)

DEFAULT_WATCH_TIMEOUT = 1800.0
# A watch that allows bookmarks gets one about this often, as from the real server's watch cache.
DEFAULT_BOOKMARK_INTERVAL = 60.0
# The annotation of the bookmark that ends the initial events of a sendInitialEvents watch.
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
# Events queued for a watch are written together, up to this many per chunk.
_EVENTS_PER_CHUNK = 256
_HEALTH_PATHS = ("/healthz", "/livez", "/readyz")
# gnostic openapi_v2.Document with only field 1 (swagger = "2.0"): tag 0x0a, length 3, the string.
_OPENAPI_V2_PROTOBUF = b"\x0a\x032.0"


class EmulatorHTTPServer(ThreadingHTTPServer):
    """ThreadingHTTPServer carrying the store, the optional bearer token, the fault switches, the traffic
    counters, the bookmark interval and a stop flag for watches."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        store: Store,
        token: str | None,
        verbose: bool,
        faults: Faults | None = None,
        authorizer: Authorizer | None = None,
        traffic: Traffic | None = None,
        bookmark_interval: float = DEFAULT_BOOKMARK_INTERVAL,
    ) -> None:
        super().__init__(address, RequestHandler)
        self.store = store
        self.token = token
        self.verbose = verbose
        self.faults = faults or Faults()
        self.authorizer = authorizer
        self.traffic = traffic or Traffic()
        self.bookmark_interval = bookmark_interval
        self.stopping = threading.Event()


@dataclass(frozen=True)
class Route:
    """A parsed resource path."""

    resource: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None
    watch_path: bool


class RequestHandler(BaseHTTPRequestHandler):
    """One HTTP request; ``do_*`` methods dispatch into the store."""

    protocol_version = "HTTP/1.1"
    server: EmulatorHTTPServer

    # -- plumbing ------------------------------------------------------------------------------------

    def setup(self) -> None:
        super().setup()
        # Headers and body leave in separate writes; without this, Nagle's algorithm holds the body
        # until the client's delayed ACK (~40 ms on Linux) and every request takes that long.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.verbose:
            log.info("%s %s", self.address_string(), format % args)

    def _send_json(
        self,
        code: int,
        body: Any,
        headers: dict[str, str] | None = None,
        warnings: Sequence[str] = (),
    ) -> None:
        self._send_bytes(code, json.dumps(body).encode(), headers, warnings)

    def _send_bytes(
        self,
        code: int,
        data: bytes,
        headers: dict[str, str] | None = None,
        warnings: Sequence[str] = (),
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        for warning in warnings:
            # RFC 7234 warn-code 299, as the API server sends them (kubectl prints "Warning: ...").
            self.send_header("Warning", "299 - " + json.dumps(warning))
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            # Counted before it is written: a client that has read the answer sees it counted.
            self.server.traffic.sent(len(data))
            self.wfile.write(data)

    def _send_error(self, error: ApiError) -> None:
        self._send_json(error.code, error.status())

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _json_body(self, required: bool = True) -> Any:
        raw = self._read_body()
        if not raw.strip():
            if required:
                raise errors.bad_request("request body is empty")
            return None
        content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        try:
            if content_type == APPLY_PATCH:
                return yaml.safe_load(raw)
            return json.loads(raw)
        except (ValueError, yaml.YAMLError) as exc:
            raise errors.bad_request(f"the request body could not be decoded: {exc}") from exc

    def _authenticate(self) -> User:
        """The caller: a user the authorizer knows by its bearer token, else the administrator (the
        server's token, or anyone when it has none); 401 otherwise."""
        header = self.headers.get("Authorization", "")
        authorizer = self.server.authorizer
        if authorizer is not None and header.startswith("Bearer "):
            user = authorizer.user_for(header[len("Bearer ") :])
            if user is not None:
                return user
        token = self.server.token
        if token is None or header == f"Bearer {token}":
            return ADMIN
        raise ApiError(401, "Unauthorized", "Unauthorized")

    def _authorize(self, user: User, route: Route, query: dict[str, str]) -> None:
        """Check the request against RBAC (when enforced), with the verb Kubernetes derives for it."""
        authorizer = self.server.authorizer
        if authorizer is None:
            return
        resource, subresource = route.resource.plural, route.subresource or ""
        if subresource == "binding" and route.name is None:
            resource, subresource = "bindings", ""  # the legacy namespaces/NS/bindings collection
        watch = route.watch_path or _flag(query, "watch")
        attributes = Attributes(
            verb=request_verb(self.command, route.name is not None, watch),
            group=route.resource.group,
            resource=resource,
            subresource=subresource,
            namespace=route.namespace or "",
            name=route.name or "",
        )
        authorizer.check(user, attributes)

    def _reset_connection(self) -> None:
        """Drop the connection with a TCP reset, as clients see it while the API server restarts."""
        self.server.faults.count_reset()
        self.close_connection = True
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        except OSError:
            pass

    def _handle(self) -> None:
        started = time.thread_time()
        try:
            self._serve()
        finally:
            self.server.traffic.cpu(time.thread_time() - started)

    def _serve(self) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        path = url.path.rstrip("/") or "/"
        if self.server.faults.hold_if_hung():
            self.close_connection = True  # a held request is never answered
            return
        if self.server.faults.is_down():
            self._reset_connection()
            return
        try:
            if path in _HEALTH_PATHS:
                self._send_text("ok")
                return
            user = self._authenticate()
            if self._discovery(path):
                return  # discovery is open to every authenticated user (system:discovery)
            route = self._route(path)
            watch = route.watch_path or _flag(query, "watch")
            self.server.traffic.request(
                request_verb(self.command, route.name is not None, watch),
                int(self.headers.get("Content-Length") or 0),
            )
            self._authorize(user, route, query)
            self._dispatch(route, query)
        except ApiError as exc:
            self._send_error(exc)
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as exc:
            log.exception("internal error on %s %s", self.command, self.path)
            self._send_error(ApiError(500, "InternalError", f"Internal error occurred: {exc}"))

    def _send_text(self, text: str) -> None:
        data = text.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_PATCH(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    # -- discovery -----------------------------------------------------------------------------------

    def _discovery(self, path: str) -> bool:
        registry = self.server.store.registry
        parts = [p for p in path.split("/") if p]
        doc: JsonObject | None = None
        if self.command != "GET":
            return False
        if parts == ["openapi", "v2"]:
            self._send_openapi_v2()
            return True
        if parts == ["version"]:
            doc = SERVER_VERSION
        elif parts == ["api"]:
            doc = registry.api_versions()
        elif parts == ["api", "v1"]:
            doc = registry.resource_list("", "v1")
        elif parts == ["apis"]:
            doc = registry.api_group_list()
        elif len(parts) == 2 and parts[0] == "apis":
            if parts[1] not in registry.group_versions():
                raise _page_not_found()
            doc = registry.api_group(parts[1])
        elif len(parts) == 3 and parts[0] == "apis":
            if not registry.has_group_version(parts[1], parts[2]):
                raise _page_not_found()
            doc = registry.resource_list(parts[1], parts[2])
        if doc is None:
            return False
        self._send_json(200, doc)
        return True

    def _send_openapi_v2(self) -> None:
        """An OpenAPI v2 document with no definitions, in the protobuf form kubectl asks for.

        ``kubectl apply`` refuses to run without one; with no schemas it falls back to its built-in types
        for strategic merge patches.
        """
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(_OPENAPI_V2_PROTOBUF)))
        self.end_headers()
        self.wfile.write(_OPENAPI_V2_PROTOBUF)

    def _route(self, path: str) -> Route:
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise _page_not_found()
        watch_path = bool(rest) and rest[0] == "watch"
        if watch_path:
            rest = rest[1:]
        namespace: str | None = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            raise _page_not_found()
        registry = self.server.store.registry
        if (group, rest) == ("", ["bindings"]) and namespace is not None:
            # The legacy binding collection: POST namespaces/NS/bindings names the pod in the body.
            return Route(PODS, namespace, None, "binding", watch_path)
        rt = registry.lookup(group, version, rest[0])
        if rt is None:
            raise _page_not_found()
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if namespace is not None and not rt.namespaced:
            raise _page_not_found()
        if rt.namespaced and name is not None and namespace is None:
            raise _page_not_found()
        if sub is not None and sub not in rt.subresources:
            raise _page_not_found()
        return Route(rt, namespace, name, sub, watch_path)

    # -- resources -----------------------------------------------------------------------------------

    def _dispatch(self, route: Route, query: dict[str, str]) -> None:
        method = self.command
        injected = self.server.faults.take(method, route.resource.plural, route.subresource)
        if injected is not None:
            error = injected.error(route.resource.plural, route.name)
            headers = {"Retry-After": f"{injected.retry_after:g}"} if injected.retry_after is not None else {}
            self._read_body()
            self._send_json(error.code, error.status(), headers)
            return
        if route.subresource == "binding":
            if method != "POST":
                raise _method_not_allowed(method)
            self._bind(route)
            return
        if route.name is None:
            if method == "GET":
                if route.watch_path or _flag(query, "watch"):
                    self._watch(route, query)
                else:
                    self._list(route, query)
            elif method == "POST":
                self._create(route, query)
            elif method == "DELETE":
                self._delete_collection(route, query)
            else:
                raise _method_not_allowed(method)
            return
        if route.subresource == "eviction":
            if method != "POST":
                raise _method_not_allowed(method)
            assert route.namespace is not None
            self._send_json(201, evict(self.server.store, route.namespace, route.name, self._json_body()))
            return
        if route.subresource == "scale":
            self._scale(route)
            return
        if method == "GET":
            obj = self.server.store.get(route.resource, route.namespace, route.name)
            self._send_object(route.resource, obj, query)
        elif method == "PUT":
            self._update(route, query)
        elif method == "PATCH":
            self._patch(route, query)
        elif method == "DELETE" and route.subresource is None:
            self._delete(route, query)
        else:
            raise _method_not_allowed(method)

    def _send_object(self, rt: ResourceType, obj: JsonObject, query: dict[str, str]) -> None:
        obj = _as_version(rt, obj)
        if wants_table(self.headers.get("Accept", "")):
            rv = obj["metadata"].get("resourceVersion", "")
            self._send_json(200, self._table(rt, [obj], rv, query))
        else:
            self._send_json(200, obj)

    def _table(self, rt: ResourceType, items: list[JsonObject], rv: str, query: dict[str, str]) -> JsonObject:
        return to_table(
            rt.kind,
            items,
            rv,
            self.server.store.clock(),
            query.get("includeObject", "Metadata"),
            rt.printer_columns if rt.custom else None,
        )

    def _selectors(self, query: dict[str, str]) -> tuple[LabelSelector, FieldSelector]:
        return parse_label_selector(query.get("labelSelector", "")), parse_field_selector(
            query.get("fieldSelector", "")
        )

    def _list(self, route: Route, query: dict[str, str]) -> None:
        labels, fields = self._selectors(query)
        token = ContinueToken.decode(query["continue"]) if query.get("continue") else None
        try:
            limit = max(0, int(query.get("limit") or 0))
        except ValueError as exc:
            raise errors.bad_request(f"invalid limit: {query.get('limit')!r}") from exc
        store, rt = self.server.store, route.resource
        page = store.list_page(rt, route.namespace, labels, fields, limit, token)
        meta: JsonObject = {"resourceVersion": str(page.resource_version)}
        if page.next is not None:
            meta["continue"] = page.next.encode()
            if page.remaining is not None:
                meta["remainingItemCount"] = page.remaining
        if wants_table(self.headers.get("Accept", "")):
            items = [_as_version(rt, o) for o in page.items]
            table = self._table(rt, items, str(page.resource_version), query)
            table["metadata"] = meta
            self._send_json(200, table)
            return
        head = {"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": meta}
        # Each stored version is serialized once and its bytes reused by every LIST and watch after.
        body = b",".join(_object_bytes(store, rt, o) for o in page.items)
        self._send_bytes(200, json.dumps(head)[:-1].encode() + b', "items": [' + body + b"]}")

    def _checked_body(self, route: Route) -> JsonObject:
        body = self._json_body()
        rt = route.resource
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a JSON object")
        if body.get("kind") not in (None, rt.kind) or body.get("apiVersion") not in (None, rt.api_version):
            raise errors.bad_request(
                f"the API version in the data ({body.get('apiVersion')}) or kind ({body.get('kind')}) "
                "does not "
                f"match the expected API version ({rt.api_version}) and kind ({rt.kind})"
            )
        return body

    def _create(self, route: Route, query: dict[str, str]) -> None:
        body = self._checked_body(route)
        warnings = field_validation(route.resource, body, query.get("fieldValidation", ""))
        obj = self.server.store.create(route.resource, body, route.namespace)
        self._send_json(201, _as_version(route.resource, obj), warnings=warnings)

    def _update(self, route: Route, query: dict[str, str]) -> None:
        body = self._checked_body(route)
        meta = body.get("metadata") or {}
        if meta.get("name") not in (None, route.name):
            raise errors.bad_request("the name of the object does not match the name on the URL")
        body.setdefault("metadata", {})["name"] = route.name
        warnings = field_validation(route.resource, body, query.get("fieldValidation", ""))
        obj = self.server.store.update(route.resource, body, route.namespace, route.subresource)
        self._send_json(200, _as_version(route.resource, obj), warnings=warnings)

    def _patch(self, route: Route, query: dict[str, str]) -> None:
        patch = self._json_body()
        content_type = self.headers.get("Content-Type", "")
        store = self.server.store
        assert route.name is not None
        warnings: list[str] = []

        def change(current: JsonObject) -> JsonObject:
            patched = apply_patch(content_type, current, patch)
            warnings[:] = field_validation(route.resource, patched, query.get("fieldValidation", ""))
            return patched

        try:
            obj = store.mutate(route.resource, route.namespace, route.name, change, route.subresource)
        except ApiError as exc:
            # Server-side apply creates what does not exist yet.
            if exc.code != 404 or not content_type.startswith(APPLY_PATCH) or not isinstance(patch, dict):
                raise
            patch.setdefault("metadata", {})["name"] = route.name
            warnings = field_validation(route.resource, patch, query.get("fieldValidation", ""))
            created = store.create(route.resource, patch, route.namespace)
            self._send_json(201, _as_version(route.resource, created), warnings=warnings)
            return
        self._send_json(200, _as_version(route.resource, obj), warnings=warnings)

    def _delete_options(self, query: dict[str, str]) -> JsonObject:
        body = self._json_body(required=False)
        options: JsonObject = dict(body) if isinstance(body, dict) else {}
        if "gracePeriodSeconds" in query:
            options["gracePeriodSeconds"] = int(query["gracePeriodSeconds"])
        if "propagationPolicy" in query:
            options["propagationPolicy"] = query["propagationPolicy"]
        if options.get("orphanDependents") is True or _flag(query, "orphanDependents"):
            options.setdefault("propagationPolicy", "Orphan")
        return options

    def _delete(self, route: Route, query: dict[str, str]) -> None:
        options = self._delete_options(query)
        assert route.name is not None
        obj = self.server.store.delete(
            route.resource,
            route.namespace,
            route.name,
            grace_period=options.get("gracePeriodSeconds"),
            propagation=options.get("propagationPolicy"),
            preconditions=options.get("preconditions"),
        )
        self._send_json(200, obj)

    def _delete_collection(self, route: Route, query: dict[str, str]) -> None:
        options = self._delete_options(query)
        labels, fields = self._selectors(query)
        store = self.server.store
        items, rv = store.list(route.resource, route.namespace, labels, fields)
        deleted = []
        for obj in items:
            try:
                deleted.append(
                    store.delete(
                        route.resource,
                        obj["metadata"].get("namespace"),
                        obj["metadata"]["name"],
                        grace_period=options.get("gracePeriodSeconds"),
                        propagation=options.get("propagationPolicy"),
                    )
                )
            except ApiError as exc:
                if exc.code != 404:
                    raise
        rt = route.resource
        self._send_json(
            200,
            {
                "kind": f"{rt.kind}List",
                "apiVersion": rt.api_version,
                "metadata": {"resourceVersion": str(rv)},
                "items": deleted,
            },
        )

    # -- subresources --------------------------------------------------------------------------------

    def _bind(self, route: Route) -> None:
        body = self._json_body()
        if not isinstance(body, dict):
            raise errors.bad_request("the request body must be a Binding")
        name = route.name or (body.get("metadata") or {}).get("name")
        target = body.get("target")
        if not name:
            raise errors.invalid("Binding", "", "metadata.name: Required value")
        if not isinstance(target, dict) or not target.get("name"):
            raise errors.invalid("Binding", name, "target.name: Required value")
        node_name = str(target["name"])
        store = self.server.store
        route = Route(route.resource, route.namespace, name, route.subresource, route.watch_path)
        assert route.name is not None

        def bind(pod: JsonObject) -> JsonObject:
            if pod["metadata"].get("deletionTimestamp"):
                raise errors.ApiError(
                    409, "Conflict", f"pod {route.name} is being deleted, cannot be assigned to a host"
                )
            if pod["spec"].get("nodeName"):
                raise errors.ApiError(
                    409,
                    "Conflict",
                    f'pod {route.name} is already assigned to node "{pod["spec"]["nodeName"]}"',
                )
            pod["spec"]["nodeName"] = node_name
            conditions = [
                c for c in pod.get("status", {}).get("conditions") or [] if c.get("type") != "PodScheduled"
            ]
            conditions.append(
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": rfc3339(store.clock())}
            )
            pod.setdefault("status", {})["conditions"] = conditions
            return pod

        with store.transaction():
            # Binding writes spec and status together, so it goes through both paths.
            bound = bind(store.get(PODS, route.namespace, route.name))
            store.mutate(PODS, route.namespace, route.name, lambda p: {**p, "spec": bound["spec"]})
            store.mutate(
                PODS, route.namespace, route.name, lambda p: {**p, "status": bound["status"]}, "status"
            )
        self._send_json(
            201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
        )

    def _scale(self, route: Route) -> None:
        store = self.server.store
        rt = route.resource
        assert route.name is not None
        method = self.command
        if method == "GET":
            self._send_json(200, _scale_of(store.get(rt, route.namespace, route.name)))
            return
        if method not in ("PUT", "PATCH"):
            raise _method_not_allowed(method)
        body = self._json_body()
        content_type = self.headers.get("Content-Type", "")

        def rescale(obj: JsonObject) -> JsonObject:
            scale = _scale_of(obj)
            if method == "PUT":
                if not isinstance(body, dict):
                    raise errors.bad_request("the request body must be a Scale object")
                wanted = body
            else:
                wanted = apply_patch(content_type, scale, body)
            replicas = (wanted.get("spec") or {}).get("replicas")
            if not isinstance(replicas, int) or replicas < 0:
                raise errors.invalid("Scale", route.name or "", "spec.replicas: Invalid value: must be >= 0")
            sent_rv = (wanted.get("metadata") or {}).get("resourceVersion")
            if sent_rv and sent_rv != obj["metadata"]["resourceVersion"]:
                raise errors.conflict(rt.plural, route.name or "", rt.group)
            obj["spec"]["replicas"] = replicas
            return obj

        updated = store.mutate(rt, route.namespace, route.name, rescale)
        self._send_json(200, _scale_of(updated))

    # -- watch ---------------------------------------------------------------------------------------

    def _watch(self, route: Route, query: dict[str, str]) -> None:
        labels, fields = self._selectors(query)
        store = self.server.store
        timeout = float(query.get("timeoutSeconds") or DEFAULT_WATCH_TIMEOUT)
        table = wants_table(self.headers.get("Accept", ""))
        bookmarks = _flag(query, "allowWatchBookmarks")
        initial_events = _flag(query, "sendInitialEvents")
        since = _watch_since(query, bookmarks, initial_events)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            watch = store.watch(route.resource, route.namespace, labels, fields, since)
        except ApiError as exc:
            self._write_chunk({"type": "ERROR", "object": exc.status()})
            self._end_chunks()
            return
        deadline = time.monotonic() + timeout
        interval = self.server.bookmark_interval
        next_bookmark = time.monotonic() + interval
        written = 0
        initial_end_due = initial_events
        try:
            while not self.server.stopping.is_set():
                if self.server.faults.is_down():
                    self._reset_connection()
                    return
                if initial_end_due and written >= watch.initial:
                    initial_end_due = False
                    self._write_chunk(
                        _bookmark(route.resource, watch.opened_at, {INITIAL_EVENTS_END: "true"})
                    )
                now = time.monotonic()
                remaining = deadline - now
                if remaining <= 0:
                    if bookmarks:
                        self._write_chunk(_bookmark(route.resource, store.resource_version))
                    break
                if bookmarks and now >= next_bookmark:
                    rv = store.bookmark_version(watch)
                    if rv is not None:
                        self._write_chunk(_bookmark(route.resource, rv))
                        next_bookmark = now + interval
                wait = min(remaining, 0.5, max(0.0, next_bookmark - now) if bookmarks else 0.5)
                event = watch.next(wait)
                if event is None:
                    if self._client_gone():
                        return
                    continue
                limit = watch.initial - written if initial_end_due else _EVENTS_PER_CHUNK
                batch = _batch(watch, event, min(limit, _EVENTS_PER_CHUNK))
                self._write_events(route.resource, batch, table, query)
                written += len(batch)
            self._end_chunks()
        except (BrokenPipeError, ConnectionResetError):
            return
        finally:
            store.close_watch(watch)

    def _write_events(
        self, rt: ResourceType, events: list[WatchEvent], table: bool, query: dict[str, str]
    ) -> None:
        """Write ``events`` as lines of one chunk; each event's object is serialized once for all
        watchers (``WatchEvent.encoded``)."""
        lines = []
        for event in events:
            if table:
                obj: JsonObject = _as_version(rt, event.object)
                cells = self._table(rt, [obj], obj["metadata"].get("resourceVersion", ""), query)
                lines.append(json.dumps({"type": event.type, "object": cells}).encode())
                continue
            data = event.encoded.get(rt.api_version)
            if data is None:
                data = event.encoded[rt.api_version] = _object_bytes(self.server.store, rt, event.object)
            lines.append(b'{"type": "' + event.type.encode() + b'", "object": ' + data + b"}")
        self._write_data(b"\n".join(lines) + b"\n")

    def _write_chunk(self, event: JsonObject) -> None:
        self._write_data(json.dumps(event).encode() + b"\n")

    def _write_data(self, data: bytes) -> None:
        self.server.traffic.sent(len(data))
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        self.close_connection = True

    def _client_gone(self) -> bool:
        """Whether the client closed its end (readable with no data), so an idle watch can end."""
        conn = self.connection
        try:
            readable, _, _ = select.select([conn], [], [], 0)
            return bool(readable) and conn.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True


def _bookmark(rt: ResourceType, rv: int, annotations: dict[str, str] | None = None) -> JsonObject:
    """A BOOKMARK event: only the kind and the resourceVersion the watch has reached."""
    meta: JsonObject = {"resourceVersion": str(rv)}
    if annotations:
        meta["annotations"] = annotations
    return {"type": "BOOKMARK", "object": {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}}


def _object_bytes(store: Store, rt: ResourceType, obj: JsonObject) -> bytes:
    """The JSON of ``obj`` as read through ``rt``'s version, from the store's cache when it can be."""
    converted = _as_version(rt, obj)
    if converted is obj:
        return store.encoded(rt, obj)
    return json.dumps(converted, separators=(",", ":")).encode()


def _as_version(rt: ResourceType, obj: JsonObject) -> JsonObject:
    """A custom object as read through ``rt``'s version: every version holds the same schema-less data
    (conversion strategy ``None``), only ``apiVersion`` differs."""
    if rt.custom and obj.get("apiVersion") != rt.api_version:
        return {**obj, "apiVersion": rt.api_version}
    return obj


def _flag(query: dict[str, str], name: str) -> bool:
    """A boolean query parameter; clients send ``true``, ``True`` or ``1``."""
    return query.get(name, "").lower() in ("true", "1")


def _scale_of(obj: JsonObject) -> JsonObject:
    meta = obj["metadata"]
    selector = obj.get("spec", {}).get("selector") or {}
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "spec": {"replicas": int(obj.get("spec", {}).get("replicas", 0))},
        "status": {
            "replicas": int(obj.get("status", {}).get("replicas", 0)),
            "selector": selector_string(selector),
        },
    }


def _page_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource")


def _method_not_allowed(method: str) -> ApiError:
    return ApiError(
        405, "MethodNotAllowed", f"the server does not allow this method on the requested resource ({method})"
    )


def _watch_since(query: dict[str, str], bookmarks: bool, initial_events: bool) -> int | None:
    """The resourceVersion a watch starts after (None: the current state first), or the request's error."""
    since_text = query.get("resourceVersion") or ""
    if initial_events and (query.get("resourceVersionMatch") != "NotOlderThan" or not bookmarks):
        raise errors.invalid(
            "ListOptions",
            "",
            "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless "
            "resourceVersionMatch is set to NotOlderThan and allowWatchBookmarks is true",
        )
    try:
        since = int(since_text) if since_text else None
    except ValueError as exc:
        raise errors.bad_request(f"invalid resource version: {since_text!r}") from exc
    if initial_events:
        return None  # the current state, which is not older than any resourceVersion asked for
    return since


def _batch(watch: Watch, first: WatchEvent, size: int) -> list[WatchEvent]:
    """``first`` and the events already queued behind it, up to ``size``: one chunk's worth."""
    batch = [first]
    while len(batch) < size:
        more = watch.next(0)
        if more is None:
            break
        batch.append(more)
    return batch
