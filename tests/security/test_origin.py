"""The interruption function knows whose events it acts on: the stack's account (``FLEETWRIGHT_ACCOUNT_ID``)
and Lambda's region (``AWS_REGION``); without either it does not start, so no event is acted on unchecked."""

from __future__ import annotations

import pytest
from aws_lambda_powertools import Logger, Metrics

from fleetwright.config.environment import ConfigError, FunctionEnvironment
from fleetwright.runtime.interruption import build

WHERE = {
    "FLEETWRIGHT_CLUSTER_NAME": "demo",
    "FLEETWRIGHT_STATE_TABLE": "fleetwright-state",
    "FLEETWRIGHT_TERMINATION_STATE_MACHINE_ARN": "arn:aws:states:us-east-1:123456789012:stateMachine:t",
}


@pytest.mark.parametrize(
    ("environ", "missing"),
    [
        ({**WHERE, "AWS_REGION": "us-east-1"}, "FLEETWRIGHT_ACCOUNT_ID"),
        ({**WHERE, "FLEETWRIGHT_ACCOUNT_ID": "123456789012"}, "AWS_REGION"),
    ],
)
def test_the_function_does_not_start_without_its_account_and_region(
    environ: dict[str, str], missing: str
) -> None:
    with pytest.raises(ConfigError, match=missing):
        build(Logger(service="test"), Metrics(namespace="test"), environ)


def test_an_account_id_that_is_not_twelve_digits_is_refused() -> None:
    with pytest.raises(ConfigError) as raised:
        FunctionEnvironment.from_environ({"FLEETWRIGHT_ACCOUNT_ID": "12345678901x"})
    assert str(raised.value).startswith("FLEETWRIGHT_ACCOUNT_ID")
    assert (
        FunctionEnvironment.from_environ({"FLEETWRIGHT_ACCOUNT_ID": "123456789012"}).account_id
        == "123456789012"
    )
