"""The disruption function reads the same NodePools as the provisioner: from the cluster when it holds
any, at every pass."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import yaml

from fleetwright.local.apiserver import ApiServer
from fleetwright.local.apiserver.karpenter import install_karpenter_crds
from tests.support.disruption import DOCUMENTS, Rig
from tests.support.termination import FakeContext


def test_a_nodepool_applied_to_the_cluster_governs_the_next_pass(
    lambda_env: tuple[Rig, ModuleType, Any],
    apiserver: ApiServer,
) -> None:
    rig, module, _ = lambda_env
    rig.node("m5.large")
    install_karpenter_crds(apiserver.store)
    # The deployment's documents consolidate empty nodes at once; the cluster's NodePool never does.
    for doc in yaml.safe_load_all(DOCUMENTS.replace("consolidateAfter: 0s", "consolidateAfter: Never")):
        plural = "nodepools" if doc["kind"] == "NodePool" else "ec2nodeclasses"
        rt = apiserver.store.registry.lookup(doc["apiVersion"].split("/")[0], "v1", plural)
        assert rt is not None
        apiserver.store.create(rt, doc)

    kept = module.handler({"id": "event-cluster-1"}, FakeContext("fleetwright-disruption"))

    assert kept["candidates"] == 1 and not kept.get("error")
    assert kept["commands"] == []  # the deployment's documents alone would remove the empty node
    assert [
        np.spec.disruption.consolidate_after for np in module.runtime.get().controller.reader.config.nodepools
    ] == ["Never"]
