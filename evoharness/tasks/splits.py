"""Target / held-out / preservation splits (docs/architecture.md, the gate's three splits)
and the untouched ``test`` split the run's final figures come from.

``prepare_splits`` reads one or more task files, drops later duplicate prompts after
``normalize_prompt`` (across files too, so the splits are disjoint after normalisation),
and deals the tasks into three or four files, seeded and stratified by ``task_family``:

1. Families (sorted by name) are each shuffled with ``random.Random(seed)``.
2. Every task gets a key ``(i + u_f) / n_f`` (its position ``i`` in its shuffled family of
   ``n_f`` tasks, ``u_f`` a seeded uniform offset per family) and all tasks are sorted by it:
   systematic stratified sampling, so any contiguous run of the order holds each family in
   proportion to its size, within one task.
3. target = the first ``sizes[0]`` tasks of that order, heldout the next ``sizes[1]``, test
   (when four sizes are given) the next ``sizes[3]``: no gate ever sees the test split, so
   the run's before/after on it is an unbiased figure (held-out is read by every gate).
   Evolution candidates that near-duplicate a test prompt (``evoharness.tasks.overlap``,
   character n-gram TF-IDF cosine >= 0.95, the same on every machine) are left out and the
   next tasks of the order take their places (listed in the manifest); an evolution run
   refuses such overlap.
4. preservation: ``sizes[2]`` tasks of the rest, with the family counts of the next
   ``sizes[2]`` tasks of the order (so still stratified by family), chosen greedily to
   cover as much of the object vocabulary as possible (each pick the task naming the most
   object classes not yet covered, ties to the earlier task; classes are read from the
   prompt by the rule extractor, ``prompt_classes``). Preservation guards what a change must
   not break, so it should name every object class it can (issue 16).

Manifests of version 1 (three splits, preservation = the next ``sizes[2]`` tasks of the
order) still verify.

Every preservation task gets one more constraint, ``quality`` (``constraint_id``
``"quality"``, threshold ``preservation_quality``, default ``PRESERVATION_QUALITY`` = 0.5;
None adds none): preservation prompts guard what a harness change must not break, and a
side effect such as grain, clipped colours or pasted-looking objects is such a regression
(``evoharness.sim.quality`` documents the score). It is added here, at split preparation,
so the benchmark builders stay faithful to their sources; the prompt is unchanged, so the
harness never sees it, and GenEval scoring ignores it.

When fewer tasks exist than ``sum(sizes)``, the sizes shrink in their own proportion
(5:1:1:1 for the default 500/100/100/100) by largest remainder, using every task.

``manifest.json`` records seed, requested and actual sizes, per-split counts and families,
and the sha256 of every input and split file; ``verify_splits`` re-checks all of it and
rebuilds the splits from the inputs to compare bytes.
"""

from __future__ import annotations

import functools
import json
import os
import random
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from evoharness.canonical import sha256_hex
from evoharness.tasks.io import (
    TaskFileError,
    atomic_write_bytes,
    dumps_tasks,
    load_tasks,
    refuse_output_over_input,
)
from evoharness.tasks.models import Constraint, ConstraintType, Split, Task, normalize_prompt

if TYPE_CHECKING:
    from evoharness.runtime.extract import RuleExtractor

#: The splits evolution reads (every gate sees them).
EVOLUTION_SPLITS: tuple[str, ...] = tuple(s.value for s in Split)
#: Every split, the untouched ``test`` split last (sizes are given in this order).
SPLITS = (*EVOLUTION_SPLITS, "test")
DEFAULT_SIZES = (500, 100, 100, 100)
MANIFEST = "manifest.json"
MANIFEST_VERSION = 2
#: Manifest versions ``verify_splits`` reads (a missing field is version 1).
KNOWN_MANIFEST_VERSIONS = (1, 2)
#: What a three-number size list means, said wherever one is accepted.
NO_TEST_SPLIT = (
    "no test split (three sizes given): the run's final figures will come from splits the "
    "gates have seen; give a fourth size (e.g. 60,20,20,20) for an untouched test split"
)
#: Threshold of the preservation split's ``quality`` constraint: a score of 0.5 is where one
#: component (noise, clipping or seams) is half-way from its clean level to its bad level
#: (``evoharness.sim.quality``); clean images score ≈ 1.
PRESERVATION_QUALITY = 0.5


