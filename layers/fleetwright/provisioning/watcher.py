"""Turning unschedulable pods into "new pending pods" signals: a background watch of their own
(:class:`PodWatcher`), or the cluster cache's pod watch (:class:`CachePodWatcher`)."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fleetwright.kube.cluster import KubeCluster
from fleetwright.kube.watch import ADDED, DELETED, MODIFIED, Resync

if TYPE_CHECKING:
    from fleetwright.kube.cache import ClusterCache

log = logging.getLogger(__name__)

WATCH_SECONDS = 20
RESTART_BACKOFF_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class PodSignal:
    """``new`` pods became unschedulable (or were first seen) at ``at`` (``time.monotonic()``);
    ``error`` is set when the watch failed and is being restarted."""

    new: int
    at: float
    error: str = ""


def _key(obj: Any) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name')}"


class PodWatcher:
    """Watches unschedulable pods until ``until`` (a ``time.monotonic()`` deadline) or :meth:`stop`.

    Only pods not seen before count as new: the kube-scheduler rewrites a waiting pod's condition on
    every retry, and those MODIFIED events must not reopen a batch.
    """

    def __init__(
        self,
        kube: KubeCluster,
        until: float,
        *,
        watch_seconds: int = WATCH_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kube = kube
        self.until = until
        self.watch_seconds = watch_seconds
        self.signals: queue.Queue[PodSignal] = queue.Queue()
        self.pending: set[str] = set()
        self._stop = threading.Event()
        self._monotonic = monotonic
        self._thread = threading.Thread(target=self._run, name="fleetwright-pod-watch", daemon=True)

    def start(self) -> PodWatcher:
        """Start watching in the background."""
        self._thread.start()
        return self

    def stop(self, wait: float = 2.0) -> None:
        """Ask the thread to stop and wait up to ``wait`` seconds (a blocked watch ends by its deadline)."""
        self._stop.set()
        self._thread.join(wait)

    def _run(self) -> None:
        while not self._stop.is_set() and self._monotonic() < self.until:
            try:
                self._watch()
            except Exception as error:  # the adapter already retried transient errors
                log.warning("pod watch failed, restarting: %s", error)
                self.signals.put(PodSignal(0, self._monotonic(), error=str(error)))
                self._stop.wait(RESTART_BACKOFF_SECONDS)

    def _watch(self) -> None:
        events = self.kube.watch_unschedulable_pods(
            until=self.until, stop=self._stop, watch_seconds=self.watch_seconds
        )
        for event in events:
            now = self._monotonic()
            if isinstance(event, Resync):
                keys = {_key(o) for o in event.objects}
                new = len(keys - self.pending)
                self.pending = keys
                self.signals.put(PodSignal(new, now))
                continue
            key = _key(event.object)
            if event.type in (ADDED, MODIFIED):
                if key not in self.pending:
                    self.pending.add(key)
                    self.signals.put(PodSignal(1, now))
            elif event.type == DELETED:
                self.pending.discard(key)


class CachePodWatcher:
    """The same signals as :class:`PodWatcher`, from the cluster cache's pod watch instead of a watch of
    its own: every pod that becomes unschedulable is one signal, the pods already waiting when it starts
    are one signal together.

    :meth:`start` syncs the cache (listing it on a cold start, reopening watches a frozen process left
    behind), so the pods that became unschedulable while nobody listened are counted too.
    """

    def __init__(self, cache: ClusterCache, *, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.cache = cache
        self.signals: queue.Queue[PodSignal] = queue.Queue()
        self._monotonic = monotonic

    def _heard(self, count: int) -> None:
        self.signals.put(PodSignal(count, self._monotonic()))

    def start(self) -> CachePodWatcher:
        """Listen to the cache, sync it, and signal the pods already waiting."""
        self.cache.add_pending_listener(self._heard)
        try:
            self.cache.sync()
        except Exception as error:  # the first pass syncs again and reports it
            log.warning("cluster cache not synced: %s", error)
            self.signals.put(PodSignal(0, self._monotonic(), error=str(error)))
        waiting = len(self.cache.pending_keys())
        if waiting:
            self.signals.put(PodSignal(waiting, self._monotonic()))
        return self

    def stop(self, wait: float = 0.0) -> None:
        """Stop listening (the cache keeps watching for the next invocation)."""
        self.cache.remove_pending_listener(self._heard)
