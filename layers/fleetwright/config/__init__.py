"""The controllers' configuration: the environment variables the functions read, each declared once as a field
of the one model reading them (``environment.py``), the names other code refers to (``names.py``,
re-exported here for the CDK app), NodePool and EC2NodeClass documents and the options every capability
shares (``settings.py``).

Importing this package loads only the names (the handlers import it at their cold start).
"""

from __future__ import annotations

from fleetwright.config import names as _names


def __getattr__(name: str) -> str:
    """``ENV_*``: the names in ``names.py``, so a name added there needs nothing here. ``ENV_NODE_ROLE``
    belongs to the document conversion (``fleetwright.model.legacy``, which also reads it for the CLI and
    sits below this package); loaded on first use so importing the names stays cheap."""
    if name == "ENV_NODE_ROLE":
        from fleetwright.model.legacy import ENV_NODE_ROLE

        return ENV_NODE_ROLE
    if name.startswith("ENV_") and hasattr(_names, name):
        value: str = getattr(_names, name)
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
