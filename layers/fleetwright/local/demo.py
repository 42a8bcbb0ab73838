"""``fleetwright demo``: the classic Karpenter walkthrough, on this machine, with no AWS account.

It starts the sandbox (moto, the Kubernetes API emulator with a scheduler, an EC2-driven kubelet and
Karpenter's CRDs, Fleetwright's provisioner), ``kubectl apply``-s the example NodePool and EC2NodeClass,
scales the example Deployment to 5 and then 30 replicas, and prints a timeline (seconds since start: launches
with instance type, zone, capacity type and $/h, then every phase of each node's start — instance running,
Node registered NotReady with its not-ready and startup taints, Ready, startup taints removed, initialized —
and the running pods) and a table of nodes. Nodes start as on EKS with every phase, ten times faster
(``DEMO_NODE_START``; the timeline's second line says so). Between the steps the NodePool's capacity type is
switched with ``kubectl patch`` and the next step's launches follow it. After the scale-up it prints what
kubectl shows: NodeClaims, one pod's Events, NodePools. Then it scales down: the Deployment is deleted and the
disruption controller removes the empty nodes through the termination workflow once they have been empty for
the NodePool's ``consolidateAfter``. Exit code 0 when every replica runs and every node is gone again, 1 (with
the reason) otherwise.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TextIO

from fleetwright.kube.resources import EVENTS, NODE_CLAIMS, NODE_POOLS, PODS
from fleetwright.local.nodestart import NodeStart
from fleetwright.local.sandbox import DEPLOYMENTS, SYSTEM_NODE, Sandbox, SandboxOptions, sandbox, shown_path

DEFAULT_STEPS = (5, 30)
# The demo's node start: EKS's figures compressed ten times, so the walkthrough takes minutes, not ten.
DEMO_NODE_START = NodeStart.default.scaled(0.1)


@dataclass
class Timeline:
    """Watches the sandbox and prints what changed, with the seconds since the demo started."""

    box: Sandbox
    started: float
    out: TextIO
    app: str
    selector: str
    instances: set[str] = field(default_factory=set)
    booted: set[str] = field(default_factory=set)
    registered: set[str] = field(default_factory=set)
    removed: set[str] = field(default_factory=set)
    ready: set[str] = field(default_factory=set)
    untainted: set[str] = field(default_factory=set)
    initialized: set[str] = field(default_factory=set)
    running: int = -1
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def say(self, text: str) -> None:
        """One timeline line (the disruption thread and the main thread both write)."""
        with self._lock:
            print(f"{time.monotonic() - self.started:7.1f}s  {text}", file=self.out, flush=True)

    def block(self, text: str) -> None:
        """Command output under the timeline line that ran it, indented past the seconds column."""
        with self._lock:
            for line in text.rstrip().splitlines():
                print(f"          {line}", file=self.out)
            self.out.flush()

    def poll(self) -> None:
        """Print every launch, every phase of each node's start, each node gone and each change of running
        pods since the last poll."""
        startup = self._startup_taint_keys()
        for record in sorted(self.box.state.nodeclaims.list(), key=lambda r: r.created_at):
            if not record.instance_id or record.instance_id in self.instances:
                continue
            self.instances.add(record.instance_id)
            price = f"${record.expected_price:.4f}/h" if record.expected_price else ""
            self.say(
                f"launched {record.instance_id} {record.instance_type} in {record.zone}, "
                f"{record.capacity_type} {price} for {record.pod_count} pods (claim {record.id}): pending"
            )
        for instance in self.box.instances():
            instance_id = instance["InstanceId"]
            if instance["State"]["Name"] == "running" and instance_id not in self.booted:
                self.booted.add(instance_id)
                self.say(f"instance {instance_id} running")
        present = set()
        for node in self.box.kube.list_nodes():
            name = node["metadata"]["name"]
            if name != SYSTEM_NODE:
                present.add(name)
                self._node_phases(name, node, startup)
        for name in sorted(self.registered - present - self.removed):
            self.removed.add(name)
            self.say(f"node {name} deleted")
        running = self.running_pods()
        if running != self.running:
            self.running = running
            self.say(f"{running} {self.app} pods Running")

    def _node_phases(self, name: str, node: dict[str, Any], startup: set[str]) -> None:
        """The lines of the phases ``node`` has reached since the last poll: registered NotReady (with its
        not-ready taint), Ready, its startup taints removed, initialized."""
        taints = [t.get("key", "") for t in node.get("spec", {}).get("taints") or []]
        if name not in self.registered:
            self.registered.add(name)
            shown = ", ".join(taints) or "no taints"
            self.say(f"node {name} registered NotReady ({node['spec'].get('providerID', '')}; {shown})")
        conditions = {c["type"]: c["status"] for c in node.get("status", {}).get("conditions", [])}
        if conditions.get("Ready") == "True" and name not in self.ready:
            self.ready.add(name)
            self.say(f"node {name} Ready")
        held = sorted(set(taints) & startup)
        if name in self.ready and not held and name not in self.untainted and startup:
            self.untainted.add(name)
            self.say(f"node {name}: startup taints removed by their agents ({', '.join(sorted(startup))})")
        labels = node.get("metadata", {}).get("labels") or {}
        if labels.get("karpenter.sh/initialized") == "true" and name not in self.initialized:
            self.initialized.add(name)
            self.say(f"node {name} initialized (karpenter.sh/initialized)")

    def _startup_taint_keys(self) -> set[str]:
        """The startup taint keys of the NodePools in the cluster."""
        keys: set[str] = set()
        for pool in self.box.client.list(NODE_POOLS).items:
            spec = pool.get("spec", {}).get("template", {}).get("spec", {})
            keys.update(str(t.get("key")) for t in spec.get("startupTaints") or [])
        return keys

    def app_pods(self) -> list[dict[str, Any]]:
        """The demo Deployment's pods, in any phase."""
        return list(self.box.client.list(PODS, "default", label_selector=self.selector).items)

    def running_pods(self) -> int:
        """Replicas of the demo Deployment in phase Running."""
        return sum(1 for p in self.app_pods() if p.get("status", {}).get("phase") == "Running")

    def wait(self, done: Callable[[], bool], timeout: float) -> bool:
        """Poll until ``done`` or ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.poll()
            if done():
                self.poll()  # what changed between the poll and the check (the last pod, the last node)
                return True
            time.sleep(0.2)
        self.poll()
        return done()


def node_table(box: Sandbox) -> list[list[str]]:
    """One row per node Fleetwright launched: name, type, zone, capacity type, pods, $/h."""
    records = {r.instance_id: r for r in box.state.nodeclaims.list() if r.instance_id}
    pods = box.client.list(PODS).items
    per_node: dict[str, int] = {}
    for pod in pods:
        node = pod.get("spec", {}).get("nodeName")
        if node:
            per_node[node] = per_node.get(node, 0) + 1
    rows = []
    for node in box.kube.list_nodes():
        name = node["metadata"]["name"]
        provider = node["spec"].get("providerID", "")
        record = records.get(provider.rsplit("/", 1)[-1])
        if record is None:
            continue
        rows.append(
            [
                name,
                record.instance_type,
                record.zone,
                record.capacity_type,
                str(per_node.get(name, 0)),
                f"{record.expected_price or 0:.4f}",
            ]
        )
    return sorted(rows)


def _print_table(rows: list[list[str]], out: TextIO) -> None:
    header = ["NODE", "TYPE", "ZONE", "CAPACITY", "PODS", "$/HOUR"]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip(), file=out)
    total = sum(float(r[5]) for r in rows)
    print(f"{len(rows)} nodes launched, ${total:.4f}/hour (${total * 730:.2f}/month)", file=out)


def _why_not(box: Sandbox, selector: str) -> str:
    pending = [
        p
        for p in box.client.list(PODS, "default", label_selector=selector).items
        if p.get("status", {}).get("phase") != "Running"
    ]
    reasons = {
        c.get("message", "")
        for p in pending
        for c in p.get("status", {}).get("conditions", [])
        if c.get("type") == "PodScheduled" and c.get("status") == "False"
    }
    text = f"{len(pending)} pods not running"
    if reasons:
        text += "; scheduler says: " + "; ".join(sorted(reasons))[:500]
    if box.errors:
        text += "; provisioner errors: " + "; ".join(box.errors[-3:])
    return text


def run_demo(
    out: TextIO | None = None,
    *,
    steps: Sequence[int] = DEFAULT_STEPS,
    timeout: float = 60.0,
    options: SandboxOptions | None = None,
    interrupt: bool = False,
    scale_down: bool = True,
    fast_forward: bool = True,
) -> int:
    """Replay the walkthrough; 0 when every step's replicas run within ``timeout`` seconds each.

    With ``interrupt``, a spot interruption warning then hits the busiest node Fleetwright launched: the
    replacement is launched, the node drained through the termination workflow's steps and terminated,
    and the demo succeeds when every replica runs again elsewhere.

    With ``scale_down`` the Deployment is then deleted and disruption passes run (every 2 s instead of
    every minute) until every node Fleetwright launched is gone. ``fast_forward`` moves the disruption
    controller's clock ahead by the NodePool's ``consolidateAfter`` once the nodes have been seen empty,
    instead of waiting for it (the timeline says so).
    """
    out = out or sys.stdout  # resolved per call: sys.stdout may be replaced (tests, redirection)
    started = time.monotonic()
    with _warnings_on_timeline(out, started):
        return _run(out, started, steps, timeout, options, interrupt, scale_down, fast_forward)


def _run(
    out: TextIO,
    started: float,
    steps: Sequence[int],
    timeout: float,
    options: SandboxOptions | None,
    interrupt: bool,
    scale_down: bool = False,
    fast_forward: bool = True,
) -> int:
    print("starting moto, the Kubernetes API emulator and the provisioner ...", file=out, flush=True)
    with sandbox(options) as box:
        app, selector = _demo_app(box)
        timeline = Timeline(box, started, out, app, selector)
        timeline.say(f"sandbox ready: cluster {box.options.cluster_name}, API server {box.server.url}")
        timeline.say(_node_start_line(box.options.node_start))
        if not _apply_nodepools(box, timeline):
            return 1
        box.provisioner.warm_up()  # what a warm Lambda has: instance types, prices and AMIs cached
        box.start_provisioner()
        edit: _Edit | None = None
        for index, replicas in enumerate(steps):
            if index == 1:
                edit = _edit_nodepool(box, timeline)
                if edit is None:
                    return 1
            timeline.say(f"kubectl scale deployment/{app} --replicas={replicas}")
            box.scale(app, replicas)
            if not timeline.wait(lambda r=replicas: timeline.running_pods() >= r, timeout):  # type: ignore[misc]
                timeline.say(f"FAILED: {_why_not(box, selector)}")
                return 1
            if edit is not None:
                if not _followed_edit(box, timeline, edit):
                    return 1
                edit = None
        timeline.say(f"all {steps[-1]} replicas Running")
        _show_kubectl(box, timeline)
        if interrupt and not _interrupt(box, timeline, steps[-1], timeout):
            return 1
        print(file=out)
        _print_table(node_table(box), out)
        print(file=out)
        if box.errors:
            print(f"provisioner errors: {'; '.join(box.errors)}", file=out)
            return 1
        if scale_down and not _scale_down(box, timeline, timeout, fast_forward):
            return 1
    return 0


def _node_start_line(start: NodeStart) -> str:
    """How new nodes start in this run: EKS's figures, or those compressed (and by how much)."""
    if start == NodeStart.default:
        return f"new nodes start as on EKS: {start.describe()} (docs/emulator.md)"
    factor = NodeStart.default.total / start.total
    return (
        f"new nodes start {factor:g}x faster than on EKS, every phase kept: {start.describe()} "
        f"(EKS: {NodeStart.default.describe()}; docs/emulator.md)"
    )


