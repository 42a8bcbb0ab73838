"""The DynamoDB table holding the autoscaler's state (node claims in flight, locks, cooldowns)."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

PARTITION_KEY = "pk"
SORT_KEY = "sk"
TTL_ATTRIBUTE = "expiresAt"  # epoch seconds; DynamoDB deletes the item some time after it


class StateTable(dynamodb.Table):
    """On-demand table with ``pk``/``sk`` string keys, TTL on ``expiresAt``, PITR and AWS-managed encryption.

    It is kept when the stack is deleted (CDK's default for tables): it may hold the record of instances
    still running.
    """

    def __init__(
        self, scope: Construct, construct_id: str, *, removal_policy: RemovalPolicy = RemovalPolicy.RETAIN
    ) -> None:
        super().__init__(
            scope,
            construct_id,
            partition_key=dynamodb.Attribute(name=PARTITION_KEY, type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name=SORT_KEY, type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            time_to_live_attribute=TTL_ATTRIBUTE,
            removal_policy=removal_policy,
        )