class SplitError(ValueError):
    """A split that cannot be prepared or does not verify; the message names the file."""


def scaled_sizes(sizes: tuple[int, ...], available: int) -> tuple[int, ...]:
    """``sizes`` when ``available >= sum(sizes)``, else scaled by ``available / sum(sizes)``
    with largest-remainder rounding (ties to the earlier split), so the result sums to
    ``available``. ``(500, 100, 100)`` with 70 tasks → ``(50, 10, 10)``; ``(500, 100, 100,
    100)`` with 80 → ``(50, 10, 10, 10)``."""
    total = sum(sizes)
    if any(s < 0 for s in sizes) or total == 0:
        raise SplitError(f"split sizes must be >= 0 and not all zero, got {sizes}")
    if available >= total:
        return tuple(sizes)
    exact = [s * available / total for s in sizes]
    base = [int(x) for x in exact]
    left = available - sum(base)
    order = sorted(range(len(sizes)), key=lambda i: (-(exact[i] - base[i]), i))
    for i in order[:left]:
        base[i] += 1
    return tuple(base)


def check_sizes(sizes: Sequence[int | str], where: str = "sizes") -> tuple[int, ...]:
    """``sizes`` as a tuple of 3 (target, heldout, preservation: no test split) or 4 (…,
    test) integers >= 0, target > 0 (evolution proposes from the target split; the others
    may be empty). Raises ``SplitError`` naming ``where`` otherwise."""
    try:
        out = tuple(int(x) for x in sizes)
    except (TypeError, ValueError):
        raise SplitError(f"{where}: want 3 or 4 integers, got {sizes!r}") from None
    if len(out) not in (3, 4) or any(x < 0 for x in out):
        raise SplitError(
            f"{where}: want target,heldout,preservation[,test] as 3 or 4 integers >= 0, "
            f"got {list(out)}"
        )
    if out[0] == 0:
        raise SplitError(
            f"{where}: the target split (the first size) needs at least one task; heldout, "
            f"preservation and test may be 0 (e.g. 60,20,20,20), got {list(out)}"
        )
    return out


@functools.cache
def _extractor() -> RuleExtractor:
    """The one rule extractor of this module, built on first use (``functools.cache`` makes
    the first use thread-safe: no module-level global is assigned; the extractor is pure, so
    threads may share it). Imported here so that importing ``tasks`` loads no grammar."""
    from evoharness.runtime.extract import RuleExtractor

    return RuleExtractor()


def prompt_classes(prompt: str) -> set[str]:
    """Object classes a prompt asks for: the subjects of the object and count constraints the
    rule extractor (``evoharness.runtime.extract.RuleExtractor``) reads from the prompt
    (negated classes are not asked for). Never reads a task's labels."""
    return {
        c.subject
        for c in _extractor().extract(prompt)
        if c.type in (ConstraintType.object, ConstraintType.count)
    }


def vocabulary_cover(rest: Sequence[Task], k: int) -> list[Task]:
    """``k`` tasks of ``rest`` (a stratified order) with the family counts of ``rest[:k]``,
    picked greedily for object-class coverage (module docstring, step 4), returned in
    ``rest`` order. Deterministic."""
    if k >= len(rest):
        return list(rest)
    quota = Counter(t.task_family for t in rest[:k])
    classes = [prompt_classes(t.prompt) for t in rest]
    taken = [False] * len(rest)
    covered: set[str] = set()
    for _ in range(k):
        best, gain = -1, -1
        for i, t in enumerate(rest):
            if taken[i] or quota[t.task_family] <= 0:
                continue
            g = len(classes[i] - covered)
            if g > gain:
                best, gain = i, g
        taken[best] = True
        quota[rest[best].task_family] -= 1
        covered |= classes[best]
    return [t for i, t in enumerate(rest) if taken[i]]


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


