"""What a NodeClaim keeps of its NodePool at launch: ``expireAfter`` and ``terminationGracePeriod``.

Karpenter copies both from the NodePool template onto each NodeClaim, so a node expires and is drained by the
values it launched with, and editing them on the NodePool is drift (they are in the NodePool hash) rolled
within the budgets, not a change that expires every older node at once. A claim recorded before they were
copied has none: the NodePool's current values apply to it, as they did when it launched (see
:func:`claim_terms`).
"""

from __future__ import annotations

from dataclasses import dataclass

from fleetwright.model.nodepool import NodePool
from fleetwright.model.quantity import QuantityError, parse_duration
from fleetwright.state.nodeclaims import NodeClaimRecord


@dataclass(frozen=True, slots=True)
class ClaimTerms:
    """A node's lifetime and drain deadline in seconds (None: ``Never`` / no terminationGracePeriod), and
    whether they are its claim's own (``copied``) or its NodePool's current ones (a claim recorded before
    they were copied)."""

    expire_after: int | None
    termination_grace_period: int | None
    copied: bool = True


NO_TERMS = ClaimTerms(expire_after=None, termination_grace_period=None, copied=False)


def copy_terms(record: NodeClaimRecord, nodepool: NodePool) -> None:
    """Copy the NodePool template's ``expireAfter`` and ``terminationGracePeriod`` onto ``record``."""
    spec = nodepool.spec.template.spec
    record.expire_after = spec.expire_after
    record.termination_grace_period = spec.termination_grace_period or ""


def recorded_terms(record: NodeClaimRecord) -> ClaimTerms | None:
    """The terms copied onto ``record``; None when it has none (recorded before they were copied) or they
    do not parse (the caller falls back to the NodePool's and says so)."""
    if not record.expire_after:
        return None
    try:
        grace = record.termination_grace_period
        return ClaimTerms(
            expire_after=parse_duration(record.expire_after),
            termination_grace_period=parse_duration(grace) if grace else None,
        )
    except QuantityError:
        return None


def pool_terms(nodepool: NodePool | None) -> ClaimTerms:
    """The NodePool's current terms (the fallback for claims without their own; none without a pool)."""
    if nodepool is None:
        return NO_TERMS
    return ClaimTerms(
        expire_after=nodepool.expire_after_seconds(),
        termination_grace_period=nodepool.termination_grace_period_seconds(),
        copied=False,
    )


def claim_terms(record: NodeClaimRecord | None, nodepool: NodePool | None) -> ClaimTerms:
    """The terms a node is expired and drained by: its claim's own, else its NodePool's current ones."""
    own = recorded_terms(record) if record is not None else None
    return own if own is not None else pool_terms(nodepool)
