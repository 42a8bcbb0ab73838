"""One resource listed once and followed by a watch in a background thread (an informer).

The informer keeps nothing itself: it hands every object to a :class:`Sink` (``replace`` after a LIST,
``upsert``/``remove`` per event), which converts and indexes what its consumers need. It records what a
freshness check needs: the last resourceVersion applied, whether a watch stream is open, and when the
server last sent something.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Protocol

from fleetwright.kube.client import JsonObject, KubeClient
from fleetwright.kube.errors import KubeApiError, WatchExpiredError
from fleetwright.kube.resources import Resource
from fleetwright.kube.watch import BOOKMARK, DELETED

log = logging.getLogger(__name__)

WATCH_SECONDS = 20
RETRY_MAX_SECONDS = 5.0


class Sink(Protocol):
    """Where an informer puts objects (called with the cache's lock held)."""

    def replace(self, objects: Iterable[JsonObject]) -> None:
        """The complete current set (after a LIST)."""
        ...

    def upsert(self, obj: JsonObject) -> None:
        """An object added or changed."""
        ...

    def remove(self, obj: JsonObject) -> None:
        """An object deleted."""
        ...


def resource_version_number(value: str) -> int | None:
    """A resourceVersion as an integer (etcd revisions are), or None when it is not one."""
    try:
        return int(value)
    except ValueError:
        return None


class Informer:
    """LIST ``resource`` into ``sink``, then WATCH from the LIST's resourceVersion, in a daemon thread.

    ``changed`` (a condition whose lock guards the sink, shared with whoever reads it) is notified after
    every change. A 410 Gone relists (``relists`` counts
    them); a dropped connection or a server error reopens the watch from the last resourceVersion after
    a backoff. :meth:`restart` abandons the current watch request (a thread left blocked on it exits when
    it wakes up: every event is checked against the informer's generation under the lock) and opens a
    new one from the last resourceVersion, so the server replays what happened meanwhile. ``clock`` is
    epoch seconds, ``monotonic`` orders events within this process.
    """

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        sink: Sink,
        changed: threading.Condition,
        *,
        watch_seconds: int = WATCH_SECONDS,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.resource = resource
        self.sink = sink
        self.lock = changed
        self.changed = changed
        self.watch_seconds = watch_seconds
        self.clock = clock
        self.monotonic = monotonic
        self.resource_version = ""
        self.listed_at: float | None = None  # epoch seconds of the last complete LIST
        self.heard_at = 0.0  # epoch seconds the server last answered (LIST, event, watch opened or ended)
        self.event_at = 0.0  # monotonic time of the last event or LIST applied
        self.opened_at: float | None = None  # monotonic time the current watch stream opened; None: closed
        self.relists = 0
        self.events = 0
        self.error = ""
        # The API server answered 404 for the resource (a custom resource whose CRD was removed): the
        # watch has stopped; only an informer made ``optional`` stops on a 404, others retry.
        self.optional = False
        self.gone = False
        self._generation = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def started(self) -> bool:
        """A LIST has filled the sink."""
        return self.listed_at is not None

    @property
    def connected(self) -> bool:
        """A watch stream is open."""
        return self.opened_at is not None

    # -- control ---------------------------------------------------------------------------------------

    def start(self) -> None:
        """LIST (in the caller's thread: errors reach the caller) and start watching."""
        self.relist()
        self._spawn()

    def restart(self, *, relist: bool = False) -> None:
        """Abandon the current watch and watch again from the last resourceVersion (after a LIST when
        ``relist``, which also runs in the caller's thread)."""
        with self.lock:
            self._generation += 1
            self.opened_at = None
        if relist:
            self.relist()
        self._spawn()

    def stop(self) -> None:
        """Stop watching (a blocked request ends by its own timeout)."""
        self._stop.set()
        with self.lock:
            self._generation += 1
            self.opened_at = None
            self.changed.notify_all()

    def relist(self, generation: int | None = None) -> None:
        """LIST and replace the sink's contents (unless ``generation``, the watch thread's, has been
        abandoned meanwhile: a newer watch or LIST owns the sink)."""
        listing = self.client.list(self.resource)
        with self.lock:
            if generation is not None and generation != self._generation:
                return
            self.sink.replace(listing.items)
            self.resource_version = listing.resource_version
            now = self.clock()
            self.listed_at = self.heard_at = now
            self.event_at = self.monotonic()
            self.relists += 1
            self.error = ""
            self.gone = False
            self.changed.notify_all()

    def _spawn(self) -> None:
        self._stop.clear()
        with self.lock:
            generation = self._generation
        self._thread = threading.Thread(
            target=self._run,
            args=(generation,),
            name=f"fleetwright-informer-{self.resource.plural}",
            daemon=True,
        )
        self._thread.start()

    # -- the watch thread ------------------------------------------------------------------------------

    def _current(self, generation: int) -> bool:
        return generation == self._generation and not self._stop.is_set()

    def _run(self, generation: int) -> None:
        failures = 0
        while self._current(generation):
            try:
                self._watch_once(generation)
                failures = 0
            except WatchExpiredError:
                log.info("watch expired; listing again", extra={"resource": self.resource.plural})
                self._closed(generation, "")
                try:
                    if self._current(generation):
                        self.relist(generation)
                except Exception as error:  # next round tries again
                    if self._not_served(error):
                        self._gone(generation)
                        return
                    failures += 1
                    self._failed(generation, error, failures)
            except Exception as error:  # the thread must outlive any failure: it reopens the watch
                if self._not_served(error):
                    self._gone(generation)
                    return
                failures += 1
                self._failed(generation, error, failures)

    def _not_served(self, error: Exception) -> bool:
        return self.optional and isinstance(error, KubeApiError) and error.not_found

    def _gone(self, generation: int) -> None:
        log.info("resource no longer served; watch stopped", extra={"resource": self.resource.plural})
        with self.lock:
            if generation == self._generation:
                self.opened_at = None
                self.gone = True
                self.changed.notify_all()

    def _failed(self, generation: int, error: Exception, failures: int) -> None:
        message = f"{type(error).__name__}: {error}"
        log.warning("watch failed; reopening", extra={"resource": self.resource.plural, "error": message})
        self._closed(generation, message)
        self._stop.wait(min(RETRY_MAX_SECONDS, 0.2 * 2 ** min(failures, 5)))

    def _closed(self, generation: int, error: str) -> None:
        with self.lock:
            if generation == self._generation:
                self.opened_at = None
                self.error = error
                self.changed.notify_all()

    def _opened(self, generation: int) -> None:
        with self.lock:
            if generation == self._generation:
                self.opened_at = self.monotonic()
                self.heard_at = self.clock()
                self.error = ""
                self.changed.notify_all()

    def _watch_once(self, generation: int) -> None:
        with self.lock:
            since = self.resource_version
        for event in self.client.watch(
            self.resource,
            resource_version=since,
            timeout_seconds=self.watch_seconds,
            allow_bookmarks=True,
            on_open=lambda: self._opened(generation),
        ):
            with self.lock:
                if generation != self._generation:
                    return  # abandoned by restart(): a newer watch owns the sink
                if event.type == DELETED:
                    self.sink.remove(event.object)
                elif event.type != BOOKMARK:
                    self.sink.upsert(event.object)
                self.resource_version = event.resource_version or self.resource_version
                self.heard_at = self.clock()
                self.event_at = self.monotonic()
                self.events += 1
                self.changed.notify_all()
        with self.lock:
            if generation == self._generation:
                # The server ended the request at its timeout: it was alive until now.
                self.heard_at = self.clock()
                self.opened_at = None
