"""``evoharness.local_store.LocalArtifactStore``: the one filesystem ArtifactStore (registry,
worker ``store: local``, CLI)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from evoharness.local_store import LocalArtifactStore
from evoharness.ports import ArtifactStore


def test_round_trip_and_digest(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path / "root")
    assert isinstance(store, ArtifactStore)
    assert (tmp_path / "root").is_dir()  # created on construction
    assert store.bucket == "local"
    digest = store.put("harnesses/a.json", b'{"x": 1}')
    assert digest == hashlib.sha256(b'{"x": 1}').hexdigest()
    assert store.exists("harnesses/a.json")
    assert store.get("harnesses/a.json") == b'{"x": 1}'
    assert not store.exists("harnesses/b.json")


def test_identical_put_does_not_rewrite_and_new_bytes_replace(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path)
    store.put("k/v.bin", b"one")
    path = tmp_path / "k" / "v.bin"
    os.utime(path, (1_000_000, 1_000_000))
    store.put("k/v.bin", b"one")
    assert path.stat().st_mtime == 1_000_000  # identical bytes: the file was not rewritten
    store.put("k/v.bin", b"two")
    assert store.get("k/v.bin") == b"two"
    assert [p.name for p in path.parent.iterdir()] == ["v.bin"]  # no temporary file left


@pytest.mark.parametrize("key", ["", "/etc/passwd", "../outside", "a/../../outside"])
def test_keys_outside_the_root_are_refused(tmp_path: Path, key: str) -> None:
    store = LocalArtifactStore(tmp_path / "root")
    with pytest.raises(ValueError, match="artifact key"):
        store.put(key, b"x")
    assert not (tmp_path / "outside").exists()


def test_a_symlink_out_of_the_root_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    root = tmp_path / "root"
    store = LocalArtifactStore(root)
    (root / "link").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ValueError, match="escapes the store root"):
        store.put("link/x.bin", b"x")
    assert not (tmp_path / "elsewhere" / "x.bin").exists()


def test_missing_key_names_key_and_root(tmp_path: Path) -> None:
    store = LocalArtifactStore(tmp_path)
    with pytest.raises(KeyError, match="no artifact at 'runs/r/round-001.json'"):
        store.get("runs/r/round-001.json")


def test_the_execution_cache_reads_only_execution_records(tmp_path: Path) -> None:
    """A record written by ``ExecutionCache.record`` is found; anything else at a record's key
    (not JSON, or JSON of another shape, e.g. a scene manifest) is a miss, never a hit
    without its cost."""
    from evoharness.execution_cache import ExecutionCache

    cache = ExecutionCache(LocalArtifactStore(tmp_path))
    assert cache.lookup("ab" * 32) is None
    rec = cache.record("ab" * 32, b"\x89PNG fake", generator_id="g@1", seconds=1.5)
    assert cache.lookup("ab" * 32) == rec and rec.key == f"executions/ab/{'ab' * 32}.png"
    cache.store.put(cache.record_key("cd" * 32), b'{"prompt": "x", "objects": []}')
    cache.store.put(cache.record_key("ef" * 32), b"not json")
    assert cache.lookup("cd" * 32) is None and cache.lookup("ef" * 32) is None


def test_list_keys_lists_by_key_prefix_as_s3_does(tmp_path: Path) -> None:
    """``list_keys`` matches a key prefix (not only a folder), recursively and sorted, and
    leaves out the temporary files of unfinished writes; a ``..`` prefix is refused."""
    store = LocalArtifactStore(tmp_path)
    for key in ("runs/r1/executions/h/t/0.json", "runs/r1/executions/h/t/1.json", "runs/r10/x"):
        store.put(key, b"{}")
    (tmp_path / "runs" / "r1" / "executions" / "h" / "t" / ".0.json.tmp123").write_bytes(b"")
    assert store.list_keys("runs/r1/exec") == [
        "runs/r1/executions/h/t/0.json",
        "runs/r1/executions/h/t/1.json",
    ]
    assert store.list_keys("runs/r1") == [
        "runs/r1/executions/h/t/0.json",
        "runs/r1/executions/h/t/1.json",
        "runs/r10/x",
    ]
    assert store.list_keys("runs/nothing/") == []
    with pytest.raises(ValueError, match="invalid key prefix"):
        store.list_keys("../up")
