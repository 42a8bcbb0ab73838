"""Errors the termination steps raise. A Lambda reports an exception's class name as ``errorType``, which is
the error name the state machine's Retry and Catch match, so these names are part of the workflow's contract:
``TransientError`` is retried with backoff; everything else goes straight to the failure path."""

from __future__ import annotations

from typing import Any

from fleetwright.cloud.errors import TransientCloudError
from fleetwright.kube.errors import KubeApiError, KubeConnectionError

RETRYABLE_KUBE_STATUSES = frozenset({429, 500, 502, 503, 504})
RETRYABLE_AWS_CODES = frozenset(
    {
        "RequestLimitExceeded",
        "Throttling",
        "ThrottlingException",
        "TooManyRequestsException",
        "ServiceUnavailable",
        "InternalError",
        "InternalFailure",
        "RequestTimeout",
    }
)


class TerminationError(Exception):
    """Base class of the workflow's own errors."""


class TransientError(TerminationError):
    """A failure that may go away by itself (throttling, 5xx, a dropped connection): retried."""


class InvalidRequestError(TerminationError):
    """The workflow's input is not a valid termination request."""


class InstanceNotOwnedError(TerminationError):
    """The instance does not carry this cluster's ownership tag: Fleetwright refuses to terminate it."""


class TerminationTimeoutError(TerminationError):
    """The instance did not start shutting down in time after TerminateInstances."""


def is_transient(error: BaseException) -> bool:
    """True for errors worth retrying: Kubernetes 429/5xx and connection failures, the cloud's transient
    errors, AWS throttling and 5xx, botocore's and urllib3's connection errors, and refused/reset/timed-out
    sockets."""
    if isinstance(
        error, TransientError | TransientCloudError | KubeConnectionError | ConnectionError | TimeoutError
    ):
        return True
    if isinstance(error, KubeApiError):
        return error.status in RETRYABLE_KUBE_STATUSES
    response: Any = getattr(error, "response", None)
    if isinstance(response, dict):
        code = str((response.get("Error") or {}).get("Code", ""))
        status = int((response.get("ResponseMetadata") or {}).get("HTTPStatusCode", 0) or 0)
        return code in RETRYABLE_AWS_CODES or status >= 500
    # botocore.exceptions.{EndpointConnectionError, ConnectionClosedError, ReadTimeoutError, ...} and
    # urllib3.exceptions.{NewConnectionError, ProtocolError, ReadTimeoutError, MaxRetryError, ...}
    name = type(error).__name__
    module = type(error).__module__
    if module.startswith("urllib3"):
        return name != "SSLError"
    from_botocore = module.startswith("botocore")
    return from_botocore and ("Connection" in name or name.endswith("TimeoutError"))
