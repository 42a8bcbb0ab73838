#!/usr/bin/env python3
"""The Fleetwright CDK app: ``cdk deploy -c clusterName=<EKS cluster>`` (see docs/deploy.md)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

# Synthesize with the package this checkout ships in the layer, whatever copy the environment has installed.
sys.path.insert(0, str(Path(__file__).resolve().parent / "layers"))
# jsii (used by aws-cdk-lib) warns on every run under Node.js 20; the warning says nothing about this app.
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from infra.nodepools import NodePoolFileError, load_nodepool_config
from infra.settings import CONTEXT_KEYS, SettingsError, settings_from_context
from infra.stack import FleetwrightStack


def build_app(app: cdk.App) -> FleetwrightStack:
    """Add the Fleetwright stack described by ``app``'s context; raises SettingsError or NodePoolFileError."""
    settings = settings_from_context({key: app.node.try_get_context(key) for key in CONTEXT_KEYS})
    nodepools = load_nodepool_config(settings.nodepool_paths, settings.node_role_name)
    env = cdk.Environment(
        account=os.environ.get("CDK_DEFAULT_ACCOUNT"), region=os.environ.get("CDK_DEFAULT_REGION")
    )
    stack = FleetwrightStack(
        app,
        settings.stack_name,
        env=env,
        cluster_name=settings.cluster_name,
        nodepools=nodepools,
        node_role_name=settings.node_role_name,
        alarm_topic_arn=settings.alarm_topic_arn,
        provisioner_reserved_concurrency=settings.provisioner_reserved_concurrency,
        disruption=settings.disruption,
        disruption_options=settings.disruption_options,
        function_sizes=settings.function_sizes,
        economy_mode=settings.economy_mode,
        monitoring=settings.monitoring,
        vpc=settings.vpc,
    )
    return stack


def main(app: cdk.App | None = None) -> int:
    """Synthesize ``app`` (default: the one the CDK CLI describes); a bad setting or NodePool file is
    reported without a traceback and exit code 2."""
    app = app or cdk.App()
    try:
        stack = build_app(app)
    except (SettingsError, NodePoolFileError) as err:
        print(err, file=sys.stderr)
        return 2
    # Unacknowledged findings are errors, so `cdk synth` fails on them (infra/nag.py holds the reasons).
    cdk.Aspects.of(stack).add(AwsSolutionsChecks(verbose=True))
    app.synth()
    return 0


if __name__ == "__main__":
    sys.exit(main())
