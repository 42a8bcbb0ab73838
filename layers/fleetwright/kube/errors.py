"""Errors raised by the Kubernetes adapter."""

from __future__ import annotations

import json
from typing import Any


class KubeError(Exception):
    """Base class of every error the adapter raises."""


class KubeConnectionError(KubeError):
    """The API server could not be reached (connection refused, timeout, TLS failure), after retries."""


class KubeconfigError(KubeError, ValueError):
    """A kubeconfig that cannot be used (missing context, unsupported auth, unreadable file)."""


class KubeApiError(KubeError):
    """The API server answered with an error status.

    ``status`` is the HTTP code, ``reason`` the ``Status.reason`` (``NotFound``, ``Conflict``, ...) and
    ``message`` the ``Status.message``; ``details`` is ``Status.details`` when the server sent one.
    """

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        *,
        method: str = "",
        path: str = "",
    ) -> None:
        where = f" ({method} {path})" if method else ""
        super().__init__(f"{status} {reason}: {message}{where}")
        self.status = status
        self.reason = reason
        self.message = message
        self.details = details
        self.method = method
        self.path = path

    @property
    def not_found(self) -> bool:
        """The object (or the resource type) does not exist."""
        return self.status == 404

    @property
    def conflict(self) -> bool:
        """A stale resourceVersion or an already existing name."""
        return self.status == 409

    @property
    def gone(self) -> bool:
        """A watch or list resourceVersion too old to serve."""
        return self.status == 410

    @classmethod
    def from_response(cls, status: int, body: bytes, method: str = "", path: str = "") -> KubeApiError:
        """The error for an HTTP response, read from its ``Status`` body when it has one."""
        try:
            decoded = json.loads(body) if body else None
        except ValueError:
            decoded = None
        return cls.from_status(status, decoded, body, method, path)

    @classmethod
    def from_status(
        cls, status: int, obj: Any, raw: bytes = b"", method: str = "", path: str = ""
    ) -> KubeApiError:
        """The error for a decoded ``Status`` object (or anything else the server sent)."""
        if isinstance(obj, dict) and obj.get("kind") == "Status":
            code = obj.get("code")
            details = obj.get("details")
            return cls(
                code if isinstance(code, int) and code else status,
                str(obj.get("reason") or _default_reason(status)),
                str(obj.get("message") or ""),
                details if isinstance(details, dict) else None,
                method=method,
                path=path,
            )
        # Not a Status: a proxy or load balancer in front of the API server answered.
        text = raw.decode("utf-8", "replace").strip()[:500]
        return cls(status, _default_reason(status), text, method=method, path=path)


class WatchExpiredError(KubeApiError):
    """A watch's resourceVersion is no longer available (410 Gone): list again and watch from there."""


_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    502: "BadGateway",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def _default_reason(status: int) -> str:
    return _REASONS.get(status, "Unknown")
