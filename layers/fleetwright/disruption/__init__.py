"""Disruption decisions: which nodes may be taken away, and how many at a time (pure, no I/O)."""
