"""A background thread turning the unschedulable-pods watch into "new pending pods" signals."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fleetwright.kube.cluster import KubeCluster
from fleetwright.kube.watch import ADDED, DELETED, MODIFIED, Resync

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
