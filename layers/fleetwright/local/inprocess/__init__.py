"""The termination workflow, interruption handling and a disruption pass run in this process, for the demo,
the sandbox and the tests (the deployed functions use Step Functions)."""
