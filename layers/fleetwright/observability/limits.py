"""How close an invocation came to its Lambda limits, reported so an alarm fires before a pass is cut off.

A function that outgrows its memory is killed without a word, and one that reaches its timeout leaves work
half done (and the provisioner's lease held until it expires); both grow with the cluster. Each scheduled
handler reports, at the end of every invocation:

- ``DurationOfTimeout``: the share of its time budget the invocation used, ``1 - left / budget``. The
  budget is the time Lambda allowed when the invocation started (the timeout, less the cold start); the
  watching provisioner watches until its deadline on purpose, so its budget is the deadline margin it
  keeps (``FLEETWRIGHT_DEADLINE_MARGIN_SECONDS``) and the value says how much of that margin a pass
  running past the deadline ate.
- ``MemoryOfLimit``: the environment's peak resident memory (``getrusage`` max RSS) as a share of the
  configured memory (``AWS_LAMBDA_FUNCTION_MEMORY_SIZE``); not reported when that variable is unset.

Both are plain fractions (unit None); from :data:`WARNING_FRACTION` (0.8) the handler logs a warning and
the stack's alarm fires (``infra/dashboard.py``).
"""

from __future__ import annotations

import os
import resource
from collections.abc import Mapping
from typing import Any

from fleetwright.observability.metrics import NONE, MetricsSink

DURATION_OF_TIMEOUT = "DurationOfTimeout"
MEMORY_OF_LIMIT = "MemoryOfLimit"
ENV_MEMORY_SIZE = "AWS_LAMBDA_FUNCTION_MEMORY_SIZE"
# From this share on, the handlers also log a warning; the stack's alarms use the same threshold.
WARNING_FRACTION = 0.8


def remaining_ms(context: Any) -> float | None:
    """What Lambda's context says is left, in milliseconds (None without a usable context)."""
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if remaining is None:
        return None
    try:
        return float(remaining())
    except (TypeError, ValueError):
        return None


def peak_memory_fraction(environ: Mapping[str, str] | None = None) -> float | None:
    """The process's peak resident memory over the configured function memory; None when unknown."""
    env = os.environ if environ is None else environ
    try:
        configured_mb = float(env.get(ENV_MEMORY_SIZE, ""))
    except ValueError:
        return None
    if configured_mb <= 0:
        return None
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kilobytes on Linux
    return peak_kb / (configured_mb * 1024.0)


def report_limits(
    metrics: MetricsSink,
    *,
    budget_ms: float | None,
    left_ms: float | None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, float]:
    """Publish ``DurationOfTimeout`` (when the budget and what is left are known) and ``MemoryOfLimit``;
    returns what was published, by name."""
    published: dict[str, float] = {}
    if budget_ms is not None and left_ms is not None and budget_ms > 0:
        published[DURATION_OF_TIMEOUT] = round(max(0.0, 1.0 - max(0.0, left_ms) / budget_ms), 4)
    memory = peak_memory_fraction(environ)
    if memory is not None:
        published[MEMORY_OF_LIMIT] = round(memory, 4)
    for name, value in published.items():
        metrics.add(name, value, NONE)
    return published
