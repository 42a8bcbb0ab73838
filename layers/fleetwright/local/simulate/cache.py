"""The replay's cluster cache: the functions' :class:`~fleetwright.kube.cache.ClusterCache`, fed by the
emulator store's change feed in the replay's one thread instead of by watch threads.

A deployed function keeps its cache warm across invocations, so its passes read pods, nodes, DaemonSets,
PDBs and NodeClaims from memory, converted once per change; without a cache the replay's passes listed
everything through the request handler and decoded it each time (a quarter of a replay's time). Watches
run on threads and real time, which a replay on a virtual clock cannot use; the store calls its
subscribers synchronously after every committed write, so the cache applies each change before the next
step of the replay runs, and a sync has nothing to wait for. What the capabilities read from the cache is
what their LISTs returned (the store's objects, each copied once as it changes).
"""

from __future__ import annotations

from typing import Any

from fleetwright.kube.cache import NODECLAIMS, ClusterCache, SyncReport
from fleetwright.kube.client import KubeClient
from fleetwright.kube.informer import Sink
from fleetwright.local.apiserver.jsoncopy import json_copy
from fleetwright.local.apiserver.resources import (
    DAEMON_SETS,
    NODES,
    POD_DISRUPTION_BUDGETS,
    PODS,
    ResourceType,
)
from fleetwright.local.apiserver.store import Store, Subscription, WatchEvent


class StoreFedCache(ClusterCache):
    """A :class:`ClusterCache` that follows ``store`` directly (see the module doc)."""

    def __init__(self, store: Store, client: KubeClient, *, clock: Any) -> None:
        super().__init__(client, clock=clock.now, monotonic=clock.monotonic)
        self.store = store
        self._feed: Subscription | None = None
        self._sinks: dict[str, Sink] = {}

    def sync(self, *, reuse: bool = False) -> SyncReport:
        """Nothing to wait for: every committed change is applied already. The first sync lists each
        resource once and subscribes to the store."""
        listed: tuple[str, ...] = ()
        if self._feed is None:
            listed = self._follow()
        report = SyncReport(str(self.store.resource_version), 0.0, (), listed)
        self.last_sync = report
        return report

    def _follow(self) -> tuple[str, ...]:
        types: list[tuple[str, ResourceType, Sink]] = [
            ("pods", PODS, self.pods),
            ("nodes", NODES, self.nodes),
            ("daemonsets", DAEMON_SETS, self.daemonsets),
            ("pdbs", POD_DISRUPTION_BUDGETS, self.pdbs),
        ]
        nodeclaims = self.store.registry.lookup("karpenter.sh", "v1", NODECLAIMS)
        if nodeclaims is not None:
            types.append((NODECLAIMS, nodeclaims, self.nodeclaims))
            self.informers[NODECLAIMS] = self.nodeclaim_informer
            self.nodeclaims_installed = True
        else:
            self.nodeclaims_installed = False
        self._sinks = {rt.key: sink for _, rt, sink in types}
        with self.changed:
            # Subscribed under the lock, before the lists: a change committed meanwhile waits for it.
            self._feed = self.store.subscribe_batches(self._apply, [rt for _, rt, _ in types])
            for _, rt, sink in types:
                sink.replace(json_copy(obj) for obj in self.store.list_page(rt).items)
        return tuple(name for name, _, _ in types)

    def _apply(self, events: list[WatchEvent]) -> None:
        with self.changed:
            for event in events:
                sink = self._sinks[event.resource.key]
                if event.type == "DELETED":
                    sink.remove(event.object)
                else:
                    sink.upsert(json_copy(event.object))
            self.changed.notify_all()

    def start(self) -> None:
        """No watch threads: :meth:`sync` follows the store."""

    def stop(self) -> None:
        """Stop following the store."""
        if self._feed is not None:
            self._feed.cancel()
            self._feed = None
