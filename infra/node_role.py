"""The IAM role and instance profile of the nodes Fleetwright launches, and their EKS access entry."""

from __future__ import annotations

from aws_cdk import aws_eks as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

NODE_MANAGED_POLICIES = (
    "AmazonEKSWorkerNodePolicy",
    "AmazonEKS_CNI_Policy",
    "AmazonEC2ContainerRegistryReadOnly",
    "AmazonSSMManagedInstanceCore",
)


class NodeRole(Construct):
    """``role`` (assumed by EC2), ``instance_profile`` and ``access_entry`` (EC2_LINUX) on ``cluster_name``.

    The access entry lets kubelets using the role join the cluster; the cluster's authentication mode
    must be ``API`` or ``API_AND_CONFIG_MAP``. ``role_name`` is fixed when given, so EC2NodeClasses can
    name it before the stack exists; otherwise CloudFormation picks one (see the stack outputs).
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, cluster_name: str, role_name: str | None = None
    ) -> None:
        super().__init__(scope, construct_id)
        self.role = iam.Role(
            self,
            "Role",
            role_name=role_name,
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description=f"Nodes launched by Fleetwright for EKS cluster {cluster_name}",
            managed_policies=[
                iam.ManagedPolicy.from_aws_managed_policy_name(n) for n in NODE_MANAGED_POLICIES
            ],
        )
        self.instance_profile = iam.InstanceProfile(self, "InstanceProfile", role=self.role)
        self.access_entry = eks.CfnAccessEntry(
            self,
            "AccessEntry",
            cluster_name=cluster_name,
            principal_arn=self.role.role_arn,
            type="EC2_LINUX",
        )
