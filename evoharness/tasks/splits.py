"""Target / held-out / preservation splits (docs/architecture.md, the gate's three splits).

``prepare_splits`` reads one or more task files, drops later duplicate prompts after
``normalize_prompt`` (across files too, so the splits are disjoint after normalisation),
and deals the tasks into three files, seeded and stratified by ``task_family``:

1. Families (sorted by name) are each shuffled with ``random.Random(seed)``.
2. Every task gets a key ``(i + u_f) / n_f`` (its position ``i`` in its shuffled family of
   ``n_f`` tasks, ``u_f`` a seeded uniform offset per family) and all tasks are sorted by it:
   systematic stratified sampling, so any contiguous run of the order holds each family in
   proportion to its size, within one task.
3. target = the first ``sizes[0]`` tasks of that order, heldout the next ``sizes[1]``,
   preservation the next ``sizes[2]``.

Every preservation task gets one more constraint, ``quality`` (``constraint_id``
``"quality"``, threshold ``preservation_quality``, default ``PRESERVATION_QUALITY`` = 0.5;
None adds none): preservation prompts guard what a harness change must not break, and a
side effect such as grain, clipped colours or pasted-looking objects is such a regression
(``evoharness.sim.quality`` documents the score). It is added here, at split preparation,
so the benchmark builders stay faithful to their sources; the prompt is unchanged, so the
harness never sees it, and GenEval scoring ignores it.

When fewer tasks exist than ``sum(sizes)``, the sizes shrink in their own proportion (5:1:1
for the default 500/100/100) by largest remainder, using every task.

``manifest.json`` records seed, requested and actual sizes, per-split counts and families,
and the sha256 of every input and split file; ``verify_splits`` re-checks all of it and
rebuilds the splits from the inputs to compare bytes.
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evoharness.canonical import sha256_hex
from evoharness.tasks.io import (
    TaskFileError,
    atomic_write_bytes,
    dumps_tasks,
    load_tasks,
    refuse_output_over_input,
)
from evoharness.tasks.models import Constraint, ConstraintType, Task, normalize_prompt

SPLITS = ("target", "heldout", "preservation")
DEFAULT_SIZES = (500, 100, 100)
MANIFEST = "manifest.json"
MANIFEST_VERSION = 1
#: Threshold of the preservation split's ``quality`` constraint: a score of 0.5 is where one
#: component (noise, clipping or seams) is half-way from its clean level to its bad level
#: (``evoharness.sim.quality``); clean images score ≈ 1.
PRESERVATION_QUALITY = 0.5


class SplitError(ValueError):
    """A split that cannot be prepared or does not verify; the message names the file."""


def scaled_sizes(sizes: tuple[int, int, int], available: int) -> tuple[int, int, int]:
    """``sizes`` when ``available >= sum(sizes)``, else scaled by ``available / sum(sizes)``
    with largest-remainder rounding (ties to the earlier split), so the result sums to
    ``available``. ``(500, 100, 100)`` with 70 tasks → ``(50, 10, 10)``."""
    total = sum(sizes)
    if any(s < 0 for s in sizes) or total == 0:
        raise SplitError(f"split sizes must be >= 0 and not all zero, got {sizes}")
    if available >= total:
        return sizes
    exact = [s * available / total for s in sizes]
    base = [int(x) for x in exact]
    left = available - sum(base)
    order = sorted(range(3), key=lambda i: (-(exact[i] - base[i]), i))
    for i in order[:left]:
        base[i] += 1
    return (base[0], base[1], base[2])


def stratified_order(tasks: list[Task], seed: int) -> list[Task]:
    """The seeded, family-stratified order described in the module docstring."""
    rng = random.Random(seed)
    families: dict[str, list[Task]] = defaultdict(list)
    for t in tasks:
        families[t.task_family].append(t)
    keyed: list[tuple[float, str, int, Task]] = []
    for fam in sorted(families):
        members = list(families[fam])
        rng.shuffle(members)
        offset = rng.random()
        n = len(members)
        for i, t in enumerate(members):
            keyed.append(((i + offset) / n, fam, i, t))
    keyed.sort(key=lambda k: (k[0], k[1], k[2]))
    return [k[3] for k in keyed]


def _dedupe(per_file: list[tuple[str, list[Task]]]) -> tuple[list[Task], int]:
    seen_ids: dict[str, str] = {}
    seen_prompts: set[str] = set()
    out: list[Task] = []
    dropped = 0
    for fname, tasks in per_file:
        for t in tasks:
            if t.task_id in seen_ids:
                raise SplitError(
                    f"{fname}: duplicate task_id {t.task_id!r} (also in {seen_ids[t.task_id]})"
                )
            seen_ids[t.task_id] = fname
            key = normalize_prompt(t.prompt)
            if key in seen_prompts:
                dropped += 1
                continue
            seen_prompts.add(key)
            out.append(t)
    return out, dropped


def with_quality(task: Task, threshold: float) -> Task:
    """``task`` plus a ``quality`` constraint (id ``"quality"``, ``value`` = ``threshold``)
    unless it already has one. Raises ``SplitError`` when the id ``"quality"`` is taken by
    another constraint type."""
    for c in task.constraints:
        if c.constraint_id == "quality":
            if c.type is ConstraintType.quality:
                return task
            raise SplitError(
                f"task {task.task_id!r}: constraint id 'quality' is taken by a {c.type.value} "
                "constraint"
            )
    q = Constraint(
        constraint_id="quality", type=ConstraintType.quality, subject="image", value=threshold
    )
    return task.model_copy(update={"constraints": [*task.constraints, q]})


def compute_splits(
    per_file: list[tuple[str, list[Task]]],
    sizes: tuple[int, int, int],
    seed: int,
    preservation_quality: float | None = PRESERVATION_QUALITY,
) -> tuple[dict[str, list[Task]], int, tuple[int, int, int]]:
    """Pure part of ``prepare_splits``: ``({split: tasks}, duplicates dropped, sizes used)``.
    Each returned task is a copy with ``metadata.split`` set; preservation tasks carry a
    ``quality`` constraint at ``preservation_quality`` (None: none)."""
    tasks, dropped = _dedupe(per_file)
    actual = scaled_sizes(sizes, len(tasks))
    order = stratified_order(tasks, seed)
    out: dict[str, list[Task]] = {}
    start = 0
    for name, n in zip(SPLITS, actual, strict=True):
        chunk = order[start : start + n]
        start += n
        out[name] = [
            t.model_copy(update={"metadata": {**t.metadata, "split": name}}, deep=True)
            for t in chunk
        ]
        if name == "preservation" and preservation_quality is not None:
            out[name] = [with_quality(t, preservation_quality) for t in out[name]]
    return out, dropped, actual


def _sha256_file(path: Path) -> str:
    return sha256_hex(path.read_bytes())


def prepare_splits(
    task_files: Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    sizes: tuple[int, int, int] = DEFAULT_SIZES,
    seed: int = 0,
    preservation_quality: float | None = PRESERVATION_QUALITY,
) -> dict[str, Any]:
    """Write ``target.jsonl``, ``heldout.jsonl``, ``preservation.jsonl`` and
    ``manifest.json`` into ``out_dir`` and return the manifest.

    ``task_files`` are JSON Lines task files (``write_jsonl``), read in the given order; a
    later duplicate prompt (after normalisation) is dropped, a duplicate ``task_id`` across
    files raises ``SplitError``. Sizes shrink 5:1:1 (in proportion to ``sizes``) when too few
    tasks exist. Preservation tasks get a ``quality`` constraint at ``preservation_quality``
    (module docstring; None: none), recorded in the manifest. Every input problem is raised before anything is written
    (``TaskFileError`` with ``file:line`` or ``SplitError``); each file is written through a
    temporary file and a rename, the manifest last.
    """
    files = [task_files] if isinstance(task_files, str | os.PathLike) else list(task_files)
    if not files:
        raise SplitError("prepare_splits needs at least one task file")
    if len(sizes) != 3:
        raise SplitError(f"sizes must be (target, heldout, preservation), got {sizes}")
    sizes = (int(sizes[0]), int(sizes[1]), int(sizes[2]))
    paths = [Path(f) for f in files]
    out = Path(out_dir)
    refuse_output_over_input(paths, [out / f"{name}.jsonl" for name in SPLITS] + [out / MANIFEST])
    per_file = [(str(p), load_tasks(p)) for p in paths]
    if not any(ts for _, ts in per_file):
        raise SplitError(f"{', '.join(map(str, paths))}: no tasks to split")
    if out.exists() and not out.is_dir():
        raise SplitError(f"{out}: exists and is not a folder")
    input_hashes = [_sha256_file(p) for p in paths]
    if preservation_quality is not None and not 0.0 <= preservation_quality <= 1.0:
        raise SplitError(f"preservation_quality {preservation_quality} is not in 0..1")
    splits, dropped, actual = compute_splits(per_file, sizes, seed, preservation_quality)
    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {
        "manifest_version": MANIFEST_VERSION,
        "seed": seed,
        "sizes_requested": list(sizes),
        "sizes": list(actual),
        "dropped_duplicates": dropped,
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
    for name in SPLITS:
        data = dumps_tasks(splits[name])
        fname = f"{name}.jsonl"
        atomic_write_bytes(out / fname, data)
        manifest["splits"][name] = {
            "file": fname,
            "sha256": sha256_hex(data),
            "count": len(splits[name]),
            "families": dict(sorted(Counter(t.task_family for t in splits[name]).items())),
        }
    text = json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    atomic_write_bytes(out / MANIFEST, text.encode("utf-8"))
    return manifest


def _rel(path: Path, base: Path) -> str:
    """``path`` relative to ``base`` when possible (so a split folder can move with its
    inputs), else absolute."""
    try:
        return os.path.relpath(path.resolve(), base.resolve())
    except ValueError:
        return str(path.resolve())


def verify_splits(manifest_path: str | os.PathLike[str]) -> dict[str, Any]:
    """Re-check a split folder against its manifest and return the manifest.

    ``manifest_path`` is ``manifest.json`` or its folder. Checks, raising ``SplitError``
    naming the file at the first mismatch: every split file's sha256 and task count, each
    task's ``metadata.split``, that the splits are disjoint by ``task_id`` and by normalised
    prompt, every input file's sha256, and that re-running the split from the inputs with the
    manifest's seed and sizes reproduces the split files byte for byte.
    """
    mpath = Path(manifest_path)
    if mpath.is_dir():
        mpath = mpath / MANIFEST
    try:
        manifest = json.loads(mpath.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SplitError(f"{mpath}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise SplitError(f"{mpath}: invalid JSON: {exc}") from None
    base = mpath.parent
    if not isinstance(manifest, dict):
        raise SplitError(f"{mpath}: malformed manifest: expected a JSON object")
    try:
        seed = int(manifest["seed"])
        requested = tuple(int(x) for x in manifest["sizes_requested"])
        split_entries = {name: manifest["splits"][name] for name in SPLITS}
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
    seen_ids: dict[str, str] = {}
    seen_prompts: dict[str, str] = {}
    for name in SPLITS:
        entry = split_entries[name]
        f = base / str(entry.get("file", f"{name}.jsonl"))
        if not f.is_file():
            raise SplitError(f"{f}: missing (listed in {mpath})")
        digest = _sha256_file(f)
        if digest != entry.get("sha256"):
            raise SplitError(
                f"{f}: sha256 {digest} does not match the manifest ({entry.get('sha256')})"
            )
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
        digest = _sha256_file(p)
        if digest != entry.get("sha256"):
            raise SplitError(
                f"{p}: input sha256 {digest} does not match the manifest ({entry.get('sha256')})"
            )
        per_file.append((str(p), load_tasks(p)))
    if len(requested) != 3:
        raise SplitError(f"{mpath}: sizes_requested must have 3 entries")
    sizes3 = (requested[0], requested[1], requested[2])
    splits, _, actual = compute_splits(per_file, sizes3, seed, quality)
    if list(actual) != list(manifest.get("sizes", [])):
        raise SplitError(f"{mpath}: sizes {manifest.get('sizes')} != recomputed {list(actual)}")
    for name in SPLITS:
        if sha256_hex(dumps_tasks(splits[name])) != split_entries[name]["sha256"]:
            raise SplitError(
                f"{base / split_entries[name]['file']}: does not match the split recomputed "
                f"from the inputs with seed {seed}"
            )
    return dict(manifest)


__all__ = [
    "DEFAULT_SIZES",
    "MANIFEST",
    "PRESERVATION_QUALITY",
    "SPLITS",
    "SplitError",
    "compute_splits",
    "load_tasks",
    "prepare_splits",
    "scaled_sizes",
    "stratified_order",
    "verify_splits",
    "with_quality",
]
