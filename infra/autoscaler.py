"""``FleetwrightAutoscaler``: everything Fleetwright deploys for one EKS cluster, as one construct.

Use it in your own CDK app::

    from infra.autoscaler import FleetwrightAutoscaler
    from infra.nodepools import load_nodepool_config

    autoscaler = FleetwrightAutoscaler(
        stack, "Fleetwright", cluster_name="prod", nodepools=load_nodepool_config(["nodepools/"])
    )

It deploys the provisioner (:meth:`FleetwrightAutoscaler.add_provisioner`), the interruption handling
with the termination workflow (:meth:`FleetwrightAutoscaler.add_interruption_handling`) and the disruption
function (:meth:`FleetwrightAutoscaler.add_disruption`). More controller
functions plug in through :meth:`FleetwrightAutoscaler.add_function`,
:meth:`FleetwrightAutoscaler.consume_interruptions` and :meth:`FleetwrightAutoscaler.grant_terminations`;
``with_functions=False`` leaves the built-in ones out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Annotations, Aws, Duration, Names, RemovalPolicy
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_eks as eks
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sns as sns
from constructs import Construct

# The environment variables the functions read (defined once, with the handlers' configuration).
from fleetwright.config import (
    ENV_ACCOUNT,
    ENV_CLUSTER,
    ENV_ECONOMY,
    ENV_INSTANCE_PROFILE,
    ENV_METRICS_NAMESPACE,
    ENV_NODE_ROLE,
    ENV_NODEPOOLS_DIGEST,
    ENV_NODEPOOLS_PARAMETER,
    ENV_QUEUE_URL,
    ENV_REPLACE_ON_REBALANCE,
    ENV_SERVICE,
    ENV_STATE_MACHINE,
    ENV_TABLE,
)
from fleetwright.observability.metrics import ENV_WITHHELD_METRICS
from infra import controller_metrics as cm
from infra.controller_policy import (
    DISRUPTION,
    INTERRUPTION,
    PROVISIONER,
    TERMINATION,
    ControllerPolicy,
    ControllerResources,
    FunctionPermissions,
)
from infra.dashboard import FleetwrightDashboard
from infra.function_network import FunctionNetwork, VpcOptions
from infra.interruption_queue import VISIBILITY_TIMEOUT, VISIBILITY_TO_TIMEOUT_RATIO, InterruptionQueue
from infra.kubernetes_access import controller_access_entry, kubernetes_groups
from infra.layer import ARCHITECTURE, RUNTIME, FleetwrightLayer
from infra.node_role import NodeRole
from infra.nodepool_parameter import NodePoolParameter, nodepools_digest
from infra.nodepools import NodePoolConfig
from infra.settings import DisruptionOptions, FunctionSize, Monitoring
from infra.state_table import StateTable
from infra.termination_workflow import TerminationWorkflow

LOG_RETENTION = logs.RetentionDays.ONE_MONTH
DEFAULT_TIMEOUT = Duration.minutes(1)

FUNCTIONS_DIR = Path(__file__).resolve().parent.parent / "functions"

# The provisioner runs on a one-minute schedule for up to a minute; its handler stops watching
# FLEETWRIGHT_DEADLINE_MARGIN_SECONDS (10 s) before the timeout, so invocations do not overlap and one
# reserved execution is enough. The lease in the state table still keeps two runs from launching at once.
PROVISIONER_SCHEDULE = events.Schedule.rate(Duration.minutes(1))
PROVISIONER_TIMEOUT = Duration.seconds(60)
# MB, watching or not: a watching provisioner is billed for most of every minute, and at 512 MB (0.29 vCPU)
# its pass from the batch window to CreateFleet is modelled within the 1.5 s pending → CreateFleet target
# (docs/cost.md, "Latency at 512 MB"). Clusters past 100 nodes raise it (docs/performance.md, "Sizing").
PROVISIONER_MEMORY = 512
PROVISIONER_RESERVED_CONCURRENCY = 1
# A scheduled invocation that could not start within a minute is superseded by the next one.
PROVISIONER_MAX_EVENT_AGE = Duration.seconds(60)

# The disruption function makes one pass per invocation on the same one-minute schedule. It takes no
# lease, so one reserved execution is what keeps two passes from acting on the same nodes; the timeout
# keeps a pass within its minute, and a pass that could not start is superseded by the next one.
DISRUPTION_SCHEDULE = events.Schedule.rate(Duration.minutes(1))
DISRUPTION_TIMEOUT = Duration.seconds(60)
DISRUPTION_MEMORY = 1024  # MB; consolidation simulates the scheduler over the whole cluster
DISRUPTION_RESERVED_CONCURRENCY = 1
DISRUPTION_MAX_EVENT_AGE = Duration.seconds(60)

# The interruption handler and the termination steps: short calls whatever the cluster's size.
EVENT_FUNCTION_MEMORY = 512  # MB
# Blast radius of the interruption path (docs/security.md): at most this many handler invocations at once
# (the event source mapping's MaximumConcurrency, within the handler's reserved concurrency, so pollers
# are never throttled into spending receives), and at most this many workflow steps running at once (a
# throttled step is retried by the workflow). Replacements launch one at a time under the provisioner's
# lease anyway.
INTERRUPTION_CONCURRENCY = 5
# What Lambda's SQS poller needs from the consuming function's role (the AWS Lambda developer guide's
# "Execution role permissions" for Amazon SQS).
QUEUE_CONSUMER_ACTIONS = ("sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes")
TERMINATION_STEPS_CONCURRENCY = 20


@dataclass(frozen=True, slots=True)
class InterruptionHandling:
    """What :meth:`FleetwrightAutoscaler.add_interruption_handling` adds."""

    handler: lambda_.Function  # consumes the interruption queue
    steps: lambda_.Function  # serves the termination workflow's steps
    workflow: TerminationWorkflow


@dataclass(frozen=True, slots=True)
class Disruption:
    """What :meth:`FleetwrightAutoscaler.add_disruption` adds."""

    function: lambda_.Function
    schedule: events.Rule
    alarms: list[cloudwatch.Alarm]


@dataclass(frozen=True, slots=True)
class Provisioner:
    """What :meth:`FleetwrightAutoscaler.add_provisioner` adds."""

    function: lambda_.Function
    schedule: events.Rule
    alarms: list[cloudwatch.Alarm]


class FleetwrightAutoscaler(Construct):
    """The Fleetwright autoscaler of one EKS cluster.

    Props: ``cluster_name`` (an existing EKS cluster in the stack's account and region, authentication mode
    ``API`` or ``API_AND_CONFIG_MAP``), ``nodepools`` (a validated :class:`NodePoolConfig`),
    ``node_role_name`` (IAM name of the node role; default: the one role the EC2NodeClasses name in
    ``spec.role``, else generated by CloudFormation), ``alarm_topic`` (SNS topic
    notified by every alarm), ``state_removal_policy`` (the state table is retained by default),
    ``with_functions`` (False: only the infrastructure, for apps that add their own functions),
    ``provisioner_reserved_concurrency`` (None: unreserved), ``replace_on_rebalance``, ``disruption``
    (False: no disruption function), ``disruption_options`` (its settings; default: the function's) and
    ``function_sizes`` (memory and timeout by function: ``provisioner``, ``disruption``, ``interruption``,
    ``termination``; default 1024 MB / 60 s for the disruption function, 512 MB / 60 s for the others),
    ``economy_mode`` (the provisioner makes one pass per invocation instead of watching), ``monitoring``
    (:class:`~infra.settings.Monitoring`; default ``ALARMS``, ``ESSENTIAL`` in economy mode: what
    dashboard, alarms and metrics to deploy) and ``vpc``
    (:class:`~infra.function_network.VpcOptions`: run the functions in the cluster's VPC, for clusters with
    a private endpoint only; ``network`` then holds the security groups and endpoints) and
    ``interruption_redrive_role_arns`` (roles that may send to the interruption queue besides its
    EventBridge rules, to move dead-lettered messages back; docs/security.md).

    Parts: ``layer``, ``state_table``, ``nodepool_parameter`` (the validated documents, in SSM),
    ``interruption`` (``queue``, ``dead_letter_queue``, ``rules``, ``delivery_dead_letter_queue``),
    ``node_role`` (``role``, ``instance_profile``, ``access_entry``), ``function_policies`` (each
    function's own managed policy, by construct id; ``controller_policy``, every built-in function's
    statements together, is made on first use), ``dashboard`` (``dashboard``, ``alarms``, ``dlq_alarm``),
    ``provisioner``,
    ``interruption_handling`` and ``disruption`` (None without them); ``functions`` lists the functions
    added so far and
    ``access_entries`` the EKS access entries of their roles.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        cluster_name: str,
        nodepools: NodePoolConfig,
        node_role_name: str | None = None,
        alarm_topic: sns.ITopic | None = None,
        state_removal_policy: RemovalPolicy = RemovalPolicy.RETAIN,
        with_functions: bool = True,
        provisioner_reserved_concurrency: int | None = PROVISIONER_RESERVED_CONCURRENCY,
        replace_on_rebalance: bool = False,
        disruption: bool = True,
        disruption_options: DisruptionOptions | None = None,
        function_sizes: Mapping[str, FunctionSize] | None = None,
        economy_mode: bool = False,
        monitoring: Monitoring | None = None,
        vpc: VpcOptions | None = None,
        interruption_redrive_role_arns: Sequence[str] = (),
    ) -> None:
        super().__init__(scope, construct_id)
        self.cluster_name = cluster_name
        self.function_sizes = dict(function_sizes or {})
        self.economy_mode = economy_mode
        self.monitoring = monitoring if monitoring is not None else Monitoring.default(economy_mode)
        self.network = (
            FunctionNetwork(self, "Network", options=vpc, cluster_name=cluster_name)
            if vpc is not None
            else None
        )
        self.nodepools = nodepools
        self.functions: list[lambda_.IFunction] = []
        self.access_entries: dict[str, eks.CfnAccessEntry] = {}  # by the role's construct path
        self.provisioner: Provisioner | None = None
        self.interruption_handling: InterruptionHandling | None = None
        self.disruption: Disruption | None = None
        self.termination_starters: list[lambda_.Function] = []  # see grant_terminations
        self.layer = FleetwrightLayer(self, "Layer")
        self.state_table = StateTable(self, "StateTable", removal_policy=state_removal_policy)
        self.interruption = InterruptionQueue(
            self, "Interruption", redrive_role_arns=interruption_redrive_role_arns
        )
        self.node_role = NodeRole(
            self, "Node", cluster_name=cluster_name, role_name=self._node_role_name(node_role_name)
        )
        self.nodepool_parameter = NodePoolParameter(
            self, "NodePools", cluster_name=cluster_name, config=nodepools
        )
        self.controller_resources = ControllerResources(
            cluster_name=cluster_name,
            node_role=self.node_role.role,
            table=self.state_table,
            nodepool_parameter=self.nodepool_parameter,
        )
        # Each built-in function's own policy, by function; the policy of every built-in function together
        # is made only when asked for (grant_controller without permissions, controller_policy).
        self.function_policies: dict[str, ControllerPolicy] = {}
        self._controller_policy: ControllerPolicy | None = None
        if alarm_topic is None:
            Annotations.of(self).add_warning_v2(
                "fleetwright:no-alarm-topic",
                "no alarm topic (context alarmTopicArn, or alarm_topic): the alarms (dead-lettered or "
                "rejected interruption events, failed terminations, failing passes) notify nobody and show "
                "only in the CloudWatch console.",
            )
        self.dashboard = FleetwrightDashboard(
            self,
            "Monitoring",
            cluster_name=cluster_name,
            queue=self.interruption.queue,
            dead_letter_queue=self.interruption.dead_letter_queue,
            delivery_dead_letter_queue=self.interruption.delivery_dead_letter_queue,
            table=self.state_table,
            alarm_topic=alarm_topic,
            level=self.monitoring.value,
        )
        if with_functions:
            self.provisioner = self.add_provisioner(reserved_concurrency=provisioner_reserved_concurrency)
            self.interruption_handling = self.add_interruption_handling(
                replace_on_rebalance=replace_on_rebalance
            )
            if disruption:
                self.disruption = self.add_disruption(disruption_options)
        self.dashboard.add_overview()

    def _node_role_name(self, requested: str | None) -> str | None:
        """``requested``, else the one role the EC2NodeClasses name; warns about roles nodes cannot use."""
        wanted = self.nodepools.node_roles()
        name = requested if requested is not None else (next(iter(wanted)) if len(wanted) == 1 else None)
        for role in sorted(wanted - {name}):
            Annotations.of(self).add_warning_v2(
                "fleetwright:node-role",
                f"an EC2NodeClass names role {role!r}, which is not the node role this stack deploys "
                f"({name or 'generated name, see output NodeRoleName'}): iam:PassRole is refused for it and "
                "it has no EKS access entry. Use one role in every EC2NodeClass, or set nodeRoleName.",
            )
        return name

    def _size(self, name: str, memory_mb: int, timeout: Duration) -> tuple[int, Duration]:
        """The memory and timeout of built-in function ``name``: ``function_sizes``, else the defaults."""
        size = self.function_sizes.get(name, FunctionSize())
        return (
            size.memory_mb or memory_mb,
            Duration.seconds(size.timeout_seconds) if size.timeout_seconds else timeout,
        )

    @property
    def function_environment(self) -> dict[str, str]:
        """The environment variables that tell a handler where everything is."""
        return {
            ENV_CLUSTER: self.cluster_name,
            ENV_TABLE: self.state_table.table_name,
            ENV_QUEUE_URL: self.interruption.queue.queue_url,
            ENV_NODE_ROLE: self.node_role.role.role_name,
            ENV_INSTANCE_PROFILE: self.node_role.instance_profile.instance_profile_name,
            ENV_NODEPOOLS_PARAMETER: self.nodepool_parameter.parameter_name,
            ENV_NODEPOOLS_DIGEST: nodepools_digest(self.nodepools),
        }

    @property
    def controller_policy(self) -> ControllerPolicy:
        """The policy of every built-in function together (made on first use): for functions added with
        :meth:`add_function` without ``permissions`` and roles of your own."""
        if self._controller_policy is None:
            self._controller_policy = ControllerPolicy(
                self, "ControllerPolicy", resources=self.controller_resources
            )
        return self._controller_policy

    @property
    def controller_policies(self) -> list[ControllerPolicy]:
        """Every policy made so far: the functions' own, then the controller policy if it was made."""
        made = [self._controller_policy] if self._controller_policy is not None else []
        return [*self.function_policies.values(), *made]

    def grant_controller(
        self, role: iam.IRole, permissions: FunctionPermissions | None = None, construct_id: str | None = None
    ) -> ControllerPolicy:
        """Give ``role`` a policy: one of its own with ``permissions`` (named ``<construct_id>Policy``),
        else :attr:`controller_policy`."""
        if permissions is None:
            policy = self.controller_policy
        else:
            name = construct_id or Names.unique_id(role)
            policy = ControllerPolicy(
                self, f"{name}Policy", resources=self.controller_resources, permissions=permissions
            )
            self.function_policies[name] = policy
        role.add_managed_policy(policy)
        return policy

    def grant_kubernetes(
        self,
        role: iam.IRole,
        construct_id: str | None = None,
        permissions: FunctionPermissions | None = None,
    ) -> eks.CfnAccessEntry:
        """An EKS access entry putting ``role`` in the Kubernetes group of the built-in function
        ``permissions`` describe, else in every function's group (docs/rbac.yaml); one per role, however
        many functions share it."""
        key = role.node.path
        if key not in self.access_entries:
            self.access_entries[key] = controller_access_entry(
                self,
                f"{construct_id or Names.unique_id(role)}AccessEntry",
                cluster_name=self.cluster_name,
                role=role,
                groups=kubernetes_groups(permissions),
            )
        return self.access_entries[key]

    def add_function(
        self,
        construct_id: str,
        *,
        handler: str,
        code: lambda_.Code,
        description: str,
        timeout: Duration = DEFAULT_TIMEOUT,
        memory_size: int = 512,
        environment: Mapping[str, str] | None = None,
        reserved_concurrency: int | None = None,
        retry_attempts: int | None = None,
        max_event_age: Duration | None = None,
        error_alarm: bool = True,
        permissions: FunctionPermissions | None = None,
    ) -> lambda_.Function:
        """A controller function: arm64, the shared layer, its own execution role (its policy: one with
        ``permissions`` when given, else the controller policy; writing to its log group; an EKS access
        entry), the common environment (plus ``environment``), a log
        group kept one month, a dashboard row and (unless ``error_alarm`` is False) an error alarm; in the
        VPC's subnets when the autoscaler has ``vpc``.

        ``reserved_concurrency``, ``retry_attempts`` and ``max_event_age`` are Lambda's own settings (the
        last two for asynchronous invocations).
        """
        log_group = logs.LogGroup(self, f"{construct_id}Logs", retention=LOG_RETENTION)
        # An explicit role instead of CDK's default one: the default attaches the AWS managed
        # AWSLambdaBasicExecutionRole (logs of every function in the account); this one writes only here.
        role = iam.Role(
            self,
            f"{construct_id}Role",
            assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description=f"Fleetwright {construct_id} function of EKS cluster {self.cluster_name}",
        )
        log_group.grant_write(role)
        function = lambda_.Function(
            self,
            construct_id,
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler=handler,
            code=code,
            description=description,
            timeout=timeout,
            memory_size=memory_size,
            layers=[self.layer],
            environment={**self.function_environment, **(environment or {})},
            log_group=log_group,
            role=role,
            reserved_concurrent_executions=reserved_concurrency,
            retry_attempts=retry_attempts,
            max_event_age=max_event_age,
        )
        if self.network is not None:
            self.network.attach(function)
        self.register_function(function, error_alarm=error_alarm, permissions=permissions)
        return function

    def register_function(
        self,
        function: lambda_.IFunction,
        *,
        error_alarm: bool = True,
        permissions: FunctionPermissions | None = None,
    ) -> None:
        """Give a function (built here or elsewhere) a policy (:meth:`grant_controller`) and Kubernetes
        access through its role; add it to the dashboard and, unless ``error_alarm`` is False, alarm on its
        errors."""
        if function.role is not None:
            self.grant_controller(function.role, permissions, function.node.id)
            self.grant_kubernetes(function.role, function.node.id, permissions)
        self.dashboard.add_function_widgets(function)
        if error_alarm:
            self.dashboard.add_alarm(
                function.metric_errors(period=Duration.minutes(5)).create_alarm(
                    self,
                    f"{function.node.id}Errors",
                    alarm_description=f"{function.node.id} failed (Lambda Errors > 0 over 5 minutes)",
                    threshold=1,
                    evaluation_periods=1,
                    comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
                    treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
                )
            )
        self.functions.append(function)

    def consume_interruptions(
        self,
        function: lambda_.IFunction,
        batch_size: int = 10,
        max_concurrency: int | None = INTERRUPTION_CONCURRENCY,
    ) -> None:
        """Deliver the interruption queue's messages to ``function`` (reporting partial batch failures), at
        most ``max_concurrency`` invocations at once (None: as many as Lambda scales to; keep it within the
        function's reserved concurrency).

        The queue's visibility timeout must be at least six times the function's timeout (AWS's guidance
        for Lambda event sources), or a message still being handled would be delivered again.
        """
        timeout = getattr(function, "timeout", None)
        limit = VISIBILITY_TIMEOUT.to_seconds() / VISIBILITY_TO_TIMEOUT_RATIO
        if isinstance(timeout, Duration) and timeout.to_seconds() > limit:
            raise ValueError(
                f"{function.node.id}: timeout {timeout.to_seconds():.0f} s exceeds the interruption queue's "
                f"visibility timeout ({VISIBILITY_TIMEOUT.to_seconds():.0f} s) "
                f"/ {VISIBILITY_TO_TIMEOUT_RATIO}"
            )
        queue = self.interruption.queue
        # What the event source mapping's poller does with the function's role, and no more (CDK's
        # SqsEventSource would also grant ChangeMessageVisibility and GetQueueUrl, which it never calls).
        queue.grant(function, *QUEUE_CONSUMER_ACTIONS)
        function.add_event_source_mapping(
            # SqsEventSource's id, so the mapping keeps its logical id.
            f"SqsEventSource:{Names.node_unique_id(queue.node)}",
            event_source_arn=queue.queue_arn,
            batch_size=batch_size,
            report_batch_item_failures=True,
            max_concurrency=max_concurrency,
        )

    def add_provisioner(
        self, *, reserved_concurrency: int | None = PROVISIONER_RESERVED_CONCURRENCY
    ) -> Provisioner:
        """The provisioner (docs/provisioner.md) on a one-minute EventBridge schedule, with alarms on failing
        passes, on instances that never register and (above ``Monitoring.ESSENTIAL``) on invocations near
        their timeout or memory."""
        self.dashboard.add_section("Provisioning")
        self.dashboard.add_provisioning_widgets()
        alarms = self.dashboard.add_provisioning_alarms()
        memory, timeout = self._size("provisioner", PROVISIONER_MEMORY, PROVISIONER_TIMEOUT)
        function = self.add_function(
            "Provisioner",
            handler="handler.handler",
            code=lambda_.Code.from_asset(str(FUNCTIONS_DIR / "provisioner")),
            description="Fleetwright provisioner (launches nodes for unschedulable pods)",
            timeout=timeout,
            memory_size=memory,
            environment={
                **self._service_environment(cm.PROVISIONER_SERVICE),
                ENV_ECONOMY: "true" if self.economy_mode else "false",
            },
            reserved_concurrency=reserved_concurrency,
            # The next scheduled invocation is the retry.
            retry_attempts=0,
            max_event_age=PROVISIONER_MAX_EVENT_AGE,
            permissions=PROVISIONER,
        )
        if self.monitoring is not Monitoring.ESSENTIAL:
            alarms.append(self.dashboard.add_limit_alarm("Provisioner", cm.PROVISIONER_SERVICE))
        schedule = events.Rule(
            self,
            "ProvisionerSchedule",
            description=f"Runs the Fleetwright provisioner of EKS cluster {self.cluster_name}",
            schedule=PROVISIONER_SCHEDULE,
            targets=[self._schedule_target(function)],
        )
        return Provisioner(function, schedule, alarms)

    def add_interruption_handling(self, *, replace_on_rebalance: bool = False) -> InterruptionHandling:
        """The interruption handler (consuming the queue), the termination workflow and its step function,
        and the workflow's failure alarm (docs/termination.md)."""
        self.dashboard.add_section("Interruptions and node terminations")
        self.dashboard.add_interruption_widgets()
        self.dashboard.add_interruption_alarms()
        steps_memory, steps_timeout = self._size("termination", EVENT_FUNCTION_MEMORY, DEFAULT_TIMEOUT)
        handler_memory, handler_timeout = self._size("interruption", EVENT_FUNCTION_MEMORY, DEFAULT_TIMEOUT)
        steps = self.add_function(
            "TerminationSteps",
            handler="handler.handler",
            code=lambda_.Code.from_asset(str(FUNCTIONS_DIR / "termination")),
            description="Fleetwright termination workflow steps (cordon, drain, terminate, clean up)",
            timeout=steps_timeout,
            memory_size=steps_memory,
            environment=self._service_environment(cm.TERMINATION_SERVICE),
            reserved_concurrency=TERMINATION_STEPS_CONCURRENCY,
            # Its errors are the workflow's to retry (TransientError) or to report (the failure alarm).
            error_alarm=False,
            permissions=TERMINATION,
        )
        workflow = TerminationWorkflow(self, "TerminationWorkflow", step_function=steps)
        self.dashboard.add_alarm(workflow.failure_alarm)
        self.dashboard.add_alarm(workflow.execution_alarm)
        self.dashboard.add_workflow_widgets(
            workflow.state_machine, workflow.failure_alarm, workflow.execution_alarm
        )
        handler = self.add_function(
            "InterruptionHandler",
            handler="handler.handler",
            code=lambda_.Code.from_asset(str(FUNCTIONS_DIR / "interruption")),
            description="Fleetwright interruption handler (Spot warnings, rebalance, state changes, Health)",
            timeout=handler_timeout,
            memory_size=handler_memory,
            environment={
                **self._service_environment(cm.INTERRUPTION_SERVICE),
                ENV_REPLACE_ON_REBALANCE: "true" if replace_on_rebalance else "false",
                # Only this account's events are acted on (the region is Lambda's AWS_REGION).
                ENV_ACCOUNT: Aws.ACCOUNT_ID,
            },
            reserved_concurrency=INTERRUPTION_CONCURRENCY,
            permissions=INTERRUPTION,
        )
        handling = InterruptionHandling(handler, steps, workflow)
        self.interruption_handling = handling
        self.grant_terminations(handler)
        self.consume_interruptions(handler)
        return handling

    def add_disruption(self, options: DisruptionOptions | None = None) -> Disruption:
        """The disruption function (docs/disruption.md) on a one-minute EventBridge schedule, one pass at a
        time: it may start termination workflows (:meth:`grant_terminations`); launching replacements,
        terminating orphaned instances and deleting launch templates (only those tagged for this cluster)
        come with its own policy (``DISRUPTION``). Alarms on failing passes (and, above
        ``Monitoring.ESSENTIAL``, near its limits). Needs :meth:`add_interruption_handling` first (the
        termination workflow)."""
        if self.interruption_handling is None:
            raise ValueError("add_disruption needs the termination workflow: call add_interruption_handling")
        self.dashboard.add_section("Disruption")
        self.dashboard.add_disruption_widgets()
        alarms = self.dashboard.add_disruption_alarms()
        memory, timeout = self._size("disruption", DISRUPTION_MEMORY, DISRUPTION_TIMEOUT)
        function = self.add_function(
            "Disruption",
            handler="handler.handler",
            code=lambda_.Code.from_asset(str(FUNCTIONS_DIR / "disruption")),
            description="Fleetwright disruption (consolidation, drift, expiration, garbage collection)",
            timeout=timeout,
            memory_size=memory,
            environment={
                **self._service_environment(cm.DISRUPTION_SERVICE),
                **(options or DisruptionOptions()).environment(),
            },
            reserved_concurrency=DISRUPTION_RESERVED_CONCURRENCY,
            # The next scheduled invocation is the retry.
            retry_attempts=0,
            max_event_age=DISRUPTION_MAX_EVENT_AGE,
            permissions=DISRUPTION,
        )
        if self.monitoring is not Monitoring.ESSENTIAL:
            alarms.append(self.dashboard.add_limit_alarm("Disruption", cm.DISRUPTION_SERVICE))
        self.grant_terminations(function)
        # The sweep lists the workflow's running executions to find nodes nobody is working on.
        self.interruption_handling.workflow.state_machine.grant(function, "states:ListExecutions")
        schedule = events.Rule(
            self,
            "DisruptionSchedule",
            description=f"Runs the Fleetwright disruption function of EKS cluster {self.cluster_name}",
            schedule=DISRUPTION_SCHEDULE,
            targets=[self._schedule_target(function)],
        )
        self.disruption = Disruption(function, schedule, alarms)
        return self.disruption

    def _schedule_target(self, function: lambda_.IFunction) -> targets.LambdaFunction:
        """A schedule's target: retried twice within a minute (the next tick is a minute later), and what
        EventBridge could not deliver even so (the function deleted, its permission removed) kept in the
        rules' delivery dead-letter queue, which the dead-letter alarm watches."""
        return targets.LambdaFunction(
            function,
            retry_attempts=2,
            max_event_age=Duration.minutes(1),
            dead_letter_queue=self.interruption.delivery_dead_letter_queue,
        )

    def grant_terminations(self, function: lambda_.Function) -> None:
        """Let ``function`` start and look up termination workflows (``states:StartExecution`` on the
        state machine, ``states:DescribeExecution`` on its executions) and tell it the state machine's ARN
        (``FLEETWRIGHT_TERMINATION_STATE_MACHINE_ARN``). Needs :meth:`add_interruption_handling` first."""
        if self.interruption_handling is None:
            raise ValueError(
                "grant_terminations needs the termination workflow: call add_interruption_handling"
            )
        machine = self.interruption_handling.workflow.state_machine
        function.add_environment(ENV_STATE_MACHINE, machine.state_machine_arn)
        machine.grant_start_execution(function)
        machine.grant_execution(function, "states:DescribeExecution")
        self.termination_starters.append(function)

    def _service_environment(self, service: str) -> dict[str, str]:
        """Powertools' service name (the ``service`` metric dimension) and the metrics namespace; below
        ``Monitoring.FULL``, the series the monitoring level leaves out (``controller_metrics.WITHHELD``)."""
        environment = {ENV_SERVICE: service, ENV_METRICS_NAMESPACE: cm.NAMESPACE}
        withheld = cm.WITHHELD[self.monitoring.value]
        if withheld:
            environment[ENV_WITHHELD_METRICS] = ",".join(withheld)
        return environment
