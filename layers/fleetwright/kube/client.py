"""A small Kubernetes REST client on urllib3 (already in the Lambda runtime through botocore).

The official ``kubernetes`` package costs ~0.4 s to import and brings many dependencies; the adapter needs
only JSON over HTTPS with a bearer token, so this client does that: pooled connections, the cluster CA,
timeouts, retries with jittered exponential backoff on 429/5xx/connection errors, one token refresh on 401,
paged LISTs and streamed WATCHes.
"""

from __future__ import annotations

import contextlib
import json
import random
import ssl
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import urllib3

from fleetwright.kube.config import ClusterConfig, load_kubeconfig
from fleetwright.kube.errors import KubeApiError, KubeConnectionError, WatchExpiredError
from fleetwright.kube.resources import Resource

JsonObject = dict[str, Any]

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"

# Throttling (API priority and fairness answers 429) and transient server errors.
RETRY_STATUSES: frozenset[int] = frozenset({429, 500, 502, 503, 504})
DEFAULT_PAGE_SIZE = 500
DEFAULT_WATCH_SECONDS = 300


@dataclass(frozen=True, slots=True)
class ObjectList:
    """The items of a LIST and the resourceVersion to start a watch from."""

    items: list[JsonObject]
    resource_version: str


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One watch event: ``type`` is ADDED, MODIFIED, DELETED or BOOKMARK."""

    type: str
    object: JsonObject

    @property
    def resource_version(self) -> str:
        """The object's (or the bookmark's) resourceVersion."""
        return str((self.object.get("metadata") or {}).get("resourceVersion") or "")


def _ssl_context(config: ClusterConfig) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if config.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    elif config.ca_data:
        # cadata takes PEM text (one or more certificates) or DER bytes.
        ca = config.ca_data
        context = ssl.create_default_context(
            cadata=ca.decode("ascii") if ca.lstrip().startswith(b"-----") else ca
        )
    return context


class KubeClient:
    """JSON over HTTP(S) to one API server.

    ``max_attempts`` bounds tries per request (connection errors and ``RETRY_STATUSES``); the wait before
    try *n+1* is ``jitter() * min(backoff_max, backoff_base * 2**(n-1))``, at least the server's
    ``Retry-After`` (capped at ``backoff_max``). ``sleep`` and ``jitter`` (the random factor) are
    injectable for tests.
    """

    def __init__(
        self,
        config: ClusterConfig,
        *,
        connect_timeout: float = 5.0,
        read_timeout: float = 30.0,
        max_attempts: int = 5,
        backoff_base: float = 0.2,
        backoff_max: float = 5.0,
        pool_size: int = 8,
        user_agent: str = "fleetwright",
        sleep: Callable[[float], None] = time.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.config = config
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.max_attempts = max(1, max_attempts)
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.user_agent = user_agent
        self._sleep = sleep
        self._jitter = jitter
        pool_args: dict[str, Any] = {"num_pools": 2, "maxsize": pool_size, "block": False}
        if config.server.startswith("https://"):
            pool_args["ssl_context"] = _ssl_context(config)
            if config.insecure:
                pool_args["cert_reqs"] = "CERT_NONE"
                pool_args["assert_hostname"] = False
        self._http = urllib3.PoolManager(**pool_args)

    @classmethod
    def from_kubeconfig(
        cls, path: str | None = None, context: str | None = None, **options: Any
    ) -> KubeClient:
        """A client for a kubeconfig context (``path`` default: ``$KUBECONFIG`` or ``~/.kube/config``)."""
        return cls(load_kubeconfig(path, context), **options)

    @classmethod
    def for_eks(
        cls, cluster: str, region: str, *, eks_client: Any = None, credentials: Any = None, **options: Any
    ) -> KubeClient:
        """A client for an EKS cluster, authenticated with the caller's AWS credentials."""
        from fleetwright.kube.eks import describe_cluster

        config = describe_cluster(cluster, region, eks_client=eks_client, credentials=credentials)
        return cls(config, **options)

    def close(self) -> None:
        """Close pooled connections."""
        self._http.clear()

    # -- plumbing --------------------------------------------------------------------------------------

    def _url(self, path: str, query: Mapping[str, Any] | None) -> str:
        params = {k: v for k, v in (query or {}).items() if v is not None}
        return self.config.server + path + (f"?{urlencode(params)}" if params else "")

    def _headers(self, content_type: str | None, refresh_token: bool) -> dict[str, str]:
        headers = {"Accept": JSON, "User-Agent": self.user_agent}
        if content_type:
            headers["Content-Type"] = content_type
        if self.config.token is not None:
            headers["Authorization"] = f"Bearer {self.config.token.token(refresh_token)}"
        return headers

    def backoff(self, attempt: int, retry_after: str | None = None) -> None:
        """Sleep before retry number ``attempt`` (1-based), at least ``Retry-After`` seconds when given."""
        delay = self._jitter() * min(self.backoff_max, self.backoff_base * 2 ** (attempt - 1))
        if retry_after:
            # Retry-After may also be an HTTP date; then the computed delay will do.
            with contextlib.suppress(ValueError):
                delay = max(delay, min(float(retry_after), self.backoff_max))
        self._sleep(delay)

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
    ) -> urllib3.BaseHTTPResponse:
        """Send with retries; a response with a status below 400, else raise ``KubeApiError``."""
        url = self._url(path, query)
        data = None if body is None else json.dumps(body).encode()
        timeout = urllib3.Timeout(connect=self.connect_timeout, read=read_timeout or self.read_timeout)
        attempt = 0
        refresh = refreshed = False
        while True:
            attempt += 1
            headers = self._headers(content_type if data is not None else None, refresh)
            refresh = False
            try:
                response = self._http.request(
                    method,
                    url,
                    body=data,
                    headers=headers,
                    timeout=timeout,
                    retries=False,
                    redirect=False,
                    preload_content=not stream,
                )
            except urllib3.exceptions.SSLError as err:
                # A certificate problem does not heal with retries.
                raise KubeConnectionError(f"{method} {path}: TLS error: {err}") from err
            except urllib3.exceptions.HTTPError as err:
                if attempt >= self.max_attempts:
                    raise KubeConnectionError(f"{method} {path}: {err} (after {attempt} attempts)") from err
                self.backoff(attempt, None)
                continue
            status = response.status
            if status < 400:
                return response
            try:
                raw = response.data if not stream else response.read()
            except urllib3.exceptions.HTTPError as err:
                raise KubeConnectionError(f"{method} {path}: reading the {status} answer: {err}") from err
            finally:
                if stream:
                    response.release_conn()
            if status == 401 and self.config.token is not None and not refreshed:
                # An expired or rotated token: get a fresh one and try once more.
                refresh = refreshed = True
                attempt -= 1
                continue
            if status in retry_statuses and attempt < self.max_attempts:
                self.backoff(attempt, response.headers.get("Retry-After"))
                continue
            raise KubeApiError.from_response(status, raw, method, path)

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = JSON,
        retry_statuses: Collection[int] = RETRY_STATUSES,
    ) -> Any:
        """Send one request (with retries) and return the decoded JSON response (None when empty)."""
        response = self._perform(method, path, query, body, content_type, retry_statuses)
        data = response.data
        if not data:
            return None
        try:
            return json.loads(data)
        except ValueError as err:
            raise KubeApiError(
                response.status, "InvalidResponse", f"response is not JSON: {err}", method=method, path=path
            ) from err

    # -- verbs -----------------------------------------------------------------------------------------

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> JsonObject:
        """GET one object (``KubeApiError`` 404 when missing)."""
        result: JsonObject = self.request("GET", resource.path(namespace, name))
        return result

    def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
    ) -> ObjectList:
        """LIST every matching object, following ``continue`` tokens page by page.

        The resourceVersion returned is the first page's (the consistent snapshot the pages belong to).
        """
        items: list[JsonObject] = []
        query: dict[str, Any] = {
            "labelSelector": label_selector or None,
            "fieldSelector": field_selector or None,
            "limit": page_size or None,
        }
        resource_version = ""
        while True:
            page = self.request("GET", resource.path(namespace), query=query)
            meta = page.get("metadata") or {}
            resource_version = resource_version or str(meta.get("resourceVersion") or "")
            for item in page.get("items") or []:
                # LIST items carry no kind/apiVersion; restore them so objects look like GET's.
                item.setdefault("kind", resource.kind)
                item.setdefault("apiVersion", resource.api_version)
                items.append(item)
            token = meta.get("continue")
            if not token:
                return ObjectList(items, resource_version)
            query["continue"] = token

    def create(self, resource: Resource, obj: Mapping[str, Any], namespace: str | None = None) -> JsonObject:
        """POST a new object (``namespace`` default: the object's own)."""
        ns = namespace or (obj.get("metadata") or {}).get("namespace")
        result: JsonObject = self.request(
            "POST", resource.path(ns if resource.namespaced else None), body=obj
        )
        return result

    def replace(
        self, resource: Resource, obj: Mapping[str, Any], *, subresource: str | None = None
    ) -> JsonObject:
        """PUT an object (conditional on its ``metadata.resourceVersion`` when set)."""
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace") if resource.namespaced else None
        result: JsonObject = self.request(
            "PUT", resource.path(ns, str(meta.get("name") or ""), subresource), body=obj
        )
        return result

    def patch(
        self,
        resource: Resource,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        patch_type: str = MERGE_PATCH,
        subresource: str | None = None,
    ) -> JsonObject:
        """PATCH an object (merge patch by default; ``JSON_PATCH``/``STRATEGIC_MERGE_PATCH`` also work)."""
        result: JsonObject = self.request(
            "PATCH", resource.path(namespace, name, subresource), body=patch, content_type=patch_type
        )
        return result

    def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        grace_period_seconds: int | None = None,
        propagation_policy: str | None = None,
        preconditions: Mapping[str, str] | None = None,
    ) -> JsonObject:
        """DELETE an object with ``DeleteOptions``; returns what the server answered."""
        options: JsonObject = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if propagation_policy is not None:
            options["propagationPolicy"] = propagation_policy
        if preconditions:
            options["preconditions"] = dict(preconditions)
        result: JsonObject = self.request("DELETE", resource.path(namespace, name), body=options)
        return result

    def watch(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        timeout_seconds: int = DEFAULT_WATCH_SECONDS,
        allow_bookmarks: bool = True,
    ) -> Iterator[WatchEvent]:
        """One WATCH request: events until the server ends it after ``timeout_seconds``.

        Raises :class:`WatchExpiredError` when ``resource_version`` is too old (410, as an HTTP status or an
        ERROR event): list again and watch from the new resourceVersion.
        """
        query = {
            "watch": "true",
            "resourceVersion": resource_version or None,
            "timeoutSeconds": timeout_seconds,
            "allowWatchBookmarks": "true" if allow_bookmarks else None,
            "labelSelector": label_selector or None,
            "fieldSelector": field_selector or None,
        }
        path = resource.path(namespace)
        try:
            response = self._perform(
                "GET",
                path,
                query,
                None,
                JSON,
                RETRY_STATUSES,
                # The server ends the watch; only a silent connection should time out on our side.
                read_timeout=timeout_seconds + self.read_timeout,
                stream=True,
            )
        except KubeApiError as err:
            if err.gone:
                raise WatchExpiredError(
                    err.status, err.reason, err.message, err.details, method="GET", path=path
                ) from err
            raise
        try:
            for line in _lines(response):
                event = json.loads(line)
                kind = event.get("type")
                obj = event.get("object") or {}
                if kind == "ERROR":
                    error = KubeApiError.from_status(500, obj, method="GET", path=path)
                    if error.gone:
                        raise WatchExpiredError(
                            error.status, error.reason, error.message, error.details, method="GET", path=path
                        )
                    raise error
                yield WatchEvent(str(kind), obj)
        except urllib3.exceptions.HTTPError as err:
            raise KubeConnectionError(f"GET {path} (watch): {err}") from err
        finally:
            # Closing drops a half-read stream's connection instead of returning it to the pool.
            response.close()
            response.release_conn()


def _lines(response: urllib3.BaseHTTPResponse) -> Iterator[bytes]:
    """Newline-delimited JSON from a streamed response, yielding each line as soon as it is complete."""
    chunks: Iterator[bytes]
    if isinstance(response, urllib3.HTTPResponse) and response.chunked and response.supports_chunked_reads():
        chunks = response.read_chunked()
    else:
        chunks = iter(lambda: response.read1(65536), b"")
    buffer = b""
    for chunk in chunks:
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line.strip():
                yield line
    if buffer.strip():
        yield buffer
