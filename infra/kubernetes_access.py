"""Kubernetes access for the controller functions: an EKS access entry per execution role.

The entry maps the role to the Kubernetes group :data:`KUBERNETES_GROUP`; what the group may do is the
ClusterRole ``fleetwright`` in ``docs/rbac.yaml`` (the manifest shown in docs/kubernetes.md), which the
operator applies once with ``kubectl apply -f docs/rbac.yaml``. EKS cannot grant a custom ClusterRole
itself, and its access policies are far broader than what the controller needs.
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import aws_eks as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

# The group bound by the ClusterRoleBinding in docs/rbac.yaml (tests/infra checks that they agree).
KUBERNETES_GROUP = "fleetwright"
RBAC_MANIFEST = Path(__file__).resolve().parent.parent / "docs" / "rbac.yaml"


def controller_access_entry(
    scope: Construct, construct_id: str, *, cluster_name: str, role: iam.IRole
) -> eks.CfnAccessEntry:
    """A ``STANDARD`` access entry putting ``role`` in :data:`KUBERNETES_GROUP` on ``cluster_name``."""
    return eks.CfnAccessEntry(
        scope,
        construct_id,
        cluster_name=cluster_name,
        principal_arn=role.role_arn,
        type="STANDARD",
        kubernetes_groups=[KUBERNETES_GROUP],
    )
