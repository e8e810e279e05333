"""The T2I-CompBench bench (bench/compbench_bench.py): a hand-annotated row becomes a task whose
constraints are the atoms the world can check, the rest counted; a tiny run scores real
images with the exact inspector."""

from __future__ import annotations

from typing import Any

from bench import compbench_bench as cb
from evoharness.tasks.models import Constraint, ConstraintType, Task


def _row(prompt: str, objects: list[dict[str, Any]], **kw: Any) -> dict[str, Any]:
    return {
        "id": "t2i-test-0001",
        "source": "t2icompbench/color_train.txt",
        "line": 1,
        "category": "color",
        "prompt": prompt,
        "objects": objects,
        "relations": kw.get("relations", []),
        "negations": kw.get("negations", []),
        "texts": kw.get("texts", []),
        "ignore": [],
    }


def _obj(noun: str, count: int | str = 1, colors=(), attributes=()) -> dict[str, Any]:
    return {"noun": noun, "count": count, "colors": list(colors), "attributes": list(attributes)}


def _atoms(task: Task) -> list[tuple]:
    return [
        (c.type.value, c.subject, c.value, c.relation, c.min_count, c.max_count)
        for c in task.constraints
    ]


def test_checkable_atoms_become_constraints_and_the_rest_are_counted() -> None:
    row = _row(
        "three metal spoons on a purple table next to a gray gargoyle",
        [
            _obj("spoon", 3, attributes=["metal"]),
            _obj("table", colors=["purple"]),
            _obj("gargoyle", colors=["gray"]),
        ],
        relations=[
            {"subject": "spoon", "relation": "on", "object": "table"},
            {"subject": "table", "relation": "next to", "object": "gargoyle"},
            {"subject": "spoon", "relation": "left of", "object": "table"},
        ],
    )
    task, cov = cb.fixture_task(row)
    assert _atoms(task) == [
        ("count", "spoon", None, None, 3, 3),
        ("object", "dining table", None, None, None, None),
        ("attribute", "spoon", "metallic", None, 3, None),  # canonical texture, all 3 spoons
        ("color", "dining table", "purple", None, None, None),
        ("position", "spoon", "dining table", "left of", 3, None),
    ]
    # gargoyle has no world class: its object and colour atoms are counted, not constraints;
    # gray is no GenEval colour anyway; "on" is no position relation; "next to" names the gargoyle
    assert cov["object"] == [2, 3]
    assert cov["count"] == [1, 1]
    assert cov["colour"] == [1, 2]
    assert cov["attribute"] == [1, 1]
    assert cov["relation"] == [1, 3]
    assert task.task_family == "t2icompbench/color" and task.metadata["category"] == "color"


def test_atoms_the_inspector_cannot_tell_apart_are_counted_not_checked() -> None:
    row = _row(
        "a red car and a blue car, a pair of shoes, no dogs and a sign that says 'OPEN'",
        [_obj("car", colors=["red"]), _obj("car", colors=["blue"]), _obj("shoe", 2)],
        relations=[{"subject": "car", "relation": "left of", "object": "car"}],
        negations=["dog", "mermaid"],
        texts=["OPEN"],
    )
    task, cov = cb.fixture_task(row)
    assert _atoms(task) == [
        ("count", "car", None, None, 2, 2),  # two objects of one class: their counts summed
        ("count", "shoe", None, None, 2, 2),
        # two colours of one class: judged on distinct cars (SimInspector.judge_all)
        ("color", "car", "red", None, None, None),
        ("color", "car", "blue", None, None, None),
        ("negative", "dog", None, None, None, None),
        ("text", "text", "OPEN", None, None, None),  # as written, not case-folded
    ]
    assert cov["colour"] == [2, 2]
    assert cov["relation"] == [0, 1]  # which car is left of which? one class on both sides
    assert cov["negation"] == [1, 2]  # mermaid is no world class
    assert cov["text"] == [1, 1]
    # one colour on a class two objects share would be judged on the top-ranked car alone
    task, cov = cb.fixture_task(
        _row("a red car and a car", [_obj("car", colors=["red"]), _obj("car")])
    )
    assert _atoms(task) == [("count", "car", None, None, 2, 2)] and cov["colour"] == [0, 1]
    # two textures of one object stay unbindable, and then the other cat's is alone
    task, cov = cb.fixture_task(
        _row(
            "a striped cat and a wooden spotted cat",
            [_obj("cat", attributes=["striped"]), _obj("cat", attributes=["wooden", "spotted"])],
        )
    )
    assert cov["attribute"] == [0, 3]  # a single texture left on a shared class: not bound


def test_prompt_with_nothing_checkable_is_not_scored_as_a_pass() -> None:
    task, cov = cb.fixture_task(
        _row("a pentagonal obelisk", [_obj("obelisk", attributes=["pentagonal"])])
    )
    assert task.constraints == [] and cov["object"] == [0, 1] and cov["attribute"] == [0, 1]
    s = cb.score([task], [(0, 0, (), 0.0)])
    assert s["color"]["images"] == 0 and s["color"]["prompt_pass"] == 0
    assert s["color"]["unscored"] == 1


def test_a_tiny_run_scores_real_images_with_the_exact_inspector() -> None:
    """2 tasks × 1 seed through the baseline harness (seed 0 draws a blue dog and a brown
    horse): the annotated task, and the same prompt's image judged against swapped colours."""
    row = _row(
        "a blue dog and a brown horse",
        [_obj("dog", colors=["blue"]), _obj("horse", colors=["brown"])],
    )
    right, _ = cb.fixture_task(row)
    swapped = right.model_copy(
        update={
            "task_id": "swapped",
            "constraints": [
                c
                if c.type is not ConstraintType.color
                else Constraint(
                    constraint_id=c.constraint_id,
                    type=c.type,
                    subject=c.subject,
                    value={"blue": "brown", "brown": "blue"}[str(c.value)],
                )
                for c in right.constraints
            ],
        }
    )
    tasks = [right, swapped]
    results = cb.run_harness("sdxl-like", cb.HARNESSES[0], tasks, [(0, 0), (1, 0)])
    verdicts = {ti: statuses for ti, _seed, statuses, _sec in results}
    assert verdicts[0] == ("pass",) * 4
    assert verdicts[1] == ("pass", "pass", "fail", "fail")
    s = cb.score(tasks, results)["color"]
    assert (s["images"], s["prompt_pass"], s["constraints"], s["constraint_pass"]) == (2, 1, 8, 6)
    assert s["uncertain"] == 0
