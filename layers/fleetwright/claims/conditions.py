"""NodeClaim status conditions as Karpenter writes them, so ``kubectl get nodeclaims`` (its READY column)
and ``kubectl describe nodeclaim`` read the same as on a Karpenter cluster.

Karpenter keeps a NodeClaim's conditions with operatorpkg's condition set: ``Launched``, ``Registered`` and
``Initialized`` always exist (``Unknown``, reason ``AwaitingReconciliation``, until their controller acts;
their first transition time is the object's creation); the root ``Ready`` follows them (``True`` once all
three are, otherwise ``Unknown``, reason ``ReconcilingDependents``, or ``False``, reason
``UnhealthyDependents``, naming the dependents not yet ``True``, latest first); a condition ``True`` has
its type as reason unless a reason is given; a transition time moves only when the status changes; every
condition carries the object's generation; conditions are kept in the order of their transition times,
``Ready`` last. The other conditions (``Drifted``, ``Consolidatable``, ``DisruptionReason``,
``ConsistentStateFound``, ...) are set or removed by whoever decides them.

:func:`merged` is pure and deterministic: the same current conditions and the same wanted ones give the
same list, so a writer compares it with what the object has and writes nothing when they are equal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from fleetwright.state.nodeclaims import ClaimStatus, NodeClaimRecord

JsonObject = dict[str, Any]

LAUNCHED: Final = "Launched"
REGISTERED: Final = "Registered"
INITIALIZED: Final = "Initialized"
READY: Final = "Ready"
DRIFTED: Final = "Drifted"
CONSOLIDATABLE: Final = "Consolidatable"
DISRUPTION_REASON: Final = "DisruptionReason"
CONSISTENT_STATE_FOUND: Final = "ConsistentStateFound"
DEPENDENTS: Final = (LAUNCHED, REGISTERED, INITIALIZED)

TRUE: Final = "True"
FALSE: Final = "False"
UNKNOWN: Final = "Unknown"


@dataclass(frozen=True, slots=True)
class Condition:
    """A condition as wanted: status, reason, message, and when it took this status (``since``, epoch
    seconds; None: the time of the write)."""

    status: str
    reason: str
    message: str = ""
    since: float | None = None


AWAITING: Final = Condition(UNKNOWN, "AwaitingReconciliation", "object is awaiting reconciliation")
NODE_NOT_FOUND: Final = Condition(UNKNOWN, "NodeNotFound", "Node not registered with cluster")


def true(kind: str, *, reason: str = "", message: str = "", since: float | None = None) -> Condition:
    """``kind`` True (its reason the type itself unless given, as operatorpkg's SetTrue)."""
    return Condition(TRUE, reason or kind, message, since)


def stamp(seconds: float) -> str:
    """An RFC 3339 time to the second, as Kubernetes writes ``metav1.Time``."""
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def lifecycle(record: NodeClaimRecord, waiting: tuple[str, str] | None = None) -> dict[str, Condition]:
    """Launched, Registered and Initialized as Karpenter's lifecycle controllers leave them for ``record``;
    ``waiting`` is why a registered node is not initialized yet (reason, message)."""
    launched = bool(record.instance_id)
    registered = record.status in (ClaimStatus.REGISTERED, ClaimStatus.INITIALIZED)
    initialized = record.status == ClaimStatus.INITIALIZED
    found = {LAUNCHED: true(LAUNCHED, since=record.launched_at) if launched else AWAITING}
    if registered:
        found[REGISTERED] = true(REGISTERED, since=record.registered_at)
    else:
        found[REGISTERED] = NODE_NOT_FOUND if launched else AWAITING
    if initialized:
        found[INITIALIZED] = true(INITIALIZED, since=record.initialized_at)
    elif registered:
        found[INITIALIZED] = Condition(UNKNOWN, *waiting) if waiting else NODE_NOT_FOUND
    else:
        found[INITIALIZED] = AWAITING
    return found


def _set(
    by_type: dict[str, JsonObject], kind: str, wanted: Condition, generation: int, now: float, created: float
) -> None:
    """Put ``wanted`` in ``by_type``: its transition time kept while the status stays, else ``since``
    (a missing dependent condition counts as Unknown since the object's creation, as operatorpkg
    initializes them)."""
    old = by_type.get(kind)
    if old is None and kind in DEPENDENTS:
        old = {"status": UNKNOWN, "lastTransitionTime": stamp(created)}  # there since the creation
    if old is not None and old.get("status") == wanted.status and old.get("lastTransitionTime"):
        since = str(old["lastTransitionTime"])
    else:
        since = stamp(wanted.since if wanted.since is not None else now)
    by_type[kind] = {
        "type": kind,
        "status": wanted.status,
        "reason": wanted.reason,
        "message": wanted.message,
        "lastTransitionTime": since,
        "observedGeneration": generation,
    }


def _root(by_type: Mapping[str, JsonObject]) -> tuple[Condition, str]:
    """Ready from the dependents, and its transition time (that of the latest dependent it follows)."""
    dependents = [by_type[kind] for kind in DEPENDENTS]
    unhealthy = [c for c in dependents if c["status"] != TRUE]
    if not unhealthy:
        return true(READY), max(str(c["lastTransitionTime"]) for c in dependents)
    latest = sorted(unhealthy, key=lambda c: str(c["lastTransitionTime"]), reverse=True)
    message = ", ".join(f"{c['type']}={c['status']}" for c in latest)
    if any(c["status"] == FALSE for c in unhealthy):
        return Condition(FALSE, "UnhealthyDependents", message), str(latest[0]["lastTransitionTime"])
    return Condition(UNKNOWN, "ReconcilingDependents", message), str(latest[0]["lastTransitionTime"])


def merged(
    current: Sequence[Mapping[str, Any]],
    wanted: Mapping[str, Condition | None],
    *,
    generation: int,
    now: float,
    created: float,
) -> list[JsonObject]:
    """``current`` with each of ``wanted`` set (or, None, removed: never a lifecycle condition), the
    lifecycle conditions present, ``Ready`` recomputed, every condition at ``generation``."""
    by_type: dict[str, JsonObject] = {}
    for present in current:
        kind = str(present.get("type") or "")
        if kind:
            by_type[kind] = {**present, "observedGeneration": generation}
    for kind, condition in wanted.items():
        if condition is None:
            if kind not in (*DEPENDENTS, READY):
                by_type.pop(kind, None)
        elif kind != READY:
            _set(by_type, kind, condition, generation, now, created)
    for kind in DEPENDENTS:
        if kind not in by_type:
            _set(by_type, kind, AWAITING, generation, now, created)
    root, since = _root(by_type)
    old_root = by_type.get(READY)
    if old_root is not None and old_root.get("status") == root.status:
        since = str(old_root.get("lastTransitionTime") or since)
    by_type[READY] = {
        "type": READY,
        "status": root.status,
        "reason": root.reason,
        "message": root.message,
        "lastTransitionTime": since,
        "observedGeneration": generation,
    }
    return sorted(by_type.values(), key=lambda c: (c["type"] == READY, str(c.get("lastTransitionTime"))))


def condition_of(conditions: Sequence[Mapping[str, Any]], kind: str) -> Mapping[str, Any] | None:
    """The condition of type ``kind`` in ``conditions``, or None."""
    return next((c for c in conditions if c.get("type") == kind), None)
