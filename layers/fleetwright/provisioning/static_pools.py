"""Static NodePools (``spec.replicas``): launch the nodes a static pool is missing, whatever the pods.

A static pool's node count is its active NodeClaim records (launching, launched, registered, initialized —
also those whose node is being drained) plus Nodes labelled with the pool that no active record holds (as
Karpenter counts running and deleting nodes). Below ``replicas`` the missing claims are launched, never
more than ``limits.nodes`` allows, each from the pool's template with every instance type its
requirements and EC2NodeClass allow (no pods: nothing narrows them). Scaling down is the disruption
controller's (``fleetwright.disruption.static_pools``).

The claims go through :meth:`Provisioner.launch_claims`: recorded (fenced by the lease) before CreateFleet,
so an invocation retried after a crash counts the claim it left ``Launching`` and launches nothing twice; a
claim whose launch failed is ``Failed``, not counted, and the next pass launches again.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fleetwright.model.errors import DocumentError
from fleetwright.model.kube import daemonset_pod
from fleetwright.model.labels import NODEPOOL
from fleetwright.model.nodepool import NodePool
from fleetwright.model.pod import Pod
from fleetwright.observability import metrics as obs
from fleetwright.provisioning.reports import PassReport, RunReport
from fleetwright.scheduling.static import static_claims
from fleetwright.scheduling.templates import nodepool_templates
from fleetwright.scheduling.types import NODES, NewNodeClaim
from fleetwright.state.lease import LeaseLostError
from fleetwright.state.nodeclaims import ClaimStatus, NodeClaimRecord

if TYPE_CHECKING:
    from fleetwright.provisioning.provisioner import Provisioner

STATIC_LIMIT_REACHED = "StaticNodePoolLimitReached"
# After a failed launch a static pool waits this long before launching again (every pass reconciles every
# few seconds; a pool EC2 cannot fill now would otherwise send a CreateFleet each time).
RETRY_AFTER_FAILURE_SECONDS = 30.0


def static_nodepools(nodepools: Iterable[NodePool]) -> list[NodePool]:
    """The NodePools with ``spec.replicas`` set."""
    return [np for np in nodepools if np.spec.replicas is not None]


def _instance_id(node: Mapping[str, Any]) -> str:
    provider_id = str((node.get("spec") or {}).get("providerID") or "")
    return provider_id.rstrip("/").rsplit("/", 1)[-1] if provider_id else ""


def node_counts(
    pools: Sequence[NodePool], records: Sequence[NodeClaimRecord], nodes: Sequence[Mapping[str, Any]]
) -> dict[str, int]:
    """Per static pool, its nodes: active claim records plus labelled Nodes no active record holds."""
    counts = {np.name: 0 for np in pools}
    held: set[str] = set()
    for record in records:
        if record.active and record.nodepool in counts:
            counts[record.nodepool] += 1
            if record.instance_id:
                held.add(record.instance_id)
            if record.node_name:
                held.add(record.node_name)
    for node in nodes:
        metadata = node.get("metadata") or {}
        pool = (metadata.get("labels") or {}).get(NODEPOOL)
        if pool not in counts:
            continue
        if _instance_id(node) in held or metadata.get("name") in held:
            continue
        counts[pool] += 1
    return counts


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
    counts = node_counts(pools, records, provisioner._node_objects())
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
    if not short:
        return
    catalog, accepted = provisioner.catalogs()
    daemonsets = _daemonsets(provisioner)
    templates = {
        t.name: t for t in nodepool_templates(pools, provisioner.config.nodeclasses) if t.name in short
    }
    templates_replicas = {p.name: p.spec.replicas for p in pools}
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
            extra={
                "nodePool": name,
                "replicas": templates_replicas[name],
                "nodes": counts[name],
                "launch": count,
            },
        )
        claims.extend(made)
    if claims:
        launched = provisioner.launch_claims(claims)
        report.launched.extend(launched.launched)
        report.failed.update(launched.failed)
        report.error = launched.error


class StaticLimitGuard:
    """Launches claims decided elsewhere (disruption replacements) through ``provisioner``, refusing those
    that would take a static pool past ``limits.nodes``. The count is taken under the launch lease, so a
    scale-up the provisioner made after the claims were planned is seen."""

    def __init__(self, provisioner: Provisioner) -> None:
        self.provisioner = provisioner

    def launch_claims(self, claims: Sequence[NewNodeClaim], *, deadline: float | None = None) -> PassReport:
        """:meth:`Provisioner.launch_claims`, or a report with every claim failed when one pool's limit
        would be exceeded (nothing launched)."""
        provisioner = self.provisioner
        pools = {p.name: p for p in static_nodepools(provisioner.config.nodepools)}
        wanted = Counter(c.nodepool for c in claims if c.nodepool in pools)
        limited = [pools[n] for n in sorted(wanted) if (pools[n].limits() or {}).get(NODES) is not None]
        if not limited:
            return provisioner.launch_claims(claims, deadline=deadline)
        # The lease the launch itself takes (re-entrant): nothing launches between the count and the launch.
        with provisioner._replacement_pass(deadline):
            counts = node_counts(limited, provisioner.state.nodeclaims.list(), provisioner._node_objects())
            for pool in limited:
                limit = (pool.limits() or {})[NODES]
                if counts[pool.name] + wanted[pool.name] > limit:
                    reason = (
                        f"NodePool {pool.name} has {counts[pool.name]} node(s): {wanted[pool.name]} more "
                        f"would exceed its limits.nodes ({limit})"
                    )
                    provisioner.metrics.add(STATIC_LIMIT_REACHED, 1, obs.COUNT, {"NodePool": pool.name})
                    provisioner.log.warning(
                        "replacement refused", extra={"nodePool": pool.name, "reason": reason}
                    )
                    return PassReport(pending=0, failed={c.name: reason for c in claims})
            return provisioner.launch_claims(claims, deadline=deadline)
