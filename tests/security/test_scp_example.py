"""The service control policy docs/iam.md gives keeps every tag key ownership rests on the controller's: a
key the code starts to rely on and the example does not cover would leave it writable by anyone."""

from __future__ import annotations

import json
import re
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from fleetwright.aws.tags import (
    CLUSTER_TAG,
    INSTANCE_CONTROLLER_TAG,
    LAUNCH_TEMPLATE_CONTROLLER_TAG,
    NODECLAIM_TAG,
    RESERVED_TAG_KEYS,
)

IAM_DOC = Path(__file__).resolve().parents[2] / "docs" / "iam.md"
SECTION = "## Keeping the ownership tags the controller's"


def _example() -> dict[str, Any]:
    text = IAM_DOC.read_text()
    section = text[text.index(SECTION) :]
    match = re.search(r"```json\n(.*?)\n```", section, re.DOTALL)
    assert match is not None, "the section has no JSON policy"
    policy: dict[str, Any] = json.loads(match.group(1))
    return policy


def _denied_keys(statement: dict[str, Any]) -> list[str]:
    return list(statement["Condition"]["ForAnyValue:StringLike"]["aws:TagKeys"])


def test_the_example_denies_writing_and_removing_every_ownership_key_on_ec2() -> None:
    [ec2] = [s for s in _example()["Statement"] if "ec2:CreateTags" in s["Action"]]

    assert ec2["Effect"] == "Deny"
    assert set(ec2["Action"]) == {"ec2:CreateTags", "ec2:DeleteTags"}
    patterns = _denied_keys(ec2)
    keys = {
        CLUSTER_TAG,
        NODECLAIM_TAG,
        INSTANCE_CONTROLLER_TAG,
        LAUNCH_TEMPLATE_CONTROLLER_TAG,
        *RESERVED_TAG_KEYS,
    }
    uncovered = [k for k in sorted(keys) if not any(fnmatchcase(k, p) for p in patterns)]
    assert uncovered == []
    assert "aws:PrincipalArn" in ec2["Condition"]["ArnNotLike"]  # the controller's roles are the exception


def test_the_example_denies_tagging_instance_profiles_with_the_cluster_tag() -> None:
    [profiles] = [s for s in _example()["Statement"] if "iam:TagInstanceProfile" in s["Action"]]

    assert profiles["Effect"] == "Deny"
    assert any(fnmatchcase(CLUSTER_TAG, p) for p in _denied_keys(profiles))
