"""The JSON merge patch (RFC 7386) that turns an object's current content into the wanted one. A merge
patch merges nested objects key by key, so a key the wanted content lacks must be sent as ``null`` at its
own depth, or it stays (a resource in ``status.resources`` no node has any more, say)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def merge_patch(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> dict[str, Any]:
    """The patch turning ``current`` into ``wanted``: keys ``wanted`` lacks are nulled at every depth;
    lists and scalars are replaced."""
    patch: dict[str, Any] = {key: None for key in current if key not in wanted}
    for key, value in wanted.items():
        before = current.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            patch[key] = merge_patch(before, value)
        else:
            patch[key] = value
    return patch
