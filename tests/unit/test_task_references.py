"""A task's ``references``: each value an image ref document (or a list of them), refused
otherwise with the field named, and read in natural key order (``image_2`` before
``image_10``). Found by a new-user trial: a string value or a dict without ``key`` was
dropped at render time while the prompt still said "image 1", and ``image_10`` sorted
before ``image_2``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoharness.runtime.runtime import task_references
from evoharness.tasks.io import load_tasks
from evoharness.tasks.models import Task


def _task(references: object) -> Task:
    return Task.model_validate(
        {
            "task_id": "mr/0",
            "prompt": "the cup from image 1",
            "task_family": "multiref",
            "references": references,
        }
    )


@pytest.mark.parametrize(
    ("references", "field"),
    [
        ({"image_1": "cup.png"}, "references.image_1: an image reference is an object"),
        ({"image_1": {"bucket": "b"}}, "references.image_1: not an image reference"),
        ({"image_1": {"key": ""}}, "references.image_1.key: empty"),
        ({"image_1": {"key": "a.png", "sha256": "xyz"}}, "references.image_1.sha256"),
        ({"image_1": {"key": "a.png", "url": "http://x"}}, "references.image_1: not an image"),
        ({"image_1": [{"key": "a.png"}, 3]}, "references.image_1[1]: an image reference"),
    ],
)
def test_malformed_references_are_refused_naming_the_field(references: object, field: str) -> None:
    with pytest.raises(ValueError, match="references") as exc:
        _task(references)
    assert field in str(exc.value)


def test_references_are_read_in_natural_key_order() -> None:
    refs = {f"image_{i}": {"key": f"{i}.png"} for i in (10, 2, 1)}
    t = _task(refs)
    assert t.reference_keys() == ["image_1", "image_2", "image_10"]
    assert [r.key for r in task_references(t)] == ["1.png", "2.png", "10.png"]
    listed = _task({"image": [{"key": "a.png"}, {"key": "b.png", "bucket": "lib"}]})
    assert [(r.bucket, r.key) for r in task_references(listed)] == [("", "a.png"), ("lib", "b.png")]


def test_a_task_file_with_a_bad_reference_names_file_line_and_field(tmp_path: Path) -> None:
    good = {
        "task_id": "mr/0",
        "prompt": "the cup from image 1",
        "task_family": "multiref",
        "references": {"image_1": {"key": "cup.png"}},
    }
    bad = {**good, "task_id": "mr/1", "references": {"image_1": {"key": ""}}}
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(ValueError) as exc:
        load_tasks(path)
    msg = str(exc.value)
    assert f"{path}:2" in msg and "references.image_1.key" in msg
