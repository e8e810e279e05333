"""Not a test module (not collected: the name lacks ``test_``): the pytest session that
``test_no_orphans.py`` starts, SIGTERMs or SIGKILLs, and then searches for orphans. It starts
real servers through the session fixtures (SeaweedFS S3, a gRPC generation service, the
Temporal dev server, and with ``VICTIM_TIME_SKIPPING=1`` the SDK-owned time-skipping server),
writes their PIDs to ``$VICTIM_READY`` and waits to be killed."""

from __future__ import annotations

import json
import os
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from services.storage.s3 import S3ArtifactStore
from tests.fixtures.services import s3_config

pytestmark = pytest.mark.skipif(
    "VICTIM_READY" not in os.environ, reason="run only by tests/services/test_no_orphans.py"
)


@pytest.fixture
def time_skipping(request: pytest.FixtureRequest) -> Any:
    if os.environ.get("VICTIM_TIME_SKIPPING") == "1":
        return request.getfixturevalue("temporal_time_skipping_env")
    return None


def test_hold_servers_until_killed(
    s3_server: Any, service_factory: Any, temporal_env: Any, time_skipping: Any
) -> None:
    bucket = f"victim-{uuid.uuid4().hex[:12]}"
    S3ArtifactStore.from_settings(s3_server.settings, bucket=bucket).ensure_bucket()
    s3, env = s3_config(s3_server, bucket)
    gen = service_factory("generation", {"backend": "sim", "s3": s3}, env=env)
    ready = Path(os.environ["VICTIM_READY"])
    tmp = ready.with_suffix(".tmp")
    tmp.write_text(json.dumps({"s3": s3_server.pid, "generation": gen.process.pid}))
    tmp.rename(ready)
    threading.Event().wait(600)  # until the outer test kills this session
