"""Interruption handling: EC2 Spot warnings, rebalance recommendations, instance state changes and AWS Health
scheduled changes, read from the interruption queue (docs/termination.md).

Entry points: :func:`events.parse_message` (one SQS body → a typed event), :func:`trust.check_event`
(whether it may be acted on: docs/security.md), :class:`controller.InterruptionController` (what to do
about it), and :func:`inprocess.run_interruption` (the whole chain in one process, for the demo).
"""
