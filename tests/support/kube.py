"""What the Kubernetes fixtures (``tests/fixtures/kube.py``) are built from."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
RBAC = REPO_ROOT / "docs" / "rbac.yaml"  # the grants of Fleetwright's functions, as docs/ publishes them
