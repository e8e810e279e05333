"""GenEval2-style JSONL (``prompt, atom_count, vqa_list [[question, answer]], skills``) to tasks
with one ``vqa`` constraint per pair; ``task_family`` is ``atoms_<atom_count>``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from evoharness.tasks.builders.rows import BuildError, file_stem, json_lines, make_task, require
from evoharness.tasks.models import Constraint, ConstraintType, Task


def _vqa_answer(value: Any, where: str) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, int):
        return str(value)
    raise BuildError(f"{where}: answer must be a non-empty string, got {value!r}")


def build_geneval2(path: str | os.PathLike[str]) -> list[Task]:
    """Tasks from GenEval2-style JSON Lines: ``{prompt, atom_count, vqa_list: [[question,
    answer], ...], skills: [...]}``. Each VQA pair becomes a ``vqa`` constraint
    (``subject`` = question, ``value`` = expected answer; booleans become ``yes``/``no``),
    ids ``c0, c1, ...``. ``task_family`` = ``atoms_<atom_count>`` (GenEval2's difficulty
    axis); ``skills`` and ``atom_count`` go to metadata. Raises ``BuildError`` with
    ``file:line``.
    """
    p = Path(path)
    stem = file_stem(p)
    tasks: list[Task] = []
    for lineno, row in json_lines(p):
        where = f"{p}:{lineno}"
        prompt = require(row, "prompt", where, str)
        atoms = require(row, "atom_count", where, int)
        vqa = require(row, "vqa_list", where, list)
        skills = require(row, "skills", where, list)
        if not all(isinstance(s, str) for s in skills):
            raise BuildError(f"{where}: field 'skills' must be a list of strings")
        constraints = []
        for k, pair in enumerate(vqa):
            qwhere = f"{where}: vqa_list[{k}]"
            if not isinstance(pair, list) or len(pair) != 2:
                raise BuildError(f"{qwhere}: expected [question, answer], got {pair!r}")
            question, answer = pair
            if not isinstance(question, str) or not question.strip():
                raise BuildError(f"{qwhere}: question must be a non-empty string")
            constraints.append(
                Constraint(
                    constraint_id=f"c{k}",
                    type=ConstraintType.vqa,
                    subject=question,
                    value=_vqa_answer(answer, qwhere),
                )
            )
        tasks.append(
            make_task(
                where,
                task_id=f"geneval2/{stem}/{lineno}",
                prompt=prompt,
                task_family=f"atoms_{atoms}",
                constraints=constraints,
                metadata={
                    "source": "geneval2",
                    "file": p.name,
                    "line": lineno,
                    "atom_count": atoms,
                    "skills": list(skills),
                },
            )
        )
    return tasks


__all__ = ["build_geneval2"]