def _kubectl(box: Sandbox, timeline: Timeline, *args: str, show: bool = True) -> str | None:
    """Run kubectl against the sandbox, print the command and (with ``show``) its output indented; its
    output, or None (after a FAILED line) when it fails."""
    timeline.say("kubectl " + " ".join(args))
    try:
        done = box.kubectl(*args)
    except RuntimeError as missing:
        timeline.say(f"FAILED: {missing}")
        return None
    if done.returncode != 0:
        timeline.say(f"FAILED: kubectl exited {done.returncode}: {done.stderr.strip()}")
        return None
    if show:
        timeline.block(done.stdout)
    return done.stdout


def _apply_nodepools(box: Sandbox, timeline: Timeline) -> bool:
    """``kubectl apply -f`` the manifests' NodePools and EC2NodeClasses; True when the provisioner then
    reads at least one usable NodePool from the cluster."""
    files = box.nodepool_files()
    if not files:
        timeline.say("FAILED: the manifests hold no NodePool or EC2NodeClass to apply")
        return False
    args = [arg for path in files for arg in ("-f", shown_path(path))]
    if _kubectl(box, timeline, "apply", *args) is None:
        return False
    read = box.nodepools.refresh()
    if read is None or not read.nodepools:
        invalid = "; ".join(f"{k} {n}: {why}" for (k, n), why in (read.invalid if read else {}).items())
        timeline.say(f"FAILED: no usable NodePool in the cluster{': ' + invalid if invalid else ''}")
        return False
    timeline.say(
        f"provisioner: NodePools from the {read.source}: {', '.join(np.name for np in read.nodepools)}"
    )
    return True


