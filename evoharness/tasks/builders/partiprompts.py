"""PartiPrompts (Yu et al. 2022): ``PartiPrompts.tsv`` (``Prompt, Category, Challenge, Note``) to
tasks without constraints; ``task_family`` is the ``Category``."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

from evoharness.tasks.builders.rows import BuildError, file_stem, make_task, read_text
from evoharness.tasks.models import Task

_PARTI_COLUMNS = ("Prompt", "Category", "Challenge", "Note")


def build_partiprompts(path: str | os.PathLike[str]) -> list[Task]:
    """Tasks from ``PartiPrompts.tsv`` (1,632 rows upstream, header
    ``Prompt  Category  Challenge  Note``). Read with ``csv`` and ``QUOTE_NONE`` so quotes
    inside prompts stay verbatim. ``task_family`` = ``Category``; ``Challenge`` and ``Note`` go
    to metadata; no constraints. Raises ``BuildError`` with ``file:line``.
    """
    p = Path(path)
    stem = file_stem(p)
    reader = csv.reader(
        io.StringIO(read_text(p), newline=""), delimiter="\t", quoting=csv.QUOTE_NONE
    )
    try:
        header = next(reader)
    except StopIteration:
        raise BuildError(f"{p}:1: empty file (expected a header row)") from None
    missing = [c for c in _PARTI_COLUMNS if c not in header]
    if missing:
        raise BuildError(f"{p}:1: header is missing column(s) {missing}")
    col = {c: header.index(c) for c in _PARTI_COLUMNS}
    tasks: list[Task] = []
    for row in reader:
        lineno = reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        where = f"{p}:{lineno}"
        if len(row) != len(header):
            raise BuildError(
                f"{where}: expected {len(header)} tab-separated fields, got {len(row)}"
            )
        prompt = row[col["Prompt"]]
        category = row[col["Category"]]
        if not category.strip():
            raise BuildError(f"{where}: empty field 'Category'")
        tasks.append(
            make_task(
                where,
                task_id=f"partiprompts/{stem}/{lineno}",
                prompt=prompt,
                task_family=category,
                metadata={
                    "source": "partiprompts",
                    "file": p.name,
                    "line": lineno,
                    "challenge": row[col["Challenge"]],
                    "note": row[col["Note"]],
                },
            )
        )
    return tasks


__all__ = ["build_partiprompts"]
