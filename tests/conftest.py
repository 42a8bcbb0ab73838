"""Holds moto to EC2's rules in the suites that launch, describe, tag and terminate instances.

Every EC2 client created while a test under one of :data:`STRICT_SUITES` runs gets a fresh
:class:`~tests.aws.strict.StrictEc2` (clients built by the code under test too: the hook wraps botocore's
``Session.create_client``). A test opts out of one rule with
``@pytest.mark.lenient_ec2("RuleName", reason="why")``; a reason is required. moto's subnet address pool is
made safe for the provisioner's concurrent launches in every suite (``thread_safe_moto``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import botocore.session
import pytest

from fleetwright.local.aws_fakes import thread_safe_moto
from tests.aws.strict import RULES, StrictEc2

TESTS = Path(__file__).parent
STRICT_SUITES = frozenset(
    {"aws", "provisioning", "interruption", "disruption", "termination", "chaos", "security"}
)


def pytest_configure(config: pytest.Config) -> None:
    thread_safe_moto()  # parallel launches meet in moto's subnet address pool
    config.addinivalue_line(
        "markers",
        "lenient_ec2(*rules, reason): turn the named strict EC2 rules off for this test (reason required)",
    )


def _skipped_rules(node: pytest.Item) -> frozenset[str]:
    skipped: set[str] = set()
    for marker in node.iter_markers("lenient_ec2"):
        if not str(marker.kwargs.get("reason", "")).strip():
            raise pytest.UsageError(f"{node.nodeid}: lenient_ec2 needs reason='why this rule does not apply'")
        unknown = set(marker.args) - set(RULES)
        if unknown:
            raise pytest.UsageError(f"{node.nodeid}: unknown strict EC2 rules {sorted(unknown)}")
        skipped.update(marker.args)
    return frozenset(skipped)


def _in_strict_suite(node: pytest.Item) -> bool:
    try:
        relative = Path(node.path).resolve().relative_to(TESTS.resolve())
    except ValueError:
        return False
    return len(relative.parts) > 1 and relative.parts[0] in STRICT_SUITES


@pytest.fixture(autouse=True)
def strict_ec2(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[StrictEc2 | None]:
    """The rules installed on this test's EC2 clients (``None`` outside the strict suites)."""
    if not _in_strict_suite(request.node):
        yield None
        return
    strict = StrictEc2(skip=_skipped_rules(request.node))
    original = botocore.session.Session.create_client

    def create_client(self: botocore.session.Session, service_name: str, *args: Any, **kwargs: Any) -> Any:
        client = original(self, service_name, *args, **kwargs)
        if service_name == "ec2":
            strict.install(client)
        return client

    monkeypatch.setattr(botocore.session.Session, "create_client", create_client)
    yield strict
    strict.uninstall()