def _capacity_types(box: Sandbox, name: str) -> set[str]:
    """The capacity types NodePool ``name`` (as last read from the cluster) allows."""
    from fleetwright.model.labels import CAPACITY_TYPE

    pool = next((np for np in box.provisioner.config.nodepools if np.name == name), None)
    if pool is None:
        return set()
    return {
        value
        for r in pool.spec.template.spec.requirements
        if r.key == CAPACITY_TYPE and r.operator == "In"
        for value in r.values
    }


@dataclass
class _Edit:
    """The NodePool edit made between the steps: which pool, the capacity type it now requires, and the
    instances launched before it."""

    nodepool: str
    capacity_type: str
    before: set[str]


def _edit_nodepool(box: Sandbox, timeline: Timeline) -> _Edit | None:
    """``kubectl patch`` the first NodePool to the other capacity type (on-demand ↔ spot); the edit once
    the provisioner has read it, None (after a FAILED line) otherwise."""
    from fleetwright.model.labels import CAPACITY_TYPE

    pool = box.provisioner.config.nodepools[0]
    wanted = "on-demand" if _capacity_types(box, pool.name) == {"spot"} else "spot"
    raw = box.client.get(NODE_POOLS, pool.name)
    requirements = [
        r for r in raw["spec"]["template"]["spec"].get("requirements", []) if r.get("key") != CAPACITY_TYPE
    ]
    requirements.append({"key": CAPACITY_TYPE, "operator": "In", "values": [wanted]})
    patch = json.dumps(
        {"spec": {"template": {"spec": {"requirements": requirements}}}}, separators=(",", ":")
    )
    if _kubectl(box, timeline, "patch", "nodepool", pool.name, "--type", "merge", "-p", patch) is None:
        return None
    deadline = time.monotonic() + 15
    while _capacity_types(box, pool.name) != {wanted}:  # the provisioner re-reads NodePools every pass
        if time.monotonic() > deadline:
            timeline.say(f"FAILED: the provisioner did not read the edit of NodePool {pool.name}")
            return None
        time.sleep(0.2)
    timeline.say(
        f"provisioner: NodePool {pool.name} now requires {wanted} capacity; the next launches follow"
    )
    return _Edit(pool.name, wanted, set(timeline.instances))


