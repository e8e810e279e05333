"""The object classes a prompt asks for, and the preservation split's vocabulary cover
(``evoharness.tasks.splits``, step 4): preservation guards what a harness change must not
break, so it is picked to name as many object classes as it can (issue 16).

Classes are read from the prompt by the rule extractor (``evoharness.runtime.extract``),
never from a task's labels. Imports nothing of the split folders or their manifests.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

from evoharness.tasks.models import ConstraintType, Task

if TYPE_CHECKING:
    from evoharness.runtime.extract import RuleExtractor


@functools.cache
def _extractor() -> RuleExtractor:
    """The one rule extractor of this module, built on first use and kept by
    ``functools.cache`` (no module-level global is assigned; the cache is safe across
    threads: two first calls at once may each build one and one is kept, harmless because the
    extractor is pure and threads may share it). Imported here so that importing ``tasks``
    loads no grammar."""
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
    picked greedily for object-class coverage (``evoharness.tasks.splits``, step 4), returned in
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


__all__ = ["prompt_classes", "vocabulary_cover"]
