"""The ``pods/NAME/eviction`` subresource and the PodDisruptionBudget arithmetic behind it."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from fleetwright.local.apiserver import errors
from fleetwright.local.apiserver.errors import ApiError
from fleetwright.local.apiserver.resources import (
    DEPLOYMENTS,
    POD_DISRUPTION_BUDGETS,
    PODS,
    REPLICA_SETS,
    STATEFUL_SETS,
    ResourceType,
)
from fleetwright.local.apiserver.selectors import LabelSelector, selector_from_object
from fleetwright.local.apiserver.store import Store

JsonObject = dict[str, Any]

EVICTION_API_VERSIONS = ("policy/v1", "policy/v1beta1")
VIOLATION_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."


@dataclass(frozen=True)
class Budget:
    """A PodDisruptionBudget evaluated against the pods it selects right now."""

    expected: int
    desired_healthy: int
    current_healthy: int

    @property
    def disruptions_allowed(self) -> int:
        """How many healthy pods may go."""
        return max(0, self.current_healthy - self.desired_healthy)


def is_ready(pod: JsonObject) -> bool:
    """A pod counts as healthy when its Ready condition is True and it is not being deleted."""
    if pod.get("metadata", {}).get("deletionTimestamp"):
        return False
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def pdb_selector(pdb: JsonObject) -> LabelSelector | None:
    """The PDB's selector; None (selects nothing) when unset. An empty selector selects every pod."""
    selector = pdb.get("spec", {}).get("selector")
    if selector is None:
        return None
    return selector_from_object(selector)


def _scaled(value: Any, total: int) -> int:
    """An int-or-percent value against ``total``, rounding percentages up like the disruption controller."""
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


def _controller_replicas(store: Store, pod: JsonObject) -> tuple[str, int] | None:
    """(uid, desired replicas) of the workload that owns ``pod``, following ReplicaSet → Deployment."""
    ns = pod["metadata"].get("namespace")
    for ref in pod["metadata"].get("ownerReferences") or []:
        if not ref.get("controller"):
            continue
        kinds: dict[str, ResourceType] = {"ReplicaSet": REPLICA_SETS, "StatefulSet": STATEFUL_SETS}
        rt = kinds.get(str(ref.get("kind")))
        owner = store.try_get(rt, ns, ref["name"]) if rt is not None else None
        if owner is None:
            return None
        if rt is REPLICA_SETS:
            for dref in owner["metadata"].get("ownerReferences") or []:
                if dref.get("kind") == "Deployment" and dref.get("controller"):
                    deployment = store.try_get(DEPLOYMENTS, ns, dref["name"])
                    if deployment is not None:
                        return deployment["metadata"]["uid"], int(deployment["spec"].get("replicas", 1))
        return owner["metadata"]["uid"], int(owner["spec"].get("replicas", 1))
    return None


def evaluate(store: Store, pdb: JsonObject) -> Budget:
    """Expected, desired and currently healthy pod counts for ``pdb``.

    The expected count is the sum of the owning controllers' replicas (so pods already evicted but not yet
    replaced still count), plus one for each selected pod that has no scalable controller.
    """
    selector = pdb_selector(pdb)
    ns = pdb["metadata"].get("namespace")
    pods, _ = store.list(PODS, ns)
    selected = [
        p
        for p in pods
        if selector is not None
        and selector.matches(p["metadata"].get("labels"))
        and p.get("status", {}).get("phase") not in ("Succeeded", "Failed")
    ]
    controllers: dict[str, int] = {}
    orphans = 0
    for pod in selected:
        owner = _controller_replicas(store, pod)
        if owner is None:
            orphans += 1
        else:
            controllers[owner[0]] = owner[1]
    expected = sum(controllers.values()) + orphans
    healthy = sum(1 for p in selected if is_ready(p))
    spec = pdb.get("spec", {})
    if spec.get("minAvailable") is not None:
        desired = _scaled(spec["minAvailable"], expected)
    elif spec.get("maxUnavailable") is not None:
        desired = max(0, expected - _scaled(spec["maxUnavailable"], expected))
    else:
        desired = 0
    return Budget(expected=expected, desired_healthy=desired, current_healthy=healthy)