def _followed_edit(box: Sandbox, timeline: Timeline, edit: _Edit) -> bool:
    """Say (and check) that every launch since the edit has the capacity type it requires."""
    since = [
        r
        for r in box.state.nodeclaims.list()
        if r.instance_id and r.instance_id not in edit.before and r.nodepool == edit.nodepool
    ]
    wrong = sorted(
        f"{r.instance_id} ({r.capacity_type})" for r in since if r.capacity_type != edit.capacity_type
    )
    if wrong:
        timeline.say(
            f"FAILED: launched after the edit without {edit.capacity_type} capacity: {', '.join(wrong)}"
        )
        return False
    plural = "s" if len(since) != 1 else ""
    timeline.say(
        f"the edit is followed: {len(since)} launch{'es' if plural else ''} since the patch, "
        f"all {edit.capacity_type}"
    )
    return True


def _show_kubectl(box: Sandbox, timeline: Timeline) -> None:
    """What a Karpenter user looks at after a scale-up: NodeClaims, the Events of a pod placed on a new
    node, NodePools (once the NodeClaims show their nodes and the NodePool status counts them)."""
    _settled(box, timeline)
    _kubectl(box, timeline, "get", "nodeclaims")
    pod = _nominated_pod(box, timeline)
    if pod:
        _kubectl(
            box,
            timeline,
            "get",
            "events",
            "--field-selector",
            f"involvedObject.name={pod}",
            "-o",
            EVENT_COLUMNS,
        )
    _kubectl(box, timeline, "get", "nodepools")


EVENT_COLUMNS = "custom-columns=TYPE:.type,REASON:.reason,FROM:.source.component,MESSAGE:.message"


def _settled(box: Sandbox, timeline: Timeline, timeout: float = 10.0) -> None:
    """Wait (at most ``timeout`` s) until every NodeClaim object is Ready and the NodePools' status
    counts their nodes: the provisioner's next pass writes both."""

    def ready() -> bool:
        claims = box.client.list(NODE_CLAIMS).items
        if not claims or not all(_condition(c, "Ready") for c in claims):
            return False
        counted = sum(
            int(((p.get("status") or {}).get("resources") or {}).get("nodes") or 0)
            for p in box.client.list(NODE_POOLS).items
        )
        return counted == len(claims)

    deadline = time.monotonic() + timeout
    while not ready() and time.monotonic() < deadline:
        time.sleep(0.2)
    timeline.poll()


