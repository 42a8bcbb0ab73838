"""Giving a node back removes only what Fleetwright's mark added: a node a person cordoned (or excluded
from load balancers) before it was marked keeps its cordon (or label) when the disruption is called off,
while a cordon Fleetwright set is always lifted."""

from __future__ import annotations

from typing import Any

from fleetwright.kube.client import KubeClient
from fleetwright.kube.cluster import (
    DISRUPTED_AT_ANNOTATION,
    EXCLUDE_FROM_LB_LABEL,
    FOUND_ON_NODE_ANNOTATION,
    KubeCluster,
)
from fleetwright.kube.config import ClusterConfig
from fleetwright.kube.resources import NODES
from fleetwright.local.apiserver import ApiServer
from fleetwright.local.apiserver import resources as emu
from tests.kube.objects import node_object

DISRUPTED = {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}


def _hand_cordoned(client: KubeClient, name: str = "n1") -> None:
    body = node_object(name)
    body["spec"]["unschedulable"] = True  # kubectl cordon
    client.create(NODES, body)


def _annotations(node: dict[str, Any]) -> dict[str, str]:
    return dict(node["metadata"].get("annotations") or {})


def test_a_node_cordoned_by_hand_stays_cordoned_when_given_back(
    client: KubeClient, cluster: KubeCluster
) -> None:
    _hand_cordoned(client)

    marked = cluster.mark_disrupted("n1")
    given_back = cluster.unmark_disrupted("n1")

    assert marked is not None and _annotations(marked)[FOUND_ON_NODE_ANNOTATION] == "unschedulable"
    assert given_back is not None
    assert given_back["spec"]["unschedulable"] is True
    assert DISRUPTED not in (given_back["spec"].get("taints") or [])
    assert EXCLUDE_FROM_LB_LABEL not in given_back["metadata"]["labels"]
    assert not {DISRUPTED_AT_ANNOTATION, FOUND_ON_NODE_ANNOTATION} & set(_annotations(given_back))


def test_a_cordon_fleetwright_set_is_lifted_even_after_repeated_marks(cluster: KubeCluster) -> None:
    cluster.client.create(NODES, node_object("n1"))

    cluster.mark_disrupted("n1")
    again = cluster.mark_disrupted("n1")  # a retried cordon step finds its own cordon: not a person's
    given_back = cluster.unmark_disrupted("n1")

    assert again is not None and FOUND_ON_NODE_ANNOTATION not in _annotations(again)
    assert given_back is not None and not given_back["spec"].get("unschedulable")


def test_a_load_balancer_exclusion_the_node_had_is_kept(client: KubeClient, cluster: KubeCluster) -> None:
    client.create(NODES, node_object("n1", labels={EXCLUDE_FROM_LB_LABEL: "true"}))

    cluster.mark_disrupted("n1")
    given_back = cluster.unmark_disrupted("n1")

    assert given_back is not None
    assert given_back["metadata"]["labels"][EXCLUDE_FROM_LB_LABEL] == "true"
    assert not given_back["spec"].get("unschedulable")


def test_a_node_marked_before_the_record_existed_is_uncordoned(
    client: KubeClient, cluster: KubeCluster
) -> None:
    # Marked by an earlier version: cordon, taint and time, and no record of what the node had before.
    body = node_object("n1", taints=[DISRUPTED])
    body["spec"]["unschedulable"] = True
    body["metadata"]["annotations"] = {DISRUPTED_AT_ANNOTATION: "2026-11-20T10:00:00Z"}
    client.create(NODES, body)

    given_back = cluster.unmark_disrupted("n1")

    assert given_back is not None and not given_back["spec"].get("unschedulable")  # never left cordoned


class CordoningClient(KubeClient):
    """A person runs ``kubectl cordon`` between the mark's read and its write (once)."""

    def __init__(self, config: ClusterConfig, apiserver: ApiServer) -> None:
        super().__init__(config, sleep=lambda _s: None)
        self.apiserver = apiserver
        self.patches = 0

    def patch(self, resource: Any, name: str, patch: Any, namespace: str | None = None, **kw: Any) -> Any:
        self.patches += 1
        if self.patches == 1:

            def cordon(node: dict[str, Any]) -> dict[str, Any]:
                node["spec"]["unschedulable"] = True
                return node

            self.apiserver.store.mutate(emu.NODES, None, name, cordon)
        return super().patch(resource, name, patch, namespace, **kw)


def test_a_cordon_racing_the_mark_is_recorded_as_the_persons(apiserver: ApiServer) -> None:
    client = CordoningClient(ClusterConfig(apiserver.url), apiserver)
    client.create(NODES, node_object("n1"))
    cluster = KubeCluster(client)

    marked = cluster.mark_disrupted("n1")
    given_back = cluster.unmark_disrupted("n1")

    assert client.patches >= 2  # the first write lost to the person's (409) and was made again
    assert marked is not None and _annotations(marked)[FOUND_ON_NODE_ANNOTATION] == "unschedulable"
    assert given_back is not None and given_back["spec"]["unschedulable"] is True
