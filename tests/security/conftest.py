"""Fixtures: the interruption handler on moto and the Kubernetes API emulator, as the interruption tests
wire it (``tests/interruption/conftest.py``), for hostile messages on the interruption queue."""

from __future__ import annotations

from tests.interruption.conftest import (  # noqa: F401  (fixtures)
    amis,
    apiserver,
    aws,
    client,
    cluster,
    fake_credentials,
    full_envelopes,
    harness,
    interruptions,
    listing,
    workflow_definition,
    world,
)
