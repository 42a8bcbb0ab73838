"""``FleetwrightStack``: the deployable unit around :class:`~infra.autoscaler.FleetwrightAutoscaler`."""

from __future__ import annotations

from typing import Any

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_sns as sns
from constructs import Construct

from infra.autoscaler import FleetwrightAutoscaler
from infra.nag import acknowledge_findings
from infra.nodepools import NodePoolConfig


class FleetwrightStack(Stack):
    """One autoscaler, its cdk-nag acknowledgements and the outputs an operator needs."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster_name: str,
        nodepools: NodePoolConfig,
        node_role_name: str | None = None,
        alarm_topic_arn: str | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("description", f"Fleetwright node autoscaler for EKS cluster {cluster_name}")
        super().__init__(scope, construct_id, **kwargs)
        topic = sns.Topic.from_topic_arn(self, "AlarmTopic", alarm_topic_arn) if alarm_topic_arn else None
        self.autoscaler = FleetwrightAutoscaler(
            self,
            "Fleetwright",
            cluster_name=cluster_name,
            nodepools=nodepools,
            node_role_name=node_role_name,
            alarm_topic=topic,
        )
        acknowledge_findings(self.autoscaler)
        a = self.autoscaler
        for name, value, description in (
            ("NodeRoleName", a.node_role.role.role_name, "IAM role for EC2NodeClass spec.role"),
            ("NodeRoleArn", a.node_role.role.role_arn, "IAM role of the nodes (has an EKS access entry)"),
            (
                "NodeInstanceProfileName",
                a.node_role.instance_profile.instance_profile_name,
                "Instance profile for EC2NodeClass spec.instanceProfile",
            ),
            ("StateTableName", a.state_table.table_name, "DynamoDB table with the autoscaler's state"),
            ("InterruptionQueueUrl", a.interruption.queue.queue_url, "SQS queue of interruption events"),
            (
                "NodePoolsParameterName",
                a.nodepool_parameter.parameter_name,
                "SSM parameter with the NodePools",
            ),
            ("ControllerPolicyArn", a.controller_policy.managed_policy_arn, "Policy of the controller"),
        ):
            CfnOutput(self, name, value=value, description=description)