class Computed(NamedTuple):
    """What ``compute_splits`` returns."""

    splits: dict[str, list[Task]]
    dropped: int
    sizes: tuple[int, ...]
    near_duplicates: list[str]


def compute_splits(
    per_file: list[tuple[str, list[Task]]],
    sizes: tuple[int, ...],
    seed: int,
    preservation_quality: float | None = PRESERVATION_QUALITY,
    version: int = MANIFEST_VERSION,
) -> Computed:
    """Pure part of ``prepare_splits``: ``Computed({split: tasks}, duplicates dropped, sizes
    used, ids of tasks left out as near-duplicates of a test prompt)``.
    ``sizes``: 3 (no test split) or 4 numbers in ``SPLITS`` order. Each returned task is a
    copy with ``metadata.split`` set; preservation tasks carry a ``quality`` constraint at
    ``preservation_quality`` (None: none). ``version`` 1 reproduces manifests of version 1
    (three contiguous chunks)."""
    tasks, dropped = _dedupe(per_file)
    actual = scaled_sizes(sizes, len(tasks))
    order = stratified_order(tasks, seed)
    names = SPLITS[: len(actual)]
    chunks: dict[str, list[Task]] = {}
    near_dropped: list[str] = []
    if version == 1:
        start = 0
        for name, size in zip(names, actual, strict=True):
            chunks[name] = order[start : start + size]
            start += size
    else:
        want = dict(zip(names, actual, strict=True))
        n0, n1, n3 = want["target"], want["heldout"], want.get("test", 0)
        test = order[n0 + n1 : n0 + n1 + n3]
        rest = order[: n0 + n1] + order[n0 + n1 + n3 :]
        if test:
            # no evolution prompt may near-duplicate a test prompt (the run would refuse it):
            # such tasks are left out, and the next tasks of the order take their places
            from evoharness.tasks.overlap import OverlapConfig, find_overlaps

            lexical = OverlapConfig(method="tfidf-char")  # the same on every machine
            near = {o.task_id for o in find_overlaps({"evolution": rest}, test, lexical)}
            near_dropped.extend(t.task_id for t in rest if t.task_id in near)
            rest = [t for t in rest if t.task_id not in near]
        if "test" in want:
            chunks["test"] = test  # a test size of 0 is an empty split, like held-out's
        chunks["target"] = rest[:n0]
        chunks["heldout"] = rest[n0 : n0 + n1]
        chunks["preservation"] = vocabulary_cover(rest[n0 + n1 :], want["preservation"])
    out: dict[str, list[Task]] = {}
    for name in names:
        out[name] = [
            t.model_copy(update={"metadata": {**t.metadata, "split": name}}, deep=True)
            for t in chunks[name]
        ]
        if name == "preservation" and preservation_quality is not None:
            out[name] = [with_quality(t, preservation_quality) for t in out[name]]
    return Computed(out, dropped, actual, near_dropped)


def _sha256_file(path: Path) -> str:
    return sha256_hex(path.read_bytes())


def _check_hash(path: Path, expected: object, what: str = "sha256") -> None:
    """Raise ``SplitError`` naming ``path`` and both hashes when the file's sha256 is not
    ``expected`` (the manifest's)."""
    digest = _sha256_file(path)
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
    input_hashes = [_sha256_file(p) for p in paths]
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
            f"({known}); re-run prepare-splits or use the evoharness that wrote it"
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
    "DEFAULT_SIZES",
    "build_run_splits",
    "check_split_hashes",
    "EVOLUTION_SPLITS",
    "MANIFEST",
    "NO_TEST_SPLIT",
    "PRESERVATION_QUALITY",
    "SPLITS",
    "SplitError",
    "check_sizes",
    "compute_splits",
    "load_tasks",
    "prepare_splits",
    "prompt_classes",
    "scaled_sizes",
    "stratified_order",
    "verify_splits",
    "vocabulary_cover",
    "with_quality",
]
