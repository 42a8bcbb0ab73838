"""The termination workflow's step function put together from its environment: ``TerminationSteps`` on
the shared connections (EC2, the state table's claims, the cluster)."""

from __future__ import annotations

from collections.abc import Mapping

from aws_lambda_powertools import Logger, Metrics

from fleetwright.aws.instances import ClusterInstances
from fleetwright.config.environment import FunctionEnvironment
from fleetwright.config.names import ENV_CLUSTER, ENV_TABLE
from fleetwright.observability.metrics import PowertoolsMetrics
from fleetwright.runtime.connections import connect
from fleetwright.termination.steps import TerminationSteps
from fleetwright.workflow.claimbook import StoreClaimBook


def build(logger: Logger, metrics: Metrics, environ: Mapping[str, str] | None = None) -> TerminationSteps:
    """The steps for the cluster the environment names. Raises
    :class:`~fleetwright.config.environment.ConfigError` when a variable is missing or bad."""
    env = FunctionEnvironment.from_environ(environ)
    env.require(ENV_CLUSTER, ENV_TABLE)
    to = connect(env.cluster_name, env.table_name, env.region, env.kubeconfig)
    clients = to.clients
    return TerminationSteps(
        to.kube,
        ClusterInstances(clients, env.cluster_name),
        StoreClaimBook(to.state.nodeclaims),
        metrics=PowertoolsMetrics(metrics),
        logger=logger,
        # The continue step's client, made the first time a long workflow continues in a new execution.
        executions=lambda: clients.client("stepfunctions"),
    )
