"""`fleetwright demo` and `fleetwright local up`: the whole scale-up loop on the local sandbox."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from fleetwright.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_demo_scales_up_then_removes_the_empty_nodes(capsys) -> None:  # type: ignore[no-untyped-def]
    code = main(["demo", "--steps", "5,12", "--timeout", "60"])
    out = capsys.readouterr().out
    assert code == 0, out
    # pods may reach the provisioner in more than one batch on a busy machine: any m5.large launch will do
    assert re.search(r"launched i-\w+ m5\.large in us-east-1\w, on-demand \$0\.0960/h for \d pods", out), out
    assert "5 inflate pods Running" in out
    assert "12 inflate pods Running" in out
    assert "all 12 replicas Running" in out
    table = out.split("all 12 replicas Running", 1)[1]
    assert "NODE" in table and "m5.large" in table
    launched = re.search(r"(\d+) nodes launched, \$\d+\.\d{4}/hour", table)
    assert launched, table
    nodes = re.findall(r"^(ip-\S+)\s", table.split("nodes launched", 1)[0], flags=re.MULTILINE)
    assert len(nodes) == int(launched.group(1)) >= 1

    # Scale-down: the Deployment goes, the nodes are seen empty, then removed after consolidateAfter.
    down = out.split("kubectl delete deployment/inflate", 1)[1]
    assert "consolidateAfter default=1m" in down
    ahead = down.index("moves the disruption clock 1m ahead")
    assert "disruption: emptiness" not in down[:ahead]  # not before consolidateAfter
    for node in nodes:
        assert re.search(rf"disruption: emptiness \(Empty\) {re.escape(node)} \[", down), down
        assert f"node {node} deleted" in down
    executions = re.findall(
        r"termination workflow i-\w+-Empty-\d+ SUCCEEDED: cordon → drain → terminate", down
    )
    assert len(executions) == len(nodes)
    plural = "s" if len(nodes) != 1 else ""
    assert f"{len(nodes)} node{plural} removed, no instance left running; $0.0000/hour" in down


def test_demo_fails_with_the_reason_when_pods_cannot_run(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    for name in ("ec2nodeclass.yaml", "deployment.yaml"):
        (manifests / name).write_text((ROOT / "examples/inflate" / name).read_text())
    nodepool = (ROOT / "examples/inflate/nodepool.yaml").read_text().replace('cpu: "100"', 'cpu: "1"')
    (manifests / "nodepool.yaml").write_text(nodepool)
    from fleetwright.local.demo import run_demo
    from fleetwright.local.sandbox import SandboxOptions

    out = io.StringIO()
    code = run_demo(out, steps=(3,), timeout=8, options=SandboxOptions(manifests=[str(manifests)]))
    assert code == 1
    text = out.getvalue()
    assert "provisioner: pods cannot be scheduled: NodePool default: limit cpu=1 reached" in text
    assert "FAILED: 3 pods not running" in text


def test_local_up_serves_kubectl_and_stops_on_sigterm(tmp_path: Path) -> None:
    kubectl = ROOT / ".tools/bin/kubectl"
    assert kubectl.exists(), "run .ci/install-kubectl first"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fleetwright.cli",
            "local",
            "up",
            "--port",
            "0",
            "--kubeconfig",
            str(tmp_path),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        lines = []
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            line = process.stdout.readline()
            lines.append(line)
            if "Ctrl-C stops everything" in line:
                break
        text = "".join(lines)
        assert f"export KUBECONFIG={tmp_path}/config" in text, text
        nodes = subprocess.run(
            [str(kubectl), "--kubeconfig", str(tmp_path / "config"), "get", "nodes"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert "ip-10-0-0-10.ec2.internal" in nodes.stdout, nodes.stderr
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0


def test_demo_interrupt_replaces_the_spot_node_and_moves_the_pods(capsys) -> None:  # type: ignore[no-untyped-def]
    code = main(["demo", "--interrupt", "--no-scale-down", "--steps", "5", "--timeout", "60"])
    out = capsys.readouterr().out
    assert code == 0, out
    warned = re.search(r"EC2 Spot Instance Interruption Warning for (i-\w+) \((\S+),", out)
    assert warned, out
    instance, node = warned.groups()
    after = out[warned.end() :]
    replacement = re.search(r"launched (i-\w+) \S+ in \S+, spot", after)
    # On a busy machine the 5 pods may arrive in two batches and get two nodes; then the other node may
    # hold the interrupted node's pods and no replacement is needed. With one node, one must launch.
    if len(re.findall(r"launched i-\w+ ", out[: warned.start()])) == 1:
        assert replacement and replacement.group(1) != instance, out
    assert "termination workflow SUCCEEDED: cordon → drain → terminate" in after
    assert f"node {node} gone; all 5 replicas Running elsewhere" in after
    assert node not in out.split("NODE", 1)[1]  # the final table lists only the replacement
