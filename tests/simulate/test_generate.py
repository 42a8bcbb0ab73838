"""The generated day: the same seed gives the same file, the requested number of pods, web load that
follows the day (low at night, high in the afternoon), batch Jobs in bursts, GPU Jobs when asked."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from fleetwright.local.simulate.generate import DAY, DayOptions, diurnal_load, generate_day
from fleetwright.local.simulate.trace import Trace
from fleetwright.local.simulate.tracefile import read_trace, write_trace


def _running(trace: Trace, namespace: str, at: float) -> int:
    return sum(
        1
        for pod in trace.pods
        if pod.namespace == namespace and pod.start <= at and (pod.end is None or pod.end > at)
    )


def _hourly_mean(trace: Trace, namespace: str, hour: float) -> float:
    samples = [_running(trace, namespace, hour * 3600 + minute * 60) for minute in range(0, 60, 5)]
    return sum(samples) / len(samples)


@pytest.fixture(scope="module")
def day() -> Trace:
    return generate_day(DayOptions(pods=4000, seed=7))


def test_the_same_seed_gives_the_same_day_and_another_seed_another(day: Trace) -> None:
    assert generate_day(DayOptions(pods=4000, seed=7)) == day
    assert generate_day(DayOptions(pods=4000, seed=8)) != day


def test_the_day_has_the_pods_asked_for_and_reads_back(day: Trace, tmp_path: Path) -> None:
    web = [pod for pod in day.pods if pod.namespace == "web"]
    batch = [pod for pod in day.pods if pod.namespace == "batch"]
    path = tmp_path / "day.csv"
    write_trace(day, path)

    assert len(day.pods) == 4000
    assert len(web) + len(batch) == 4000
    assert abs(len(web) - 0.6 * 4000) <= 0.005 * 0.6 * 4000
    assert 0 < day.duration <= DAY
    assert read_trace(path) == day


def test_web_load_is_low_at_night_and_peaks_in_the_afternoon(day: Trace) -> None:
    hourly = {hour: _hourly_mean(day, "web", hour) for hour in range(24)}
    busiest = max(hourly, key=lambda hour: hourly[hour])
    quietest = min(hourly, key=lambda hour: hourly[hour])

    assert 13 <= busiest <= 17
    assert quietest in (1, 2, 3, 4, 5)
    assert 2.2 <= hourly[15] / hourly[3] <= 3.8  # the default peak-to-trough ratio is 3


def test_peak_options_move_and_flatten_the_curve() -> None:
    evening = generate_day(DayOptions(pods=2000, seed=3, peak_hour=20.0))
    flat = generate_day(DayOptions(pods=2000, seed=3, peak_to_trough=1.0))
    evening_hourly = {hour: _hourly_mean(evening, "web", hour) for hour in range(24)}

    assert 18 <= max(evening_hourly, key=lambda hour: evening_hourly[hour]) <= 22
    assert 0.75 <= _hourly_mean(flat, "web", 15) / _hourly_mean(flat, "web", 3) <= 1.3
    assert diurnal_load(15 * 3600, 3.0, 15.0) == pytest.approx(1.0)
    assert diurnal_load(3 * 3600, 3.0, 15.0) == pytest.approx(1.0 / 3.0)


def test_web_pods_use_standard_shapes_and_share_their_deployment_labels(day: Trace) -> None:
    web = [pod for pod in day.pods if pod.namespace == "web"]
    shapes = {(pod.cpu, pod.memory) for pod in web}

    assert shapes <= {("250m", "512Mi"), ("500m", "1Gi"), ("1", "2Gi"), ("2", "4Gi")}
    assert len({pod.owner for pod in web}) == 12
    assert all(pod.labels == {"app": pod.owner, "tier": "web"} for pod in web)


def test_batch_jobs_arrive_in_bursts_and_run_minutes_to_hours(day: Trace) -> None:
    batch = [pod for pod in day.pods if pod.namespace == "batch"]
    finished = [pod.end - pod.start for pod in batch if pod.end is not None]
    per_job = Counter(pod.owner for pod in batch)
    minutes_with_arrivals = {int(pod.start // 60) for pod in batch}

    assert len(finished) > 0.8 * len(batch)
    assert min(finished) >= 0.8 * 120 and max(finished) <= 1.2 * 6 * 3600
    assert max(finished) > 3600 and min(finished) < 600
    assert max(per_job.values()) > 10 and min(per_job.values()) == 1
    assert len(minutes_with_arrivals) < len(batch) / 5


def test_gpu_jobs_when_asked() -> None:
    trace = generate_day(DayOptions(pods=1000, seed=2, gpu_jobs=4))
    gpu = [pod for pod in trace.pods if pod.gpu]

    assert len({pod.owner for pod in gpu}) == 4
    assert {pod.namespace for pod in gpu} == {"ml"}
    assert {pod.gpu for pod in gpu} <= {1, 4, 8}
    assert len(trace.pods) == 1000
    assert not any(pod.gpu for pod in generate_day(DayOptions(pods=1000, seed=2)).pods)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (DayOptions(pods=10), "--pods 10"),
        (DayOptions(web_share=1.5), "--web-share 1.5"),
        (DayOptions(deployments=0), "--deployments 0"),
        (DayOptions(peak_to_trough=0.5), "--peak-to-trough 0.5"),
        (DayOptions(peak_hour=24.0), "--peak-hour 24.0"),
        (DayOptions(gpu_jobs=-1), "--gpu-jobs -1"),
    ],
)
def test_out_of_range_options_are_named(options: DayOptions, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        generate_day(options)


def test_a_small_day_still_has_exactly_its_pods() -> None:
    trace = generate_day(DayOptions(pods=100, seed=5))

    assert len(trace.pods) == 100
    assert len({pod.name for pod in trace.pods}) == 100
