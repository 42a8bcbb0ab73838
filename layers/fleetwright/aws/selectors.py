"""EC2 ``Filters`` from EC2NodeClass selector terms (tags with ``*`` wildcards, ids, names)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def tag_filters(tags: Mapping[str, str] | None) -> list[dict[str, Any]]:
    """``{"k": "v"}`` → ``tag:k = v`` filters; a value of ``*`` only asks for the key to exist.

    EC2 itself expands ``*`` and ``?`` inside values, so ``team-*`` matches ``team-a``.
    """
    filters = []
    for key, value in sorted((tags or {}).items()):
        if value == "*":
            filters.append({"Name": "tag-key", "Values": [key]})
        else:
            filters.append({"Name": f"tag:{key}", "Values": [value]})
    return filters
