"""The controllers' configuration: the environment variables the functions read (``names.py``, re-exported
here for the CDK app), the one model reading them (``environment.py``), NodePool and EC2NodeClass documents
and the options every capability shares (``settings.py``).

Importing this package loads only the names (the handlers import it at their cold start).
"""

from __future__ import annotations

from fleetwright.config.names import (
    ENV_ACCOUNT,
    ENV_BATCH_IDLE_SECONDS,
    ENV_BATCH_MAX_SECONDS,
    ENV_BREAKER_COOL_OFF_SECONDS,
    ENV_BREAKER_THRESHOLD,
    ENV_BREAKER_WINDOW_SECONDS,
    ENV_CLUSTER,
    ENV_DEADLINE_MARGIN_SECONDS,
    ENV_DEFAULT_REGION,
    ENV_DRY_RUN,
    ENV_ECONOMY,
    ENV_INSTANCE_PROFILE,
    ENV_KUBECONFIG,
    ENV_LAUNCH_MARGIN_SECONDS,
    ENV_LAUNCH_PARALLELISM,
    ENV_LAUNCH_RATE_LIMIT,
    ENV_LAUNCH_RATE_WINDOW_SECONDS,
    ENV_LEASE_SECONDS,
    ENV_LEASE_WAIT_SECONDS,
    ENV_METRICS_NAMESPACE,
    ENV_MIN_NODE_AGE_SECONDS,
    ENV_MIN_SAVING_DOLLARS,
    ENV_MIN_SAVING_FRACTION,
    ENV_NODE_REPAIR,
    ENV_NODEPOOLS_DIGEST,
    ENV_NODEPOOLS_FILE,
    ENV_NODEPOOLS_PARAMETER,
    ENV_ORPHAN_GRACE_SECONDS,
    ENV_QUEUE_URL,
    ENV_RECONCILE_INTERVAL_SECONDS,
    ENV_REGION,
    ENV_REGISTRATION_TIMEOUT_SECONDS,
    ENV_REPLACE_ON_REBALANCE,
    ENV_SERVICE,
    ENV_SETTLE_GRACE_SECONDS,
    ENV_SPOT_TO_SPOT,
    ENV_STATE_MACHINE,
    ENV_TABLE,
    ENV_TASK_ROOT,
    ENV_TRACING,
)

__all__ = [
    "ENV_ACCOUNT",
    "ENV_BATCH_IDLE_SECONDS",
    "ENV_BATCH_MAX_SECONDS",
    "ENV_BREAKER_COOL_OFF_SECONDS",
    "ENV_BREAKER_THRESHOLD",
    "ENV_BREAKER_WINDOW_SECONDS",
    "ENV_CLUSTER",
    "ENV_DEADLINE_MARGIN_SECONDS",
    "ENV_DEFAULT_REGION",
    "ENV_DRY_RUN",
    "ENV_ECONOMY",
    "ENV_INSTANCE_PROFILE",
    "ENV_KUBECONFIG",
    "ENV_LAUNCH_MARGIN_SECONDS",
    "ENV_LAUNCH_PARALLELISM",
    "ENV_LAUNCH_RATE_LIMIT",
    "ENV_LAUNCH_RATE_WINDOW_SECONDS",
    "ENV_LEASE_SECONDS",
    "ENV_LEASE_WAIT_SECONDS",
    "ENV_METRICS_NAMESPACE",
    "ENV_MIN_NODE_AGE_SECONDS",
    "ENV_MIN_SAVING_DOLLARS",
    "ENV_MIN_SAVING_FRACTION",
    "ENV_NODEPOOLS_DIGEST",
    "ENV_NODEPOOLS_FILE",
    "ENV_NODEPOOLS_PARAMETER",
    "ENV_NODE_REPAIR",
    "ENV_NODE_ROLE",
    "ENV_ORPHAN_GRACE_SECONDS",
    "ENV_QUEUE_URL",
    "ENV_RECONCILE_INTERVAL_SECONDS",
    "ENV_REGION",
    "ENV_REGISTRATION_TIMEOUT_SECONDS",
    "ENV_REPLACE_ON_REBALANCE",
    "ENV_SERVICE",
    "ENV_SETTLE_GRACE_SECONDS",
    "ENV_SPOT_TO_SPOT",
    "ENV_STATE_MACHINE",
    "ENV_TABLE",
    "ENV_TASK_ROOT",
    "ENV_TRACING",
]


def __getattr__(name: str) -> str:
    """``ENV_NODE_ROLE`` belongs to the document conversion (``fleetwright.model.legacy``, which also reads
    it for the CLI and sits below this package); loaded on first use so importing the names stays cheap."""
    if name == "ENV_NODE_ROLE":
        from fleetwright.model.legacy import ENV_NODE_ROLE

        return ENV_NODE_ROLE
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
