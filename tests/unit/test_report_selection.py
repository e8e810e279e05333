"""The before/after cards of the run report are a balanced, labelled sample (issue 14 item
7): improvements, regressions and unchanged failures, one example per accepted patch, one
card per task (no task repeated over its seeds)."""

from __future__ import annotations

from evoharness_app.evaluation import Outcome
from evoharness_app.job_report import select_image_pairs


def _o(tid: str, seed: int, before: bool, after: bool, *types: str) -> Outcome:
    return Outcome("target", tid, seed, before, after, frozenset(types or ("object",)))


def test_balanced_labelled_sample_one_card_per_task() -> None:
    outcomes = [_o(f"fix{i}", s, False, True, "count") for i in range(7) for s in range(4)]
    outcomes += [_o("broke", 0, True, False), _o("broke", 1, True, True)]
    outcomes += [_o("stuck", 0, False, False, "position"), _o("fine", 0, True, True)]
    outcomes += [_o("pos-fixed", 2, False, True, "position")]
    picked = select_image_pairs(outcomes, [("r1-c1", "count"), ("r2-c1", "position")], 12)
    labels = [label for _, label in picked]
    tasks = [o.task_id for o, _ in picked]
    assert len(tasks) == len(set(tasks))  # one card per task
    assert labels[:2] == ["example of patch r1-c1 (improved)", "example of patch r2-c1 (improved)"]
    assert tasks[1] == "pos-fixed"  # the position patch's example targets position
    assert {"improved", "regressed", "unchanged failure"} <= set(labels)
    assert ("broke", "regressed") in [(o.task_id, lab) for o, lab in picked]
    assert ("stuck", "unchanged failure") in [(o.task_id, lab) for o, lab in picked]
    assert len(picked) == 11  # 7 + broke + stuck + fine + pos-fixed: every task once
    assert select_image_pairs(outcomes, [], 3) == select_image_pairs(outcomes, [], 3)
    three = [lab for _, lab in select_image_pairs(outcomes, [], 3)]
    assert three == ["improved", "regressed", "unchanged failure"]