def _condition(obj: dict[str, Any], kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in (obj.get("status") or {}).get("conditions") or []
    )


def _nominated_pod(box: Sandbox, timeline: Timeline) -> str:
    """A pod of the demo Deployment the provisioner nominated for a new node (its Events tell the story)."""
    pods = {str(p["metadata"]["name"]) for p in timeline.app_pods()}
    nominated = sorted(
        str(e.get("involvedObject", {}).get("name"))
        for e in box.client.list(EVENTS, "default").items
        if e.get("reason") == "Nominated" and e.get("involvedObject", {}).get("name") in pods
    )
    return nominated[-1] if nominated else (sorted(pods)[-1] if pods else "")


def _interrupt(box: Sandbox, timeline: Timeline, replicas: int, timeout: float) -> bool:
    """Send a spot interruption for the node running most pods; True when the workload recovers."""
    import threading

    from fleetwright.local.inprocess.interruption import run_interruption

    rows = node_table(box)
    if not rows:
        timeline.say("FAILED: no node to interrupt")
        return False
    busiest = max(rows, key=lambda row: int(row[4]))
    node = box.kube.get_node(busiest[0]) or {}
    instance_id = str(node.get("spec", {}).get("providerID", "")).rsplit("/", 1)[-1]
    timeline.say(f"EC2 Spot Instance Interruption Warning for {instance_id} ({busiest[0]}, {busiest[1]})")
    reports: list[Any] = []
    chain = threading.Thread(
        target=lambda: reports.append(
            run_interruption(
                instance_id,
                "spot-interruption",
                kube=box.kube,
                cloud=box.cloud,
                state=box.state,
                config=box.provisioner.config,
                region=box.options.region,
            )
        ),
        name="interruption",
        daemon=True,
    )
    chain.start()

    def recovered() -> bool:
        gone = box.kube.get_node(busiest[0]) is None
        return gone and not chain.is_alive() and timeline.running_pods() >= replicas

    if not timeline.wait(recovered, timeout):
        timeline.say(f"FAILED: after the interruption: {_why_not(box, timeline.selector)}")
        return False
    for report in reports:
        for execution in report.executions:
            timeline.say(f"termination workflow {execution.status}: {' → '.join(execution.history)}")
    timeline.say(f"node {busiest[0]} gone; all {replicas} replicas Running elsewhere")
    return True


DISRUPTION_INTERVAL = 2.0  # seconds between the demo's disruption passes (the Lambda's schedule: 1 min)


@dataclass
class _DemoClock:
    """Epoch seconds for the disruption controller, which the demo may move ahead (never back)."""

    offset: float = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


def _scale_down(box: Sandbox, timeline: Timeline, timeout: float, fast_forward: bool) -> bool:
    """Delete the demo Deployment and run disruption passes until every node Fleetwright launched is
    gone; True when they are."""

    nodes = {row[0] for row in node_table(box)}
    clock = _DemoClock()
    waits = {
        np.name: np.spec.disruption.consolidate_after_seconds() for np in box.provisioner.config.nodepools
    }
    wait = max((w for w in waits.values() if w is not None), default=0)
    timeline.say(f"kubectl delete deployment/{timeline.app}")
    box.client.delete(DEPLOYMENTS, timeline.app, "default")
    if not timeline.wait(lambda: not timeline.app_pods(), timeout):
        timeline.say(f"FAILED: {len(timeline.app_pods())} {timeline.app} pods still exist")
        return False
    timeline.say(
        f"disruption controller: a pass every {DISRUPTION_INTERVAL:g} s (the Lambda runs every minute); "
        f"consolidateAfter {', '.join(f'{k}={_seconds(v)}' for k, v in sorted(waits.items()))}"
    )
    stop = threading.Event()
    failures: list[str] = []
    worker = threading.Thread(
        target=_disruption_passes,
        args=(box, timeline, clock, wait if fast_forward else 0, stop, failures),
        name="disruption",
        daemon=True,
    )
    worker.start()
    limit = timeout + (0 if fast_forward else wait)
    try:
        done = timeline.wait(lambda: bool(failures) or not nodes & {r[0] for r in node_table(box)}, limit)
    finally:
        stop.set()
        worker.join(timeout=timeout)
    if failures or not done:
        left = sorted(nodes & {r[0] for r in node_table(box)})
        timeline.say(f"FAILED: scale-down: {'; '.join(failures) or f'nodes left: {left}'}")
        return False
    if not _no_instance_running(box, timeline):
        return False
    plural = "s" if len(nodes) != 1 else ""
    timeline.say(f"{len(nodes)} node{plural} removed, no instance left running; $0.0000/hour")
    return True


