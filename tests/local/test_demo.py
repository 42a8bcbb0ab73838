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

import pytest

from fleetwright.cli import main

# Left out of `make quick` (tests/conftest.py); waits for other threads on the real clock.
pytestmark = [pytest.mark.slow, pytest.mark.real_time]

ROOT = Path(__file__).resolve().parents[2]


def test_demo_applies_nodepools_with_kubectl_follows_an_edit_then_removes_the_nodes(capsys) -> None:  # type: ignore[no-untyped-def]
    code = main(["demo", "--steps", "5,12", "--timeout", "60"])
    out = capsys.readouterr().out
    assert code == 0, out
    # The NodePool and EC2NodeClass reach the cluster through kubectl; the provisioner reads them from there.
    assert "kubectl apply -f examples/inflate/ec2nodeclass.yaml -f examples/inflate/nodepool.yaml" in out
    assert "nodepool.karpenter.sh/default created" in out
    assert "ec2nodeclass.karpenter.k8s.aws/default created" in out
    assert "provisioner: NodePools from the cluster: default" in out

    before, after = out.split("kubectl patch nodepool default --type merge", 1)
    # pods may reach the provisioner in more than one batch on a busy machine: any m5.large launch will do
    assert re.search(r"launched i-\w+ m5\.large in us-east-1\w, on-demand \$0\.0960/h for \d pods", before)
    assert "5 inflate pods Running" in before
    # Every phase of a node's start shows, in order, time compressed and said so.
    assert "new nodes start 10x faster than on EKS, every phase kept" in before
    node = re.search(r"node (ip-\S+) registered NotReady \(aws:///\S+; ([^)]*)\)", before)
    assert node, before
    assert "node.kubernetes.io/not-ready" in node.group(2) and "node.cilium.io/agent-not-ready" in node.group(
        2
    )
    name = re.escape(node.group(1))
    phases = [
        rf"node {name} registered NotReady",
        rf"node {name} Ready",
        rf"node {name}: startup taints removed by their agents \(node.cilium.io/agent-not-ready\)",
    ]
    found = [re.search(p, before) for p in phases]
    assert all(found), before
    assert [m.start() for m in found if m] == sorted(m.start() for m in found if m), before
    # Fleetwright labels it initialized at its next reconciliation (every 5 s), maybe after the pods run.
    assert out.index(f"node {node.group(1)} initialized") > out.index(f"node {node.group(1)} Ready")
    assert re.search(r"instance i-\w+ running", before)
    assert not re.search(r"launched i-\w+ \S+ in \S+, spot", before), before
    # After the patch to spot, the next scale-up launches spot capacity only.
    assert "nodepool.karpenter.sh/default patched" in after
    assert "NodePool default now requires spot capacity" in after
    scale_up = after.split("all 12 replicas Running", 1)[0]
    assert "12 inflate pods Running" in scale_up
    spot = re.findall(r"launched (i-\w+) \S+ in \S+, spot", scale_up)
    assert spot, scale_up
    assert not re.search(r"launched i-\w+ \S+ in \S+, on-demand", scale_up), scale_up
    assert f"the edit is followed: {len(spot)} launch" in scale_up and "all spot" in scale_up

    # What kubectl shows afterwards: the NodeClaims, a pod's Events, the NodePool counting its nodes.
    shown = re.split(r"^NODE\s", after.split("all 12 replicas Running", 1)[1], maxsplit=1, flags=re.M)[0]
    claims = shown.split("kubectl get nodeclaims", 1)[1].split("kubectl get events", 1)[0]
    assert re.search(r"NAME\s+TYPE\s+CAPACITY\s+ZONE\s+NODE\s+READY\s+AGE", claims), claims
    claim_rows = re.findall(
        r"^\s+(default-\w+)\s+(\S+)\s+(spot|on-demand)\s+us-east-1\w\s+ip-\S+\s+True", claims, re.M
    )
    assert sorted(r[2] for r in claim_rows).count("spot") == len(spot), claims
    events = shown.split("kubectl get events --field-selector involvedObject.name=inflate-", 1)[1]
    assert re.search(
        r"Normal\s+Nominated\s+fleetwright\s+Pod should schedule on: nodeclaim/default-\w+", events
    )
    pools = shown.split("kubectl get nodepools", 1)[1]
    assert re.search(rf"default\s+default\s+{len(claim_rows)}\s+True", pools), pools

    table = out.split("all 12 replicas Running", 1)[1].split("kubectl delete", 1)[0]
    launched = re.search(r"(\d+) nodes launched, \$\d+\.\d{4}/hour", table)
    assert launched, table
    rows = re.findall(r"^(ip-\S+)\s+\S+\s+\S+\s+(spot|on-demand)\s", table, flags=re.MULTILINE)
    assert len(rows) == int(launched.group(1)) == len(claim_rows)

    # Scale-down: the on-demand nodes no longer match the edited NodePool (drift); the spot nodes go
    # once they have been empty for consolidateAfter.
    down = out.split("kubectl delete deployment/inflate", 1)[1]
    assert "consolidateAfter default=1m" in down
    ahead = down.index("moves the disruption clock 1m ahead")
    assert "disruption: emptiness" not in down[:ahead]  # not before consolidateAfter
    for node, capacity in rows:
        method = "drift \\(Drifted\\)" if capacity == "on-demand" else "emptiness \\(Empty\\)"
        assert re.search(rf"disruption: {method} {re.escape(node)} \[", down), down
        assert f"node {node} deleted" in down
    executions = re.findall(
        r"termination workflow i-\w+-(?:Empty|Drifted)-\d+ SUCCEEDED: cordon → drain → terminate", down
    )
    assert len(executions) == len(rows)
    plural = "s" if len(rows) != 1 else ""
    assert f"{len(rows)} node{plural} removed, no instance left running; $0.0000/hour" in down


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


