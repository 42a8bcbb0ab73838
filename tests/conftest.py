"""Registers the shared fixtures, marks the slow tests, and holds moto to EC2's rules in the suites that
launch, describe, tag and terminate instances.

Fixtures shared across directories are pytest plugins in ``tests/fixtures/``, registered here once
(:data:`pytest_plugins`): tests request them by name. Helpers and the types fixtures return are plain modules
in ``tests/support/``. A directory's ``conftest.py`` holds only the fixtures that directory alone uses
(``docs/testing.md``).

Every EC2 client created while a test under one of :data:`STRICT_SUITES` runs gets a fresh
:class:`~tests.aws.strict.StrictEc2` (clients built by the code under test too: the hook wraps botocore's
``Session.create_client``). A test opts out of one rule with
``@pytest.mark.lenient_ec2("RuleName", reason="why")``; a reason is required. moto's subnet address pool is
made safe for the provisioner's concurrent launches in every suite (``thread_safe_moto``).

Tests that start a world — moto, the Kubernetes emulator, a workflow harness or a CDK synthesis — are
marked ``slow`` here, by the fixtures they request (:data:`WORLD_FIXTURES`), so ``make quick``
(``pytest -m "not slow"``) runs the pure tests alone; slow tests without such a fixture carry the marker
themselves.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import botocore.session
import pytest

from fleetwright.local.aws_fakes import thread_safe_moto
from tests.aws.strict import RULES, StrictEc2
from tests.support.suites import suite

pytest_plugins = [
    "tests.fixtures.aws",
    "tests.fixtures.kube",
    "tests.fixtures.state",
    "tests.fixtures.world",
    "tests.fixtures.workflow",
    "tests.fixtures.interruption",
    "tests.fixtures.disruption",
]

# Fixtures that start moto, the emulator, a workflow harness or a CDK synthesis (see the module docstring).
WORLD_FIXTURES = frozenset(
    {
        "aws",
        "world",
        "make_rig",
        "synthesis",
        "chaos",
        "harness",
        "interruptions",
        "apiserver",
        "rbac_apiserver",
        "dynamodb",
    }
)
# Fixtures whose work runs on threads or a server that tests wait for on the real clock.
REAL_TIME_FIXTURES = frozenset({"apiserver", "rbac_apiserver", "harness", "kubectl"})
# What a test module that waits on the real clock calls (``tests/support/waiting.py``, or a sleep).
REAL_TIME_CALLS = ("time.sleep(", "wait_for(")
SLOW_SUITES = frozenset({"infra"})  # every module synthesizes the CDK app
STRICT_SUITES = frozenset(
    {"aws", "provisioning", "interruption", "disruption", "termination", "chaos", "security"}
)


def pytest_configure(config: pytest.Config) -> None:
    thread_safe_moto()  # parallel launches meet in moto's subnet address pool
    config.addinivalue_line(
        "markers",
        "lenient_ec2(*rules, reason): turn the named strict EC2 rules off for this test (reason required)",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    sources: dict[Path, bool] = {}
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if WORLD_FIXTURES.intersection(fixtures) or suite(item) in SLOW_SUITES:
            item.add_marker(pytest.mark.slow)
        if REAL_TIME_FIXTURES.intersection(fixtures):
            item.add_marker(pytest.mark.real_time)
        path = Path(str(item.fspath))
        if path not in sources:
            sources[path] = any(call in path.read_text() for call in REAL_TIME_CALLS)
        if sources[path] and item.get_closest_marker("real_time") is None:
            raise pytest.UsageError(
                f"{item.nodeid} waits on the real clock ({' or '.join(REAL_TIME_CALLS)}): run it on a virtual"
                " clock, or mark it pytest.mark.real_time (docs/testing.md)"
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
    return suite(node) in STRICT_SUITES


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
