"""Every Python package Fleetwright installs (the development environment, CI and the Lambda layer) comes
from a lock that pins it with the hashes of its files, and the CDK command line from an npm lockfile: a
changed file on an index or a mirror fails the install instead of running. The locks must also agree with
the pins they were made from (``make lock`` after changing a requirements file)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from infra.layer import EXCLUDED_REQUIREMENTS, layer_requirements, lock_entries, pip_command, requirement_name
from tests.support.infra import REPO_ROOT

RUNTIME_LOCK = REPO_ROOT / "requirements.lock"
DEV_LOCK = REPO_ROOT / "requirements-dev.lock"
HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}")


def _pins(requirements: Path) -> dict[str, str]:
    """name -> version of the ``name==version`` lines of a requirements file (following ``-r``)."""
    pins: dict[str, str] = {}
    for raw in requirements.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("-r "):
            pins.update(_pins(requirements.parent / line[3:].strip()))
        elif "==" in line:
            pins[requirement_name(line)] = line.split("==", 1)[1].split(";", 1)[0].strip()
    return pins


def _locked(lock: Path) -> dict[str, set[str]]:
    """name -> versions locked (two when markers split them by Python version)."""
    locked: dict[str, set[str]] = {}
    for entry in lock_entries(lock):
        version = re.match(r"[^=]+==([^ ;]+)", entry)
        assert version is not None, f"{lock.name}: not pinned: {entry[:80]}"
        assert HASH.search(entry), f"{lock.name}: no hash: {entry[:80]}"
        locked.setdefault(requirement_name(entry), set()).add(version.group(1))
    return locked


def test_every_pin_is_locked_at_its_version_with_hashes() -> None:
    for requirements, lock in (
        (REPO_ROOT / "requirements.txt", RUNTIME_LOCK),
        (REPO_ROOT / "requirements-dev.txt", DEV_LOCK),
    ):
        pins, locked = _pins(requirements), _locked(lock)
        assert len(pins) >= 15
        stale = {name: version for name, version in pins.items() if locked.get(name) != {version}}
        assert stale == {}, f"{lock.name} is stale for {stale}: run `make lock`"


def test_the_development_lock_has_the_runtime_lock_s_versions() -> None:
    runtime, development = _locked(RUNTIME_LOCK), _locked(DEV_LOCK)
    assert {name: development.get(name) for name in runtime} == runtime


def test_make_and_ci_install_only_hashed_packages() -> None:
    makefile = (REPO_ROOT / "Makefile").read_text()
    installs = [line.strip() for line in makefile.splitlines() if "pip install" in line]
    assert installs == [
        "$(BIN)/python -m pip install --quiet --require-hashes -r requirements-dev.lock",
        # the package itself, built by the locked setuptools (build isolation would fetch it unchecked)
        "$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .",
    ]
    assert re.search(r"^\$\(STAMP\): requirements-dev\.lock", makefile, re.MULTILINE)
    assert re.search(r"^lock: .*\n\t.*\.ci/lock", makefile, re.MULTILINE)
    # CI builds the environment through make (.ci/run), so from the lock too.
    assert "make test" in (REPO_ROOT / ".ci" / "run").read_text()
    assert {"setuptools", "wheel", "pip", "uv"} <= set(_locked(DEV_LOCK))


def test_the_layer_installs_exactly_the_locked_files(tmp_path: Path) -> None:
    requirements = layer_requirements()
    names = {requirement_name(r) for r in requirements}
    # The runtime lock less what the Lambda runtime provides; every one with its hashes.
    assert names == set(_locked(RUNTIME_LOCK)) - EXCLUDED_REQUIREMENTS
    assert {"pydantic", "pydantic-core", "kubernetes"} <= names and not names & EXCLUDED_REQUIREMENTS
    assert all(HASH.search(r) for r in requirements)
    command = pip_command(tmp_path, tmp_path / "requirements.txt")
    assert {"--require-hashes", "--no-deps"} <= set(command)
    assert command[-2:] == ["--requirement", str(tmp_path / "requirements.txt")]


def test_the_cdk_cli_is_installed_from_its_lockfile() -> None:
    cli = REPO_ROOT / "infra" / "cli"
    wanted = json.loads((cli / "package.json").read_text())["dependencies"]["aws-cdk"]
    locked = json.loads((cli / "package-lock.json").read_text())["packages"]["node_modules/aws-cdk"]
    assert locked["version"] == wanted and wanted.startswith("2.")  # 3.x cannot read aws-cdk-lib 2's output
    assert locked["integrity"].startswith("sha512-")
    synth = (REPO_ROOT / ".ci" / "cdk-synth").read_text()
    assert "npm ci --prefix infra/cli" in synth and "npm install" not in synth
