"""The scheduling simulation: pure functions from pods, NodePools and instance types to decisions."""
