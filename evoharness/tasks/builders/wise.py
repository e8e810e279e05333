"""WISE-style JSON array or JSONL (``Prompt, Explanation, Category, Subcategory, prompt_id``) to
tasks without constraints; ``task_family`` is the ``Category``, the explanation goes to metadata."""

from __future__ import annotations

import os
from pathlib import Path

from evoharness.tasks.builders.rows import (
    BuildError,
    file_stem,
    json_array,
    json_lines,
    make_task,
    read_text,
    require,
)
from evoharness.tasks.models import Task


def build_wise(path: str | os.PathLike[str]) -> list[Task]:
    """Tasks from WISE-style files: a JSON array (or JSON Lines) of objects with
    ``Prompt, Explanation, Category, Subcategory, prompt_id``. ``task_family`` =
    ``Category``; ``Subcategory``, ``prompt_id`` and ``Explanation`` (what a correct image
    shows; for the verifier, never the harness) go to metadata. A duplicate ``prompt_id``
    raises ``BuildError`` naming both lines.
    """
    p = Path(path)
    stem = file_stem(p)
    text_start = read_text(p).lstrip()[:1]
    rows = json_array(p) if text_start == "[" else json_lines(p)
    tasks: list[Task] = []
    seen: dict[str, int] = {}
    for lineno, row in rows:
        where = f"{p}:{lineno}"
        prompt = require(row, "Prompt", where, str)
        explanation = require(row, "Explanation", where, str)
        category = require(row, "Category", where, str)
        sub = require(row, "Subcategory", where, str)
        pid = require(row, "prompt_id", where, (int, str))
        key = str(pid)
        if key in seen:
            raise BuildError(f"{where}: duplicate prompt_id {pid!r} (first at line {seen[key]})")
        seen[key] = lineno
        tasks.append(
            make_task(
                where,
                task_id=f"wise/{stem}/{lineno}",
                prompt=prompt,
                task_family=category,
                metadata={
                    "source": "wise",
                    "file": p.name,
                    "line": lineno,
                    "subcategory": sub,
                    "prompt_id": pid,
                    "explanation": explanation,
                },
            )
        )
    return tasks


__all__ = ["build_wise"]
