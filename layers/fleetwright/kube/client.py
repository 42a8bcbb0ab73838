"""``KubeClient``: Fleetwright's JSON verbs on the official ``kubernetes`` client.

The official ``ApiClient`` sends every request (connection pool, TLS, proxies, bearer token through
``Configuration.refresh_api_key_hook``) and ``kubernetes.watch.Watch`` reads watch streams. What stays ours
is what the controllers rely on and the official client does not do: retries with jittered exponential
backoff on 429/5xx/connection errors honouring ``Retry-After``, one token refresh after a 401, paged LISTs,
and errors as :class:`KubeApiError` / :class:`KubeConnectionError`. Responses are read raw
(``_preload_content=False``) and decoded with ``json.loads``: the callers work with JSON dicts, and model
deserialization would only cost time.

``kubernetes`` (~0.45 s to import) is imported when a client is built, never by ``import fleetwright.kube``,
so a Lambda handler's cold-start import does not pay for it.
"""

from __future__ import annotations

import contextlib
import json
import random
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from fleetwright.kube.config import ClusterConfig, TokenSource, configuration, load_kubeconfig
from fleetwright.kube.deadline import attempt_timeouts, check_backoff
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


class KubeClient:
    """JSON over HTTP(S) to one API server, through the official client.

    ``config`` is a :class:`ClusterConfig` or an official ``kubernetes.client.Configuration`` (what
    :meth:`from_kubeconfig` loads). ``max_attempts`` bounds tries per request (connection errors and
    ``RETRY_STATUSES``); the wait before try *n+1* is ``jitter() * min(backoff_max, backoff_base *
    2**(n-1))``, at least the server's ``Retry-After`` (capped at ``backoff_max``). ``sleep`` and
    ``jitter`` (the random factor) are injectable for tests.
    """

    def __init__(
        self,
        config: ClusterConfig | Any,
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
        from kubernetes.client import ApiClient  # type: ignore[import-untyped]

        self._token: TokenSource | None = None
        if isinstance(config, ClusterConfig):
            self._token = config.token
            config = configuration(config)
        # Retries are this class's policy; urllib3's own would multiply them.
        config.retries = False
        config.connection_pool_maxsize = pool_size
        self.configuration: Any = config
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.max_attempts = max(1, max_attempts)
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self._sleep = sleep
        self._jitter = jitter
        self._api = ApiClient(config)
        self._api.user_agent = user_agent
        # Bytes of non-streamed response bodies read so far (what LISTs cost; watch streams not counted).
        self.bytes_received = 0
        self.writes = 0  # requests other than GET sent (the cluster cache reuses a sync none followed)

    @classmethod
    def from_kubeconfig(
        cls, path: str | None = None, context: str | None = None, **options: Any
    ) -> KubeClient:
        """A client for a kubeconfig context (``path`` default: ``$KUBECONFIG`` or ``~/.kube/config``)."""
        return cls(load_kubeconfig(path, context), **options)

    @classmethod
    def for_eks(
        cls,
        cluster: str,
        region: str,
        *,
        endpoint: str | None = None,
        certificate_authority: str | None = None,
        eks_client: Any = None,
        credentials: Any = None,
        **options: Any,
    ) -> KubeClient:
        """A client for an EKS cluster, authenticated with the caller's AWS credentials.

        ``endpoint`` and ``certificate_authority`` (base64 PEM, as ``eks:DescribeCluster`` returns it) come
        from a caller that already described the cluster; otherwise ``eks_client`` (a boto3 EKS client)
        describes it. ``credentials``: botocore credentials, a boto3 session or a callable returning
        credentials (default: the default credential chain).
        """
        from fleetwright.kube.eks import cluster_config, describe_endpoint

        if endpoint is None:
            if eks_client is None:
                raise ValueError("for_eks needs the cluster's endpoint and CA, or an EKS client")
            endpoint, certificate_authority = describe_endpoint(eks_client, cluster)
        config = cluster_config(
            cluster,
            region,
            endpoint=endpoint,
            certificate_authority=certificate_authority,
            credentials=credentials,
        )
        return cls(config, **options)

    def close(self) -> None:
        """Close pooled connections."""
        self._api.rest_client.pool_manager.clear()
        self._api.close()

    # -- plumbing --------------------------------------------------------------------------------------

    def backoff(self, attempt: int, retry_after: str | None = None, *, what: str = "request") -> None:
        """Sleep before retry number ``attempt`` (1-based), at least ``Retry-After`` seconds when given;
        raises :class:`~fleetwright.kube.deadline.KubeDeadlineExceededError` instead when the retry could
        not end before the caller's deadline (``kube/deadline.py``)."""
        delay = self._jitter() * min(self.backoff_max, self.backoff_base * 2 ** (attempt - 1))
        if retry_after:
            # Retry-After may also be an HTTP date; then the computed delay will do.
            with contextlib.suppress(ValueError):
                delay = max(delay, min(float(retry_after), self.backoff_max))
        check_backoff(delay, what, attempt)
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
    ) -> Any:
        """Send with retries, by the caller's deadline; a 2xx answer's body (``stream``: the response)."""
        import urllib3
        from kubernetes.client.exceptions import ApiException  # type: ignore[import-untyped]

        params = [(key, value) for key, value in (query or {}).items() if value is not None]
        what = f"{method} {path}"
        attempt = 0
        refreshed = False
        while True:
            attempt += 1
            timeout = attempt_timeouts(self.connect_timeout, read_timeout or self.read_timeout, what)
            try:
                response = self._api.call_api(
                    path,
                    method,
                    query_params=list(params),
                    header_params={"Accept": JSON, "Content-Type": content_type},
                    body=body,
                    auth_settings=["BearerToken"],
                    _return_http_data_only=True,
                    _preload_content=False,
                    _request_timeout=timeout,
                )
                if stream:
                    return response
                try:
                    return response.data
                finally:
                    response.release_conn()
            except ApiException as err:
                status = int(err.status or 0)
                if status == 0:
                    # The official client reports a TLS failure this way; a certificate does not heal.
                    raise KubeConnectionError(f"{method} {path}: TLS error: {err.reason}") from err
                if status == 401 and self._token is not None and not refreshed:
                    # An expired or rotated token: get a fresh one and try once more.
                    self._token.token(refresh=True)
                    refreshed = True
                    attempt -= 1
                    continue
                if status in retry_statuses and attempt < self.max_attempts:
                    self.backoff(attempt, (err.headers or {}).get("Retry-After"), what=what)
                    continue
                raw = err.body if isinstance(err.body, bytes) else str(err.body or "").encode()
                raise KubeApiError.from_response(status, raw, method, path) from err
            except urllib3.exceptions.HTTPError as err:
                if attempt >= self.max_attempts:
                    raise KubeConnectionError(f"{what}: {err} (after {attempt} attempts)") from err
                self.backoff(attempt, None, what=what)

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
        if method != "GET":
            self.writes += 1
        data = self._perform(method, path, query, body, content_type, retry_statuses)
        self.bytes_received += len(data or b"")
        if not data:
            return None
        try:
            return json.loads(data)
        except ValueError as err:
            raise KubeApiError(
                200, "InvalidResponse", f"response is not JSON: {err}", method=method, path=path
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
        on_open: Callable[[], None] | None = None,
    ) -> Iterator[WatchEvent]:
        """One WATCH request: events until the server ends it after ``timeout_seconds``.

        Raises :class:`WatchExpiredError` when ``resource_version`` is too old (410, as an HTTP status or an
        ERROR event): list again and watch from the new resourceVersion. ``on_open`` is called once the
        server has accepted the request (the stream is open), before the first event.
        """
        from kubernetes.watch import Watch  # type: ignore[import-untyped]

        query = {
            "watch": "true",
            "resourceVersion": resource_version or None,
            "timeoutSeconds": timeout_seconds,
            "allowWatchBookmarks": "true" if allow_bookmarks else None,
            "labelSelector": label_selector or None,
            "fieldSelector": field_selector or None,
        }
        path = resource.path(namespace)
        open_stream = self._watch_opener(path, query, timeout_seconds, on_open)
        # Passing timeout_seconds makes Watch make one request and leave resuming to list_then_watch.
        events = Watch().stream(open_stream, timeout_seconds=timeout_seconds)
        try:
            for event in events:
                if isinstance(event, dict):  # None: a blank line
                    yield WatchEvent(str(event.get("type")), event.get("raw_object") or {})
        except WatchExpiredError:
            raise
        except Exception as err:
            failure = _watch_failure(err, path)
            if failure is err:
                raise
            raise failure from err
        finally:
            events.close()

    def _watch_opener(
        self, path: str, query: dict[str, Any], timeout_seconds: int, on_open: Callable[[], None] | None
    ) -> Callable[..., Any]:
        """The function Watch.stream calls to open the stream (it asks for watch=True and
        _preload_content=False: the query and _perform do both)."""

        def open_stream(**_set_by_watch: Any) -> Any:
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
            if on_open is not None:
                on_open()
            return response

        return open_stream


def _watch_failure(err: Exception, path: str) -> Exception:
    """What a watch stream's ``err`` means to callers: 410 Gone as WatchExpiredError, an ERROR event or a
    malformed event as KubeApiError, a broken connection as KubeConnectionError; else ``err`` itself."""
    import urllib3
    from kubernetes.client.exceptions import ApiException

    if isinstance(err, KubeApiError):
        if err.gone:
            return WatchExpiredError(
                err.status, err.reason, err.message, err.details, method="GET", path=path
            )
        return err
    if isinstance(err, ApiException):
        # An ERROR event: Watch raises its Status as (code, "Reason: message").
        reason, _, message = str(err.reason or "").partition(": ")
        error_type = WatchExpiredError if err.status == 410 else KubeApiError
        return error_type(int(err.status or 500), reason, message, method="GET", path=path)
    if isinstance(err, KeyError | TypeError):
        return KubeApiError(
            500, "InvalidResponse", f"malformed watch event: {err!r}", method="GET", path=path
        )
    if isinstance(err, urllib3.exceptions.HTTPError):
        return KubeConnectionError(f"GET {path} (watch): {err}")
    return err
