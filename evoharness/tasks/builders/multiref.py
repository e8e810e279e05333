"""The ``multiref`` dataset (issue 32): multi-reference tasks in the style of AutoRef and
MultiBanana — two to four reference images from the embedded reference library
(``evoharness.sim.reference_library``), a prompt that binds each to its subject ("the red cup
from image 1, the striped yellow cat from image 2 and the blue car from image 3 on a
table"), and per-reference constraints in the existing kinds:

- ``ref<i>-count``: ``count`` of the subject's class, ``min_count = max_count = 1`` — the
  subject is in the picture exactly once (not omitted, not duplicated);
- ``ref<i>-color``: ``color`` of the class, the reference's colour;
- ``ref<i>-texture``: ``attribute`` of the class, the reference's texture (textured
  references only).

``task.references`` holds ``{"image_1": ImageRef doc, "image_2": …}`` (``image_<i>`` keys,
read in key order by ``evoharness.runtime.runtime.task_references``: at most 9 references
keep that order). The tasks hold the library's keys only: build the library into the store
the generator reads (``reference_library.build``, the runtime's ``library_index:
embedded``, ``evoharness build-reference-library``) before rendering them.

Each task's subjects are distinct classes (so a class's count is the reference's count),
drawn with a ``random.Random(seed)``; the n-th task has ``refs[n % len(refs)]`` references.
``task_id`` = ``multiref/<seed>/<n>``, ``task_family`` = ``multiref_<k>``.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from evoharness.sim.reference_library import DEFAULT_PREFIX, LibraryEntry, LibrarySpec
from evoharness.tasks.models import Constraint, ConstraintType, Task

#: Reference counts of the default build (AutoRef / MultiBanana: two to four).
DEFAULT_REFS = (2, 3, 4)
#: The most references a task may have (``task_references`` orders ``image_<i>`` keys as
#: strings, so ``image_10`` would sort before ``image_2``).
MAX_REFS = 9
_ORDINAL_JOIN = ", "


def phrase(entry: LibraryEntry) -> str:
    """The words naming a reference's subject: "striped yellow cat"."""
    return " ".join(w for w in (entry.texture, entry.color, entry.cls) if w)


def prompt_for(entries: Sequence[LibraryEntry], scene: str = "on a table") -> str:
    """ "the red cup from image 1, the striped yellow cat from image 2 and the blue car from
    image 3 on a table" (``scene`` appended when not empty)."""
    parts = [f"the {phrase(e)} from image {i}" for i, e in enumerate(entries, start=1)]
    text = parts[0] if len(parts) == 1 else _ORDINAL_JOIN.join(parts[:-1]) + " and " + parts[-1]
    return f"{text} {scene}".strip()


def constraints_for(entries: Sequence[LibraryEntry]) -> list[Constraint]:
    """The per-reference constraints of the module docstring, in reference order."""
    out: list[Constraint] = []
    for i, e in enumerate(entries, start=1):
        out.append(
            Constraint(
                constraint_id=f"ref{i}-count",
                type=ConstraintType.count,
                subject=e.cls,
                min_count=1,
                max_count=1,
            )
        )
        out.append(
            Constraint(
                constraint_id=f"ref{i}-color",
                type=ConstraintType.color,
                subject=e.cls,
                value=e.color,
            )
        )
        if e.texture:
            out.append(
                Constraint(
                    constraint_id=f"ref{i}-texture",
                    type=ConstraintType.attribute,
                    subject=e.cls,
                    value=e.texture,
                )
            )
    return out


def build_multiref(
    seed: int = 0,
    count: int = 12,
    *,
    refs: Sequence[int] = DEFAULT_REFS,
    prefix: str = DEFAULT_PREFIX,
    bucket: str = "",
    spec: LibrarySpec | None = None,
    scene: str = "on a table",
) -> list[Task]:
    """``count`` multi-reference tasks (module docstring) over the library ``spec`` written
    under ``prefix`` (in S3 ``bucket``; "" for a local store). Raises ``ValueError`` naming
    the argument for a count below 1, a reference count outside 1..``MAX_REFS`` or above the
    library's classes."""
    spec = spec or LibrarySpec()
    if count < 1:
        raise ValueError(f"count: {count} < 1")
    if not refs:
        raise ValueError("refs: empty")
    for k in refs:
        if not 1 <= k <= MAX_REFS:
            raise ValueError(f"refs: {k} is outside 1..{MAX_REFS}")
        if k > len(spec.classes):
            raise ValueError(
                f"refs: {k} references need {k} classes; the library has {len(spec.classes)}"
            )
    by_class: dict[str, list[LibraryEntry]] = {}
    for e in spec.entries():
        if e.cls in spec.classes:  # the classes drawn in every colour and pose
            by_class.setdefault(e.cls, []).append(e)
    rng = random.Random(seed)
    prefix = prefix.rstrip("/")
    tasks = []
    for n in range(count):
        k = refs[n % len(refs)]
        classes = rng.sample(sorted(by_class), k)
        entries = [rng.choice(by_class[c]) for c in classes]
        references = {}
        for i, e in enumerate(entries, start=1):
            doc = {"key": e.key(prefix)}
            if bucket:
                doc["bucket"] = bucket
            references[f"image_{i}"] = doc
        tasks.append(
            Task(
                task_id=f"multiref/{seed}/{n}",
                prompt=prompt_for(entries, scene),
                task_family=f"multiref_{k}",
                constraints=constraints_for(entries),
                references=references,
                metadata={
                    "source": "multiref",
                    "references": [{"caption": e.caption, "pose": e.pose} for e in entries],
                },
            )
        )
    return tasks


__all__ = ["DEFAULT_REFS", "MAX_REFS", "build_multiref", "constraints_for", "phrase", "prompt_for"]
