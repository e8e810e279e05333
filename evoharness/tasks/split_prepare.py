"""Preparing split folders: ``prepare_splits`` deals task files into the splits
(``evoharness.tasks.splits``) and writes them with their manifest
(``evoharness.tasks.split_manifest``); ``build_run_splits`` builds an evolution run's tasks
from the shared data and prepares its split folder.

Preservation tasks carry the ``quality`` constraint ``compute_splits`` adds (its threshold
is recorded in the manifest).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evoharness.canonical import sha256_hex
from evoharness.tasks.class_cover import prompt_classes
from evoharness.tasks.io import (
    atomic_write_bytes,
    dumps_tasks,
    load_tasks,
    refuse_output_over_input,
)
from evoharness.tasks.models import Task
from evoharness.tasks.split_manifest import MANIFEST
from evoharness.tasks.splits import (
    DEFAULT_SIZES,
    MANIFEST_VERSION,
    PRESERVATION_QUALITY,
    SPLITS,
    SplitError,
    check_sizes,
    compute_splits,
)


def prepare_splits(
    task_files: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    sizes: Sequence[int] = DEFAULT_SIZES,
    seed: int = 0,
    preservation_quality: float | None = PRESERVATION_QUALITY,
) -> dict[str, Any]:
    """Write ``target.jsonl``, ``heldout.jsonl``, ``preservation.jsonl``, ``test.jsonl``
    (when ``sizes`` has four numbers; three: no test split) and ``manifest.json`` into
    ``out_dir`` and return the manifest. ``sizes`` are checked by ``check_sizes`` (the
    target split must not be empty).

    ``task_files`` are JSON Lines task files (``write_jsonl``), read in the given order; a
    later duplicate prompt (after normalisation) is dropped, a duplicate ``task_id`` across
    files raises ``SplitError``. Sizes shrink 5:1:1:1 (in proportion to ``sizes``) when too
    few tasks exist. Preservation tasks get a ``quality`` constraint at ``preservation_quality``
    (module docstring; None: none), recorded in the manifest. Every input problem is raised before anything is written
    (``TaskFileError`` with ``file:line`` or ``SplitError``); each file is written through a
    temporary file and a rename, the manifest last.
    """
    files = [task_files] if isinstance(task_files, str | os.PathLike) else list(task_files)
    if not files:
        raise SplitError("prepare_splits needs at least one task file")
    sizes = check_sizes(sizes)
    names = SPLITS[: len(sizes)]
    paths = [Path(f) for f in files]
    out = Path(out_dir)
    refuse_output_over_input(paths, [out / f"{name}.jsonl" for name in SPLITS] + [out / MANIFEST])
    per_file = [(str(p), load_tasks(p)) for p in paths]
    if not any(ts for _, ts in per_file):
        raise SplitError(f"{', '.join(map(str, paths))}: no tasks to split")
    if out.exists() and not out.is_dir():
        raise SplitError(f"{out}: exists and is not a folder")
    input_hashes = [sha256_hex(p.read_bytes()) for p in paths]
    if preservation_quality is not None and not 0.0 <= preservation_quality <= 1.0:
        raise SplitError(f"preservation_quality {preservation_quality} is not in 0..1")
    splits, dropped, actual, near = compute_splits(per_file, sizes, seed, preservation_quality)
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {
        "manifest_version": MANIFEST_VERSION,
        "seed": seed,
        "sizes_requested": list(sizes),
        "sizes": list(actual),
        "dropped_duplicates": dropped,
        # evolution candidates left out because they near-duplicate a test prompt
        # (evoharness.tasks.overlap, the default embedder and threshold)
        "dropped_near_duplicates_of_test": near,
        "preservation_quality": preservation_quality,
        "inputs": [
            {
                "path": _rel(p, out),
                "sha256": h,
                "tasks": len(ts),
            }
            for p, h, (_, ts) in zip(paths, input_hashes, per_file, strict=True)
        ],
        "splits": {},
    }
    stale = out / "test.jsonl"
    if "test" not in names and stale.is_file():
        stale.unlink()  # a test split of an earlier preparation would not match this manifest
    for name in names:
        data = dumps_tasks(splits[name])
        fname = f"{name}.jsonl"
        atomic_write_bytes(out / fname, data)
        manifest["splits"][name] = {
            "file": fname,
            "sha256": sha256_hex(data),
            "count": len(splits[name]),
            "families": dict(sorted(Counter(t.task_family for t in splits[name]).items())),
            # object classes the split's prompts name (of evoharness.vocab.CLASSES)
            "classes": len(set().union(*(prompt_classes(t.prompt) for t in splits[name]))),
        }
    text = json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    atomic_write_bytes(out / MANIFEST, text.encode("utf-8"))
    return manifest


def build_run_splits(
    shared_dir: str | os.PathLike[str],
    run_dir: str | os.PathLike[str],
    sizes: Sequence[int],
    synthetic_count: int = 0,
    seed: int = 0,
) -> dict[str, list[Task]]:
    """The tasks of an evolution run (``evoharness evolve main`` and ``evolve local``): GenEval
    prompts from ``<shared_dir>/data/geneval/evaluation_metadata.jsonl`` plus
    ``synthetic_count`` synthetic tasks (``evoharness.tasks.synthetic``, seeded by ``seed``)
    written to ``<run_dir>/tasks/``, split by ``prepare_splits`` into ``<run_dir>/splits/``
    with ``sizes`` (3 numbers: no test split; 4: with the untouched test split) and ``seed``.
    Returns ``{split: tasks}`` for the splits written. Raises ``SplitError`` naming the file
    when the GenEval metadata is missing, ``BuildError``/``SplitError`` with file and line for
    malformed data (nothing is split then)."""
    from evoharness.tasks.builders import build_tasks, write_jsonl

    sizes = check_sizes(sizes)
    geneval_file = Path(shared_dir) / "data" / "geneval" / "evaluation_metadata.jsonl"
    if not geneval_file.is_file():
        raise SplitError(f"{geneval_file}: GenEval metadata not found (set EVOHARNESS_SHARED)")
    tasks_dir = Path(run_dir) / "tasks"
    files = [write_jsonl(build_tasks("geneval", geneval_file).tasks, tasks_dir / "geneval.jsonl")]
    if synthetic_count > 0:
        synthetic = build_tasks("synthetic", None, seed=seed, count=synthetic_count)
        files.append(write_jsonl(synthetic.tasks, tasks_dir / "synthetic.jsonl"))
    out = Path(run_dir) / "splits"
    manifest = prepare_splits(files, out, sizes=sizes, seed=seed)
    return {
        name: load_tasks(out / manifest["splits"][name]["file"])
        for name in SPLITS
        if name in manifest["splits"]
    }


def _rel(path: Path, base: Path) -> str:
    """``path`` relative to ``base`` when possible (so a split folder can move with its
    inputs), else absolute."""
    try:
        return os.path.relpath(path.resolve(), base.resolve())
    except ValueError:
        return str(path.resolve())


__all__ = ["build_run_splits", "prepare_splits"]
