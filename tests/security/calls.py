"""Who calls what: the AWS operations and Kubernetes requests of each Fleetwright function, recorded while
the functions' flows run against moto and the Kubernetes API emulator.

The flows run in one process, one function at a time; :class:`Acting` says which function is running,
records every botocore request under that function's name (``BaseClient._make_api_call``, which every
client call and paginator page goes through) and gives the Kubernetes client that function's bearer token,
so the emulator's audit tells the functions' requests apart by user.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

# The built-in functions, by the names infra/controller_policy.py gives their permissions.
PROVISIONER = "provisioner"
DISRUPTION = "disruption"
INTERRUPTION = "interruption"
TERMINATION = "termination"
FUNCTIONS = (PROVISIONER, DISRUPTION, INTERRUPTION, TERMINATION)


@dataclass(frozen=True, slots=True)
class Call:
    """One AWS request: the service's IAM prefix (its signing name), the operation and its parameters."""

    prefix: str
    operation: str
    params: dict[str, Any] = field(hash=False, compare=False)


@dataclass
class Acting:
    """The function running now (None: set-up and checks, which are not recorded), its calls and the
    bearer token of each function's Kubernetes user."""

    tokens: dict[str, str] = field(default_factory=dict)
    current: str | None = None
    calls: dict[str, list[Call]] = field(default_factory=lambda: defaultdict(list))

    @contextmanager
    def as_function(self, name: str) -> Iterator[None]:
        """Run the block as function ``name``; the function running before resumes after it."""
        previous, self.current = self.current, name
        try:
            yield
        finally:
            self.current = previous

    def record(self, prefix: str, operation: str, params: dict[str, Any]) -> None:
        """Record a request of the function running now (nothing outside a function)."""
        if self.current is not None:
            self.calls[self.current].append(Call(prefix, operation, dict(params)))

    def token(self, refresh: bool = False) -> str:
        """The bearer token of the function running now (a ``TokenSource`` of the Kubernetes client)."""
        if self.current is None:
            raise AssertionError("a Kubernetes request made outside any function")
        return self.tokens[self.current]

    def wrap(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        """``method`` run as function ``name``."""

        def run(*args: Any, **kwargs: Any) -> Any:
            with self.as_function(name):
                return method(*args, **kwargs)

        return run

    def standing_in(self, prefix: str, operation: str, method: Callable[..., Any]) -> Callable[..., Any]:
        """``method`` of an in-process stand-in, recorded as the AWS request the real client makes for it."""

        def run(*args: Any, **kwargs: Any) -> Any:
            self.record(prefix, operation, {})
            return method(*args, **kwargs)

        return run


# What IAM authorizes for a request beyond the action named after its operation.
TRANSACTION_ITEM_ACTIONS = {
    "Put": "dynamodb:PutItem",
    "Update": "dynamodb:UpdateItem",
    "Delete": "dynamodb:DeleteItem",
    "ConditionCheck": "dynamodb:ConditionCheckItem",
}


def iam_actions(call: Call) -> set[str]:
    """The IAM actions AWS authorizes for ``call`` (the Service Authorization Reference's action and
    its dependent actions as Fleetwright's requests use them).

    TransactWriteItems has no action of its own: each item is authorized as its own action. A launch
    (CreateFleet, RunInstances) also needs RunInstances on every resource, CreateTags for the tags it
    applies and PassRole for the launch template's instance profile role; CreateLaunchTemplate with tags
    needs CreateTags; AddRoleToInstanceProfile needs PassRole for the role; CreateInstanceProfile with tags
    needs TagInstanceProfile.
    """
    if call.prefix == "dynamodb" and call.operation == "TransactWriteItems":
        return {TRANSACTION_ITEM_ACTIONS[kind] for item in call.params["TransactItems"] for kind in item}
    actions = {f"{call.prefix}:{call.operation}"}
    if call.operation in ("CreateFleet", "RunInstances"):
        actions |= {"ec2:RunInstances", "iam:PassRole"}
    if call.prefix == "ec2" and call.params.get("TagSpecifications"):
        actions.add("ec2:CreateTags")
    if call.operation == "AddRoleToInstanceProfile":
        actions.add("iam:PassRole")
    if call.operation == "CreateInstanceProfile" and call.params.get("Tags"):
        actions.add("iam:TagInstanceProfile")
    return actions
