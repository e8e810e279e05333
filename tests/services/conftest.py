"""A session-scoped stack of the five services for the tests that only need them running
(fuzzing, load): generation and verification on the sim backend, the registry on SQLite + S3
with the small baseline promoted to ``prod`` (``bench.load_bench.start_stack``), the runtime in
front of them, and the rule-based proposer. Started once, stopped by PID at session end."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from services.storage.s3 import S3ArtifactStore
from tests.fixtures.services import ServiceHandle


@pytest.fixture(scope="session")
def services_stack(
    s3_server: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, ServiceHandle]]:
    """``{"generation", "verification", "registry", "runtime", "proposer"}`` → handle, and
    under ``"_s3"`` the ``S3Settings`` of the stack's bucket."""
    from bench.load_bench import start_stack
    from tests.fixtures.services import start_service

    settings = s3_server.settings.model_copy(update={"bucket": f"svc-{uuid.uuid4().hex[:12]}"})
    S3ArtifactStore.from_settings(settings).ensure_bucket()
    work = tmp_path_factory.mktemp("services-stack")
    handles, stop = start_stack(settings, work)
    try:
        handles["proposer"] = start_service("proposer", {"backend": "rule"}, workdir=work)
        handles["_s3"] = settings  # type: ignore[assignment]
        yield handles
    finally:
        handles.pop("_s3", None)
        stop()
