"""The interruption function put together from its environment: an ``InterruptionController`` wired to AWS,
the state table, the cluster and the termination state machine, acting only on events of the stack's
account (``FLEETWRIGHT_ACCOUNT_ID``, set by the stack) and the function's region (``AWS_REGION``, set by
Lambda).

Without a usable NodePool configuration the controller still drains and terminates, but launches no
replacements (logged as an error).
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_lambda_powertools import Logger, Metrics

from fleetwright.config.environment import FunctionEnvironment
from fleetwright.config.names import ENV_ACCOUNT, ENV_CLUSTER, ENV_REGION, ENV_STATE_MACHINE, ENV_TABLE
from fleetwright.config.settings import settings_from_env
from fleetwright.interruption.controller import InterruptionController, InterruptionSettings
from fleetwright.interruption.replacement import ReplacementLauncher
from fleetwright.interruption.trust import EventOrigin
from fleetwright.observability.metrics import PowertoolsMetrics
from fleetwright.provisioning.provisioner import Provisioner
from fleetwright.runtime.connections import connect
from fleetwright.state.interruptions import InterruptionRecords
from fleetwright.workflow.claimbook import StoreClaimBook
from fleetwright.workflow.starter import StepFunctionsStarter


def build(
    logger: Logger, metrics: Metrics, environ: Mapping[str, str] | None = None
) -> InterruptionController:
    """The controller for the cluster the environment names. Raises
    :class:`~fleetwright.config.environment.ConfigError` when a variable is missing or bad."""
    env = FunctionEnvironment.from_environ(environ)
    env.require(ENV_CLUSTER, ENV_TABLE, ENV_STATE_MACHINE, ENV_ACCOUNT, ENV_REGION)
    to = connect(env.cluster_name, env.table_name, env.region, env.kubeconfig)
    replacements: ReplacementLauncher | None
    try:
        config = settings_from_env(env).config
        replacements = ReplacementLauncher(Provisioner(to.kube, to.cloud, to.state, config, logger=logger))
    except Exception as error:
        logger.error("no NodePool configuration; replacements disabled", extra={"error": str(error)})
        replacements = None
    return InterruptionController(
        kube=to.kube,
        cloud=to.cloud,
        origin=EventOrigin(account=env.account_id, region=env.region),
        unavailable=to.state.unavailable,
        workflow=StepFunctionsStarter(to.clients.client("stepfunctions"), env.state_machine_arn),
        records=InterruptionRecords(to.state.table, to.state.cluster),
        claims=StoreClaimBook(to.state.nodeclaims),
        replacements=replacements,
        settings=InterruptionSettings(replace_on_rebalance=env.replace_on_rebalance),
        metrics=PowertoolsMetrics(metrics),
        logger=logger,
    )
