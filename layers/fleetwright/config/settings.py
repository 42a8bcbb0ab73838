"""The provisioner's configuration: NodePool/EC2NodeClass documents and options from the environment.

Documents come from a bundled file (or directory) or an SSM parameter, and are checked exactly as
``fleetwright validate`` checks them, so a bad deployment fails its first invocation with the same lines
the command prints. With neither (or a parameter holding no document) the functions use the NodePools
applied to the cluster only (``fleetwright.provisioning.nodepool_source``).
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleetwright.config.environment import ConfigError, FunctionEnvironment
from fleetwright.config.names import (
    ENV_CLUSTER,
    ENV_NODEPOOLS_FILE,
    ENV_NODEPOOLS_PARAMETER,
    ENV_REGION,
    ENV_TABLE,
)
from fleetwright.model.ec2nodeclass import EC2NodeClass
from fleetwright.model.nodepool import NodePool

__all__ = ["ConfigError", "HandlerSettings", "ProvisionerConfig", "settings_from_env"]


def _option(name: str) -> Any:
    """The default of a provisioner option: declared once, on its ``FunctionEnvironment`` field."""
    return FunctionEnvironment.default_of(name)


@dataclass(slots=True)
class ProvisionerConfig:
    """What the provisioner provisions and how it paces itself.

    Batching: a batch opens with the first pending pod and closes after ``batch_idle_seconds`` without a
    new one, or ``batch_max_seconds`` after it opened. Claims whose node has not registered
    ``registration_timeout_seconds`` after launch are terminated.

    Each pass holds the lease (``lease_seconds`` long, renewed while launching); a pass or a replacement
    launch waits at most ``lease_wait_seconds`` for another launcher's. Launches end by the lease's
    expiry (or the invocation's deadline) less ``launch_margin_seconds``, recorded on the claim as its
    launch deadline. A claim left ``Launching`` by a launcher that died is matched to its instance by
    tag, or failed, ``settle_grace_seconds`` after its launch deadline (claims recorded without one:
    ``orphan_grace_seconds`` after creation). ``economy`` makes each invocation a single pass instead of
    watching until the deadline.

    Blast radius (``docs/provisioner.md``, "Bounded blast radius"): at most ``launch_rate_limit``
    instances are launched in any ``launch_rate_window_seconds``, cluster-wide; a NodePool whose claims
    timed out ``breaker_threshold`` times within ``breaker_window_seconds`` with none of its nodes Ready
    within that window launches nothing for ``breaker_cool_off_seconds`` (doubled at each failed retry, at
    most 4 h).

    The options read from the environment take their defaults from ``FunctionEnvironment``, where each
    is declared with its variable.
    """

    cluster_name: str
    nodepools: list[NodePool] = field(default_factory=list)
    nodeclasses: list[EC2NodeClass] = field(default_factory=list)
    batch_idle_seconds: float = _option("batch_idle_seconds")
    batch_max_seconds: float = _option("batch_max_seconds")
    registration_timeout_seconds: float = _option("registration_timeout_seconds")
    deadline_margin_seconds: float = _option("deadline_margin_seconds")
    lease_seconds: float = _option("lease_seconds")
    reconcile_interval_seconds: float = _option("reconcile_interval_seconds")
    orphan_grace_seconds: float = _option("orphan_grace_seconds")
    lease_wait_seconds: float = _option("lease_wait_seconds")
    launch_margin_seconds: float = _option("launch_margin_seconds")
    settle_grace_seconds: float = _option("settle_grace_seconds")
    launch_parallelism: int = _option("launch_parallelism")
    launch_rate_limit: int = _option("launch_rate_limit")
    launch_rate_window_seconds: float = _option("launch_rate_window_seconds")
    breaker_threshold: int = _option("breaker_threshold")
    breaker_window_seconds: float = _option("breaker_window_seconds")
    breaker_cool_off_seconds: float = _option("breaker_cool_off_seconds")
    economy: bool = _option("economy")
    failed_claim_ttl_seconds: float = 3600.0
    terminated_claim_ttl_seconds: float = 86400.0
    warnings: list[str] = field(default_factory=list)

    def nodeclass(self, name: str) -> EC2NodeClass | None:
        """The EC2NodeClass called ``name``."""
        return next((nc for nc in self.nodeclasses if nc.name == name), None)


@dataclass(slots=True)
class HandlerSettings:
    """Everything the Lambda handler reads from its environment."""

    config: ProvisionerConfig
    table_name: str
    region: str
    kubeconfig: str | None = None
    tracing: bool = False
    sources: list[str] = field(default_factory=list)


def load_documents(paths: list[str]) -> tuple[list[NodePool], list[EC2NodeClass], list[str]]:
    """NodePools, EC2NodeClasses and warnings from YAML files or directories.

    Raises :class:`ConfigError` with the lines ``fleetwright validate`` would print as errors, or when
    there is no NodePool.
    """
    from fleetwright.manifests import load_manifests
    from fleetwright.model.errors import DocumentError
    from fleetwright.validation import validate

    _, warnings, errors = validate(paths)
    if errors:
        raise ConfigError("\n".join(errors))
    try:
        manifests = load_manifests(paths)
    except DocumentError as error:  # a non-Karpenter document the validator skipped is broken
        raise ConfigError(error.render()) from None
    if not manifests.nodepools:
        raise ConfigError(f"no NodePool found in {', '.join(paths)}")
    return list(manifests.nodepools), list(manifests.nodeclasses), warnings


def has_documents(text: str) -> bool:
    """True when ``text`` holds at least one YAML document (not only comments and separators)."""
    import yaml

    try:
        return any(doc is not None for doc in yaml.safe_load_all(text))
    except yaml.YAMLError:
        return True  # a broken document: validation reports it


def parameter_file(name: str, text: str, directory: str | None = None) -> str:
    """Write an SSM parameter's documents to a file named after the parameter (so validation messages
    name it) and return the path."""
    base = Path(directory or tempfile.gettempdir()) / "fleetwright-parameters"
    base.mkdir(parents=True, exist_ok=True)
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name.strip("/")) or "parameter"
    path = base / f"{safe}.yaml"
    path.write_text(text)
    return str(path)


def ssm_parameter_reader(region: str) -> Callable[[str], str]:
    """Reads an SSM parameter's (decrypted) value with the process's shared clients for ``region``."""

    def read(name: str) -> str:
        from fleetwright.aws.clients import clients_for  # boto3: only when a parameter is configured

        answer = clients_for(region).ssm.get_parameter(Name=name, WithDecryption=True)
        return str(answer["Parameter"]["Value"])

    return read


def settings_from_env(
    environ: Mapping[str, str] | FunctionEnvironment | None = None,
    *,
    read_parameter: Callable[[str], str] | None = None,
    base_dir: str | None = None,
) -> HandlerSettings:
    """Read and validate the handler's configuration from ``environ`` (default: ``os.environ``; or the
    environment already parsed).

    ``read_parameter(name)`` returns an SSM parameter's value (used with ``FLEETWRIGHT_NODEPOOLS_PARAMETER``;
    default: SSM GetParameter in the function's region); relative ``FLEETWRIGHT_NODEPOOLS_FILE`` paths are
    read from ``base_dir`` (the Lambda task root).
    Raises :class:`ConfigError`.
    """
    env = environ if isinstance(environ, FunctionEnvironment) else FunctionEnvironment.from_environ(environ)
    env.require(ENV_CLUSTER, ENV_TABLE)
    if not env.region:
        raise ConfigError(f"missing environment variable {ENV_REGION}")
    files = list(env.nodepools_files)
    parameter = env.nodepools_parameter
    if files and parameter:
        raise ConfigError(f"set only one of {ENV_NODEPOOLS_FILE} and {ENV_NODEPOOLS_PARAMETER}")
    if parameter:
        try:
            text = (read_parameter or ssm_parameter_reader(env.region))(parameter)
        except Exception as error:
            raise ConfigError(
                f"{ENV_NODEPOOLS_PARAMETER}: cannot read SSM parameter {parameter}: {error}"
            ) from None
        # A deployment without a NodePool file stores a parameter with no document (only a comment).
        paths = [parameter_file(parameter, text)] if has_documents(text) else []
    elif files:
        root = Path(base_dir or env.task_root or ".")
        paths = [str(p if Path(p).is_absolute() else root / p) for p in files]
    else:
        paths = []
    # No documents configured: NodePools come only from the cluster (kubectl, Helm, Argo CD).
    # v1alpha5 AWSNodeTemplates without instanceProfile take the deployment's node role.
    from fleetwright.model.legacy import stack_node_role

    with stack_node_role(env.node_role):
        nodepools, nodeclasses, warnings = load_documents(paths) if paths else ([], [], [])
    config = ProvisionerConfig(
        cluster_name=env.cluster_name,
        nodepools=nodepools,
        nodeclasses=nodeclasses,
        warnings=warnings,
        **env.provisioner_options(),
    )
    return HandlerSettings(
        config=config,
        table_name=env.table_name,
        region=env.region,
        kubeconfig=env.kubeconfig,
        tracing=env.tracing,
        sources=[parameter] if parameter else files,
    )
