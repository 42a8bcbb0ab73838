"""The emulator's node lifecycle controller: the taints kube-controller-manager puts on a Node from its
``Ready`` condition (TaintNodesByCondition).

While a Node's ``Ready`` condition is ``False`` it carries ``node.kubernetes.io/not-ready:NoSchedule``;
while it is ``Unknown``, ``node.kubernetes.io/unreachable:NoSchedule``; once it is ``True``, neither. A Node
without a ``Ready`` condition (a hand-written manifest) is left as it is. The scheduler
(:mod:`fleetwright.local.kube_scheduler`) then reads these taints like any other: a starting node takes
only the pods that tolerate them. The NoExecute taints of taint-based eviction are not simulated.
https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/#taint-nodes-by-condition
"""

from __future__ import annotations

import contextlib
from typing import Any

from fleetwright.local.apiserver.controllers import Controller
from fleetwright.local.apiserver.errors import ApiError
from fleetwright.local.apiserver.resources import NODES

JsonObject = dict[str, Any]

NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
_BY_STATUS = {"False": NOT_READY, "Unknown": UNREACHABLE}
_MANAGED = frozenset(_BY_STATUS.values())


def condition_taint(node: JsonObject) -> str | None:
    """The key of the NoSchedule taint ``node``'s ``Ready`` condition calls for (None: no such taint, or
    no ``Ready`` condition to judge by)."""
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return _BY_STATUS.get(str(condition.get("status")))
    return None


def _ready_known(node: JsonObject) -> bool:
    return any(c.get("type") == "Ready" for c in (node.get("status") or {}).get("conditions") or [])


def _managed(taint: JsonObject) -> bool:
    return taint.get("key") in _MANAGED and taint.get("effect") == "NoSchedule"


class NodeLifecycleController(Controller):
    """Keeps each Node's not-ready / unreachable NoSchedule taint in step with its ``Ready`` condition."""

    watches = (NODES,)

    def reconcile(self) -> None:
        """Add or remove the condition taint of every Node whose taints do not match its ``Ready``."""
        for node in self.store.list(NODES)[0]:
            if not _ready_known(node) or self._in_step(node):
                continue
            with contextlib.suppress(ApiError):  # gone or changed meanwhile: its next event brings us back
                self.store.mutate(NODES, None, node["metadata"]["name"], self._retaint)

    @staticmethod
    def _in_step(node: JsonObject) -> bool:
        wanted = condition_taint(node)
        present = [t.get("key") for t in (node.get("spec") or {}).get("taints") or [] if _managed(t)]
        return present == ([wanted] if wanted else [])

    @staticmethod
    def _retaint(node: JsonObject) -> JsonObject:
        spec = node.setdefault("spec", {})
        taints = [t for t in spec.get("taints") or [] if not _managed(t)]
        wanted = condition_taint(node)
        if wanted:
            taints.append({"key": wanted, "effect": "NoSchedule"})
        if taints:
            spec["taints"] = taints
        else:
            spec.pop("taints", None)
        return node
