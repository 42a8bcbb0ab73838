"""docs/architecture.md's package layers are the import contract `lint-imports` enforces, and the code
keeps it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _documented_layers() -> list[set[str]]:
    """The numbered list under "Package map": each item one layer (`a | b`), or several joined by
    ", then "."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## Package map", 1)[1].split("\n| package", 1)[0]
    layers: list[set[str]] = []
    for item in re.findall(r"^\d+\. (.+?)(?: — |$)", section, flags=re.M):
        for part in item.split(", then "):
            layers.append({m.strip() for chunk in re.findall(r"`([^`]+)`", part) for m in chunk.split("|")})
    return layers


def _contract_layers() -> list[set[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    [contract] = [c for c in config["contracts"] if c["type"] == "layers"]
    return [
        {m.strip().removeprefix("fleetwright.") for m in layer.split("|")} for layer in contract["layers"]
    ]


def test_the_documented_layers_are_the_contract() -> None:
    assert _documented_layers() == _contract_layers()


def test_every_package_is_in_a_layer() -> None:
    package = ROOT / "layers" / "fleetwright"
    modules = {p.stem for p in package.glob("*.py") if p.stem != "__init__"}
    modules |= {p.name for p in package.iterdir() if (p / "__init__.py").exists()}
    placed = set().union(*_contract_layers())
    assert modules - placed == set(), "add these to the layers in pyproject.toml and docs/architecture.md"


def test_the_code_keeps_the_contract() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "layers")}
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint), "--no-cache"], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout[-3000:]
