"""cfn-lint finds no errors in the synthesized templates."""

from __future__ import annotations

import json

import pytest
from cfnlint.api import ManualArgs, lint  # type: ignore[import-untyped]

from tests.support.infra import Synthesis


@pytest.mark.parametrize("which", ["fleetwright", "user"])
def test_template_has_no_lint_errors(synthesis: Synthesis, which: str) -> None:
    stack = getattr(synthesis, which)
    matches = lint(json.dumps(stack.raw), config=ManualArgs(regions=["us-east-1", "eu-west-1"]))
    errors = [f"{m.rule.id} {m.message} ({m.path})" for m in matches if m.rule.id.startswith("E")]
    assert errors == []
