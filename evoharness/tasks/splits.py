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
   prompt by the rule extractor, ``evoharness.tasks.class_cover``). Preservation guards what
   a change must not break, so it should name every object class it can (issue 16).

``compute_splits(..., version=1)`` deals as manifests of version 1 did (three contiguous
chunks, preservation = the next ``sizes[2]`` tasks of the order), so those still verify.

Every preservation task gets one more constraint, ``quality`` (``constraint_id``
``"quality"``, threshold ``preservation_quality``, default ``PRESERVATION_QUALITY`` = 0.5;
None adds none): preservation prompts guard what a harness change must not break, and a
side effect such as grain, clipped colours or pasted-looking objects is such a regression
(``evoharness.sim.quality`` documents the score). It is added here, at split preparation,
so the benchmark builders stay faithful to their sources; the prompt is unchanged, so the
harness never sees it, and GenEval scoring ignores it.

When fewer tasks exist than ``sum(sizes)``, the sizes shrink in their own proportion
(5:1:1:1 for the default 500/100/100/100) by largest remainder, using every task.

This module holds the split names, the sizes and the dealing itself (``compute_splits``, pure:
no file is read or written). Elsewhere: ``evoharness.tasks.class_cover`` (the object classes
of a prompt and step 4's vocabulary cover), ``evoharness.tasks.split_prepare``
(``prepare_splits`` writes a split folder and its manifest, ``build_run_splits`` an evolution
run's), ``evoharness.tasks.split_manifest`` (the manifest's format and the checks that read
it: ``verify_splits``, ``check_split_hashes``).
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from evoharness.tasks.class_cover import vocabulary_cover
from evoharness.tasks.models import Constraint, ConstraintType, Split, Task, normalize_prompt

#: The splits evolution reads (every gate sees them).
EVOLUTION_SPLITS: tuple[str, ...] = tuple(s.value for s in Split)
#: The untouched split the run's final figures come from; no gate ever reads it.
TEST_SPLIT = "test"
#: Every split, the untouched test split last (sizes are given in this order).
SPLITS = (*EVOLUTION_SPLITS, TEST_SPLIT)
DEFAULT_SIZES = (500, 100, 100, 100)
#: The dealing's version, recorded in every manifest (``evoharness.tasks.split_manifest``):
#: 2 deals as the module docstring says; 1 dealt three contiguous chunks.
MANIFEST_VERSION = 2
#: Versions ``compute_splits`` can deal again, so their manifests verify (a manifest without
#: the field is version 1).
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


def family_groups(tasks: Iterable[Task]) -> list[tuple[str, list[Task]]]:
    """``tasks`` grouped by ``task_family``: one ``(family, tasks)`` pair per family, families
    in sorted order, each family's tasks in input order (new lists: the caller may shuffle
    them)."""
    families: dict[str, list[Task]] = defaultdict(list)
    for t in tasks:
        families[t.task_family].append(t)
    return sorted(families.items())


def stratified_order(tasks: list[Task], seed: int) -> list[Task]:
    """The seeded, family-stratified order described in the module docstring."""
    rng = random.Random(seed)
    keyed: list[tuple[float, str, int, Task]] = []
    for fam, members in family_groups(tasks):
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
        n0, n1, n3 = want[Split.target], want[Split.heldout], want.get(TEST_SPLIT, 0)
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
        if TEST_SPLIT in want:
            chunks[TEST_SPLIT] = test  # a test size of 0 is an empty split, like held-out's
        chunks[Split.target] = rest[:n0]
        chunks[Split.heldout] = rest[n0 : n0 + n1]
        chunks[Split.preservation] = vocabulary_cover(rest[n0 + n1 :], want[Split.preservation])
    out: dict[str, list[Task]] = {}
    for name in names:
        out[name] = [
            t.model_copy(update={"metadata": {**t.metadata, "split": name}}, deep=True)
            for t in chunks[name]
        ]
        if name == Split.preservation and preservation_quality is not None:
            out[name] = [with_quality(t, preservation_quality) for t in out[name]]
    return Computed(out, dropped, actual, near_dropped)


__all__ = [
    "DEFAULT_SIZES",
    "EVOLUTION_SPLITS",
    "KNOWN_MANIFEST_VERSIONS",
    "MANIFEST_VERSION",
    "NO_TEST_SPLIT",
    "PRESERVATION_QUALITY",
    "SPLITS",
    "TEST_SPLIT",
    "Computed",
    "SplitError",
    "check_sizes",
    "compute_splits",
    "family_groups",
    "scaled_sizes",
    "stratified_order",
    "with_quality",
]
