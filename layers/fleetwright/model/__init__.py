"""Fleetwright's domain model: quantities, requirements, pods, nodes, instance types, NodePools."""
