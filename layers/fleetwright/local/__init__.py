"""Local stand-ins for the cloud: a Kubernetes API emulator and (later) simulators for the demo and tests.

Nothing here ships in the Lambda layer, and nothing outside ``fleetwright.local`` imports it.
"""
