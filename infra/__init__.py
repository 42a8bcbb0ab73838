"""The Fleetwright CDK app: one construct (:class:`FleetwrightAutoscaler`) and a thin stack around it."""

from __future__ import annotations

from infra.autoscaler import FleetwrightAutoscaler
from infra.nodepools import NodePoolConfig, NodePoolFileError, load_nodepool_config
from infra.settings import DisruptionOptions
from infra.stack import FleetwrightStack

__all__ = [
    "DisruptionOptions",
    "FleetwrightAutoscaler",
    "FleetwrightStack",
    "NodePoolConfig",
    "NodePoolFileError",
    "load_nodepool_config",
]
