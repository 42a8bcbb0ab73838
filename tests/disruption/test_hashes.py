"""Drift hashes: which NodePool and EC2NodeClass changes make existing nodes drift, and that a launch
records them."""

from __future__ import annotations

from typing import Any

from fleetwright.claims.terms import ClaimTerms, recorded_terms
from fleetwright.model.hashes import HASH_VERSION, UNVERSIONED, nodeclass_hash, nodepool_hash
from fleetwright.model.karpenter import EC2NodeClass, NodePool
from tests.support.aws import node_class
from tests.support.disruption import RigFactory, nodepool


def _pool(**changes: Any) -> NodePool:
    body = nodepool().model_dump(mode="json", by_alias=True, exclude_none=True)
    for path, value in changes.items():
        target = body
        *parents, leaf = path.split(".")
        for key in parents:
            target = target.setdefault(key, {})
        target[leaf] = value
    return NodePool.model_validate(body)


def test_nodepool_changes_that_shape_the_node_drift_it() -> None:
    base = nodepool_hash(_pool())
    assert nodepool_hash(_pool()) == base  # stable
    assert nodepool_hash(_pool(**{"spec.template.metadata.labels": {"team": "a"}})) != base
    taint = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    assert nodepool_hash(_pool(**{"spec.template.spec.taints": taint})) != base
    assert nodepool_hash(_pool(**{"spec.template.spec.startupTaints": taint})) != base


def test_editing_expire_after_or_termination_grace_period_is_nodepool_drift() -> None:
    # Karpenter: both are copied onto each NodeClaim and hashed, so an edit drifts the nodes.
    base = nodepool_hash(_pool())
    assert nodepool_hash(_pool(**{"spec.template.spec.expireAfter": "24h"})) != base
    assert nodepool_hash(_pool(**{"spec.template.spec.terminationGracePeriod": "1h"})) != base
    # The default lifetime, spelled out or left out, is the same lifetime.
    spelled = nodepool_hash(_pool(**{"spec.template.spec.expireAfter": "720h"}))
    body = _pool().model_dump(mode="json", by_alias=True, exclude_none=True)
    del body["spec"]["template"]["spec"]["expireAfter"]
    assert nodepool_hash(NodePool.model_validate(body)) == spelled


def test_claims_hashed_before_versions_compare_with_the_unversioned_digest() -> None:
    # Upgrading must drift no node: the v1 digest left expireAfter and terminationGracePeriod out.
    base = nodepool_hash(_pool(), UNVERSIONED)
    assert nodepool_hash(_pool(**{"spec.template.spec.expireAfter": "24h"}), UNVERSIONED) == base
    assert nodepool_hash(_pool(), UNVERSIONED) != nodepool_hash(_pool(), HASH_VERSION)


def test_nodepool_changes_that_do_not_shape_the_node_do_not_drift_it() -> None:
    base = nodepool_hash(_pool())
    widened = [{"key": "node.kubernetes.io/instance-type", "operator": "Exists"}]
    assert nodepool_hash(_pool(**{"spec.template.spec.requirements": widened})) == base
    assert nodepool_hash(_pool(**{"spec.weight": 50, "spec.limits": {"cpu": "100"}})) == base
    assert nodepool_hash(_pool(**{"spec.disruption.consolidateAfter": "10m"})) == base


def test_nodeclass_hash_follows_the_spec_but_not_the_selector_terms() -> None:
    base = nodeclass_hash(node_class())
    assert nodeclass_hash(node_class(userData="#!/bin/bash\necho hi\n")) != base
    assert nodeclass_hash(node_class(tags={"team": "a"})) != base
    assert nodeclass_hash(node_class(amiSelectorTerms=[{"alias": "al2023@v20240807"}])) == base
    other = EC2NodeClass.model_validate(
        {
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {
                "amiSelectorTerms": [{"alias": "al2023@latest"}],
                "subnetSelectorTerms": [{"id": "subnet-0123456789abcdef0"}],
                "securityGroupSelectorTerms": [{"id": "sg-0123456789abcdef0"}],
                "instanceProfile": "demo-node-profile",
            },
        }
    )
    assert nodeclass_hash(other) == base


def test_a_provisioning_pass_records_the_hashes_on_its_claims(make_rig: RigFactory) -> None:
    rig = make_rig()
    rig.world.pending(1)
    provisioner = rig.world.provisioner(rig.config)

    provisioner.provision()

    [claim] = rig.world.state.nodeclaims.list()
    assert claim.nodepool_hash == nodepool_hash(rig.config.nodepools[0])
    assert claim.nodeclass_hash == nodeclass_hash(rig.config.nodeclasses[0])
    assert claim.hash_version == HASH_VERSION


def test_nodeclaim_copies_expire_after_and_termination_grace_period_from_its_nodepool(
    make_rig: RigFactory,
) -> None:
    rig = make_rig(nodepool(expire_after="336h", grace="2h"))
    rig.world.pending(1)

    rig.world.provisioner(rig.config).provision()

    [claim] = rig.world.state.nodeclaims.list()
    assert (claim.expire_after, claim.termination_grace_period) == ("336h", "2h")
    assert recorded_terms(claim) == ClaimTerms(expire_after=336 * 3600, termination_grace_period=7200)


def test_launch_fields_drift_nodes_but_ip_prefix_count_does_not() -> None:
    base = nodeclass_hash(node_class())
    interfaces = [{"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"}]
    drifting: list[dict[str, Any]] = [
        {"networkInterfaces": interfaces},
        {"connectionTracking": {"udpTimeout": 30}},
        {"cpuOptions": {"nestedVirtualization": "enabled"}},
        {"placementGroupSelector": {"name": "kafka"}},
        {"context": "ctx-0123"},
        {"instanceStorePolicy": "RAID0"},
        {"blockDeviceMappings": [{"ebs": {"snapshotID": "snap-0123", "volumeInitializationRate": 100}}]},
    ]
    for change in drifting:
        assert nodeclass_hash(node_class(**change)) != base, change
    assert nodeclass_hash(node_class(ipPrefixCount=2)) == base


def test_spelling_out_the_alias_family_does_not_drift() -> None:
    # Karpenter hashes the resolved AMI family, not the field.
    base = nodeclass_hash(node_class())
    assert nodeclass_hash(node_class(amiFamily="AL2023")) == base
    assert nodeclass_hash(node_class(amiFamily="Bottlerocket", amiSelectorTerms=[{"id": "ami-0123"}])) != base


def test_capacity_reservation_selector_terms_are_not_in_the_hash() -> None:
    # Karpenter keeps reservations out of the hash and drifts per instance instead.
    base = nodeclass_hash(node_class())
    reserved = node_class(capacityReservationSelectorTerms=[{"id": "cr-0123456789abcdef0"}])
    assert nodeclass_hash(reserved) == base
