"""GenEval scoring from per-constraint evidence (Ghosh et al. 2023, GenEval).

GenEval's published rules (geneval/evaluation/evaluate_images.py and summary_scores.py): an
image is correct when all its ``include`` requirements (class count, colour, position) and
``exclude`` requirements hold; per-tag accuracy is the mean of image correctness over the
tag's images; the overall score is the mean of the six tag accuracies (single_object,
two_object, counting, colors, position, color_attr). Here each task's constraints carry those
requirements, so an image is correct when every one of its evidence records is ``pass``
(``uncertain`` is not a pass). ``quality`` constraints (pixel quality, which split preparation
adds to preservation tasks) are not GenEval requirements and are ignored here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evoharness.evidence import Evidence, EvidenceStatus
from evoharness.tasks.models import ConstraintType, Task

GENEVAL_TAGS = ("single_object", "two_object", "counting", "colors", "position", "color_attr")


def task_tag(task: Task) -> str:
    """A task's GenEval tag: ``metadata["tag"]`` when set, else its ``task_family``."""
    return str(task.metadata.get("tag") or task.task_family)


def geneval_scores(
    tasks: Sequence[Task],
    evidence_by_task: dict[str, list[Evidence]],
    seeds: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Per-tag accuracy and the overall GenEval score.

    ``evidence_by_task``: image key → that image's evidence (one per constraint of its task).
    A key is a task id, or ``"<task_id>@<suffix>"`` for several images of one task (e.g. one
    per seed). Every task is expected to have one image per suffix in ``seeds`` (default:
    every suffix that occurs among the keys; one image per task when keys carry none). An
    expected image without evidence — missing, or its generation failed — counts as an
    incorrect image of its tag, as in GenEval's and WISE's protocols (a prompt's score is over
    all its requested images; a missing image scores 0), so missing images can only lower the
    score.

    Returns ``{"per_tag": {tag: {"accuracy", "correct", "images"}}, "overall",
    "overall_tags", "images", "missing_images", "missing"}``: ``images`` counts every scored
    image (missing ones included, as failures); ``missing_images`` how many were missing;
    ``missing`` the task ids without any image; ``overall`` is the mean accuracy over the six
    GenEval tags that have tasks (over all tags present when none of the six does). Raises
    ``ValueError`` for a key naming no task, or evidence that does not cover the task's
    constraints.
    """
    by_id = {t.task_id: t for t in tasks}
    seen: dict[str, set[str]] = {}
    tally: dict[str, list[int]] = {}
    for key, evidence in evidence_by_task.items():
        tid, _, suffix = (key, "", "") if key in by_id else key.rpartition("@")
        if tid not in by_id:
            raise ValueError(f"evidence key {key!r} names no task")
        task = by_id[tid]
        want = {c.constraint_id for c in task.constraints if c.type is not ConstraintType.quality}
        got = {e.constraint_id for e in evidence}
        if not want <= got:
            raise ValueError(
                f"evidence for {key!r} lacks constraints {sorted(want - got)} of task {tid!r}"
            )
        correct = all(
            e.status is EvidenceStatus.passed for e in evidence if e.constraint_id in want
        )
        t = tally.setdefault(task_tag(task), [0, 0])
        t[0] += int(correct)
        t[1] += 1
        seen.setdefault(tid, set()).add(suffix)
    expected = set(seeds) if seeds is not None else set().union(*seen.values()) if seen else {""}
    missing_images = 0
    for task in tasks:
        absent = len(expected - seen.get(task.task_id, set()))
        if absent:
            missing_images += absent
            tally.setdefault(task_tag(task), [0, 0])[1] += absent
    per_tag = {
        tag: {"accuracy": c / n, "correct": c, "images": n} for tag, (c, n) in sorted(tally.items())
    }
    overall_tags = [t for t in GENEVAL_TAGS if t in per_tag] or list(per_tag)
    overall = (
        sum(per_tag[t]["accuracy"] for t in overall_tags) / len(overall_tags)
        if overall_tags
        else 0.0
    )
    return {
        "per_tag": per_tag,
        "overall": overall,
        "overall_tags": overall_tags,
        "images": sum(n for _, n in tally.values()),
        "missing_images": missing_images,
        "missing": sorted(set(by_id) - set(seen)),
    }