def pdb_status(store: Store, pdb: JsonObject) -> JsonObject:
    """The ``status`` a disruption controller would write for ``pdb``."""
    budget = evaluate(store, pdb)
    return {
        "observedGeneration": pdb["metadata"].get("generation", 1),
        "expectedPods": budget.expected,
        "desiredHealthy": budget.desired_healthy,
        "currentHealthy": budget.current_healthy,
        "disruptionsAllowed": budget.disruptions_allowed,
        "conditions": [
            {
                "type": "DisruptionAllowed",
                "status": "True" if budget.disruptions_allowed > 0 else "False",
                "reason": "SufficientPods" if budget.disruptions_allowed > 0 else "InsufficientPods",
                "message": "",
                "lastTransitionTime": pdb["metadata"].get("creationTimestamp"),
                "observedGeneration": pdb["metadata"].get("generation", 1),
            }
        ],
    }


def evict(store: Store, namespace: str, name: str, body: Any) -> JsonObject:
    """Evict pod ``namespace/name`` if its disruption budget allows; a ``Status`` to send with code 201.

    Raises 429 (TooManyRequests) when the budget would be violated, 500 when several budgets select the pod
    (the real server refuses that too), 404 for a missing pod and 400 for a body that is not an Eviction.
    """
    _check_eviction_body(name, body)
    options = body.get("deleteOptions") or {}
    grace = options.get("gracePeriodSeconds")
    with store.transaction():
        pod = store.get(PODS, namespace, name)
        phase = pod.get("status", {}).get("phase")
        # Pods that hold no running workload are never protected by a budget.
        if pod["metadata"].get("deletionTimestamp") or phase in ("Pending", "Succeeded", "Failed"):
            store.delete(
                PODS, namespace, name, grace_period=grace, preconditions=options.get("preconditions")
            )
            return _success()
        _check_budget(store, namespace, pod)
        store.delete(PODS, namespace, name, grace_period=grace, preconditions=options.get("preconditions"))
    return _success()


def _check_eviction_body(name: str, body: Any) -> None:
    """400 unless ``body`` is an Eviction of pod ``name`` in a supported version."""
    if not isinstance(body, dict) or body.get("kind") != "Eviction":
        raise errors.bad_request("body must be an Eviction")
    if body.get("apiVersion") not in EVICTION_API_VERSIONS:
        raise errors.bad_request(f"unsupported Eviction apiVersion {body.get('apiVersion')!r}")
    body_name = (body.get("metadata") or {}).get("name")
    if body_name and body_name != name:
        raise errors.bad_request("name in URL does not match name in Eviction object")


def _check_budget(store: Store, namespace: str, pod: JsonObject) -> None:
    """429 when evicting ``pod`` would break its disruption budget; 500 when several budgets select it."""
    pdbs, _ = store.list(POD_DISRUPTION_BUDGETS, namespace)
    matching = [
        p for p in pdbs if (sel := pdb_selector(p)) is not None and sel.matches(pod["metadata"].get("labels"))
    ]
    if len(matching) > 1:
        raise ApiError(
            500,
            "InternalError",
            "This pod has more than one PodDisruptionBudget, "
            "which the eviction subresource does not support.",
        )
    if matching:
        pdb = matching[0]
        budget = evaluate(store, pdb)
        allowed = (
            budget.disruptions_allowed >= 1
            if is_ready(pod)
            else budget.current_healthy >= budget.desired_healthy
        )
        if not allowed:
            raise ApiError(
                429,
                "TooManyRequests",
                VIOLATION_MESSAGE,
                {
                    "causes": [
                        {
                            "reason": "DisruptionBudget",
                            "message": f"The disruption budget {pdb['metadata']['name']} needs "
                            f"{budget.desired_healthy} healthy pods and has {budget.current_healthy} "
                            "currently",
                        }
                    ]
                },
            )


def _success() -> JsonObject:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
