"""Termination workflow steps: one Lambda serves every Task state of the state machine
(``infra/termination_workflow.py``); the input names the step: ``{"step": "drain", "state": {...}}`` and the
output is the new workflow state. See docs/termination.md.

Errors worth retrying (throttling, 5xx, dropped connections) are raised as ``TransientError``, the name the
state machine's Retry matches; any other exception takes the workflow's failure path.

Cold start: only Powertools' Logger and Metrics are imported here; boto3 and the Kubernetes adapter load on
the first invocation and are kept for warm ones.
"""

from __future__ import annotations

import os
from typing import Any

from aws_lambda_powertools import Logger, Metrics

SERVICE = "fleetwright-termination"
logger = Logger(service=os.environ.get("POWERTOOLS_SERVICE_NAME") or SERVICE)
metrics = Metrics(namespace=os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or "Fleetwright", service=SERVICE)

ENV_CLUSTER = "FLEETWRIGHT_CLUSTER_NAME"
ENV_TABLE = "FLEETWRIGHT_STATE_TABLE"
ENV_KUBECONFIG = "FLEETWRIGHT_KUBECONFIG"

# The steps built by the first invocation (a dict so no ``global`` statement is needed).
_RUNTIME: dict[str, Any] = {}


def build_steps(environ: dict[str, str] | None = None) -> Any:
    """``TerminationSteps`` wired to EC2, the state table and the cluster named in the environment."""
    from fleetwright.aws.clients import clients_for
    from fleetwright.aws.instances import ClusterInstances
    from fleetwright.kube import KubeClient, KubeCluster
    from fleetwright.observability.metrics import PowertoolsMetrics
    from fleetwright.state import StateStore
    from fleetwright.termination.steps import TerminationSteps
    from fleetwright.workflow.claimbook import StoreClaimBook

    env = dict(os.environ if environ is None else environ)
    missing = [v for v in (ENV_CLUSTER, ENV_TABLE) if not env.get(v)]
    if missing:
        raise RuntimeError(f"missing environment variable(s): {', '.join(missing)}")
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or ""
    cluster = env[ENV_CLUSTER]
    clients = clients_for(region)
    client = (
        KubeClient.from_kubeconfig(env[ENV_KUBECONFIG])
        if env.get(ENV_KUBECONFIG)
        else KubeClient.for_eks(cluster, region, eks_client=clients.eks)
    )
    state = StateStore(env[ENV_TABLE], cluster, region=region)
    return TerminationSteps(
        KubeCluster(client),
        ClusterInstances(clients, cluster),
        StoreClaimBook(state.nodeclaims),
        metrics=PowertoolsMetrics(metrics),
        logger=logger,
        # The continue step's client, made the first time a long workflow continues in a new execution.
        executions=lambda: clients.client("stepfunctions"),
    )


def steps() -> Any:
    """The module-scope steps (built by the first invocation)."""
    if "steps" not in _RUNTIME:
        _RUNTIME["steps"] = build_steps()
    return _RUNTIME["steps"]


def set_steps(value: Any) -> None:
    """Use ``value`` (a ``TerminationSteps``) instead of building one (tests, the local demo)."""
    _RUNTIME["steps"] = value


def reset_steps() -> None:
    """Forget the steps (the next invocation builds them again)."""
    _RUNTIME.clear()


@metrics.log_metrics
@logger.inject_lambda_context(log_event=False)
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """The Lambda entry point: run ``event["step"]`` on ``event["state"]``; ``event["context"]`` carries
    the execution's name, start time and state machine (``$$.Execution``, ``$$.StateMachine``)."""
    from fleetwright.termination.errors import TransientError, is_transient

    step = str(event.get("step") or "")
    state = event.get("state") or {}
    request = state.get("request") or state
    context_object = event.get("context") or {}
    logger.append_keys(
        step=step,
        node=request.get("node"),
        instanceId=request.get("instanceId"),
        execution=context_object.get("execution"),
    )
    try:
        result: dict[str, Any] = steps().run(step, state, context_object)
    except Exception as error:
        if is_transient(error):
            logger.warning("transient error; the workflow retries", extra={"error": str(error)})
            raise TransientError(f"{type(error).__name__}: {error}") from error
        raise
    return result
