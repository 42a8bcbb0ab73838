"""Fleetwright's state in one DynamoDB table (single-table design, keys ``pk``/``sk``, TTL ``expiresAt``).

NodeClaims, the shared unavailable-offerings cache, the provisioner's lease and Powertools idempotency
records live side by side, told apart by their partition key. ``docs/state.md`` lists the items and their
access patterns. boto3 is imported on the first table call, so importing this package costs nothing.
"""

from __future__ import annotations

from fleetwright.state.lease import Lease, LeaseLostError, LeaseUnavailableError
from fleetwright.state.nodeclaims import ClaimStatus, NodeClaimRecord, NodeClaimStore
from fleetwright.state.store import StateStore
from fleetwright.state.table import DynamoTable
from fleetwright.state.unavailable import DynamoUnavailableOfferings

__all__ = [
    "ClaimStatus",
    "DynamoTable",
    "DynamoUnavailableOfferings",
    "Lease",
    "LeaseLostError",
    "LeaseUnavailableError",
    "NodeClaimRecord",
    "NodeClaimStore",
    "StateStore",
]
