"""Running the controller functions inside the cluster's VPC (clusters with a private API endpoint only).

A function attached to subnets reaches nothing outside its VPC unless the subnets route there, so it needs
the EKS API server's private endpoint and, without a NAT route, a VPC endpoint for every AWS API it calls.
The services below are the clients the layer builds (``fleetwright.aws.clients``, the state table, the
Step Functions starters). Not listed, on purpose: SQS (Lambda's event source mapping polls the
interruption queue, the handler never calls SQS), CloudWatch Logs and metrics (Lambda ships the logs and
the EMF lines; no API call), STS (the Kubernetes token is a presigned URL made without a call), IAM (no
VPC endpoint exists: EC2NodeClasses using ``role`` need a NAT route for the instance profile calls, or
use ``instanceProfile``, e.g. the stack's output ``NodeInstanceProfileName``) and the Pricing API (only in
us-east-1; without it the functions use the on-demand price table shipped in the layer).
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Aws, CfnResource
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

# Interface endpoints the functions need (service names after com.amazonaws.<region>.).
INTERFACE_ENDPOINT_SERVICES = ("ec2", "ssm", "eks", "states")
# The state table is reached through a gateway endpoint (route table entries, no network interface).
GATEWAY_ENDPOINT_SERVICES = ("dynamodb",)
HTTPS = 443
# What Lambda needs to attach a function to subnets (the actions of AWSLambdaVPCAccessExecutionRole).
ATTACH_ACTIONS = (
    "ec2:CreateNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "ec2:DeleteNetworkInterface",
    "ec2:AssignPrivateIpAddresses",
    "ec2:UnassignPrivateIpAddresses",
)


@dataclass(frozen=True, slots=True)
class VpcOptions:
    """Where the functions run: ``subnet_ids`` (private subnets that reach the cluster's endpoint) in
    ``vpc_id``; ``security_group_ids`` (default: one the stack creates, HTTPS out only);
    ``cluster_security_group_id`` (the stack lets the functions' groups reach port 443 on it); and
    ``create_endpoints`` (interface endpoints in the subnets, a DynamoDB gateway endpoint on
    ``route_table_ids``)."""

    subnet_ids: tuple[str, ...]
    vpc_id: str | None = None
    security_group_ids: tuple[str, ...] = ()
    cluster_security_group_id: str | None = None
    create_endpoints: bool = False
    route_table_ids: tuple[str, ...] = ()

    def problems(self) -> list[str]:
        """What is missing for this configuration to deploy."""
        found = []
        if not self.subnet_ids:
            found.append("vpcSubnetIds: at least one subnet is needed")
        if not self.vpc_id and (not self.security_group_ids or self.create_endpoints):
            found.append("vpcId is needed to create a security group or VPC endpoints")
        if self.create_endpoints and not self.route_table_ids:
            found.append("createVpcEndpoints needs vpcRouteTableIds (the DynamoDB gateway endpoint's routes)")
        return found


class FunctionNetwork(Construct):
    """The functions' security groups (``security_group_ids``), the policy that lets Lambda attach them to
    the subnets (``attach_policy``) and, when asked, the VPC endpoints (``endpoints``)."""

    def __init__(
        self, scope: Construct, construct_id: str, *, options: VpcOptions, cluster_name: str
    ) -> None:
        super().__init__(scope, construct_id)
        problems = options.problems()
        if problems:
            raise ValueError("; ".join(problems))
        self.options = options
        self.security_group: ec2.CfnSecurityGroup | None = None
        if options.security_group_ids:
            self.security_group_ids = list(options.security_group_ids)
        else:
            # HTTPS out only: the cluster's private endpoint and the VPC endpoints (DNS goes to the VPC
            # resolver, which security groups do not filter). Nothing comes in.
            self.security_group = ec2.CfnSecurityGroup(
                self,
                "SecurityGroup",
                group_description=f"Fleetwright functions of EKS cluster {cluster_name}",
                vpc_id=str(options.vpc_id),
                security_group_egress=[
                    ec2.CfnSecurityGroup.EgressProperty(
                        ip_protocol="tcp",
                        from_port=HTTPS,
                        to_port=HTTPS,
                        cidr_ip="0.0.0.0/0",
                        description="HTTPS to the cluster endpoint and the AWS APIs (VPC endpoints)",
                    )
                ],
            )
            self.security_group_ids = [self.security_group.attr_group_id]
        if options.cluster_security_group_id:
            for i, group in enumerate(self.security_group_ids):
                ec2.CfnSecurityGroupIngress(
                    self,
                    f"ClusterEndpointIngress{i}",
                    group_id=options.cluster_security_group_id,
                    ip_protocol="tcp",
                    from_port=HTTPS,
                    to_port=HTTPS,
                    source_security_group_id=group,
                    description="Fleetwright functions to the Kubernetes API server",
                )
        self.attach_policy = iam.ManagedPolicy(
            self,
            "AttachPolicy",
            description=f"Lets Lambda attach the Fleetwright functions of {cluster_name} to their subnets",
            statements=[iam.PolicyStatement(actions=list(ATTACH_ACTIONS), resources=["*"])],
        )
        self.endpoints: dict[str, ec2.CfnVPCEndpoint] = {}
        if options.create_endpoints:
            self._add_endpoints(options, cluster_name)

    def _add_endpoints(self, options: VpcOptions, cluster_name: str) -> None:
        endpoint_group = ec2.CfnSecurityGroup(
            self,
            "EndpointSecurityGroup",
            group_description=f"VPC endpoints of the Fleetwright functions of EKS cluster {cluster_name}",
            vpc_id=str(options.vpc_id),
            security_group_ingress=[
                ec2.CfnSecurityGroup.IngressProperty(
                    ip_protocol="tcp",
                    from_port=HTTPS,
                    to_port=HTTPS,
                    source_security_group_id=group,
                    description="HTTPS from the Fleetwright functions",
                )
                for group in self.security_group_ids
            ],
            # No traffic out (the rule CDK writes for a group without egress): an endpoint only answers.
            security_group_egress=[
                ec2.CfnSecurityGroup.EgressProperty(
                    ip_protocol="icmp", from_port=252, to_port=86, cidr_ip="255.255.255.255/32"
                )
            ],
        )
        for service in INTERFACE_ENDPOINT_SERVICES:
            self.endpoints[service] = ec2.CfnVPCEndpoint(
                self,
                f"{service.capitalize()}Endpoint",
                vpc_id=str(options.vpc_id),
                service_name=f"com.amazonaws.{Aws.REGION}.{service}",
                vpc_endpoint_type="Interface",
                subnet_ids=list(options.subnet_ids),
                security_group_ids=[endpoint_group.attr_group_id],
                private_dns_enabled=True,
            )
        for service in GATEWAY_ENDPOINT_SERVICES:
            self.endpoints[service] = ec2.CfnVPCEndpoint(
                self,
                f"{service.capitalize()}Endpoint",
                vpc_id=str(options.vpc_id),
                service_name=f"com.amazonaws.{Aws.REGION}.{service}",
                vpc_endpoint_type="Gateway",
                route_table_ids=list(options.route_table_ids),
            )

    def attach(self, function: lambda_.Function) -> None:
        """Run ``function`` in the subnets with the security groups."""
        if function.role is not None:
            function.role.add_managed_policy(self.attach_policy)
        resource = function.node.default_child
        assert isinstance(resource, CfnResource)
        resource.add_property_override(
            "VpcConfig",
            {"SubnetIds": list(self.options.subnet_ids), "SecurityGroupIds": list(self.security_group_ids)},
        )
        # Lambda checks the attach permissions when it creates the function.
        resource.node.add_dependency(self.attach_policy)
