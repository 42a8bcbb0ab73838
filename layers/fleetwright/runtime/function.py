"""What every function's handler shares: its Powertools logger and metrics, named after its service, and the
module-scope cache of what its first invocation builds (connections, the watch-fed cluster cache, the
controller), which warm invocations reuse.

Cold start: only the standard library, Powertools' Logger and Metrics and the variable names are imported
here (the handlers import this module at theirs); each function's wiring (``runtime/<function>.py``, with
boto3, the adapters and the configuration) loads when the first invocation builds it.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Generic, TypeVar

from aws_lambda_powertools import Logger, Metrics

from fleetwright.config.names import ENV_METRICS_NAMESPACE, ENV_SERVICE

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

NAMESPACE = "Fleetwright"
# Kept free at the end of an invocation for what follows a Kubernetes call abandoned at the deadline:
# recording the outcome (a claim, a workflow state, the metrics) and returning.
KUBE_RESERVE_SECONDS = 5.0

Built = TypeVar("Built")


class FunctionRuntime(Generic[Built]):
    """One function's logger, metrics and built runtime.

    ``build(logger, metrics)`` makes what the invocations use (it reads the environment, so a bad
    configuration fails the first invocation); ``stop(built)`` releases it (the cluster cache's watches)
    when it is forgotten. The service name comes from ``POWERTOOLS_SERVICE_NAME`` (the stack sets it to
    ``service``) and is the metrics' ``service`` dimension; the namespace from
    ``POWERTOOLS_METRICS_NAMESPACE``, else ``Fleetwright``.
    """

    def __init__(
        self,
        name: str,
        service: str,
        build: Callable[[Logger, Metrics], Built],
        *,
        stop: Callable[[Built], None] | None = None,
    ) -> None:
        self.name = name
        self.service = service
        self.logger = Logger(service=os.environ.get(ENV_SERVICE) or service)
        self.metrics = Metrics(namespace=os.environ.get(ENV_METRICS_NAMESPACE) or NAMESPACE, service=service)
        self._build = build
        self._stop = stop
        self.clock: Callable[[], float] = time.monotonic  # what Kubernetes deadlines are timed on (tests)
        # What the first invocation built (a dict so tests can tell "not built" from any value).
        self._built: dict[str, Built] = {}

    def get(self) -> Built:
        """The runtime, built by the first call and kept for the life of the process."""
        if "built" not in self._built:
            self._built["built"] = self._build(self.logger, self.metrics)
        return self._built["built"]

    def start(self) -> Built:
        """:meth:`get`, logging ``<name> cannot start`` with the error (a configuration problem says what to
        fix) before raising it."""
        try:
            return self.get()
        except Exception as error:
            self.logger.error(f"{self.name} cannot start", extra={"error": str(error)})
            raise

    def set(self, value: Built) -> None:
        """Use ``value`` instead of building one (tests)."""
        self._built["built"] = value

    def reset(self) -> None:
        """Forget the runtime (the next invocation builds it again, re-reading the configuration), stopping
        what it keeps running."""
        built = self._built.pop("built", None)
        if built is not None and self._stop is not None:
            self._stop(built)

    def remaining_ms(self, context: LambdaContext | None) -> float | None:
        """What Lambda's context says is left, in milliseconds (None without a usable context)."""
        from fleetwright.observability.limits import remaining_ms

        return remaining_ms(context)

    @contextlib.contextmanager
    def kubernetes_deadline(self, context: LambdaContext | None) -> Iterator[None]:
        """Bound the invocation's Kubernetes calls (``kube/deadline.py``) by its remaining time less
        ``KUBE_RESERVE_SECONDS`` (at most half of it), so a hung API server ends the invocation with a
        recorded result instead of at its timeout. Without a usable context, calls are not bounded."""
        left_ms = self.remaining_ms(context)
        if left_ms is None:
            yield
            return
        from fleetwright.kube.deadline import KubeDeadline, deadline_scope

        left = max(0.0, left_ms / 1000.0)
        with deadline_scope(KubeDeadline.after(left - min(KUBE_RESERVE_SECONDS, left / 2), self.clock)):
            yield

    def report_limits(self, budget_ms: float | None, left_ms: float | None) -> dict[str, float]:
        """``DurationOfTimeout`` (of ``budget_ms``) and ``MemoryOfLimit``
        (``fleetwright.observability.limits``); a warning in the log from 0.8 on."""
        from fleetwright.observability import limits
        from fleetwright.observability.metrics import PowertoolsMetrics

        published = limits.report_limits(
            PowertoolsMetrics(self.metrics), budget_ms=budget_ms, left_ms=left_ms
        )
        if any(value >= limits.WARNING_FRACTION for value in published.values()):
            self.logger.warning(f"{self.name} close to its Lambda limits", extra={"limits": published})
        return published
