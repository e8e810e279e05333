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
    assert s["overall"] == pytest.approx(0.5) and s["missing"] == ["t3"]
    unc = _ev(True)
    unc[0] = unc[0].model_copy(update={"status": EvidenceStatus.uncertain})
    assert geneval_scores(tasks, {"t1": unc})["per_tag"]["single_object"]["accuracy"] == 0.0


def test_bad_keys() -> None:
    tasks = [_task("t2", "two_object", 2)]
    with pytest.raises(ValueError, match="names no task"):
        geneval_scores(tasks, {"zz": _ev(True)})
    with pytest.raises(ValueError, match="lacks constraints"):
        geneval_scores(tasks, {"t2": _ev(True)})
