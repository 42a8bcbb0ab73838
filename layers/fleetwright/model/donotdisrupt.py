"""``karpenter.sh/do-not-disrupt``: whether the annotation protects a pod (or a node) right now.

As in Karpenter v1: on a Node only ``"true"`` counts. On a pod ``"true"`` protects it for as long as it
runs; a positive Go duration (``30m``, ``1h30m``, ``90s``) protects it until that long after the pod
started (``status.startTime``; a pod with no start time yet stays protected). Any other value is
ignored, and reported so the user can fix it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from fleetwright.model.labels import DO_NOT_DISRUPT_ANNOTATION

_PART: Final = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNITS: Final = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}


def parse_go_duration(text: str) -> float:
    """Seconds in a Go duration (``time.ParseDuration``'s syntax, sign included); ValueError otherwise."""
    body = text
    sign = 1.0
    if body[:1] in ("+", "-"):
        sign = -1.0 if body[0] == "-" else 1.0
        body = body[1:]
    if body == "0":
        return 0.0
    if not body:
        raise ValueError(f"time: invalid duration {text!r}")
    total = 0.0
    pos = 0
    while pos < len(body):
        match = _PART.match(body, pos)
        if match is None:
            raise ValueError(f"time: invalid duration {text!r}")
        total += float(match[1]) * _UNITS[match[2]]
        pos = match.end()
    return sign * total


@dataclass(frozen=True, slots=True)
class Protection:
    """What a pod's annotation means now: ``active`` protection, lasting ``until`` (epoch seconds; None
    for ``"true"`` or while the pod has no start time), or ``invalid`` (why the value is ignored)."""

    active: bool
    until: float | None = None
    invalid: str = ""


NONE: Final = Protection(False)


def pod_protection(annotations: Mapping[str, str], started_at: float | None, now: float) -> Protection:
    """The protection ``karpenter.sh/do-not-disrupt`` on a running pod gives at ``now``."""
    value = annotations.get(DO_NOT_DISRUPT_ANNOTATION)
    if value is None:
        return NONE
    if value == "true":
        return Protection(True)
    try:
        seconds = parse_go_duration(value)
    except ValueError as error:
        return Protection(False, invalid=f'failed to parse "{value}" as a duration: {error}')
    if seconds <= 0:
        return Protection(False, invalid=f'duration "{value}" must be positive')
    if started_at is None:
        return Protection(True)
    until = started_at + seconds
    return Protection(now < until, until=until)


def node_protected(annotations: Mapping[str, str]) -> bool:
    """A Node is protected only by ``karpenter.sh/do-not-disrupt: "true"``."""
    return annotations.get(DO_NOT_DISRUPT_ANNOTATION) == "true"
