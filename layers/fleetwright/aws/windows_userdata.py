"""User data for the Windows AMI families: a PowerShell script running the EKS-optimized AMI's
``Start-EKSBootstrap.ps1``, after the user's own PowerShell, with the kubelet arguments Karpenter passes
(``--node-labels`` and ``--register-with-taints`` always, then the node class's kubelet settings)."""

from __future__ import annotations

from collections.abc import Mapping

from fleetwright.aws.userdata import BootstrapOptions, kubelet_labels

BOOTSTRAP_SCRIPT = r"$env:ProgramFiles\Amazon\EKS\Start-EKSBootstrap.ps1"


def _quoted_pairs(flag: str, values: Mapping[str, object], separator: str) -> str:
    return f'{flag}="{",".join(f"{k}{separator}{v}" for k, v in sorted(values.items()))}"'


def windows_kubelet_args(options: BootstrapOptions) -> list[str]:
    """The ``-KubeletExtraArgs`` words, in Karpenter's order (values in double quotes)."""
    labels = kubelet_labels(options.labels)
    args = []
    if labels:
        args.append(_quoted_pairs("--node-labels", labels, "="))
    args.append(f'--register-with-taints="{",".join(t.render() for t in options.taints)}"')
    kubelet = options.kubelet
    if kubelet is None:
        return args
    if kubelet.max_pods is not None:
        args.append(f"--max-pods={kubelet.max_pods}")
    if kubelet.pods_per_core is not None:
        args.append(f"--pods-per-core={kubelet.pods_per_core}")
    for flag, values, separator in (
        ("--system-reserved", kubelet.system_reserved, "="),
        ("--kube-reserved", kubelet.kube_reserved, "="),
        ("--eviction-hard", kubelet.eviction_hard, "<"),
        ("--eviction-soft", kubelet.eviction_soft, "<"),
        ("--eviction-soft-grace-period", kubelet.eviction_soft_grace_period, "="),
    ):
        if values:
            args.append(_quoted_pairs(flag, values, separator))
    if kubelet.eviction_max_pod_grace_period is not None:
        args.append(f"--eviction-max-pod-grace-period={kubelet.eviction_max_pod_grace_period}")
    if kubelet.image_gc_high_threshold_percent is not None:
        args.append(f"--image-gc-high-threshold={kubelet.image_gc_high_threshold_percent}")
    if kubelet.image_gc_low_threshold_percent is not None:
        args.append(f"--image-gc-low-threshold={kubelet.image_gc_low_threshold_percent}")
    if kubelet.cpu_cfs_quota is not None:
        args.append(f"--cpu-cfs-quota={str(kubelet.cpu_cfs_quota).lower()}")
    return args


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
        command += f" -DNSClusterIP '{options.kubelet.cluster_dns[0]}'"
    lines.append(command)
    lines.append("</powershell>")
    return "\n".join(lines)
