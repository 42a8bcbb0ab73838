"""Configuration from the environment, checked like ``fleetwright validate`` checks manifests."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleetwright.config.settings import ConfigError, settings_from_env
from fleetwright.validation import validate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "inflate"


def _env(**extra: str) -> dict[str, str]:
    return {
        "FLEETWRIGHT_CLUSTER_NAME": "demo",
        "FLEETWRIGHT_STATE_TABLE": "fleetwright-state",
        "AWS_REGION": "us-east-1",
        **extra,
    }


def _both() -> str:
    return f"{EXAMPLES / 'nodepool.yaml'},{EXAMPLES / 'ec2nodeclass.yaml'}"


def test_a_bundled_file_gives_nodepools_nodeclasses_and_options() -> None:
    settings = settings_from_env(
        _env(
            FLEETWRIGHT_NODEPOOLS_FILE=_both(),
            FLEETWRIGHT_BATCH_IDLE_SECONDS="0.5",
            FLEETWRIGHT_ECONOMY_MODE="true",
        )
    )
    config = settings.config
    assert [np.name for np in config.nodepools] == ["default"]
    assert [nc.name for nc in config.nodeclasses] == ["default"]
    assert config.batch_idle_seconds == 0.5 and config.batch_max_seconds == 10.0
    assert config.economy
    assert settings.table_name == "fleetwright-state" and settings.region == "us-east-1"


def test_relative_paths_are_read_from_the_task_root() -> None:
    settings = settings_from_env(
        _env(FLEETWRIGHT_NODEPOOLS_FILE="inflate", LAMBDA_TASK_ROOT=str(EXAMPLES.parent))
    )
    assert [np.name for np in settings.config.nodepools] == ["default"]


def test_an_ssm_parameter_can_hold_the_documents() -> None:
    text = (EXAMPLES / "nodepool.yaml").read_text() + "---\n" + (EXAMPLES / "ec2nodeclass.yaml").read_text()
    asked: list[str] = []

    def read(name: str) -> str:
        asked.append(name)
        return text

    settings = settings_from_env(
        _env(FLEETWRIGHT_NODEPOOLS_PARAMETER="/fleetwright/demo/nodepools"), read_parameter=read
    )
    assert asked == ["/fleetwright/demo/nodepools"]
    assert [np.name for np in settings.config.nodepools] == ["default"]


def test_without_a_reader_the_parameter_is_read_from_ssm(monkeypatch: pytest.MonkeyPatch) -> None:
    import boto3
    from moto import mock_aws

    from fleetwright.aws.clients import reset_clients

    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(key, "testing")
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    text = (EXAMPLES / "nodepool.yaml").read_text() + "---\n" + (EXAMPLES / "ec2nodeclass.yaml").read_text()
    with mock_aws():
        reset_clients()
        try:
            ssm = boto3.client("ssm", region_name="us-east-1")
            ssm.put_parameter(Name="/fleetwright/demo/nodepools", Value=text, Type="SecureString")
            settings = settings_from_env(_env(FLEETWRIGHT_NODEPOOLS_PARAMETER="/fleetwright/demo/nodepools"))
            assert [np.name for np in settings.config.nodepools] == ["default"]
            with pytest.raises(ConfigError, match="cannot read SSM parameter /fleetwright/missing"):
                settings_from_env(_env(FLEETWRIGHT_NODEPOOLS_PARAMETER="/fleetwright/missing"))
        finally:
            reset_clients()


def test_invalid_documents_fail_with_the_validate_messages(tmp_path: Path) -> None:
    bad = tmp_path / "nodepools.yaml"
    bad.write_text(
        (EXAMPLES / "nodepool.yaml").read_text().replace("operator: In", "operator: Within", 1)
        + "---\n"
        + (EXAMPLES / "ec2nodeclass.yaml").read_text()
    )
    with pytest.raises(ConfigError) as raised:
        settings_from_env(_env(FLEETWRIGHT_NODEPOOLS_FILE=str(bad)))
    _, _, expected = validate([str(bad)])
    assert expected
    assert str(raised.value) == "\n".join(expected)
    assert f"{bad}: document 0 (NodePool default)" in str(raised.value)


def test_a_nodepool_without_its_nodeclass_is_refused() -> None:
    with pytest.raises(ConfigError, match="EC2NodeClass default"):
        settings_from_env(_env(FLEETWRIGHT_NODEPOOLS_FILE=str(EXAMPLES / "nodepool.yaml")))


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"FLEETWRIGHT_CLUSTER_NAME": ""}, "FLEETWRIGHT_CLUSTER_NAME"),
        ({"FLEETWRIGHT_NODEPOOLS_FILE": "x", "FLEETWRIGHT_NODEPOOLS_PARAMETER": "/p"}, "only one"),
        (
            {"FLEETWRIGHT_NODEPOOLS_FILE": _both(), "FLEETWRIGHT_BATCH_IDLE_SECONDS": "soon"},
            "expected a number",
        ),
        (
            {"FLEETWRIGHT_NODEPOOLS_FILE": _both(), "FLEETWRIGHT_ECONOMY_MODE": "maybe"},
            "expected true or false",
        ),
        (
            {"FLEETWRIGHT_NODEPOOLS_FILE": _both(), "FLEETWRIGHT_BATCH_MAX_SECONDS": "0.5"},
            "must not be shorter",
        ),
    ],
)
def test_bad_settings_say_what_to_fix(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        settings_from_env(_env(**env))
