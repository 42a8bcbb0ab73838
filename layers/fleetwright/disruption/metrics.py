"""Metric names the disruption function publishes (namespace ``Fleetwright``, service
``fleetwright-disruption``); the CDK dashboard and alarms import them from here."""

from __future__ import annotations

from typing import Final

SERVICE: Final = "fleetwright-disruption"

DISRUPTION_COMMANDS: Final = "DisruptionCommands"  # dimension Method
NODES_DISRUPTED: Final = "NodesDisrupted"  # dimension Reason (Empty, Drifted, Underutilized, Expired)
DISRUPTION_SAVINGS: Final = "DisruptionSavingsPerHour"  # USD per hour a command is expected to save
DISRUPTION_CANDIDATES: Final = "DisruptionCandidates"  # nodes a pass considered
DISRUPTION_BLOCKED: Final = "DisruptionBlocked"  # dimension Why (Budget, DoNotDisrupt, Pdb, ...)
COMMANDS_INVALIDATED: Final = "DisruptionCommandsInvalidated"  # re-validation found the cluster changed
DECISION_DURATION: Final = "DisruptionDecisionDuration"  # milliseconds to compute a plan
DISRUPTION_ERRORS: Final = "DisruptionErrors"  # a pass (or one command's execution) failed
GARBAGE_COLLECTED: Final = "GarbageCollected"  # dimension Kind (Instance, Node, LaunchTemplate)
# Instances carrying the cluster tag without the NodePool tag the controller writes: tagged by someone else's
# hand, never terminated (dimension Kind: Instance)
IMPOSTORS_SEEN: Final = "ImpostorsSeen"
NODE_COUNT: Final = "NodeCount"  # gauge: Fleetwright's nodes, per pass (total, and NodePool × CapacityType)
CLUSTER_HOURLY_COST: Final = "ClusterHourlyCost"  # gauge: USD/h of Fleetwright's nodes (the same series)
NODES_UNCORDONED_BY_SWEEP: Final = "NodesUncordonedBySweep"  # marked nodes nobody was working on, given back
INTERRUPTIONS_REDRIVEN: Final = "InterruptionsRedriven"  # dimension Kind: a new workflow attempt by the sweep
NODES_REPAIRED: Final = "NodesRepaired"  # dimensions Condition, NodePool: unhealthy nodes sent to termination
NODE_REPAIR_BLOCKED: Final = "NodeRepairBlocked"  # dimension NodePool: unhealthy nodes kept by the 20 % rule
