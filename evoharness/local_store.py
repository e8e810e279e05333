"""A filesystem ``ArtifactStore`` for the embedded registry (production uses S3 through
``services.storage.s3.S3ArtifactStore``; both implement ``evoharness.ports.ArtifactStore``)."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path


class LocalArtifactStore:
    """Blobs as files under ``root``; writes are atomic (temporary file + rename).

    Keys are relative paths (``harnesses/<sha256>.json``); ``..`` and absolute keys raise
    ``ValueError``.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        if not key or key.startswith("/") or ".." in Path(key).parts:
            raise ValueError(f"invalid artifact key {key!r}")
        return self.root / key

    def put(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> str:
        """Store ``data`` at ``key`` (idempotent); return its sha256 hex."""
        digest = hashlib.sha256(data).hexdigest()
        path = self._path(key)
        if path.exists() and path.read_bytes() == data:
            return digest
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return digest

    def get(self, key: str) -> bytes:
        """The blob at ``key``; ``KeyError`` naming the key when missing."""
        path = self._path(key)
        try:
            return path.read_bytes()
        except FileNotFoundError:
            raise KeyError(f"no artifact at {key!r} under {self.root}") from None

    def exists(self, key: str) -> bool:
        """True when a blob is stored at ``key``."""
        return self._path(key).is_file()
