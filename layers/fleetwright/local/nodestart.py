"""How long a new EC2 node takes to start, phase by phase: the one model of node start the emulator, the
sandbox and any offline simulation share.

The phases, in order (each measured from the end of the one before):

1. ``boot_seconds`` — EC2 ``pending`` → ``running`` (DescribeInstances shows ``pending`` meanwhile);
2. ``register_seconds`` — ``running`` → the kubelet registers its Node, ``Ready=False`` (the OS boots,
   nodeadm / bootstrap.sh configures the kubelet, TLS bootstrap);
3. ``ready_seconds`` — registered → ``Ready=True`` (the CNI is up); the node lifecycle controller keeps
   ``node.kubernetes.io/not-ready:NoSchedule`` on the Node until then;
4. ``startup_taint_seconds`` — Ready → the agents that own the startup taints (a NodePool's
   ``startupTaints``, e.g. Cilium's ``node.cilium.io/agent-not-ready``) remove them.

:attr:`NodeStart.default` holds published EKS / EC2 figures (sources in ``docs/emulator.md``);
:meth:`NodeStart.fast` shortens every phase for tests that run in real time, and :meth:`NodeStart.scaled`
compresses the default for the demo. No phase is ever skipped: every duration is positive.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

# A phase never takes less than this, so no phase is skipped however much the model is shortened.
MIN_PHASE_SECONDS = 0.001


@dataclass(frozen=True, slots=True)
class NodeStart:
    """The four phases of a node's start, in seconds (see the module docstring)."""

    boot_seconds: float = 10.0
    register_seconds: float = 20.0
    ready_seconds: float = 15.0
    startup_taint_seconds: float = 5.0

    default: ClassVar[NodeStart]

    def __post_init__(self) -> None:
        for name in ("boot_seconds", "register_seconds", "ready_seconds", "startup_taint_seconds"):
            if not getattr(self, name) > 0:
                raise ValueError(f"NodeStart.{name} must be positive (a phase is never skipped)")

    @classmethod
    def fast(cls, seconds: float = 0.05) -> NodeStart:
        """Every phase ``seconds`` long (tests in real time)."""
        return cls(seconds, seconds, seconds, seconds)

    def scaled(self, factor: float) -> NodeStart:
        """Every phase ``factor`` times as long (``0.1``: ten times faster)."""
        return NodeStart(
            max(MIN_PHASE_SECONDS, self.boot_seconds * factor),
            max(MIN_PHASE_SECONDS, self.register_seconds * factor),
            max(MIN_PHASE_SECONDS, self.ready_seconds * factor),
            max(MIN_PHASE_SECONDS, self.startup_taint_seconds * factor),
        )

    @property
    def to_ready(self) -> float:
        """Launch → Node Ready."""
        return self.boot_seconds + self.register_seconds + self.ready_seconds

    @property
    def total(self) -> float:
        """Launch → Node Ready without startup taints."""
        return self.to_ready + self.startup_taint_seconds

    def describe(self) -> str:
        """``boot 10 s, register 20 s, Ready 15 s, startup taints 5 s`` (for logs and the demo)."""
        return (
            f"boot {self.boot_seconds:g} s, register {self.register_seconds:g} s, "
            f"Ready {self.ready_seconds:g} s, startup taints {self.startup_taint_seconds:g} s"
        )


NodeStart.default = NodeStart()
