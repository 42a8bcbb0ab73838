"""cdk-nag AwsSolutions: no unacknowledged findings, and every acknowledgement says why."""

from __future__ import annotations

import re

from tests.infra.conftest import Synthesis

NAG = re.compile(r"AwsSolutions-[A-Z0-9]+")


def test_no_unacknowledged_findings(synthesis: Synthesis) -> None:
    findings = [m for m in synthesis.fleetwright.messages if "ERROR" in m[0] or "WARNING" in m[0]]
    assert findings == []


def test_checks_ran_and_every_acknowledgement_was_needed(synthesis: Synthesis) -> None:
    suppressed = {
        (path.rsplit("/", 2)[-2], NAG.search(text).group())  # type: ignore[union-attr]
        for _, path, text in synthesis.fleetwright.messages
        if "was triggered but suppressed" in text
    }
    # Only the node role's AWS managed policies and the controller policy's wildcards are acknowledged.
    assert suppressed == {("Role", "AwsSolutions-IAM4"), ("ControllerPolicy", "AwsSolutions-IAM5")}


def test_each_acknowledgement_gives_a_reason(synthesis: Synthesis) -> None:
    acknowledgements = [
        rule
        for resource in synthesis.fleetwright.raw["Resources"].values()
        for rule in resource.get("Metadata", {}).get("cdk_nag", {}).get("rules_to_suppress", [])
    ]
    assert len(acknowledgements) == 6
    for rule in acknowledgements:
        assert len(rule["reason"]) >= 60, rule
        assert rule["applies_to"], rule  # scoped to named findings, never the whole rule
