"""The functions' environment: one model reads every variable, names the variable a bad value came from,
and the handlers load it (and everything heavy) only on their first invocation."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fleetwright.config.environment import ConfigError, FunctionEnvironment
from fleetwright.config.settings import ProvisionerConfig

ROOT = Path(__file__).resolve().parents[2]


def test_unset_variables_take_the_documented_defaults() -> None:
    env = FunctionEnvironment.from_environ({})
    assert (env.batch_idle_seconds, env.batch_max_seconds, env.launch_parallelism) == (1.0, 10.0, 8)
    assert env.economy is False and env.replace_on_rebalance is False and env.dry_run is False
    assert env.min_saving_fraction is None and env.spot_to_spot is None  # the planner's own defaults


def test_values_are_trimmed_and_blank_ones_count_as_unset() -> None:
    env = FunctionEnvironment.from_environ(
        {
            "FLEETWRIGHT_CLUSTER_NAME": " demo ",
            "FLEETWRIGHT_NODEPOOLS_FILE": "a.yaml, b/ ,",
            "FLEETWRIGHT_LEASE_SECONDS": " ",
            "FLEETWRIGHT_REPLACE_ON_REBALANCE": "Yes",
            "AWS_DEFAULT_REGION": "eu-west-1",
        }
    )
    assert env.cluster_name == "demo" and env.nodepools_files == ("a.yaml", "b/")
    assert env.lease_seconds == 30.0 and env.replace_on_rebalance is True
    assert env.region == "eu-west-1"  # AWS_REGION wins when both are set
    assert FunctionEnvironment.from_environ(
        {"AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "x"}
    ).region == ("us-east-1")


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("FLEETWRIGHT_LEASE_SECONDS", "soon", "FLEETWRIGHT_LEASE_SECONDS: expected a number, got 'soon'"),
        ("FLEETWRIGHT_LEASE_SECONDS", "-1", "FLEETWRIGHT_LEASE_SECONDS: expected a non-negative number"),
        ("FLEETWRIGHT_LAUNCH_PARALLELISM", "0", "FLEETWRIGHT_LAUNCH_PARALLELISM: must be at least 1"),
        (
            "FLEETWRIGHT_REPLACE_ON_REBALANCE",
            "sometimes",
            "FLEETWRIGHT_REPLACE_ON_REBALANCE: expected true or false, got 'sometimes'",
        ),
        (
            "FLEETWRIGHT_DISRUPTION_MIN_SAVING_FRACTION",
            "1.5",
            "FLEETWRIGHT_DISRUPTION_MIN_SAVING_FRACTION: expected a number from 0 to 1, got '1.5'",
        ),
    ],
)
def test_a_bad_value_names_its_variable(variable: str, value: str, message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        FunctionEnvironment.from_environ({variable: value})
    assert str(raised.value).startswith(message)


def test_every_bad_variable_is_reported_at_once() -> None:
    with pytest.raises(ConfigError) as raised:
        FunctionEnvironment.from_environ(
            {"FLEETWRIGHT_ECONOMY_MODE": "maybe", "FLEETWRIGHT_BATCH_IDLE_SECONDS": "soon"}
        )
    assert sorted(line.split(":")[0] for line in str(raised.value).splitlines()) == [
        "FLEETWRIGHT_BATCH_IDLE_SECONDS",
        "FLEETWRIGHT_ECONOMY_MODE",
    ]


def test_required_variables_are_named_when_missing() -> None:
    env = FunctionEnvironment.from_environ({"FLEETWRIGHT_CLUSTER_NAME": "demo"})
    with pytest.raises(
        ConfigError,
        match="missing environment variable\\(s\\): FLEETWRIGHT_STATE_TABLE, "
        "FLEETWRIGHT_TERMINATION_STATE_MACHINE_ARN",
    ):
        env.require(
            "FLEETWRIGHT_CLUSTER_NAME", "FLEETWRIGHT_STATE_TABLE", "FLEETWRIGHT_TERMINATION_STATE_MACHINE_ARN"
        )


@pytest.mark.parametrize("function", ["provisioner", "interruption", "termination", "disruption"])
def test_importing_a_handler_loads_nothing_heavy(function: str) -> None:
    """Cold start: boto3, the Kubernetes client, pydantic, the configuration and the libraries behind it
    (pydantic-settings, croniter, cachetools) wait for the first invocation."""
    script = (
        "import sys, handler\n"
        "heavy = {'boto3', 'kubernetes', 'pydantic', 'yaml', 'fleetwright.config.environment',\n"
        "         'pydantic_settings', 'croniter', 'cachetools'}\n"
        "print(sorted(heavy & set(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT / "functions" / function,
        env={"PYTHONPATH": str(ROOT / "layers"), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip() == "[]"


def test_the_process_environment_is_read_by_the_same_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    """What a deployed function does: no mapping given, pydantic-settings reads ``os.environ``."""
    for name in FunctionEnvironment.variables().values():
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    monkeypatch.setenv("FLEETWRIGHT_CLUSTER_NAME", " demo ")
    monkeypatch.setenv("FLEETWRIGHT_NODEPOOLS_FILE", "a.yaml, b/ ,")  # not JSON: read as written
    monkeypatch.setenv("FLEETWRIGHT_LEASE_SECONDS", " ")
    monkeypatch.setenv("FLEETWRIGHT_BATCH_MAX_SECONDS", "12")
    monkeypatch.setenv("fleetwright_batch_idle_seconds", "5")  # names are case-sensitive
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    env = FunctionEnvironment.from_environ()
    assert (env.cluster_name, env.nodepools_files, env.region) == ("demo", ("a.yaml", "b/"), "eu-west-1")
    assert (env.lease_seconds, env.batch_max_seconds, env.batch_idle_seconds) == (30.0, 12.0, 1.0)
    monkeypatch.setenv("FLEETWRIGHT_BATCH_IDLE_SECONDS", "20")
    with pytest.raises(ConfigError, match="FLEETWRIGHT_BATCH_MAX_SECONDS must not be shorter than"):
        FunctionEnvironment.from_environ()
    # A mapping given instead (tests, a copy) is read alone: the process's variables do not leak in.
    assert FunctionEnvironment.from_environ({}).batch_idle_seconds == 1.0
    assert FunctionEnvironment.from_environ({}).region == ""


def test_a_provisioner_option_is_declared_once() -> None:
    """The environment field gives ``ProvisionerConfig`` its value and, unset, its default."""
    options = FunctionEnvironment.from_environ({"FLEETWRIGHT_LEASE_SECONDS": "45"}).provisioner_options()
    config = ProvisionerConfig(cluster_name="demo", **options)
    assert config.lease_seconds == 45.0
    defaults = ProvisionerConfig(cluster_name="demo")
    for name, value in FunctionEnvironment.from_environ({}).provisioner_options().items():
        assert getattr(defaults, name) == value, name
    assert "launch_parallelism" in options and "tracing" not in options  # tracing is the handler's


def test_every_variable_is_listed_in_the_docs() -> None:
    text = "\n".join(path.read_text() for path in (ROOT / "docs").glob("*.md"))
    variables = FunctionEnvironment.variables().values()
    assert len(variables) > 30
    assert [name for name in variables if f"`{name}`" not in text] == []
