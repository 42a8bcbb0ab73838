"""``FleetwrightStack``: the deployable unit around :class:`~infra.autoscaler.FleetwrightAutoscaler`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_sns as sns
from constructs import Construct

from infra.autoscaler import PROVISIONER_RESERVED_CONCURRENCY, FleetwrightAutoscaler
from infra.function_network import VpcOptions
from infra.nag import acknowledge_findings
from infra.nodepools import NodePoolConfig
from infra.settings import DisruptionOptions, FunctionSize, Monitoring


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
        provisioner_reserved_concurrency: int | None = PROVISIONER_RESERVED_CONCURRENCY,
        disruption: bool = True,
        disruption_options: DisruptionOptions | None = None,
        function_sizes: Mapping[str, FunctionSize] | None = None,
        economy_mode: bool = False,
        monitoring: Monitoring | None = None,
        vpc: VpcOptions | None = None,
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
            provisioner_reserved_concurrency=provisioner_reserved_concurrency,
            disruption=disruption,
            disruption_options=disruption_options,
            function_sizes=function_sizes,
            economy_mode=economy_mode,
            monitoring=monitoring,
            vpc=vpc,
        )
        acknowledge_findings(self.autoscaler)
        a = self.autoscaler
        outputs: list[tuple[str, str, str]] = [
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
        ]
        if a.dashboard.dashboard is not None:
            outputs.append(("DashboardName", a.dashboard.dashboard.dashboard_name, "CloudWatch dashboard"))
        if a.interruption_handling is not None:
            outputs.append(
                (
                    "TerminationStateMachineArn",
                    a.interruption_handling.workflow.state_machine.state_machine_arn,
                    "Step Functions state machine that drains and terminates nodes",
                )
            )
        for function in a.functions:
            log_group = getattr(function, "log_group", None)
            if log_group is not None:
                name = function.node.id
                outputs.append(
                    (f"{name}LogGroup", log_group.log_group_name, f"Log group of the {name} function")
                )
        for name, value, description in outputs:
            CfnOutput(self, name, value=value, description=description)
