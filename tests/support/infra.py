"""The infrastructure tests' helpers: the synthesized stacks the ``synthesis`` fixture
(``tests/infra/conftest.py``) returns, and readers of a CloudFormation template (intrinsics rendered as
text, the one resource of a kind, a Lambda function by description, the nodes' role)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aws_cdk import assertions

    from infra.autoscaler import FleetwrightAutoscaler

REPO_ROOT = Path(__file__).resolve().parents[2]
CLUSTER = "prod-cluster"
ALARM_TOPIC = "arn:aws:sns:us-east-1:123456789012:fleetwright-alarms"
USER_STACK = "UserApp"
EXAMPLE_NODECLASS = REPO_ROOT / "examples" / "inflate" / "ec2nodeclass.yaml"
EXAMPLE_NODEPOOL = REPO_ROOT / "examples" / "inflate" / "nodepool.yaml"


@dataclass
class SynthesizedStack:
    """A synthesized stack: its template (as JSON and for ``assertions``) and its annotations."""

    name: str
    raw: dict[str, Any]
    template: assertions.Template
    messages: list[tuple[str, str, str]]  # (level, construct path, text)

    def resources(self, resource_type: str) -> dict[str, dict[str, Any]]:
        """The template's resources of one type, by logical id."""
        return {k: r for k, r in self.raw["Resources"].items() if r["Type"] == resource_type}


@dataclass
class Synthesis:
    outdir: Path
    fleetwright: SynthesizedStack
    autoscaler: FleetwrightAutoscaler  # the one in ``fleetwright``
    user: SynthesizedStack
    user_autoscaler: FleetwrightAutoscaler


def render(value: Any) -> Any:
    """A template value with intrinsic functions written as text: ``{"Ref": "X"}`` → ``${X}``,
    ``Fn::GetAtt`` → ``${X.Attr}``, ``Fn::Join`` joined; lists and dicts rendered item by item."""
    if isinstance(value, list):
        return [render(v) for v in value]
    if isinstance(value, dict):
        if set(value) == {"Ref"}:
            return "${" + value["Ref"] + "}"
        if set(value) == {"Fn::GetAtt"}:
            return "${" + ".".join(value["Fn::GetAtt"]) + "}"
        if set(value) == {"Fn::Join"}:
            separator, parts = value["Fn::Join"]
            return separator.join(str(render(p)) for p in parts)
        return {k: render(v) for k, v in value.items()}
    return value


def only(resources: dict[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """The logical id and body of the single resource in ``resources``."""
    assert len(resources) == 1, sorted(resources)
    return next(iter(resources.items()))


def logical_id(reference: str) -> str:
    """``X`` from a rendered reference ``${X}`` or ``${X.Attr}``."""
    return reference.removeprefix("${").removesuffix("}").split(".")[0]


def function_by_description(stack: SynthesizedStack, start: str) -> tuple[str, dict[str, Any]]:
    """The one Lambda function whose description starts with ``start``."""
    functions = stack.resources("AWS::Lambda::Function")
    return only({k: f for k, f in functions.items() if f["Properties"]["Description"].startswith(start)})


def node_role(stack: SynthesizedStack) -> tuple[str, dict[str, Any]]:
    """The role EC2 assumes (the nodes' role)."""
    return only(
        {
            k: r
            for k, r in stack.resources("AWS::IAM::Role").items()
            if "ec2.amazonaws.com" in str(r["Properties"]["AssumeRolePolicyDocument"])
        }
    )


Template = dict[str, Any]
Synthesized = tuple[Template, list[tuple[str, str]]]
