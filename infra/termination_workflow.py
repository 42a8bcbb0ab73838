"""The termination workflow: a Step Functions state machine whose Task states all invoke one Lambda (the step
handler in ``functions/termination``), naming the step in the payload.

::

    Resumed? ─no→ Cordon → ReplacementWanted? ─yes→ AwaitReplacement → ReplacementReady? ─no→ WaitForRepl.
       │yes                  │no                        ↑                  │yes        │continue  │
       ↓                     ↓                          └──────────────────┼───────────┼──────────┘
    ResumeAt? ──────────→ Drain ←── WaitBetweenPasses ←─no── Drained? ←────┘           ↓
       └─replacement pending→ AwaitReplacement          │  ├─abandoned→ DisruptionCalledOff (Succeed)
                                                         │  └─continue→ Continue → ContinuedInNewExecution
                                                         │yes
                                                         ↓
             Terminate → InstanceGone? ─no→ WaitForShutdown → CheckInstance ─┐
                            │yes  ↑──────────────────────────────────────────┘
                            ↓
                         DeleteNode → FinalizeClaim → Terminated (Succeed)

    any Task's error (after retries) → RecordFailure → FailurePending? ─yes→ WaitToRecordFailure ─┐
                                              ↑                    │no                            │
                                              └────────────────────┼──────────────────────────────┘
                                                                   ↓
                                                         TerminationFailed (Fail)

Wait durations come from the state (``drain.waitSeconds``, computed by the drain step and growing while no
pod leaves; ``request.drainIntervalSeconds``, ``request.pollSeconds``), so tests run the same definition
with 0 s waits. Every Task retries Lambda's service errors and throttling and ``TransientError`` with
exponential backoff, a maximum delay and full jitter: :data:`RETRY_BUDGET_SECONDS` rides out an outage of
the Kubernetes API or Lambda of several minutes. Every other error is caught into ``$.error`` and ends in
the failure state after the ``record_failure`` step has left a Warning event on the Node, given the node
back and raised the ``TerminationFailures`` metric, which :attr:`TerminationWorkflow.failure_alarm`
watches. Long loops continue in a new execution of the same state machine (``Continue``); the new
execution starts at ``Resumed?`` and goes straight back to its loop.
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_iam as iam
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
# Errors every Task retries: Lambda's own (throttling, service errors) and the steps' TransientError.
RETRIED_ERRORS = (
    "Lambda.TooManyRequestsException",
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.ClientExecutionTimeoutException",
    TRANSIENT_ERROR,
)
DEFAULT_TIMEOUT = Duration.hours(24)
DEFAULT_RETRY_INTERVAL = Duration.seconds(2)
DEFAULT_RETRY_MAX_DELAY = Duration.seconds(60)
DEFAULT_RETRY_ATTEMPTS = 25
RETRY_BACKOFF = 2


def retry_budget_seconds(
    interval: float, max_delay: float, attempts: int, backoff: float = RETRY_BACKOFF
) -> float:
    """The longest time a Task keeps retrying: the sum of its nominal delays. Full jitter draws each delay
    between 0 and its nominal value, so half of this is the expected time."""
    return float(sum(min(max_delay, interval * backoff**n) for n in range(attempts)))


# 2 + 4 + 8 + 16 + 32 + 20 × 60 = 1,262 s nominal, ~631 s expected with full jitter: an outage of 5 minutes
# is ridden out by retries alone (the chance of 25 jittered delays adding up to less than 300 s is ~1e-5).
RETRY_BUDGET_SECONDS = retry_budget_seconds(2, 60, DEFAULT_RETRY_ATTEMPTS)


class TerminationWorkflow(Construct):
    """``state_machine`` (standard, logged, traced), ``failure_metric``, ``failure_alarm`` (a step
    recorded a failure) and ``execution_alarm`` (an execution failed, timed out or was aborted).

    Props: ``step_function`` (the Lambda serving every step), ``retry_interval``/``retry_max_delay``/
    ``retry_attempts`` for :data:`RETRIED_ERRORS` (doubling each time, full jitter), ``timeout`` of one
    execution (longer workflows continue in new executions well before it) and ``log_removal_policy`` of
    the execution log group.

    The step function may start executions of this state machine (the ``Continue`` step): a standalone
    policy on its role, so the function does not depend on the state machine that depends on it.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        step_function: lambda_.IFunction,
        retry_interval: Duration = DEFAULT_RETRY_INTERVAL,
        retry_max_delay: Duration = DEFAULT_RETRY_MAX_DELAY,
        retry_attempts: int = DEFAULT_RETRY_ATTEMPTS,
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
                payload=sfn.TaskInput.from_object(
                    {
                        "step": step,
                        "state": sfn.JsonPath.entire_payload,
                        "context": {
                            "execution": sfn.JsonPath.string_at("$$.Execution.Name"),
                            "startTime": sfn.JsonPath.string_at("$$.Execution.StartTime"),
                            "stateMachine": sfn.JsonPath.string_at("$$.StateMachine.Id"),
                        },
                    }
                ),
                payload_response_only=True,  # the step's return value is the new state
                retry_on_service_exceptions=False,  # retried below, longer than CDK's default
            )
            invoke.add_retry(
                errors=list(RETRIED_ERRORS),
                interval=retry_interval,
                backoff_rate=RETRY_BACKOFF,
                max_delay=retry_max_delay,
                jitter_strategy=sfn.JitterType.FULL,
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
        wait_to_record = sfn.Wait(
            self, "WaitToRecordFailure", time=sfn.WaitTime.seconds_path("$.failure.retrySeconds")
        )
        wait_to_record.next(record_failure)
        record_failure.next(
            sfn.Choice(self, "FailurePending?")
            .when(
                # the Kubernetes API did not answer: the event or the uncordon is tried again
                _is("$.failure.pending"),
                wait_to_record,
            )
            .otherwise(failed)
        )

        cordon = task("Cordon", "cordon")
        await_replacement = task("AwaitReplacement", "await_replacement")
        drain = task("Drain", "drain")
        terminate = task("Terminate", "terminate")
        check_instance = task("CheckInstance", "check_instance")
        delete_node = task("DeleteNode", "delete_node")
        finalize_claim = task("FinalizeClaim", "finalize_claim")
        continue_task = task("Continue", "continue")
        continue_task.next(
            sfn.Succeed(
                self,
                "ContinuedInNewExecution",
                comment="The workflow goes on in a new execution of this state machine ($.continuation).",
            )
        )
        for step in (
            cordon,
            await_replacement,
            drain,
            continue_task,
            terminate,
            check_instance,
            delete_node,
            finalize_claim,
        ):
            step.add_catch(record_failure, errors=["States.ALL"], result_path="$.error")

        drain_wait = sfn.WaitTime.seconds_path("$.request.drainIntervalSeconds")
        wait_for_replacement = sfn.Wait(self, "WaitForReplacement", time=drain_wait)
        wait_between_passes = sfn.Wait(
            self, "WaitBetweenPasses", time=sfn.WaitTime.seconds_path("$.drain.waitSeconds")
        )
        # A step function older than this definition (mid-deploy) writes no drain.waitSeconds.
        wait_drain_interval = sfn.Wait(self, "WaitDrainInterval", time=drain_wait)
        wait_for_shutdown = sfn.Wait(
            self, "WaitForShutdown", time=sfn.WaitTime.seconds_path("$.request.pollSeconds")
        )

        replacement_ready = (
            sfn.Choice(self, "ReplacementReady?")
            .when(sfn.Condition.boolean_equals("$.replacement.ready", True), drain)
            .when(_is("$.replacement.continueInNewExecution"), continue_task)
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
                # a step function older than this definition (mid-deploy) writes no such key
                _is("$.drain.abandoned"),
                called_off,
            )
            .when(sfn.Condition.boolean_equals("$.drain.done", True), terminate)
            .when(_is("$.drain.continueInNewExecution"), continue_task)
            .when(sfn.Condition.is_not_present("$.drain.waitSeconds"), wait_drain_interval)
            .otherwise(wait_between_passes)
        )
        drain.next(drained)
        wait_between_passes.next(drain)
        wait_drain_interval.next(drain)

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

        # A continuation (input with ``resume``) goes back to the loop it left: no second cordon, and no
        # second replacement wait unless the replacement was still pending.
        resume_at = (
            sfn.Choice(self, "ResumeAt?")
            .when(
                _is("$.replacement.ready", False),
                await_replacement,
            )
            .otherwise(drain)
        )
        resumed = (
            sfn.Choice(self, "Resumed?")
            .when(sfn.Condition.is_present("$.resume"), resume_at)
            .otherwise(cordon)
        )

        self.log_group = logs.LogGroup(
            self, "ExecutionLogs", retention=logs.RetentionDays.ONE_MONTH, removal_policy=log_removal_policy
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            comment="Fleetwright: cordon, drain and terminate one node, then delete its Node and NodeClaim",
            definition_body=sfn.DefinitionBody.from_chainable(resumed),
            timeout=timeout,
            tracing_enabled=True,
            logs=sfn.LogOptions(destination=self.log_group, level=sfn.LogLevel.ALL),
        )
        # The Continue step starts the next execution of this state machine. A policy of its own, attached
        # to the step function's role: in the role's default policy the function (which depends on that
        # policy) would depend on the state machine, which depends on the function.
        self.continue_policy: iam.Policy | None = None
        if step_function.role is not None:
            self.continue_policy = iam.Policy(
                self,
                "ContinuePolicy",
                statements=[
                    iam.PolicyStatement(
                        actions=["states:StartExecution"],
                        resources=[self.state_machine.state_machine_arn],
                    )
                ],
                roles=[step_function.role],
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


def _is(path: str, value: bool = True) -> sfn.Condition:
    """``path`` is present and equal to ``value`` (a step function older than the definition, or a state
    that never reached that step, may not have it)."""
    return sfn.Condition.and_(sfn.Condition.is_present(path), sfn.Condition.boolean_equals(path, value))
