"""The functions' Kubernetes groups may read the NodeClaim CRD and no other CustomResourceDefinition: the
CRDs of a cluster describe other operators' APIs, which are none of Fleetwright's business."""

from __future__ import annotations

from fleetwright.claims.nodeclaim_objects import CRD_NAME
from fleetwright.local.apiserver.rbac import Attributes, Policy, User
from infra.kubernetes_access import KUBERNETES_GROUPS, RBAC_MANIFEST

CRDS = ("apiextensions.k8s.io", "customresourcedefinitions")


def _get_crd(name: str) -> Attributes:
    return Attributes(verb="get", group=CRDS[0], resource=CRDS[1], name=name)


def test_every_group_may_get_only_the_nodeclaim_crd() -> None:
    policy = Policy.load(RBAC_MANIFEST)
    allowed = {
        group: policy.allows(User(f"fleetwright-{function}", (group,)), _get_crd(CRD_NAME))
        for function, group in KUBERNETES_GROUPS.items()
    }
    # The functions that check whether the CRD is installed before writing NodeClaim objects
    # (tests/infra/test_least_privilege.py checks that each group is granted what its function uses).
    assert allowed == {
        KUBERNETES_GROUPS["provisioner"]: True,
        KUBERNETES_GROUPS["interruption"]: True,
        KUBERNETES_GROUPS["termination"]: False,
        KUBERNETES_GROUPS["disruption"]: False,
    }
    for function, group in KUBERNETES_GROUPS.items():
        user = User(f"fleetwright-{function}", (group,))
        for other in (
            "nodepools.karpenter.sh",
            "ec2nodeclasses.karpenter.k8s.aws",
            "certificates.cert-manager.io",
        ):
            assert not policy.allows(user, _get_crd(other)), (group, other)
        assert not policy.allows(user, Attributes(verb="list", group=CRDS[0], resource=CRDS[1])), group


def test_every_rule_on_crds_names_the_crds_it_covers() -> None:
    rules = [
        rule
        for role in Policy.load(RBAC_MANIFEST).cluster_roles.values()
        for rule in role
        if CRDS[1] in rule.resources or "*" in rule.resources
    ]
    assert len(rules) == 2
    assert all(rule.resource_names == {CRD_NAME} and rule.verbs == {"get"} for rule in rules)