def test_local_up_provisions_for_a_nodepool_applied_with_kubectl(tmp_path: Path) -> None:
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
            "--node-start-scale",
            "0.1",  # every phase of a node's start kept, ten times shorter
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(kubectl), "--kubeconfig", str(tmp_path / "config"), *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
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
        apply = "kubectl apply -f examples/inflate/ec2nodeclass.yaml -f examples/inflate/nodepool.yaml"
        assert apply in text, text
        assert "kubectl get nodeclaims,nodepools" in text
        assert "kubectl get events --field-selector involvedObject.kind=Pod" in text
        assert "ip-10-0-0-10.ec2.internal" in run("get", "nodes").stdout
        # Karpenter's CRDs are served and no NodePool exists until the user applies one.
        assert run("get", "nodepools").returncode == 0
        assert "default" not in run("get", "nodepools", "-o", "name").stdout

        assert run(*apply.split()[1:]).returncode == 0
        assert run("scale", "deployment/inflate", "--replicas=2").returncode == 0
        claims = ""
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not re.search(
            r"default-\w+\s+\S+\s+on-demand\s+us-east-1\w\s+ip-", claims
        ):
            time.sleep(1)
            claims = run("get", "nodeclaims").stdout
        assert re.search(r"default-\w+\s+\S+\s+on-demand\s+us-east-1\w\s+ip-", claims), claims
        events = run("get", "events", "--field-selector", "involvedObject.kind=Pod", "-o", "name").stdout
        assert events.strip(), "no Events about the pods"
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    # Only what a user needs: the AWS server's line per request is off unless --aws-log asks for it.
    printed = "".join(lines) + (process.stdout.read() if process.stdout else "")
    assert ' HTTP/1.1" 200' not in printed, printed[-2000:]


def test_local_up_explains_a_manifest_it_cannot_read(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "fleetwright.cli", "local", "up", "--port", "0", "-f", str(tmp_path / "none")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert "no such file or directory" in done.stderr
    assert "Traceback" not in done.stderr


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
    assert node not in out.rsplit("\nNODE ", 1)[1]  # the final table lists only the replacement
