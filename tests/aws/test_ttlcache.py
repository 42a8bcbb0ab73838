"""The module-scope caches of the AWS adapters: an answer is reused for its TTL on the injected clock and
asked again after it, ``None`` answers are kept too, and clearing drops everything."""

from __future__ import annotations

import threading

from fleetwright.aws.ttlcache import TtlCache, clear_all_caches


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Source:
    """Counts how often the cache asks AWS."""

    def __init__(self, answer: str | None = "answer") -> None:
        self.calls = 0
        self.answer = answer

    def __call__(self) -> str | None:
        self.calls += 1
        return self.answer


def test_an_answer_is_reused_until_its_ttl_has_passed_on_the_injected_clock() -> None:
    clock, source = Clock(), Source()
    cache: TtlCache[str | None] = TtlCache(ttl=60.0, clock=clock)
    assert cache.get_or_compute("us-east-1", source) == "answer"
    clock.now += 59.9
    assert cache.get_or_compute("us-east-1", source) == "answer"
    assert source.calls == 1
    clock.now += 0.1  # exactly 60 s after it was computed: stale
    assert cache.get_or_compute("us-east-1", source) == "answer"
    assert source.calls == 2


def test_keys_are_cached_apart_and_none_is_an_answer() -> None:
    clock, none, some = Clock(), Source(None), Source("x")
    cache: TtlCache[str | None] = TtlCache(ttl=60.0, clock=clock)
    assert cache.get_or_compute("a", none) is None
    assert cache.get_or_compute("a", none) is None
    assert cache.get_or_compute("b", some) == "x"
    assert (none.calls, some.calls) == (1, 1)


def test_put_refreshes_and_invalidate_drops_one_key_or_all() -> None:
    clock, source = Clock(), Source()
    cache: TtlCache[str | None] = TtlCache(ttl=60.0, clock=clock)
    cache.put("a", "seeded")
    cache.put("b", "seeded")
    clock.now += 30
    cache.put("a", "fresher")
    clock.now += 45  # "b" is 75 s old, "a" 45 s
    assert cache.get_or_compute("a", source) == "fresher"
    assert cache.get_or_compute("b", source) == "answer"
    cache.invalidate("a")
    assert cache.get_or_compute("a", source) == "answer"
    assert source.calls == 2
    cache.invalidate()
    cache.get_or_compute("a", source)
    cache.get_or_compute("b", source)
    assert source.calls == 4


def test_clear_all_caches_empties_every_cache_of_the_process() -> None:
    clock, source = Clock(), Source()
    first: TtlCache[str | None] = TtlCache(ttl=60.0, clock=clock)
    second: TtlCache[str | None] = TtlCache(ttl=3600.0, clock=clock)
    first.get_or_compute("k", source)
    second.get_or_compute("k", source)
    clear_all_caches()
    first.get_or_compute("k", source)
    second.get_or_compute("k", source)
    assert source.calls == 4


def test_threads_share_one_cache_without_losing_entries() -> None:
    clock = Clock()
    cache: TtlCache[int] = TtlCache(ttl=60.0, clock=clock)

    def fill(offset: int) -> None:
        for key in range(offset, 2000, 4):
            cache.put(key, key)

    threads = [threading.Thread(target=fill, args=(offset,)) for offset in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [cache.get_or_compute(key, lambda: -1) for key in range(2000)] == list(range(2000))
