"""A synthetic day of web and batch pods, deterministic from a seed (``fleetwright trace generate``).

Web Deployments scale with a diurnal load curve (low at night, peak mid-afternoon) the way a Horizontal
Pod Autoscaler with its default behaviour follows it: up by at most double or 4 pods a minute, down only to
the highest recommendation of the last five minutes;
each is rolled out once in working hours. Batch Jobs arrive in bursts (on the hour and half hour, more
of them at night, and at random times), each with parallel pods running minutes to hours; GPU Jobs are
optional. docs/simulate.md ("Traces") says where the shape comes from and what each parameter does.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import TypeVar

from fleetwright.local.simulate.trace import Trace, TracePod
from fleetwright.local.simulate.tracefile import make_trace

_T = TypeVar("_T")

DAY = 86_400.0
STEP = 60.0  # seconds between two autoscaler decisions
SCALE_DOWN_WINDOW = 5  # steps: the HPA's default 300 s scale-down stabilization

# Requests (cpu, memory) with their weights: the standard sizes teams pick.
WEB_SHAPES = ((("250m", "512Mi"), 3), (("500m", "1Gi"), 4), (("1", "2Gi"), 2), (("2", "4Gi"), 1))
BATCH_SHAPES = ((("500m", "1Gi"), 2), (("1", "2Gi"), 4), (("2", "8Gi"), 3), (("4", "16Gi"), 1))
GPU_SHAPES = (((1, "3", "12Gi"), 3), ((4, "16", "64Gi"), 2), ((8, "32", "128Gi"), 1))
WEB_NAMES = (
    "frontend",
    "checkout",
    "cart",
    "catalog",
    "search",
    "auth",
    "api",
    "payments",
    "profile",
    "recommend",
    "media",
    "notify",
)
BATCH_KINDS = ("etl", "report", "index", "export", "thumbnail", "backup")


@dataclass(frozen=True, slots=True)
class DayOptions:
    """What to generate: ``pods`` rows in all, about ``web_share`` of them web pods."""

    pods: int = 10_000
    seed: int = 1
    web_share: float = 0.6
    deployments: int = 12
    peak_to_trough: float = 3.0
    peak_hour: float = 15.0
    gpu_jobs: int = 0

    def check(self) -> None:
        """Raise ``ValueError`` naming the first option out of range."""
        if self.pods < 100:
            raise ValueError(f"--pods {self.pods}: generate at least 100 pods")
        if not 0.0 <= self.web_share <= 0.9:
            raise ValueError(f"--web-share {self.web_share}: expected a fraction from 0 to 0.9")
        if self.deployments < 1:
            raise ValueError(f"--deployments {self.deployments}: expected at least 1")
        if self.peak_to_trough < 1.0:
            raise ValueError(f"--peak-to-trough {self.peak_to_trough}: expected at least 1")
        if not 0.0 <= self.peak_hour < 24.0:
            raise ValueError(f"--peak-hour {self.peak_hour}: expected an hour from 0 to 24")
        if self.gpu_jobs < 0:
            raise ValueError(f"--gpu-jobs {self.gpu_jobs}: expected 0 or more")


def diurnal_load(seconds: float, peak_to_trough: float, peak_hour: float) -> float:
    """The load at ``seconds`` into the day, 1 at ``peak_hour`` and ``1 / peak_to_trough`` twelve hours
    away, on a raised cosine."""
    trough = 1.0 / peak_to_trough
    phase = 2.0 * math.pi * (seconds / 3600.0 - peak_hour) / 24.0
    return trough + (1.0 - trough) * (1.0 + math.cos(phase)) / 2.0


def generate_day(options: DayOptions) -> Trace:
    """The day's trace: exactly ``options.pods`` pods, the same for the same options."""
    options.check()
    web = _web_pods(options)
    batch = _batch_pods(options, options.pods - len(web))
    return make_trace(web + batch)


# --- web -------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Deployment:
    name: str
    cpu: str
    memory: str
    weight: float
    noise: list[float]
    rollout_at: float
    live: list[tuple[str, float]] = field(default_factory=list)
    pods: list[TracePod] = field(default_factory=list)
    serial: int = 0


