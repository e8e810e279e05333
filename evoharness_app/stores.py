"""The artifact store a CLI command reads or writes: a local folder, or the stack's S3."""

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
