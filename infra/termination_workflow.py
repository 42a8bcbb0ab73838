"""The termination workflow: a Step Functions state machine whose Task states all invoke one Lambda (the step
handler in ``functions/termination``), naming the step in the payload.

::

    Cordon → ReplacementWanted? ─yes→ AwaitReplacement → ReplacementReady? ─no→ WaitForReplacement ─┐
               │no                        ↑                  │yes                                    │
               ↓                          └──────────────────┼───────────────────────────────────────┘
             Drain ←──── WaitBetweenPasses ←─no── Drained? ←─┘ (Drain loops until done)
                                                     │  └─abandoned→ DisruptionCalledOff (Succeed)
                                                     │yes
                                                     ↓
             Terminate → InstanceGone? ─no→ WaitForShutdown → CheckInstance ─┐
                            │yes  ↑──────────────────────────────────────────┘
                            ↓
                         DeleteNode → FinalizeClaim → Terminated (Succeed)

    any Task's error (after retries) → RecordFailure → TerminationFailed (Fail)

Wait durations come from the input (``drainIntervalSeconds``, ``pollSeconds``; the first step fills in
5 s defaults), so tests run the same definition with 0 s waits. ``TransientError`` is retried with
exponential backoff; every other error is caught into ``$.error`` and ends in the failure state after the
``record_failure`` step has left a Warning event on the Node and raised the ``TerminationFailures`` metric,
which :attr:`TerminationWorkflow.failure_alarm` watches.
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from infra import controller_metrics as cm

METRICS_NAMESPACE = cm.NAMESPACE
STEP_SERVICE = cm.TERMINATION_SERVICE  # the step handler's Powertools service (a metric dimension)
FAILURE_METRIC = cm.TERMINATION_FAILURES
TRANSIENT_ERROR = "TransientError"
DEFAULT_TIMEOUT = Duration.hours(24)
DEFAULT_RETRY_INTERVAL = Duration.seconds(2)


class TerminationWorkflow(Construct):
    """``state_machine`` (standard, logged, traced), ``failure_metric``, ``failure_alarm`` (a step
    recorded a failure) and ``execution_alarm`` (an execution failed, timed out or was aborted).

    Props: ``step_function`` (the Lambda serving every step), ``retry_interval``/``retry_attempts`` for
    ``TransientError`` (doubling each time), ``timeout`` of a whole execution (a scheduled change may be
    hours away) and ``log_removal_policy`` of the execution log group.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        step_function: lambda_.IFunction,
        retry_interval: Duration = DEFAULT_RETRY_INTERVAL,
        retry_attempts: int = 5,
        timeout: Duration = DEFAULT_TIMEOUT,
        log_removal_policy: RemovalPolicy = RemovalPolicy.DESTROY,
    ) -> None:
        super().__init__(scope, construct_id)
        self.step_function = step_function

        def task(state_id: str, step: str) -> tasks.LambdaInvoke:
            invoke = tasks.LambdaInvoke(
                self,
                state_id,
                lambda_function=step_function,
                payload=sfn.TaskInput.from_object({"step": step, "state": sfn.JsonPath.entire_payload}),
                payload_response_only=True,  # the step's return value is the new state
                retry_on_service_exceptions=True,
            )
            invoke.add_retry(
                errors=[TRANSIENT_ERROR],
                interval=retry_interval,
                backoff_rate=2,
                max_attempts=retry_attempts,
            )
            return invoke

        failed = sfn.Fail(
            self,
            "TerminationFailed",
            comment="The node could not be terminated; the Node's events and the logs say why.",
            error_path="$.failure.error",
            cause_path="$.failure.cause",
        )
        unrecorded = sfn.Fail(
            self,
            "TerminationFailedUnrecorded",
            error="TerminationFailed",
            cause="The termination failed and the failure could not be recorded; see the execution history.",
        )
        record_failure = task("RecordFailure", "record_failure")
        record_failure.add_catch(unrecorded, errors=["States.ALL"], result_path="$.recordError")
        record_failure.next(failed)

        cordon = task("Cordon", "cordon")
        await_replacement = task("AwaitReplacement", "await_replacement")
        drain = task("Drain", "drain")
        terminate = task("Terminate", "terminate")
        check_instance = task("CheckInstance", "check_instance")
        delete_node = task("DeleteNode", "delete_node")
        finalize_claim = task("FinalizeClaim", "finalize_claim")
        for step in (
            cordon,
            await_replacement,
            drain,
            terminate,
            check_instance,
            delete_node,
            finalize_claim,
        ):
            step.add_catch(record_failure, errors=["States.ALL"], result_path="$.error")

        drain_wait = sfn.WaitTime.seconds_path("$.request.drainIntervalSeconds")
        wait_for_replacement = sfn.Wait(self, "WaitForReplacement", time=drain_wait)
        wait_between_passes = sfn.Wait(self, "WaitBetweenPasses", time=drain_wait)
        wait_for_shutdown = sfn.Wait(
            self, "WaitForShutdown", time=sfn.WaitTime.seconds_path("$.request.pollSeconds")
        )

        replacement_ready = (
            sfn.Choice(self, "ReplacementReady?")
            .when(sfn.Condition.boolean_equals("$.replacement.ready", True), drain)
            .otherwise(wait_for_replacement)
        )
        await_replacement.next(replacement_ready)
        wait_for_replacement.next(await_replacement)

        called_off = sfn.Succeed(
            self,
            "DisruptionCalledOff",
            comment="The deadline of a disruption that may not force pods out passed: the node was "
            "uncordoned and kept (a DisruptionCalledOff event on the Node says why).",
        )
        drained = (
            sfn.Choice(self, "Drained?")
            .when(
                # is_present: a step function older than this definition (mid-deploy) writes no such key
                sfn.Condition.and_(
                    sfn.Condition.is_present("$.drain.abandoned"),
                    sfn.Condition.boolean_equals("$.drain.abandoned", True),
                ),
                called_off,
            )
            .when(sfn.Condition.boolean_equals("$.drain.done", True), terminate)
            .otherwise(wait_between_passes)
        )
        drain.next(drained)
        wait_between_passes.next(drain)

        instance_gone = (
            sfn.Choice(self, "InstanceGone?")
            .when(sfn.Condition.boolean_equals("$.instance.gone", True), delete_node)
            .otherwise(wait_for_shutdown)
        )
        terminate.next(instance_gone)
        wait_for_shutdown.next(check_instance)
        check_instance.next(instance_gone)
        delete_node.next(finalize_claim)
        finalize_claim.next(sfn.Succeed(self, "Terminated"))

        replacement_wanted = (
            sfn.Choice(self, "ReplacementWanted?")
            .when(sfn.Condition.boolean_equals("$.request.waitForReplacement", True), await_replacement)
            .otherwise(drain)
        )
        cordon.next(replacement_wanted)

        self.log_group = logs.LogGroup(
            self, "ExecutionLogs", retention=logs.RetentionDays.ONE_MONTH, removal_policy=log_removal_policy
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            comment="Fleetwright: cordon, drain and terminate one node, then delete its Node and NodeClaim",
            definition_body=sfn.DefinitionBody.from_chainable(cordon),
            timeout=timeout,
            tracing_enabled=True,
            logs=sfn.LogOptions(destination=self.log_group, level=sfn.LogLevel.ALL),
        )
        self.failure_metric = cloudwatch.Metric(
            namespace=METRICS_NAMESPACE,
            metric_name=FAILURE_METRIC,
            dimensions_map={"service": STEP_SERVICE},
            statistic="Sum",
            period=Duration.minutes(5),
        )
        self.failure_alarm = self.failure_metric.create_alarm(
            self,
            "FailureAlarm",
            alarm_description="A node termination workflow failed: the node may still be cordoned, or its "
            "instance still running. Look for TerminationFailed events on Nodes.",
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        # Executions that end without the RecordFailure step (the 24 h timeout, an abort, the unrecorded
        # failure path) publish no TerminationFailures: Step Functions' own counts catch them.
        ended_badly = cloudwatch.MathExpression(
            # A metric with no data in a period would leave the sum without a value: fill with 0.
            expression="FILL(failed, 0) + FILL(timedOut, 0) + FILL(aborted, 0)",
            using_metrics={
                "failed": self.state_machine.metric_failed(statistic="Sum", period=Duration.minutes(5)),
                "timedOut": self.state_machine.metric_timed_out(statistic="Sum", period=Duration.minutes(5)),
                "aborted": self.state_machine.metric_aborted(statistic="Sum", period=Duration.minutes(5)),
            },
            label="Termination workflows failed, timed out or aborted",
            period=Duration.minutes(5),
        )
        self.execution_alarm = ended_badly.create_alarm(
            self,
            "ExecutionAlarm",
            alarm_description="A node termination workflow execution failed, timed out or was aborted: open "
            "it in the Step Functions console; its node may still be cordoned or its instance running.",
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
