"""An API server that accepts requests and answers none, on a virtual clock: each request sent while it
hangs costs its read timeout (the clock moves by it) and fails as urllib3 fails it, which is what a client
sees behind a stuck load balancer. Installed on a ``KubeClient`` in place of the official client's
``call_api``; requests outside the hang go to the real server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import urllib3

from fleetwright.kube import KubeClient


class HungApi:
    """``hang(seconds)`` (``None``: until ``answer()``) from now on ``clock``; ``read_timeouts`` lists
    what each held request waited."""

    def __init__(self, client: KubeClient, clock: Callable[[], float], advance: Callable[[float], None]):
        self.clock = clock
        self.advance = advance
        self.until: float | None = None
        self.read_timeouts: list[float] = []
        self._call = client._api.call_api
        client._api.call_api = self.call_api

    def hang(self, seconds: float | None = None) -> None:
        self.until = float("inf") if seconds is None else self.clock() + seconds

    def answer(self) -> None:
        self.until = None

    def hung(self) -> bool:
        return self.until is not None and self.clock() < self.until

    def call_api(self, path: str, method: str, *args: Any, **kwargs: Any) -> Any:
        if not self.hung():
            return self._call(path, method, *args, **kwargs)
        _connect, read = kwargs["_request_timeout"]
        self.read_timeouts.append(float(read))
        self.advance(float(read))
        raise urllib3.exceptions.ReadTimeoutError(None, path, "Read timed out.")  # type: ignore[arg-type]
