"""``fleetwright simulate``: a workload trace replayed on a virtual clock through the code the functions
run (docs/simulate.md). Development tooling: not shipped in the Lambda layer."""
