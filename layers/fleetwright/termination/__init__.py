"""The termination workflow's step logic: cordon, wait for replacement, drain, terminate, delete the Node,
finalize the claim, and the failure path (docs/termination.md). The state machine that strings the steps
together is defined in ``infra/termination_workflow.py``.
"""
