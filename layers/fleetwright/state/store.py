"""``StateStore``: the state table of one cluster, as the stores the capabilities use."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from fleetwright.state.emptiness import EmptinessStore
from fleetwright.state.launchguard import LaunchGuardStore
from fleetwright.state.lease import DEFAULT_LEASE_SECONDS, Lease
from fleetwright.state.nodeclaims import NodeClaimStore
from fleetwright.state.podevents import PodSetStore
from fleetwright.state.table import PARTITION_KEY, SORT_KEY, TTL_ATTRIBUTE, DynamoTable
from fleetwright.state.unavailable import DEFAULT_REFRESH_SECONDS, DynamoUnavailableOfferings

ENV_TABLE = "FLEETWRIGHT_STATE_TABLE"


class StateStore:
    """NodeClaims, the unavailable-offerings cache, "empty since" and pod-set markers, the launch-rate
    record and registration breakers, leases and idempotency records of one cluster.

    ``table`` is a table name or a :class:`DynamoTable`; ``clock`` gives epoch seconds.
    """

    def __init__(
        self,
        table: str | DynamoTable,
        cluster: str,
        *,
        region: str | None = None,
        client: Any = None,
        clock: Callable[[], float] = time.time,
        unavailable_refresh_seconds: float = DEFAULT_REFRESH_SECONDS,
    ) -> None:
        self.table = (
            table if isinstance(table, DynamoTable) else DynamoTable(table, region=region, client=client)
        )
        self.cluster = cluster
        self.clock = clock
        self.nodeclaims = NodeClaimStore(self.table, cluster)
        self.emptiness = EmptinessStore(self.table, cluster)
        self.podsets = PodSetStore(self.table, cluster)
        self.launchguard = LaunchGuardStore(self.table, cluster)
        self.unavailable = DynamoUnavailableOfferings(
            self.table, cluster, refresh_seconds=unavailable_refresh_seconds, clock=clock
        )

    def lease(
        self, holder: str, *, name: str = "provisioner", seconds: float = DEFAULT_LEASE_SECONDS
    ) -> Lease:
        """The lease ``name`` as seen by ``holder``."""
        return Lease(self.table, self.cluster, holder, name=name, seconds=seconds, clock=self.clock)

    def idempotency_layer(self, function_name: str) -> Any:
        """A Powertools ``DynamoDBPersistenceLayer`` storing its records in this table.

        Records go to partition ``IDEMPOTENCY#<cluster>#<function>`` with the hashed idempotency key as
        sort key and ``expiresAt`` as expiry, so the table's TTL removes them. Importing Powertools'
        idempotency utility costs ~0.7 s, so it happens here, on first use, not at cold start.
        """
        from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer

        return DynamoDBPersistenceLayer(
            table_name=self.table.name,
            key_attr=PARTITION_KEY,
            sort_key_attr=SORT_KEY,
            static_pk_value=f"IDEMPOTENCY#{self.cluster}#{function_name}",
            expiry_attr=TTL_ATTRIBUTE,
            boto3_client=self.table.client,
        )
