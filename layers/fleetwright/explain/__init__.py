"""``fleetwright explain``: why a pod is pending and why a node stays, from the scheduler's and the disruption
planner's own pure functions over a read-only view of a cluster or of manifests (docs/explain.md)."""
