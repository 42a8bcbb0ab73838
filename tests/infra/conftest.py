"""One synthesis per test session: the app as ``cdk synth`` builds it, plus a user's app using the construct
without its built-in functions.

Synthesizing takes 10-15 s and ~600 MB (jsii runs a Node.js process), so every test reads the same cloud
assembly.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.infra import (
    ALARM_TOPIC,
    CLUSTER,
    EXAMPLE_NODECLASS,
    EXAMPLE_NODEPOOL,
    REPO_ROOT,
    USER_STACK,
    Synthesis,
    Synthesized,
    SynthesizedStack,
)

os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
# The app synthesizes the package of this checkout (app.py does the same).
sys.path.insert(0, str(REPO_ROOT / "layers"))

import aws_cdk as cdk
from aws_cdk import assertions
from aws_cdk import aws_lambda as lambda_
from cdk_nag import AwsSolutionsChecks

import app as cdk_app
from infra.autoscaler import FleetwrightAutoscaler
from infra.nodepools import load_nodepool_config
from infra.settings import Monitoring


def _two_roles_dir(base: Path) -> Path:
    """A NodePool directory whose two EC2NodeClasses name different roles."""
    nodeclass = EXAMPLE_NODECLASS.read_text(encoding="utf-8")
    (base / "nodepool.yaml").write_text(EXAMPLE_NODEPOOL.read_text(encoding="utf-8"), encoding="utf-8")
    (base / "a.yaml").write_text(nodeclass.replace("KarpenterNodeRole-my-cluster", "RoleA"), encoding="utf-8")
    second = nodeclass.replace("KarpenterNodeRole-my-cluster", "RoleB").replace(
        "name: default", "name: other"
    )
    (base / "b.yaml").write_text(second, encoding="utf-8")
    return base


@pytest.fixture(scope="session")
def synthesis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synthesis]:
    """The app of ``cdk deploy -c clusterName=prod-cluster -c monitoring=full`` (every dashboard row, metric
    and alarm; the cheaper defaults are tested in test_cost_options.py), and a user's stack using the
    construct."""
    cwd = Path.cwd()
    os.chdir(REPO_ROOT)  # nodePoolsFile is relative to the project directory, as with the CDK CLI
    try:
        outdir = tmp_path_factory.mktemp("cdk.out")
        app = cdk.App(
            outdir=str(outdir),
            context={"clusterName": CLUSTER, "monitoring": "full", "alarmTopicArn": ALARM_TOPIC},
        )
        stack = cdk_app.build_app(app)
        # log_ignores: acknowledged findings are reported as info, so the tests see that the checks ran.
        cdk.Aspects.of(stack).add(AwsSolutionsChecks(log_ignores=True))

        user_stack = cdk.Stack(app, USER_STACK)
        user = FleetwrightAutoscaler(
            user_stack,
            "Autoscaler",
            cluster_name="other-cluster",
            nodepools=load_nodepool_config([str(_two_roles_dir(tmp_path_factory.mktemp("pools")))]),
            with_functions=False,
            monitoring=Monitoring.FULL,
        )
        function = user.add_function(
            "Provisioner",
            handler="index.handler",
            code=lambda_.Code.from_inline("def handler(event, context):\n    return None\n"),
            description="stand-in for a controller function",
        )
        user.consume_interruptions(function)
        assembly = app.synth()
    finally:
        os.chdir(cwd)

    def read(name: str) -> SynthesizedStack:
        artifact = assembly.get_stack_by_name(name)
        messages = [(str(m.level), m.id, str(m.entry.data)) for m in artifact.messages]
        return SynthesizedStack(
            name, artifact.template, assertions.Template.from_json(artifact.template), messages
        )

    yield Synthesis(outdir, read(stack.stack_name), stack.autoscaler, read(USER_STACK), user)


def _synth(tmp: Path, context: dict[str, str]) -> Synthesized:
    """The app's template (and its messages) with cdk-nag, for ``context`` (``cdk synth -c ...``)."""
    cwd = os.getcwd()
    os.chdir(REPO_ROOT)
    try:
        app = cdk.App(outdir=str(tmp), context={"alarmTopicArn": ALARM_TOPIC, **context})
        stack = cdk_app.build_app(app)
        cdk.Aspects.of(stack).add(AwsSolutionsChecks())
        artifact = app.synth().get_stack_by_name(stack.stack_name)
    finally:
        os.chdir(cwd)
    return artifact.template, [(str(m.level), str(m.entry.data)) for m in artifact.messages]


@pytest.fixture(scope="session")
def watching(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synthesized]:
    """``cdk synth`` with the defaults: watching, ``monitoring=alarms``."""
    yield _synth(tmp_path_factory.mktemp("cdk.watching"), {"clusterName": "cost-watching"})


@pytest.fixture(scope="session")
def economy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Synthesized]:
    """``cdk synth -c economyMode=true``: ``monitoring=essential``."""
    yield _synth(
        tmp_path_factory.mktemp("cdk.economy"), {"clusterName": "cost-economy", "economyMode": "true"}
    )
