"""What a package needs to add ``fleetwright`` subcommands: the subparsers type and :func:`command_group`
(kept apart from ``cli.py`` so command modules do not import the command line that loads them)."""

from __future__ import annotations

import argparse
from typing import TypeAlias

# argparse has no public name for the object add_subparsers() returns.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def command_group(subparsers: Subparsers, name: str, help_text: str) -> Subparsers:
    """The subparsers of ``fleetwright NAME ...``, created on first use so several modules can share it."""
    existing = subparsers.choices.get(name)
    if existing is not None:
        for action in existing._actions:
            if isinstance(action, argparse._SubParsersAction):
                return action
    parser = subparsers.add_parser(name, help=help_text, description=help_text)
    group: Subparsers = parser.add_subparsers(dest=f"{name}_command", required=True, metavar="COMMAND")
    return group
