"""The shared Lambda layer: the ``fleetwright`` package and its runtime dependencies, built without Docker.

The layer is assembled on the machine running ``cdk synth``: the package is copied (minus the parts only
the command line and the local emulator use) and the dependencies locked in ``requirements.lock`` (the
closure of ``requirements.txt``, each with the hashes of its files; ``make lock``) are installed with
``pip install --require-hashes --no-deps --platform manylinux2014_aarch64 --only-binary=:all:``, so the
wheels match the Lambda runtime (arm64, CPython 3.14) whatever the build machine is, and a wheel whose bytes
differ from the ones locked (a tampered index or mirror) fails the build.

boto3/botocore are left out on purpose: the Lambda Python runtime ships them, and leaving them out keeps
the layer small (see docs/deploy.md for the measured sizes). The official ``kubernetes`` client and its
dependencies (urllib3, requests, oauthlib, websocket-client, ...) are pinned in ``requirements.txt`` and go
in like any other requirement. The pinned urllib3 may shadow the runtime's copy for botocore too, which is
fine: botocore accepts any urllib3 below 3.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import cast

import jsii
from aws_cdk import AssetHashType, BundlingOptions, DockerImage, ILocalBundling
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

REPO_ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIR = REPO_ROOT / "layers" / "fleetwright"
REQUIREMENTS_FILE = REPO_ROOT / "requirements.txt"
LOCK_FILE = REPO_ROOT / "requirements.lock"

RUNTIME = lambda_.Runtime.PYTHON_3_14
ARCHITECTURE = lambda_.Architecture.ARM_64
PIP_PLATFORM = "manylinux2014_aarch64"
PIP_PYTHON_VERSION = "3.14"  # must match RUNTIME

# Provided by the Lambda runtime; installing them would add ~33 MB (unzipped) to the layer.
EXCLUDED_REQUIREMENTS = frozenset({"boto3", "botocore", "s3transfer", "jmespath"})
# Parts of the package no Lambda function imports: the command line and ``explain``, the local API emulator,
# the offline planner and manifest loader (the functions read the cluster, not files) and the catalog
# generator.
EXCLUDED_PATHS = ("local", "explain", "cli.py", "plan.py", "catalog/generate.py")
_IGNORED_NAMES = ("__pycache__", "*.pyc", ".mypy_cache")


def lock_entries(lock_file: Path) -> list[str]:
    """The requirements of a hashed lock file, one string each (``name==version [; marker] --hash=...``):
    continuation lines joined, comments and blanks dropped."""
    entries: list[str] = []
    current: list[str] = []
    for raw in lock_file.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip() if not raw.lstrip().startswith("--hash") else raw.strip()
        if not line:
            continue
        continued = line.endswith("\\")
        current.append(line.rstrip("\\").strip())
        if not continued:
            entries.append(" ".join(current))
            current = []
    if current:
        entries.append(" ".join(current))
    return entries


def requirement_name(entry: str) -> str:
    """The normalized project name of a requirement line."""
    name = re.split(r"[=<>!~;\[ ]", entry, maxsplit=1)[0].strip()
    return re.sub(r"[-_.]+", "-", name).lower()


def layer_requirements(lock_file: Path = LOCK_FILE) -> list[str]:
    """The locked requirements that go into the layer (runtime-provided ones dropped), with their hashes."""
    return [e for e in lock_entries(lock_file) if requirement_name(e) not in EXCLUDED_REQUIREMENTS]


def pip_command(target: Path, requirements_file: Path) -> list[str]:
    """``pip install`` of the hashed ``requirements_file`` into ``target`` as wheels for the Lambda platform:
    exactly the files locked (``--require-hashes``), nothing resolved beyond them (``--no-deps``)."""
    return [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--quiet",  # twice: only errors, not warnings about the local pip configuration
        "--disable-pip-version-check",
        "--no-compile",
        "--require-hashes",
        "--no-deps",
        "--target",
        str(target),
        "--platform",
        PIP_PLATFORM,
        "--only-binary=:all:",
        "--python-version",
        PIP_PYTHON_VERSION,
        "--implementation",
        "cp",
        "--requirement",
        str(requirements_file),
    ]


def copy_package(source: Path, destination: Path) -> None:
    """Copy the package to ``destination`` without the excluded modules and caches."""
    shutil.copytree(source, destination, ignore=shutil.ignore_patterns(*_IGNORED_NAMES))
    for relative in EXCLUDED_PATHS:
        path = destination / relative
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def _layer_files(source: Path) -> Iterable[Path]:
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source).as_posix()
        if not path.is_file() or "__pycache__" in relative or path.suffix == ".pyc":
            continue
        if any(relative == ex or relative.startswith(ex + "/") for ex in EXCLUDED_PATHS):
            continue
        yield path


def layer_hash(source: Path = PACKAGE_DIR, requirements: Sequence[str] | None = None) -> str:
    """A hash of everything that decides the layer's content, so an unchanged layer is not rebuilt."""
    digest = hashlib.sha256()
    for part in (PIP_PLATFORM, PIP_PYTHON_VERSION, *(requirements or layer_requirements())):
        digest.update(part.encode() + b"\0")
    for path in _layer_files(source):
        digest.update(path.relative_to(source).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


@jsii.implements(ILocalBundling)
class PipLayerBundling:
    """Builds the layer directory (``python/...``) on the local machine instead of in a container."""

    def __init__(self, source: Path, requirements: Sequence[str]) -> None:
        self.source = source
        self.requirements = list(requirements)

    def try_bundle(self, output_dir: str, options: BundlingOptions) -> bool:  # jsii passes both
        """Copy the package and install the wheels into ``output_dir/python``; True when done."""
        target = Path(output_dir) / "python"
        copy_package(self.source, target / "fleetwright")
        if self.requirements:
            with tempfile.TemporaryDirectory() as scratch:
                requirements_file = Path(scratch) / "requirements.txt"
                requirements_file.write_text("\n".join(self.requirements) + "\n", encoding="utf-8")
                subprocess.run(pip_command(target, requirements_file), check=True)
        # Console scripts of the dependencies are useless in a layer.
        shutil.rmtree(target / "bin", ignore_errors=True)
        drop_runtime_provided(target)
        return True


def drop_runtime_provided(target: Path) -> None:
    """Remove what a requirement pulled in that the Lambda runtime provides (the X-Ray SDK depends on
    botocore): the runtime's own copy is the one the functions load, so a second one only costs space."""
    for name in sorted(EXCLUDED_REQUIREMENTS):
        shutil.rmtree(target / name, ignore_errors=True)
        for info in target.glob(f"{name}-*.dist-info"):
            shutil.rmtree(info, ignore_errors=True)


def layer_code(source: Path = PACKAGE_DIR, requirements: Sequence[str] | None = None) -> lambda_.Code:
    """The layer's code asset, bundled locally (the Docker image is a placeholder that is never run)."""
    pinned = layer_requirements() if requirements is None else list(requirements)
    return lambda_.Code.from_asset(
        str(source),
        asset_hash_type=AssetHashType.CUSTOM,
        asset_hash=layer_hash(source, pinned),
        bundling=BundlingOptions(
            image=DockerImage.from_registry("scratch"),
            # jsii calls try_bundle(output_dir, options) positionally, unlike the keyword-style stub.
            local=cast(ILocalBundling, PipLayerBundling(source, pinned)),
        ),
    )


class FleetwrightLayer(lambda_.LayerVersion):
    """The layer every Fleetwright function uses: ``import fleetwright`` and its dependencies."""

    def __init__(self, scope: Construct, construct_id: str) -> None:
        super().__init__(
            scope,
            construct_id,
            code=layer_code(),
            compatible_runtimes=[RUNTIME],
            compatible_architectures=[ARCHITECTURE],
            description="Fleetwright autoscaler package and its runtime dependencies (requirements.lock)",
        )
