"""Running replays: one world per packing policy, each replaying the same trace from scratch, with its
state table in memory (:mod:`~fleetwright.local.simulate.dynamo`) or in moto's DynamoDB."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from fleetwright.local.apiserver.resources import NAMESPACES
from fleetwright.local.simulate.dynamo import MemoryDynamoDB
from fleetwright.local.simulate.engine import Outcome, Replay, seeded_claim_ids
from fleetwright.local.simulate.trace import Trace
from fleetwright.local.simulate.world import World, WorldSpec, build_world
from fleetwright.model.instancetype import InstanceType
from fleetwright.state.table import create_state_table

STATE_TABLE = "fleetwright-state"
MEMORY = "memory"
MOTO = "moto"


@contextlib.contextmanager
def state_client(backend: str = MEMORY, region: str = "us-east-1") -> Iterator[Any]:
    """A DynamoDB client holding the state table: in memory, or moto's (in this process)."""
    if backend == MEMORY:
        client: Any = MemoryDynamoDB()
        create_state_table(client, STATE_TABLE)
        yield client
        return
    if backend != MOTO:
        raise ValueError(f"unknown state backend {backend!r}")
    from unittest import mock

    import boto3  # type: ignore[import-untyped]
    from moto import mock_aws

    from fleetwright.local.sandbox import FAKE_CREDENTIALS

    with mock.patch.dict(os.environ, {**FAKE_CREDENTIALS, "AWS_DEFAULT_REGION": region}), mock_aws():
        client = boto3.client("dynamodb", region_name=region)
        create_state_table(client, STATE_TABLE)
        yield client


def replay(
    spec: WorldSpec,
    trace: Trace,
    *,
    seed: int = 0,
    backend: str = MEMORY,
    progress: Callable[[float], None] | None = None,
    keep: Callable[[World], None] | None = None,
) -> Outcome:
    """Replay ``trace`` in a new world built from ``spec``; ``keep`` sees the world before it is torn
    down (tests look inside)."""
    with state_client(backend, spec.region) as client, seeded_claim_ids(seed):
        world = build_world(spec, STATE_TABLE, client)
        create_namespaces(world, trace)
        replaying = Replay(
            world, trace, progress=progress, spot_interruptions=spec.spot_interruptions, seed=seed
        )
        outcome = replaying.run()
        if keep is not None:
            keep(world)
        return outcome


def create_namespaces(world: World, trace: Trace) -> None:
    """The namespaces of the trace's pods, as the cluster the trace came from had them (a pod in a
    namespace that does not exist is refused)."""
    for namespace in sorted({pod.namespace for pod in trace.pods}):
        if world.store.try_get(NAMESPACES, None, namespace) is None:
            world.store.create(NAMESPACES, {"metadata": {"name": namespace}})


def replay_policies(
    spec: WorldSpec,
    trace: Trace,
    policies: tuple[str | None, ...],
    *,
    seed: int = 0,
    backend: str = MEMORY,
    progress: Callable[[str | None, float], None] | None = None,
    jobs: int = 1,
) -> dict[str | None, Outcome]:
    """One replay per packing policy (None: the NodePools' own); with ``jobs`` > 1 the replays run in
    that many processes at once (each replay is single-threaded), reporting no progress."""
    if jobs > 1 and len(policies) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        context = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(max_workers=min(jobs, len(policies)), mp_context=context) as pool:
            futures = {
                policy: pool.submit(replay, replace(spec, packing=policy), trace, seed=seed, backend=backend)
                for policy in policies
            }
            return {policy: future.result() for policy, future in futures.items()}
    outcomes: dict[str | None, Outcome] = {}
    for policy in policies:

        def report(done: float, policy: str | None = policy) -> None:
            if progress is not None:
                progress(policy, done)

        outcomes[policy] = replay(
            replace(spec, packing=policy), trace, seed=seed, backend=backend, progress=report
        )
    return outcomes


def catalog_for(spec: WorldSpec) -> list[InstanceType]:
    """The instance types the replay's NodePools can launch (as the provisioner's catalogs give them)."""
    with state_client() as client:
        return build_world(spec, STATE_TABLE, client).provisioner.catalogs()[0]
