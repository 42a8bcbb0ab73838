"""Static NodePools (``spec.replicas``): launch the nodes a static pool is missing, whatever the pods.

A static pool's node count is its active NodeClaim records (launching, launched, registered, initialized —
also those whose node is being drained) plus Nodes labelled with the pool that no active record holds (as
Karpenter counts running and deleting nodes; :func:`fleetwright.claims.static_limits.node_counts`). Below
``replicas`` the missing claims are launched, never more than ``limits.nodes`` allows, each from the pool's
template with every instance type its requirements and EC2NodeClass allow (no pods: nothing narrows them).
Scaling down is the disruption controller's (``fleetwright.disruption.static_pools``).

The claims go through :meth:`Provisioner.launch_claims`: recorded (fenced by the lease) before CreateFleet,
so an invocation retried after a crash counts the claim it left ``Launching`` and launches nothing twice; a
claim whose launch failed is ``Failed``, not counted, and the next pass launches again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from fleetwright.claims.reports import PassReport, RunReport
from fleetwright.claims.static_limits import STATIC_LIMIT_REACHED, node_counts, static_nodepools
from fleetwright.model.errors import DocumentError
from fleetwright.model.kube import daemonset_pod
from fleetwright.model.nodepool import NodePool
from fleetwright.model.pod import Pod
from fleetwright.observability import metrics as obs
from fleetwright.scheduling.static import static_claims
from fleetwright.scheduling.templates import nodepool_templates
from fleetwright.scheduling.types import NODES, NewNodeClaim
from fleetwright.state.lease import LeaseLostError
from fleetwright.state.nodeclaims import ClaimStatus, NodeClaimRecord

if TYPE_CHECKING:
    from fleetwright.provisioning.provisioner import Provisioner

# After a failed launch a static pool waits this long before launching again (every pass reconciles every
# few seconds; a pool EC2 cannot fill now would otherwise send a CreateFleet each time).
RETRY_AFTER_FAILURE_SECONDS = 30.0


def missing(pool: NodePool, count: int) -> tuple[int, int]:
    """How many claims ``pool`` lacks with ``count`` nodes, and how many of those ``limits.nodes`` holds
    back."""
    wanted = max(0, (pool.spec.replicas or 0) - count)
    limit = (pool.limits() or {}).get(NODES)
    allowed = wanted if limit is None else max(0, min(wanted, limit - count))
    return allowed, wanted - allowed


def recent_failures(records: Sequence[NodeClaimRecord], now: float, ttl: float) -> dict[str, float]:
    """Per NodePool with a claim failed less than :data:`RETRY_AFTER_FAILURE_SECONDS` ago, the seconds
    until it may launch again. A claim is failed with an expiry ``ttl`` seconds ahead, which dates it."""
    waits: dict[str, float] = {}
    for record in records:
        if record.status != ClaimStatus.FAILED:
            continue
        failed_at = record.expires_at - ttl if record.expires_at is not None else record.created_at
        left = failed_at + RETRY_AFTER_FAILURE_SECONDS - now
        if left > 0:
            waits[record.nodepool] = max(left, waits.get(record.nodepool, 0.0))
    return waits


def _daemonsets(provisioner: Provisioner) -> list[Pod]:
    found: list[Pod] = []
    for obj in provisioner.kube.list_daemonsets():
        try:
            found.append(daemonset_pod(obj))
        except DocumentError as error:
            provisioner.log.warning("object ignored", extra={"error": error.render()})
    return found


def keep_replicas(provisioner: Provisioner, run: RunReport) -> None:
    """Launch what the static pools lack (under the pass's lease); the pass's report joins ``run.passes``
    when it launched or failed anything. Errors are reported, never raised, except
    :class:`LeaseLostError`."""
    pools = static_nodepools(provisioner.config.nodepools)
    if not pools:
        return
    report = PassReport()
    try:
        _keep_replicas(provisioner, pools, report)
    except LeaseLostError:
        raise
    except Exception as error:
        report.error = f"{type(error).__name__}: {error}"
        provisioner.metrics.add(obs.PASS_ERRORS, 1)
        provisioner.log.exception("static NodePools not scaled up", extra={"error": report.error})
    if report.launched or report.failed or report.error:
        run.passes.append(report)


def _keep_replicas(provisioner: Provisioner, pools: Sequence[NodePool], report: PassReport) -> None:
    records = provisioner.state.nodeclaims.list()
    counts = node_counts(pools, records, provisioner.lifecycle.node_objects())
    short = _short(provisioner, pools, records, counts)
    if not short:
        return
    claims = _claims(provisioner, pools, short, counts, report)
    if claims:
        launched = provisioner.launch_claims(claims)
        report.launched.extend(launched.launched)
        report.failed.update(launched.failed)
        report.error = launched.error


def _short(
    provisioner: Provisioner,
    pools: Sequence[NodePool],
    records: Sequence[NodeClaimRecord],
    counts: dict[str, int],
) -> dict[str, int]:
    """Per static pool below its replicas, how many claims to launch now: within ``limits.nodes`` (a pool
    held back is counted and logged), and none while the pool waits after a failed launch."""
    recent = recent_failures(records, provisioner.wall_clock(), provisioner.config.failed_claim_ttl_seconds)
    short: dict[str, int] = {}
    for pool in pools:
        allowed, held_back = missing(pool, counts[pool.name])
        if held_back:
            provisioner.metrics.add(STATIC_LIMIT_REACHED, 1, obs.COUNT, {"NodePool": pool.name})
            provisioner.log.warning(
                "static NodePool held at its node limit",
                extra={
                    "nodePool": pool.name,
                    "replicas": pool.spec.replicas,
                    "nodes": counts[pool.name],
                    "limit": (pool.limits() or {}).get(NODES),
                },
            )
        if allowed and pool.name in recent:
            provisioner.log.info(
                "static NodePool waits after a failed launch",
                extra={"nodePool": pool.name, "retryInSeconds": round(recent[pool.name])},
            )
        elif allowed:
            short[pool.name] = allowed
    return short


def _claims(
    provisioner: Provisioner,
    pools: Sequence[NodePool],
    short: dict[str, int],
    counts: dict[str, int],
    report: PassReport,
) -> list[NewNodeClaim]:
    """The claims each short pool launches, from its template with every instance type its requirements
    and EC2NodeClass allow; a pool no instance type fits fails in ``report``."""
    catalog, accepted = provisioner.catalogs()
    daemonsets = _daemonsets(provisioner)
    templates = {
        t.name: t for t in nodepool_templates(pools, provisioner.config.nodeclasses) if t.name in short
    }
    replicas = {p.name: p.spec.replicas for p in pools}
    claims: list[NewNodeClaim] = []
    for name, count in sorted(short.items()):
        template = templates[name]
        bootable = accepted.get(template.node_class, set())
        made = static_claims(template, [t for t in catalog if t.name in bootable], daemonsets, count)
        if not made:
            reason = f"NodePool {name}: no instance type meets its requirements"
            report.failed[name] = reason
            provisioner.metrics.add(
                obs.LAUNCH_ERRORS, 1, obs.COUNT, {"NodePool": name, "ErrorCode": "NoLaunchableOffering"}
            )
            provisioner.log.error("cannot launch", extra={"nodePool": name, "reason": reason})
            continue
        provisioner.log.info(
            "static NodePool below its replicas",
            extra={"nodePool": name, "replicas": replicas[name], "nodes": counts[name], "launch": count},
        )
        claims.extend(made)
    return claims
