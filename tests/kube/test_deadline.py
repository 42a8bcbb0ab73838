"""Kubernetes calls end by the caller's deadline against an API server that accepts requests and never
answers: each attempt's timeouts are cut to the time left and no retry is slept past it. The hang is
played on a virtual clock (``tests/kube/hang.py``); one test holds a real request on the emulator to show
the official client honours the cut timeout."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fleetwright.kube import ClusterConfig, KubeClient, KubeConnectionError
from fleetwright.kube.deadline import KubeDeadline, KubeDeadlineExceededError, deadline_scope
from fleetwright.kube.resources import NODES, PODS
from fleetwright.local.apiserver import ApiServer
from tests.kube.hang import HungApi
from tests.support.clock import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_000.0)


@pytest.fixture
def hung(apiserver: ApiServer, clock: FakeClock) -> Iterator[tuple[KubeClient, HungApi]]:
    kube = KubeClient(ClusterConfig(server=apiserver.url), sleep=clock.advance, jitter=lambda: 1.0)
    api = HungApi(kube, clock, clock.advance)
    api.hang()
    yield kube, api
    kube.close()


def test_without_a_deadline_a_hung_server_holds_a_request_for_every_attempt(
    hung: tuple[KubeClient, HungApi], clock: FakeClock
) -> None:
    kube, server = hung
    started = clock()
    with pytest.raises(KubeConnectionError) as raised:
        kube.get(NODES, "node-a")
    assert not isinstance(raised.value, KubeDeadlineExceededError)
    assert server.read_timeouts == [30.0] * 5
    assert clock() - started > 150  # what a 60 s Lambda cannot outlive


@pytest.mark.parametrize("budget", [55.0, 20.0, 3.0])
def test_a_deadline_ends_the_call_by_it(
    hung: tuple[KubeClient, HungApi], clock: FakeClock, budget: float
) -> None:
    kube, server = hung
    started = clock()
    with (
        deadline_scope(KubeDeadline.after(budget, clock)),
        pytest.raises(KubeDeadlineExceededError, match=r"GET /api/v1/nodes/node-a"),
    ):
        kube.get(NODES, "node-a")
    assert clock() - started <= budget
    assert server.read_timeouts, "the request was sent while time was left"
    assert max(server.read_timeouts) <= budget


def test_an_attempt_waits_only_what_is_left(hung: tuple[KubeClient, HungApi], clock: FakeClock) -> None:
    kube, server = hung
    with deadline_scope(KubeDeadline.after(40.0, clock)), pytest.raises(KubeDeadlineExceededError):
        kube.list(PODS)
    # 30 s, a 0.2 s backoff, then the 9.8 s left.
    assert server.read_timeouts == [30.0, pytest.approx(9.8)]


def test_nothing_is_sent_once_the_deadline_has_passed(
    hung: tuple[KubeClient, HungApi], clock: FakeClock
) -> None:
    kube, server = hung
    with deadline_scope(KubeDeadline.after(-1.0, clock)), pytest.raises(KubeDeadlineExceededError):
        kube.get(NODES, "node-a")
    assert server.read_timeouts == []


def test_a_retry_after_longer_than_what_is_left_is_not_slept(apiserver: ApiServer, clock: FakeClock) -> None:
    kube = KubeClient(ClusterConfig(server=apiserver.url), sleep=clock.advance, backoff_max=30.0)
    throttled = apiserver.faults.inject(429, verb="GET", resource="nodes", times=5, retry_after=20)
    started = clock()
    try:
        with deadline_scope(KubeDeadline.after(10.0, clock)), pytest.raises(KubeDeadlineExceededError):
            kube.list(NODES)
    finally:
        kube.close()
    assert clock() == started  # no sleep: the 20 s Retry-After could not end in time
    assert throttled.hits == 1


def test_an_answering_server_is_unaffected_by_a_deadline(
    hung: tuple[KubeClient, HungApi], clock: FakeClock, apiserver: ApiServer
) -> None:
    kube, server = hung
    server.answer()
    with deadline_scope(KubeDeadline.after(5.0, clock)):
        assert kube.list(NODES).items == []


def test_an_inner_scope_keeps_the_earlier_deadline(clock: FakeClock) -> None:
    from fleetwright.kube.deadline import current_deadline

    outer = KubeDeadline.after(10.0, clock)
    with deadline_scope(outer), deadline_scope(KubeDeadline.after(60.0, clock)):
        assert current_deadline() is outer
    with deadline_scope(KubeDeadline.after(60.0, clock)), deadline_scope(outer):
        assert current_deadline() is outer
    with deadline_scope(outer), deadline_scope(None):
        assert current_deadline() is outer
    assert current_deadline() is None


def test_the_official_client_gives_up_on_a_held_request_at_the_deadline(apiserver: ApiServer) -> None:
    """A real request held by the emulator (a real server on purpose: the cut read timeout reaches the
    socket)."""
    kube = KubeClient(ClusterConfig(server=apiserver.url), sleep=lambda _s: None)
    apiserver.faults.hang()
    try:
        with deadline_scope(KubeDeadline.after(0.3)), pytest.raises(KubeDeadlineExceededError):
            kube.get(NODES, "node-a")
        assert apiserver.faults.hung_requests >= 1
    finally:
        apiserver.faults.unhang()
        kube.close()
