"""Context values of ``cdk deploy -c key=value``, read without synthesizing anything."""

from __future__ import annotations

import pytest

from infra.settings import SettingsError, settings_from_context


def test_provisioner_reserves_one_execution_unless_told_otherwise() -> None:
    assert settings_from_context({"clusterName": "prod"}).provisioner_reserved_concurrency == 1
    settings = settings_from_context({"clusterName": "prod", "provisionerReservedConcurrency": "2"})
    assert settings.provisioner_reserved_concurrency == 2
    # Accounts whose concurrency quota is still 10 cannot reserve any: "none" leaves it unreserved.
    settings = settings_from_context({"clusterName": "prod", "provisionerReservedConcurrency": "none"})
    assert settings.provisioner_reserved_concurrency is None


@pytest.mark.parametrize("value", ["0", "-1", "one", "1.5"])
def test_bad_reserved_concurrency_is_refused_naming_the_setting(value: str) -> None:
    with pytest.raises(SettingsError, match="provisionerReservedConcurrency"):
        settings_from_context({"clusterName": "prod", "provisionerReservedConcurrency": value})


def test_cluster_name_gives_the_default_stack_name() -> None:
    settings = settings_from_context({"clusterName": " prod "})
    assert (settings.cluster_name, settings.stack_name) == ("prod", "Fleetwright-prod")
    assert settings.nodepool_paths == ("examples/inflate",)
