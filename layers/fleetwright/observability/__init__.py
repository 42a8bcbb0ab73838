"""What every function reports: metric names, units and sinks (``metrics.py``) and how close a pass came to
its Lambda limits (``limits.py``) — shared by all capabilities so each names its metrics one way."""
