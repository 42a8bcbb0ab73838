"""boto3 clients with botocore's retry modes, created lazily and cached at module scope.

A warm Lambda reuses the same clients (and their connection pools) across invocations; a cold start
pays for boto3 only when an AWS call is actually made.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# The Pricing API is served from a few regions only; us-east-1 answers for every region's prices.
PRICING_REGION = "us-east-1"
# Every request is bounded: a connection within 5 s, each read of the answer within 20 s (CreateFleet
# instant answers in a few seconds). A launch's settle grace (docs/provisioner.md) covers the read timeout.
CONNECT_TIMEOUT_SECONDS = 5.0
READ_TIMEOUT_SECONDS = 20.0
THROTTLING_CODES = frozenset(
    {"Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequestsException"}
)


@dataclass(eq=False)
class AwsClients:
    """The AWS clients one region needs, built on first use.

    ``retry_mode`` is botocore's ``adaptive`` (client-side rate limiting on throttles, the default) or
    ``standard``; both retry throttling and transient errors with exponential backoff up to
    ``max_attempts`` tries. ``session`` is a ``boto3.Session`` (a new default one when omitted). Every
    request is bounded by ``connect_timeout`` and ``read_timeout`` (seconds).
    """

    region: str
    retry_mode: str = "adaptive"
    max_attempts: int = 10
    connect_timeout: float = CONNECT_TIMEOUT_SECONDS
    read_timeout: float = READ_TIMEOUT_SECONDS
    session: Any = None
    _clients: dict[str, Any] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def client(self, service: str, region: str | None = None) -> Any:
        """The (cached) boto3 client for ``service`` in this region, or in ``region`` when given."""
        key = f"{service}@{region or self.region}"
        with self._lock:
            found = self._clients.get(key)
            if found is None:
                found = self._build(service, region or self.region)
                self._clients[key] = found
            return found

    def _build(self, service: str, region: str) -> Any:
        import boto3  # type: ignore[import-untyped]
        from botocore.config import Config  # type: ignore[import-untyped]

        if self.session is None:
            self.session = boto3.session.Session()
        config = Config(
            region_name=region,
            retries={"mode": self.retry_mode, "max_attempts": self.max_attempts},
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
            user_agent_extra="fleetwright",
        )
        return self.session.client(service, config=config)

    @property
    def ec2(self) -> Any:
        """The EC2 client."""
        return self.client("ec2")

    @property
    def ssm(self) -> Any:
        """The SSM client (AMI parameters)."""
        return self.client("ssm")

    @property
    def eks(self) -> Any:
        """The EKS client (cluster endpoint, CA and version)."""
        return self.client("eks")

    @property
    def iam(self) -> Any:
        """The IAM client (instance profiles for a node class's role)."""
        return self.client("iam")

    @property
    def pricing(self) -> Any:
        """The Pricing API client (always in :data:`PRICING_REGION`)."""
        return self.client("pricing", PRICING_REGION)


_CACHE: dict[tuple[str, str], AwsClients] = {}
_CACHE_LOCK = threading.Lock()


def clients_for(region: str, retry_mode: str = "adaptive") -> AwsClients:
    """The module-scope :class:`AwsClients` for ``region`` (shared by every caller in this process)."""
    with _CACHE_LOCK:
        found = _CACHE.get((region, retry_mode))
        if found is None:
            found = AwsClients(region=region, retry_mode=retry_mode)
            _CACHE[(region, retry_mode)] = found
        return found


def reset_clients() -> None:
    """Forget every cached client (tests, or after credentials change)."""
    with _CACHE_LOCK:
        _CACHE.clear()


def error_code(error: BaseException) -> str:
    """The AWS error code of a botocore ``ClientError`` (``""`` for other exceptions)."""
    response: Mapping[str, Any] = getattr(error, "response", None) or {}
    return str((response.get("Error") or {}).get("Code", ""))


def error_message(error: BaseException) -> str:
    """The AWS error message of a botocore ``ClientError`` (``str(error)`` for other exceptions)."""
    response: Mapping[str, Any] = getattr(error, "response", None) or {}
    return str((response.get("Error") or {}).get("Message", "")) or str(error)
