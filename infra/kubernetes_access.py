"""Kubernetes access for the controller functions: an EKS access entry per execution role.

Each built-in function's role is mapped to a Kubernetes group of its own (:data:`KUBERNETES_GROUPS`); what
each group may do is the ClusterRole of the same name in ``docs/rbac.yaml`` (the manifest shown in
docs/kubernetes.md), which the operator applies once with ``kubectl apply -f docs/rbac.yaml``. A function
added without permissions of its own is put in every group (it may do what the built-in functions do
together). EKS cannot grant a custom ClusterRole itself, and its access policies are far broader than what
the functions need.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from aws_cdk import aws_eks as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from infra.controller_policy import BUILT_IN, FunctionPermissions

# The group of each built-in function (by FunctionPermissions.name), bound by the ClusterRoleBindings in
# docs/rbac.yaml (tests/infra checks that they agree).
KUBERNETES_GROUPS = {name: f"fleetwright-{name}" for name in BUILT_IN}
RBAC_MANIFEST = Path(__file__).resolve().parent.parent / "docs" / "rbac.yaml"


def kubernetes_groups(permissions: FunctionPermissions | None) -> list[str]:
    """The groups of a function with ``permissions``: its own for a built-in function, else all of them."""
    if permissions is not None and permissions.name in KUBERNETES_GROUPS:
        return [KUBERNETES_GROUPS[permissions.name]]
    return sorted(KUBERNETES_GROUPS.values())


def controller_access_entry(
    scope: Construct,
    construct_id: str,
    *,
    cluster_name: str,
    role: iam.IRole,
    groups: Sequence[str],
) -> eks.CfnAccessEntry:
    """A ``STANDARD`` access entry putting ``role`` in ``groups`` on ``cluster_name``."""
    return eks.CfnAccessEntry(
        scope,
        construct_id,
        cluster_name=cluster_name,
        principal_arn=role.role_arn,
        type="STANDARD",
        kubernetes_groups=list(groups),
    )
