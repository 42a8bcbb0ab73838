"""The merge patch status writers send: exactly the wanted content, at every depth."""

from __future__ import annotations

from fleetwright.kube.patches import merge_patch


def test_a_status_patch_removes_what_is_gone_at_every_depth() -> None:
    current = {
        "resources": {"cpu": "4", "nvidia.com/gpu": "1", "nodes": "2"},
        "conditions": [{"type": "Ready"}],
        "old": "x",
    }
    wanted = {"resources": {"cpu": "2", "nodes": "1"}, "conditions": [{"type": "Ready", "status": "True"}]}

    patch = merge_patch(current, wanted)

    assert patch == {
        "resources": {"cpu": "2", "nvidia.com/gpu": None, "nodes": "1"},
        "conditions": [{"type": "Ready", "status": "True"}],
        "old": None,
    }
