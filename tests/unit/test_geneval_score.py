"""GenEval scoring: an image is correct when all its constraints pass; overall = mean of tags."""

from __future__ import annotations

import pytest

from evoharness.evidence import Evidence, EvidenceStatus
from evoharness.tasks.geneval_score import geneval_scores
from evoharness.tasks.models import Constraint, Task


def _task(tid: str, tag: str, n: int) -> Task:
    cs = [Constraint(constraint_id=f"c{i}", type="object", subject="cat") for i in range(n)]
    return Task(
        task_id=tid, prompt="a cat", task_family="geneval", constraints=cs, metadata={"tag": tag}
    )


def _ev(*ok: bool) -> list[Evidence]:
    return [
        Evidence(
            constraint_id=f"c{i}",
            status=EvidenceStatus.passed if o else EvidenceStatus.failed,
            confidence=1.0,
        )
        for i, o in enumerate(ok)
    ]


def test_rules() -> None:
    tasks = [
        _task("t1", "single_object", 1),
        _task("t2", "two_object", 2),
        _task("t3", "counting", 1),
    ]
    s = geneval_scores(
        tasks,
        {"t1@0": _ev(True), "t1@1": _ev(False), "t2@0": _ev(True, False), "t2@1": _ev(True, True)},
    )
    assert s["per_tag"]["single_object"]["accuracy"] == 0.5
    assert s["per_tag"]["two_object"] == {"accuracy": 0.5, "correct": 1, "images": 2}
    # t3 has no image: both expected seeds count as failures (GenEval/WISE protocol)
    assert s["per_tag"]["counting"] == {"accuracy": 0.0, "correct": 0, "images": 2}
    assert s["overall"] == pytest.approx(1 / 3) and s["missing"] == ["t3"]
    assert s["missing_images"] == 2 and s["images"] == 6
    unc = _ev(True)
    unc[0] = unc[0].model_copy(update={"status": EvidenceStatus.uncertain})
    assert geneval_scores(tasks, {"t1": unc})["per_tag"]["single_object"]["accuracy"] == 0.0


def test_bad_keys() -> None:
    tasks = [_task("t2", "two_object", 2)]
    with pytest.raises(ValueError, match="names no task"):
        geneval_scores(tasks, {"zz": _ev(True)})
    with pytest.raises(ValueError, match="lacks constraints"):
        geneval_scores(tasks, {"t2": _ev(True)})


def test_missing_images_count_as_failures() -> None:
    """A folder with only passing images of some tasks must not score 1.0 (issue 14 item 17)."""
    tasks = [_task("t1", "single_object", 1), _task("t2", "single_object", 1)]
    s = geneval_scores(tasks, {"t1@0": _ev(True), "t1@1": _ev(True), "t2@0": _ev(True)})
    assert s["overall"] == pytest.approx(0.75) and s["missing_images"] == 1
    assert s["missing"] == []
    s = geneval_scores(tasks, {"t1@0": _ev(True)}, seeds=["0", "1", "2", "3"])
    assert s["overall"] == pytest.approx(1 / 8) and s["missing_images"] == 7
    assert s["missing"] == ["t2"]
