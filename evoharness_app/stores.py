"""The artifact store a CLI command reads or writes: a local folder, or the stack's S3; and
the worker settings that reach a running stack (``stack_worker_settings``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def stack_store() -> Any:
    """The stack's S3 artifact store from the service settings (``EVOHARNESS_S3__*``;
    ``eval "$(evoharness env)"`` sets them)."""
    from services.common.settings import ServiceSettings, load_settings
    from services.storage.s3 import S3ArtifactStore

    return S3ArtifactStore.from_settings(load_settings(ServiceSettings).s3)


def open_store(folder: str | Path | None) -> Any:
    """``folder`` as a local artifact store (it must exist), else the stack's S3 store.
    Raises ``FileNotFoundError`` naming ``folder`` when it is not a folder."""
    if folder is None:
        return stack_store()
    from evoharness.local_store import LocalArtifactStore

    if not Path(folder).is_dir():
        raise FileNotFoundError(f"--store {folder}: no such folder")
    return LocalArtifactStore(folder)


def stack_worker_settings(state: Any) -> Any:
    """``WorkerSettings`` pointing at the running stack ``state`` (``services.stack``): its
    S3, Temporal and services' addresses, bearer token and CA, for the main job's
    evaluation through the services."""
    from workflows.backends import load_worker_settings

    env = state.env  # the stack's S3 settings; os.environ is left untouched
    return load_worker_settings(
        s3={
            "endpoint": env["EVOHARNESS_S3__ENDPOINT"],
            "access_key": env["EVOHARNESS_S3__ACCESS_KEY"],
            "secret_key": env["EVOHARNESS_S3__SECRET_KEY"],
            "bucket": env.get("EVOHARNESS_S3__BUCKET", "evoharness"),
            "secure": env.get("EVOHARNESS_S3__SECURE", "false") == "true",
        },
        worker={
            "temporal_address": state.address("temporal"),
            "generation_address": state.address("generation"),
            "verification_address": state.address("verification"),
            "proposer_address": state.address("proposer"),
        },
        # the stack's bearer token and CA (services.stack: auth on by default)
        server={"metrics_port": -1, "auth_token": env.get("EVOHARNESS_TOKEN", "")},
        client={"tls_ca_file": env.get("EVOHARNESS_CLIENT__TLS_CA_FILE")},
    )
