"""``LocalArtifactStore``: the filesystem ``evoharness.ports.ArtifactStore``.

The one local store of the project: the embedded registry's documents, the worker's
``store: local`` and the CLI use it; production uses S3 (``services.storage.s3.
S3ArtifactStore``), which implements the same port. Filesystem only, no network I/O, so it
lives in the core beside the port; it imports nothing outside ``evoharness``.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path


class LocalArtifactStore:
    """Blobs as files under ``root`` (created when missing); writes are atomic (temporary file
    in the same folder + rename) and idempotent (identical bytes are not rewritten).

    Keys are relative paths (``harnesses/<sha256>.json``); an empty, absolute or ``..`` key,
    or one that resolves outside ``root`` (a symlink), raises ``ValueError`` naming it.
    ``bucket`` is ``"local"`` (S3 stores name their bucket there; refs and messages use it).
    """

    bucket = "local"

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        if not key or key.startswith("/") or ".." in Path(key).parts:
            raise ValueError(f"invalid artifact key {key!r}")
        path = self.root / key
        if self.root.resolve() not in path.resolve().parents:
            raise ValueError(f"artifact key {key!r} escapes the store root {self.root}")
        return path

    def put(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> str:
        """Store ``data`` at ``key`` (idempotent); return its sha256 hex. ``content_type`` is
        accepted for the port's signature and not stored."""
        digest = hashlib.sha256(data).hexdigest()
        path = self._path(key)
        if path.is_file() and path.read_bytes() == data:
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
        """The blob at ``key``; ``KeyError`` naming the key and root when missing."""
        path = self._path(key)
        try:
            return path.read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            raise KeyError(f"no artifact at {key!r} under {self.root}") from None

    def exists(self, key: str) -> bool:
        """True when a blob is stored at ``key``."""
        return self._path(key).is_file()

    def list_keys(self, prefix: str = "") -> list[str]:
        """All keys under ``prefix`` (a key prefix, as S3 lists them: ``runs/r1/exec`` matches
        ``runs/r1/executions/...``), sorted; temporary files of unfinished writes are left
        out. ``ValueError`` for an absolute or ``..`` prefix."""
        if prefix.startswith("/") or ".." in Path(prefix).parts:
            raise ValueError(f"invalid key prefix {prefix!r}")
        base = self.root / prefix.rsplit("/", 1)[0] if "/" in prefix else self.root
        if not base.is_dir():
            return []
        keys = (
            p.relative_to(self.root).as_posix()
            for p in base.rglob("*")
            if p.is_file() and not p.name.startswith(".")
        )
        return sorted(k for k in keys if k.startswith(prefix))
