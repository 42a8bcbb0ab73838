"""A Kubernetes API emulator speaking the real REST API, for tests and the local demo.

``ApiServer`` serves it over HTTP; ``Store`` holds the objects and feeds watches and in-process controllers.
"""

from __future__ import annotations

from fleetwright.local.apiserver.server import ApiServer, add_cli
from fleetwright.local.apiserver.store import Store, Subscription, WatchEvent

__all__ = ["ApiServer", "Store", "Subscription", "WatchEvent", "add_cli"]