def _deployments(options: DayOptions, count: int) -> list[_Deployment]:
    """Each Deployment's size, shape, load noise and rollout time, independent of the scale."""
    steps = int(DAY / STEP)
    result = []
    for index in range(count):
        rng = random.Random(f"{options.seed}/web/{index}")
        (cpu, memory) = _pick(rng, WEB_SHAPES)
        weight = rng.lognormvariate(0.0, 0.8)
        noise, level = [], 0.0
        for _ in range(steps + 1):
            level = 0.9 * level + rng.gauss(0.0, 0.04)  # a slowly wandering ±10 % around the curve
            noise.append(math.exp(level))
        rollout_at = rng.uniform(9 * 3600.0, 17 * 3600.0)
        base = WEB_NAMES[index % len(WEB_NAMES)]
        name = base if index < len(WEB_NAMES) else f"{base}-{index // len(WEB_NAMES) + 1}"
        result.append(_Deployment(name, cpu, memory, weight, noise, rollout_at))
    total = sum(d.weight for d in result)
    for deployment in result:
        deployment.weight /= total
    return result


def _web_pods(options: DayOptions) -> list[TracePod]:
    """The web pods, their count brought within 0.5 % of ``web_share * pods`` when the scale allows (a
    few passes, each scaling the Deployments' sizes by how far the last one missed), never above
    ``pods``."""
    target = round(options.pods * options.web_share)
    if target == 0:
        return []
    deployments = _deployments(options, max(1, min(options.deployments, target // 20)))
    scale = target / 2.0
    best: list[TracePod] | None = None
    for _ in range(8):
        pods = _scaled_web(options, deployments, scale)
        if len(pods) <= options.pods and (best is None or abs(len(pods) - target) < abs(len(best) - target)):
            best = pods
        if abs(len(pods) - target) <= max(1, target // 200):
            break
        scale *= target / max(1, len(pods))
    return best or []


def _scaled_web(options: DayOptions, deployments: list[_Deployment], scale: float) -> list[TracePod]:
    pods: list[TracePod] = []
    for deployment in deployments:
        deployment.live, deployment.pods, deployment.serial = [], [], 0
        _run_deployment(options, deployment, scale)
        pods.extend(deployment.pods)
    return pods


def _run_deployment(options: DayOptions, deployment: _Deployment, scale: float) -> None:
    """Replicas follow the curve minute by minute as an HPA sets them (:func:`_replicas`), the newest pods
    going first on the way down; one rollout replaces every pod."""
    peak = deployment.weight * scale
    recent: list[int] = []
    rolled = False
    for step, noise in enumerate(deployment.noise):
        now = step * STEP
        load = diurnal_load(now, options.peak_to_trough, options.peak_hour)
        recent = [*recent, max(1, math.ceil(peak * load * noise))][-SCALE_DOWN_WINDOW:]
        wanted = _replicas(len(deployment.live), recent, first=step == 0)
        if now >= DAY:
            break
        while len(deployment.live) < wanted:
            _start_pod(deployment, now)
        while len(deployment.live) > wanted:
            _end_pod(deployment, len(deployment.live) - 1, now)
        if not rolled and now >= deployment.rollout_at:
            _rollout(deployment, now)
            rolled = True
    for name, start in deployment.live:
        deployment.pods.append(_web_pod(deployment, name, start, None))


def _replicas(current: int, recent: list[int], first: bool) -> int:
    """The HPA's default behaviour: up to the latest recommendation, at most doubling or adding 4 pods a
    minute; down to the highest recommendation of the stabilization window. The day starts at the
    first recommendation."""
    latest = recent[-1]
    if first:
        return latest
    if latest >= current:
        return min(latest, max(2 * current, current + 4))
    return max(recent)


def _rollout(deployment: _Deployment, now: float) -> None:
    """A rolling update with 25 % surge: four waves 12 s apart (all within the minute), each new pod
    starting 10 s before the old one it replaces ends."""
    old = list(deployment.live)
    deployment.live.clear()
    for offset, (name, start) in enumerate(old):
        begin = now + 12.0 * (offset * 4 // len(old))
        _start_pod(deployment, begin)
        deployment.pods.append(_web_pod(deployment, name, start, begin + 10.0))


def _start_pod(deployment: _Deployment, now: float) -> None:
    deployment.serial += 1
    deployment.live.append((f"{deployment.name}-{deployment.serial:05d}", now))


def _end_pod(deployment: _Deployment, index: int, now: float) -> None:
    name, start = deployment.live.pop(index)
    deployment.pods.append(_web_pod(deployment, name, start, now))


def _web_pod(deployment: _Deployment, name: str, start: float, end: float | None) -> TracePod:
    if end is not None and end > DAY:
        end = None
    labels = {"app": deployment.name, "tier": "web"}
    return TracePod(name, start, end, deployment.cpu, deployment.memory, 0, deployment.name, "web", labels)


# --- batch -----------------------------------------------------------------------------------------------


def _batch_pods(options: DayOptions, budget: int) -> list[TracePod]:
    """Jobs in bursts until ``budget`` pods: GPU Jobs first (``options.gpu_jobs`` of them), then CPU Jobs;
    the last Job is cut to fit."""
    rng = random.Random(f"{options.seed}/batch")
    pods: list[TracePod] = []
    job = 0
    gpu_left = options.gpu_jobs
    while len(pods) < budget:
        burst = _burst_time(rng)
        for _ in range(rng.randint(1, 6)):
            room = budget - len(pods)
            if room <= 0:
                break
            job += 1
            offset = burst + rng.uniform(0.0, 60.0)
            if gpu_left > 0:
                gpu_left -= 1
                pods.extend(_gpu_job(rng, job, offset, room))
            else:
                pods.extend(_cpu_job(rng, job, offset, room))
    return pods


def _burst_time(rng: random.Random) -> float:
    """Half the bursts are cron schedules on the hour or half hour, twice as many per hour from midnight
    to 06:00 (nightly batch); the others come at any time."""
    if rng.random() < 0.5:
        return rng.uniform(0.0, DAY - STEP)
    night = rng.random() < 0.4  # 6 night hours of 24 with twice the weight: 12 / (12 + 18)
    hour = rng.randrange(0, 6) if night else rng.randrange(6, 24)
    return hour * 3600.0 + rng.choice((0.0, 1800.0))


def _cpu_job(rng: random.Random, job: int, start: float, room: int) -> list[TracePod]:
    kind = BATCH_KINDS[rng.randrange(len(BATCH_KINDS))]
    name = f"{kind}-{job:05d}"
    cpu, memory = _pick(rng, BATCH_SHAPES)
    width = min(room, _parallelism(rng))
    runtime = min(6 * 3600.0, max(120.0, rng.lognormvariate(math.log(900.0), 1.1)))
    labels = {"job-name": name, "tier": "batch"}
    return [
        _job_pod(rng, f"{name}-{index}", start, runtime, cpu, memory, 0, name, "batch", labels)
        for index in range(width)
    ]


def _gpu_job(rng: random.Random, job: int, start: float, room: int) -> list[TracePod]:
    name = f"train-{job:05d}"
    gpu, cpu, memory = _pick(rng, GPU_SHAPES)
    width = min(room, rng.choice((1, 1, 1, 2, 4)))
    runtime = min(8 * 3600.0, max(1800.0, rng.lognormvariate(math.log(2 * 3600.0), 0.7)))
    labels = {"job-name": name, "tier": "gpu"}
    return [
        _job_pod(rng, f"{name}-{index}", start, runtime, cpu, memory, gpu, name, "ml", labels)
        for index in range(width)
    ]


def _job_pod(
    rng: random.Random,
    name: str,
    start: float,
    runtime: float,
    cpu: str,
    memory: str,
    gpu: int,
    owner: str,
    namespace: str,
    labels: dict[str, str],
) -> TracePod:
    begin = float(round(start + rng.uniform(0.0, 10.0)))
    end: float | None = float(round(begin + runtime * rng.uniform(0.8, 1.2)))
    if end is not None and end > DAY:
        end = None
    return TracePod(name, begin, end, cpu, memory, gpu, owner, namespace, dict(labels))


def _parallelism(rng: random.Random) -> int:
    """Pods of one Job: most run one or a handful, a few fan out to a hundred."""
    draw = rng.random()
    if draw < 0.4:
        return 1
    if draw < 0.8:
        return rng.randint(2, 10)
    return rng.randint(11, 100)


def _pick(rng: random.Random, weighted: tuple[tuple[_T, int], ...]) -> _T:
    choices = [item for item, _ in weighted]
    weights = [weight for _, weight in weighted]
    return rng.choices(choices, weights=weights)[0]
