"""User data for the Windows AMI families: a PowerShell script running the EKS-optimized AMI's
``Start-EKSBootstrap.ps1``, after the user's own PowerShell, with the kubelet arguments Karpenter passes
(``--node-labels`` and ``--register-with-taints`` always, then the node class's kubelet settings)."""

from __future__ import annotations

from fleetwright.aws.userdata import BootstrapOptions, kubelet_flags

BOOTSTRAP_SCRIPT = r"$env:ProgramFiles\Amazon\EKS\Start-EKSBootstrap.ps1"


def _quoted(value: str) -> str:
    """A PowerShell single-quoted string: a quote inside is doubled, so a value cannot end it."""
    return "'" + value.replace("'", "''") + "'"


def windows_kubelet_args(options: BootstrapOptions) -> list[str]:
    """The ``-KubeletExtraArgs`` words, in Karpenter's order (lists in double quotes)."""
    return [
        f'{flag.name}="{flag.value}"' if flag.listed else f"{flag.name}={flag.value}"
        for flag in kubelet_flags(options, windows=True)
    ]


def windows_user_data(options: BootstrapOptions) -> str:
    """``<powershell>`` user's script, then ``& Start-EKSBootstrap.ps1 -EKSClusterName ...``."""
    cluster = options.cluster
    lines = ["<powershell>"]
    if options.custom_user_data:
        custom = options.custom_user_data.strip()
        custom = custom.removeprefix("<powershell>").removesuffix("</powershell>").strip()
        if custom:
            lines.append(custom)
    lines.append(f'[string]$EKSBootstrapScriptFile = "{BOOTSTRAP_SCRIPT}"')
    command = (
        f"& $EKSBootstrapScriptFile -EKSClusterName '{cluster.name}' -APIServerEndpoint '{cluster.endpoint}'"
    )
    if cluster.ca_bundle:
        command += f" -Base64ClusterCA '{cluster.ca_bundle}'"
    command += f" -KubeletExtraArgs '{' '.join(windows_kubelet_args(options))}'"
    if options.kubelet is not None and options.kubelet.cluster_dns:
        command += f" -DNSClusterIP {_quoted(options.kubelet.cluster_dns[0])}"
    lines.append(command)
    lines.append("</powershell>")
    return "\n".join(lines)
