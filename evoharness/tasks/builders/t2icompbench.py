"""T2I-CompBench (Huang et al. 2023): ``<category>_train.txt`` (one prompt per line), or a folder
of them, to tasks without constraints; ``task_family`` is the category from the file stem."""

from __future__ import annotations

import os
import re
from pathlib import Path

from evoharness.tasks.builders.rows import (
    file_stem,
    input_files,
    make_task,
    numbered_lines,
    read_text,
    refuse_json_object,
)
from evoharness.tasks.models import Task

_SPLIT_SUFFIX = re.compile(r"_(train|val|test)$")


def t2icompbench_family(path: Path) -> str:
    """``color_train.txt`` → ``color``; ``3d_spatial_val.txt`` → ``3d_spatial``."""
    return _SPLIT_SUFFIX.sub("", file_stem(path))


def build_t2icompbench(path: str | os.PathLike[str]) -> list[Task]:
    """Tasks from T2I-CompBench prompt files: one prompt per line (CRLF or LF, final newline
    optional, blank lines skipped). ``path`` is one ``*.txt`` file or a folder whose
    ``*_train.txt`` files are read in name order. ``task_family`` = category from the file
    stem. Raises ``BuildError`` naming the file, and ``file:line`` for a line that is a JSON
    object (a JSON Lines file given to this text format).
    """
    tasks: list[Task] = []
    for f in input_files(Path(path), "*_train.txt"):
        stem = file_stem(f)
        family = t2icompbench_family(f)
        for lineno, line in numbered_lines(read_text(f)):
            if not line.strip():
                continue
            refuse_json_object(f"{f}:{lineno}", line)
            tasks.append(
                make_task(
                    f"{f}:{lineno}",
                    task_id=f"t2icompbench/{stem}/{lineno}",
                    prompt=line,
                    task_family=family,
                    metadata={"source": "t2icompbench", "file": f.name, "line": lineno},
                )
            )
    return tasks


__all__ = ["build_t2icompbench", "t2icompbench_family"]
