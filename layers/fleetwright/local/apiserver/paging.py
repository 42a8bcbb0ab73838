"""LIST pages: consistent snapshots of one resource type and the continue tokens that point into them.

A paged LIST reads every page at the resourceVersion of its first page, as the real API server does from
etcd: the first page takes a snapshot (the sorted keys and the stored versions, which are never changed
in place), later pages walk it from the key after the last one returned, so a page costs what it holds.
A token whose snapshot is gone is answered with 410 Expired, like a token older than etcd's compaction.
"""

from __future__ import annotations

import base64
import binascii
import json
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fleetwright.local.apiserver import errors
from fleetwright.local.apiserver.errors import ApiError

JsonObject = dict[str, Any]
Key = tuple[str, str]

# The resourceVersion a token carries to ask for the rest of a list at the latest state ("inconsistent
# continue"), as in the token the real server hands out with its 410.
LATEST = -1


@dataclass(frozen=True)
class ContinueToken:
    """Where the next page starts: after ``start`` in the snapshot taken at ``resource_version``."""

    resource_version: int
    start: Key

    def encode(self) -> str:
        """The opaque ``metadata.continue`` string."""
        doc = {"v": "meta.k8s.io/v1", "rv": self.resource_version, "start": list(self.start)}
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode()

    @staticmethod
    def decode(token: str) -> ContinueToken:
        """Parse a token from ``encode``; 400 when it is not one."""
        try:
            doc = json.loads(base64.urlsafe_b64decode(token.encode()))
            ns, name = doc["start"]
            return ContinueToken(int(doc["rv"]), (str(ns), str(name)))
        except (ValueError, TypeError, KeyError, binascii.Error) as exc:
            raise errors.bad_request("continue key is not valid: invalid continue token") from exc


@dataclass(frozen=True)
class Snapshot:
    """The keys (sorted) and stored versions of the objects a LIST can return, at one resourceVersion."""

    resource_version: int
    keys: list[Key]
    objects: dict[Key, JsonObject]


@dataclass(frozen=True)
class Page:
    """One LIST response's items (the stored versions: read them, do not change them)."""

    items: list[JsonObject]
    resource_version: int
    next: ContinueToken | None
    remaining: int | None


def read_page(
    snapshot: Snapshot,
    matches: Callable[[JsonObject], bool] | None,
    limit: int,
    after: Key | None,
) -> Page:
    """Up to ``limit`` (0: all) objects after ``after`` that ``matches``; a continue token when the
    snapshot holds more keys past the last one returned, as etcd reports more (even if none of them
    match), and the count of those keys when nothing filters, the real server's remainingItemCount."""
    keys, objects = snapshot.keys, snapshot.objects
    index = bisect_right(keys, after) if after is not None else 0
    items: list[JsonObject] = []
    end = len(keys)
    while index < end:
        obj = objects[keys[index]]
        index += 1
        if matches is None or matches(obj):
            items.append(obj)
            if limit and len(items) == limit:
                break
    if not limit or index >= end:
        return Page(items, snapshot.resource_version, None, None)
    token = ContinueToken(snapshot.resource_version, keys[index - 1])
    return Page(items, snapshot.resource_version, token, end - index if matches is None else None)


def expired(last: Key) -> ApiError:
    """410 for a token whose snapshot is gone, carrying a token for the rest at the latest state."""
    return ApiError(
        410,
        "Expired",
        "The provided continue parameter is too old to display a consistent list result. You can start a "
        "new list without the continue parameter, or use the continue token in this response to retrieve "
        "the remainder of the results. Continuing with the provided token results in an inconsistent "
        "list - objects that were created, modified, or deleted between the time the first chunk was "
        "returned and now may show up in the list.",
        list_meta={"continue": ContinueToken(LATEST, last).encode()},
    )
