"""The names of the environment variables that code outside the environment model needs: those the CDK app
(``infra/``) sets on the functions and those the functions' messages name. Only constants: the handlers
import this at their cold start.

Every variable the functions read is declared once, as a field of
``fleetwright.config.environment.FunctionEnvironment`` (its name, type and default); a name is also written
here only when other code refers to it.
"""

from __future__ import annotations

from typing import Final

# Where everything is (set by the stack on every function).
ENV_CLUSTER: Final = "FLEETWRIGHT_CLUSTER_NAME"
ENV_TABLE: Final = "FLEETWRIGHT_STATE_TABLE"
ENV_QUEUE_URL: Final = "FLEETWRIGHT_INTERRUPTION_QUEUE_URL"
ENV_INSTANCE_PROFILE: Final = "FLEETWRIGHT_NODE_INSTANCE_PROFILE"
ENV_STATE_MACHINE: Final = "FLEETWRIGHT_TERMINATION_STATE_MACHINE_ARN"
# The NodePool and EC2NodeClass documents: bundled files or an SSM parameter, and the parameter's digest
# (a NodePool change then changes every function's configuration, so Lambda replaces warm environments
# that read the old documents at their cold start).
ENV_NODEPOOLS_FILE: Final = "FLEETWRIGHT_NODEPOOLS_FILE"
ENV_NODEPOOLS_PARAMETER: Final = "FLEETWRIGHT_NODEPOOLS_PARAMETER"
ENV_NODEPOOLS_DIGEST: Final = "FLEETWRIGHT_NODEPOOLS_DIGEST"

# Provisioner options the stack sets (the others keep their defaults unless a deployment adds them).
ENV_ECONOMY: Final = "FLEETWRIGHT_ECONOMY_MODE"

# Interruption handling. The account whose events are acted on (the stack's: ``AWS::AccountId``; the region
# is Lambda's own ``AWS_REGION``).
ENV_REPLACE_ON_REBALANCE: Final = "FLEETWRIGHT_REPLACE_ON_REBALANCE"
ENV_ACCOUNT: Final = "FLEETWRIGHT_ACCOUNT_ID"

# Disruption options (the stack's ``disruption*`` settings).
ENV_MIN_SAVING_FRACTION: Final = "FLEETWRIGHT_DISRUPTION_MIN_SAVING_FRACTION"
ENV_MIN_SAVING_DOLLARS: Final = "FLEETWRIGHT_DISRUPTION_MIN_SAVING_DOLLARS"
ENV_MIN_NODE_AGE_SECONDS: Final = "FLEETWRIGHT_DISRUPTION_MIN_NODE_AGE_SECONDS"
ENV_SPOT_TO_SPOT: Final = "FLEETWRIGHT_DISRUPTION_SPOT_TO_SPOT"
ENV_DRY_RUN: Final = "FLEETWRIGHT_DISRUPTION_DRY_RUN"
ENV_NODE_REPAIR: Final = "FLEETWRIGHT_DISRUPTION_NODE_REPAIR"

# Set by Lambda, or by the stack for Powertools (the service name is the metrics' ``service`` dimension).
ENV_REGION: Final = "AWS_REGION"
ENV_SERVICE: Final = "POWERTOOLS_SERVICE_NAME"
ENV_METRICS_NAMESPACE: Final = "POWERTOOLS_METRICS_NAMESPACE"