def _disruption_passes(
    box: Sandbox,
    timeline: Timeline,
    clock: _DemoClock,
    skip: float,
    stop: threading.Event,
    failures: list[str],
) -> None:
    """Disruption passes until ``stop``; after the first, the clock jumps ``skip`` seconds ahead (the
    nodes' consolidateAfter) so the demo need not wait it out. A failure ends the loop in ``failures``."""
    from fleetwright.local.inprocess.disruption import run_disruption

    passes = 0
    while not stop.is_set():
        try:
            run = run_disruption(
                kube=box.kube,
                cloud=box.cloud,
                state=box.state,
                config=box.provisioner.config,
                metrics=box.metrics,
                clock=clock,
            )
        except Exception as error:  # the loop must end the demo with the reason, not hang it
            failures.append(f"{type(error).__name__}: {error}")
            return
        passes += 1
        _say_pass(timeline, run)
        if run.report.error:
            failures.append(run.report.error)
            return
        if passes == 1 and skip:
            clock.offset += skip
            timeline.say(
                f"nodes seen empty; the demo moves the disruption clock {_seconds(skip)} ahead "
                "instead of waiting consolidateAfter"
            )
            continue
        stop.wait(DISRUPTION_INTERVAL)


def _no_instance_running(box: Sandbox, timeline: Timeline) -> bool:
    """True when every instance is terminated or shutting down; else says which still run."""
    running = sorted(
        i["InstanceId"] for i in box.instances() if i["State"]["Name"] not in ("shutting-down", "terminated")
    )
    if running:
        timeline.say(f"FAILED: scale-down: instances still running: {', '.join(running)}")
        return False
    return True


def _say_pass(timeline: Timeline, run: Any) -> None:
    for outcome in run.report.commands:
        types = ", ".join(outcome.instance_types)
        saving = f", saves ${outcome.savings:.4f}/h" if outcome.savings else ""
        timeline.say(
            f"disruption: {outcome.method} ({outcome.reason}) {', '.join(outcome.nodes)} [{types}]{saving}"
            f" → {outcome.status}"
        )
    for execution in run.executions:
        timeline.say(
            f"termination workflow {execution.name} {execution.status}: {' → '.join(execution.history)}"
        )


def _seconds(value: float | None) -> str:
    if value is None:
        return "Never"
    minutes, seconds = divmod(int(value), 60)
    return f"{minutes}m{seconds}s" if minutes and seconds else f"{minutes}m" if minutes else f"{seconds}s"


class _TimelineLog(logging.Handler):
    """Shows the provisioner's warnings (unschedulable pods, launch errors) as timeline lines."""

    def __init__(self, out: TextIO, started: float) -> None:
        super().__init__(logging.WARNING)
        self.out = out
        self.started = started

    def emit(self, record: logging.LogRecord) -> None:
        try:
            detail = getattr(record, "reason", "") or getattr(record, "error", "")
            text = f"{record.getMessage()}: {detail}" if detail else record.getMessage()
            print(f"{time.monotonic() - self.started:7.1f}s  provisioner: {text}", file=self.out, flush=True)
        except Exception:  # a log line must never break the code that logs it
            self.handleError(record)


@contextmanager
def _warnings_on_timeline(out: TextIO, started: float) -> Iterator[None]:
    """Route Fleetwright's warnings to the timeline for the demo's duration."""
    logger = logging.getLogger("fleetwright")
    handler = _TimelineLog(out, started)
    propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def _demo_app(box: Sandbox) -> tuple[str, str]:
    """The Deployment the demo scales (the manifests' first, in namespace default) and its selector."""
    deployments = box.client.request("GET", "/apis/apps/v1/namespaces/default/deployments")
    items: list[dict[str, Any]] = deployments.get("items", []) if isinstance(deployments, dict) else []
    if not items:
        raise SystemExit("the manifests hold no Deployment in namespace default to scale")
    first = items[0]
    labels = first["spec"]["selector"].get("matchLabels") or {}
    return str(first["metadata"]["name"]), ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
