"""The manifest of a split folder (``manifest.json``, written by
``evoharness.tasks.split_prepare.prepare_splits``) and the checks that read it.

The manifest records seed, requested and actual sizes, per-split counts and families, and the
sha256 of every input and split file. ``verify_splits`` re-checks all of it and rebuilds the
splits from the inputs (``evoharness.tasks.splits.compute_splits``) to compare bytes;
``check_split_hashes`` checks only the split files' hashes, where the inputs are not at hand.
Manifests of version 1 (three splits, preservation = the next ``sizes[2]`` tasks of the
order) still verify.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evoharness.canonical import sha256_hex
from evoharness.tasks.io import TaskFileError, dumps_tasks, load_tasks
from evoharness.tasks.models import Task, normalize_prompt
from evoharness.tasks.splits import (
    KNOWN_MANIFEST_VERSIONS,
    SPLITS,
    SplitError,
    compute_splits,
)

MANIFEST = "manifest.json"


def _check_hash(path: Path, expected: object, what: str = "sha256") -> None:
    """Raise ``SplitError`` naming ``path`` and both hashes when the file's sha256 is not
    ``expected`` (the manifest's)."""
    digest = sha256_hex(path.read_bytes())
    if digest != expected:
        raise SplitError(f"{path}: {what} {digest} does not match the manifest ({expected})")


def _read_manifest(mpath: Path) -> dict[str, Any]:
    """The JSON object in ``mpath``; ``SplitError`` naming it when unreadable or not one."""
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SplitError(f"{mpath}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise SplitError(f"{mpath}: invalid JSON: {exc}") from None
    if not isinstance(manifest, dict):
        raise SplitError(f"{mpath}: malformed manifest: expected a JSON object")
    return manifest


def check_split_hashes(folder: str | os.PathLike[str], names: Sequence[str]) -> None:
    """Check that the split files ``<folder>/<name>.jsonl`` of ``names`` are those the
    folder's ``manifest.json`` records (``splits.<name>.sha256``). Raises ``SplitError``
    naming the file and both hashes at the first mismatch, or the manifest when it cannot be
    read or does not list a split. Only the hashes: ``verify_splits`` also rebuilds the
    splits from the inputs, which need not be at hand where a run is prepared."""
    mpath = Path(folder) / MANIFEST
    manifest = _read_manifest(mpath)
    entries = manifest.get("splits")
    for name in names:
        entry = entries.get(name) if isinstance(entries, dict) else None
        if not isinstance(entry, dict):
            raise SplitError(f"{mpath}: does not list the {name} split ({name}.jsonl)")
        _check_hash(Path(folder) / str(entry.get("file", f"{name}.jsonl")), entry.get("sha256"))


def _refuse_unknown_files(
    base: Path, mpath: Path, split_files: list[Path], inputs: list[dict[str, Any]]
) -> None:
    """Raise ``SplitError`` naming the first entry of the split folder ``base`` that is not
    the manifest ``mpath``, one of its ``split_files`` or one of its ``inputs`` (an input may
    lie in the folder): a stray ``extra.jsonl`` would otherwise pass ``verify-splits`` with
    "ok" while nothing checks it (a harness folder refuses unknown files the same way).
    Hidden files (``.git``, ``.DS_Store``) are ignored."""
    known = {mpath.resolve(), *(f.resolve() for f in split_files)}
    for entry in inputs:
        p = Path(str(entry["path"]))
        known.add((p if p.is_absolute() else base / p).resolve())
    for f in sorted(base.iterdir()):
        if not f.name.startswith(".") and f.resolve() not in known:
            raise SplitError(
                f"{f}: unknown file in a split folder (expected {mpath.name} and the split "
                f"files it lists: {', '.join(p.name for p in split_files)}); move it out"
            )


def verify_splits(manifest_path: str | os.PathLike[str]) -> dict[str, Any]:
    """Re-check a split folder against its manifest and return the manifest.

    ``manifest_path`` is ``manifest.json`` or its folder. Checks, raising ``SplitError``
    naming the file at the first mismatch: every split file's sha256 and task count, each
    task's ``metadata.split``, that the splits are disjoint by ``task_id`` and by normalised
    prompt, every input file's sha256, and that re-running the split from the inputs with the
    manifest's seed and sizes reproduces the split files byte for byte; a file in the folder
    that is none of these (hidden files aside) is refused by name. A ``manifest_version``
    other than those of ``KNOWN_MANIFEST_VERSIONS`` is refused (``SplitError`` naming the
    file and the field) before anything else is read.
    """
    mpath = Path(manifest_path)
    if mpath.is_dir():
        mpath = mpath / MANIFEST
    elif mpath.suffix == ".jsonl":
        raise SplitError(
            f"{mpath}: not a manifest; give the split folder ({mpath.parent}) or its {MANIFEST}"
        )
    manifest = _read_manifest(mpath)
    base = mpath.parent
    version = manifest.get("manifest_version", 1)
    if isinstance(version, bool) or version not in KNOWN_MANIFEST_VERSIONS:
        known = " or ".join(map(str, KNOWN_MANIFEST_VERSIONS))
        raise SplitError(
            f"{mpath}: manifest_version {version!r} is not one this evoharness reads "
            f"({known}); re-run prepare-splits (--force) or use the evoharness that wrote it"
        )
    try:
        seed = int(manifest["seed"])
        requested = tuple(int(x) for x in manifest["sizes_requested"])
        if len(requested) not in (3, 4):
            raise ValueError("sizes_requested must have 3 or 4 entries")
        names = SPLITS[: len(requested)]
        split_entries = {name: manifest["splits"][name] for name in names}
        inputs = list(manifest["inputs"])
        # manifests written before the quality constraint existed have no such field
        pq = manifest.get("preservation_quality")
        quality = None if pq is None else float(pq)
    except KeyError as exc:
        raise SplitError(f"{mpath}: malformed manifest: missing field {exc}") from None
    except (TypeError, ValueError) as exc:
        raise SplitError(f"{mpath}: malformed manifest: {exc}") from None
    for name, entry in split_entries.items():
        if not isinstance(entry, dict):
            raise SplitError(f"{mpath}: malformed manifest: splits.{name} must be an object")
    for i, entry in enumerate(inputs):
        if not isinstance(entry, dict) or "path" not in entry:
            raise SplitError(
                f"{mpath}: malformed manifest: inputs[{i}] must be an object with a path"
            )
    _refuse_unknown_files(
        base,
        mpath,
        [base / str(e.get("file", f"{n}.jsonl")) for n, e in split_entries.items()],
        inputs,
    )
    seen_ids: dict[str, str] = {}
    seen_prompts: dict[str, str] = {}
    for name in names:
        entry = split_entries[name]
        f = base / str(entry.get("file", f"{name}.jsonl"))
        if not f.is_file():
            raise SplitError(f"{f}: missing (listed in {mpath})")
        _check_hash(f, entry.get("sha256"))
        try:
            tasks = load_tasks(f)
        except TaskFileError as exc:
            raise SplitError(str(exc)) from None
        if len(tasks) != entry.get("count"):
            raise SplitError(f"{f}: {len(tasks)} tasks, manifest says {entry.get('count')}")
        for t in tasks:
            if t.metadata.get("split") != name:
                raise SplitError(
                    f"{f}: task {t.task_id!r} has metadata.split "
                    f"{t.metadata.get('split')!r}, expected {name!r}"
                )
            if t.task_id in seen_ids:
                raise SplitError(f"{f}: task {t.task_id!r} is also in {seen_ids[t.task_id]}")
            seen_ids[t.task_id] = f.name
            key = normalize_prompt(t.prompt)
            if key in seen_prompts:
                raise SplitError(
                    f"{f}: task {t.task_id!r} repeats a prompt of {seen_prompts[key]} "
                    "after normalisation"
                )
            seen_prompts[key] = f"{f.name} ({t.task_id})"
    per_file: list[tuple[str, list[Task]]] = []
    for entry in inputs:
        p = Path(str(entry["path"]))
        p = p if p.is_absolute() else base / p
        if not p.is_file():
            raise SplitError(f"{p}: input task file missing (listed in {mpath})")
        _check_hash(p, entry.get("sha256"), "input sha256")
        per_file.append((str(p), load_tasks(p)))
    splits, _, actual, _ = compute_splits(per_file, requested, seed, quality, version)
    if list(actual) != list(manifest.get("sizes", [])):
        raise SplitError(f"{mpath}: sizes {manifest.get('sizes')} != recomputed {list(actual)}")
    for name in names:
        if sha256_hex(dumps_tasks(splits[name])) != split_entries[name]["sha256"]:
            raise SplitError(
                f"{base / split_entries[name]['file']}: does not match the split recomputed "
                f"from the inputs with seed {seed}"
            )
    return dict(manifest)


__all__ = [
    "MANIFEST",
    "check_split_hashes",
    "verify_splits",
]
