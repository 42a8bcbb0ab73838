"""List-then-watch loops: a consistent starting state, then changes, surviving expired resourceVersions."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from fleetwright.kube.client import DEFAULT_WATCH_SECONDS, JsonObject, KubeClient, WatchEvent
from fleetwright.kube.errors import KubeApiError, KubeConnectionError, WatchExpiredError
from fleetwright.kube.resources import Resource

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"
BOOKMARK = "BOOKMARK"


@dataclass(frozen=True, slots=True)
class Resync:
    """The complete current set of objects: sent first, and again after a relist (410 Gone).

    Consumers replace what they know with ``objects``; later events are changes relative to it.
    """

    objects: tuple[JsonObject, ...]
    resource_version: str


def list_then_watch(
    client: KubeClient,
    resource: Resource,
    namespace: str | None = None,
    *,
    label_selector: str | None = None,
    field_selector: str | None = None,
    until: float | None = None,
    stop: threading.Event | None = None,
    watch_seconds: int = DEFAULT_WATCH_SECONDS,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[Resync | WatchEvent]:
    """LIST, yield a :class:`Resync`, then yield ADDED/MODIFIED/DELETED events, until ``until``.

    ``until`` is a deadline on ``clock`` (None: run until ``stop`` is set or the consumer stops); each
    WATCH request lasts at most ``watch_seconds`` and is renewed from the last resourceVersion seen
    (bookmarks included). A 410 Gone relists and yields a new ``Resync``. Connection errors and retryable
    server errors reopen the watch after the client's backoff. ``stop`` and ``until`` are checked between
    events and when a watch ends, so a quiet watch notices them within ``watch_seconds``.
    """
    resource_version: str | None = None
    failures = 0

    def finished() -> bool:
        return (stop is not None and stop.is_set()) or (until is not None and clock() >= until)

    while not finished():
        if resource_version is None:
            listing = client.list(
                resource, namespace, label_selector=label_selector, field_selector=field_selector
            )
            resource_version = listing.resource_version
            yield Resync(tuple(listing.items), resource_version)
            continue
        seconds = watch_seconds if until is None else min(watch_seconds, int(until - clock()) + 1)
        try:
            for event in client.watch(
                resource,
                namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                resource_version=resource_version,
                timeout_seconds=max(1, seconds),
            ):
                failures = 0
                resource_version = event.resource_version or resource_version
                if event.type != BOOKMARK:
                    yield event
                if finished():
                    return
        except WatchExpiredError:
            resource_version = None
        except (KubeConnectionError, KubeApiError) as err:
            if isinstance(err, KubeApiError) and err.status not in (429, 500, 502, 503, 504):
                raise
            failures += 1
            if failures >= client.max_attempts:
                raise
            client.backoff(failures, None)


def object_key(obj: JsonObject) -> str:
    """``namespace/name`` (``name`` for cluster-scoped objects)."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))


def filtered(
    events: Iterator[Resync | WatchEvent], keep: Callable[[JsonObject], bool]
) -> Iterator[Resync | WatchEvent]:
    """The stream restricted to objects for which ``keep`` holds.

    An object that starts to satisfy ``keep`` arrives as ADDED, one that stops (or is deleted) as DELETED,
    changes to a kept object as MODIFIED; objects never kept are not reported.
    """
    known: set[str] = set()
    for item in events:
        if isinstance(item, Resync):
            objects = tuple(o for o in item.objects if keep(o))
            known = {object_key(o) for o in objects}
            yield Resync(objects, item.resource_version)
            continue
        key = object_key(item.object)
        if item.type != DELETED and keep(item.object):
            yield WatchEvent(MODIFIED if key in known else ADDED, item.object)
            known.add(key)
        elif key in known:
            known.discard(key)
            yield WatchEvent(DELETED, item.object)
