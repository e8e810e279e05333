"""GenEval (Ghosh et al. 2023): ``evaluation_metadata.jsonl`` rows to tasks with exact object /
count / color / position constraints; ``task_family`` is the row's ``tag``."""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evoharness.tasks.builders.rows import BuildError, file_stem, json_lines, make_task, require
from evoharness.tasks.geneval_score import GENEVAL_TAGS
from evoharness.tasks.io import format_validation
from evoharness.tasks.models import (
    GENEVAL_COLORS,
    MAX_COUNT,
    POSITION_RELATIONS,
    Constraint,
    ConstraintType,
    Task,
)
from evoharness.vocab import CLASSES

_GENEVAL_INCLUDE_KEYS = {"class", "count", "color", "position"}


def _known(value: str, allowed: tuple[str, ...], where: str, what: str) -> str:
    """``value`` when it is one of ``allowed``, else ``BuildError`` naming ``where`` (file,
    line and field), the value, what was expected and the closest allowed name."""
    if value in allowed:
        return value
    close = difflib.get_close_matches(value, allowed, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise BuildError(f"{where}: {value!r} is not {what}{hint}")


def _geneval_class(cls: str, where: str) -> str:
    return _known(
        cls,
        CLASSES,
        f"{where}.class",
        "one of GenEval's 80 object classes (geneval/object_names.txt, evoharness.vocab.CLASSES)",
    )


def geneval_constraints(row: dict[str, Any], where: str) -> list[Constraint]:
    """Exact constraints of one GenEval metadata row, ids ``c0, c1, ...`` in this order:

    for each ``include`` entry ``i``: an ``object`` constraint (count 1, no cap) or a
    ``count`` constraint (``min_count`` = ``include.count``; ``max_count`` = m - 1 when an
    ``exclude`` entry of the same class has count m, e.g. the counting tag's n + 1); then a
    ``color`` constraint when the entry has ``color``; then a ``position`` constraint when it
    has ``position: [relation, j]`` (``value`` = class of include ``j``, ``ref`` = j).
    An empty ``include`` raises ``BuildError`` (a row with nothing to check). Counts must lie in 1..``MAX_COUNT`` (``BuildError`` naming the entry otherwise).
    An ``exclude`` class not in ``include`` becomes a ``negative`` constraint (m = 1) or a
    ``count`` with min 0, max m - 1. Unknown keys raise ``BuildError`` ("unknown constraint
    type"), and so do classes that are not GenEval's 80 (``evoharness.vocab.CLASSES``),
    naming the entry and field (``include[0].class``). Semantics: GenEval's
    ``evaluate_images.py`` (Ghosh et al. 2023).
    """
    include = require(row, "include", where, list)
    if not include:
        raise BuildError(f"{where}: field 'include' is empty: a GenEval row with nothing to check")
    exclude = row.get("exclude", [])
    if not isinstance(exclude, list):
        raise BuildError(f"{where}: field 'exclude' must be a list, got {exclude!r}")
    caps: dict[str, int] = {}
    for k, ex in enumerate(exclude):
        ewhere = f"{where}: exclude[{k}]"
        cls = _geneval_class(require(ex, "class", ewhere, str), ewhere)
        m = require(ex, "count", ewhere, int)
        unknown = set(ex) - {"class", "count"}
        if unknown:
            raise BuildError(f"{ewhere}: unknown constraint type(s) {sorted(unknown)}")
        if not 1 <= m <= MAX_COUNT:
            raise BuildError(f"{ewhere}: count must be >= 1 and at most {MAX_COUNT}, got {m}")
        if cls in caps:
            raise BuildError(f"{ewhere}: class {cls!r} excluded twice")
        caps[cls] = m
    classes: list[str] = []
    for i, inc in enumerate(include):
        iwhere = f"{where}: include[{i}]"
        classes.append(_geneval_class(require(inc, "class", iwhere, str), iwhere))
    out: list[Constraint] = []

    def add(**kw: Any) -> None:
        cwhere = f"{where}: constraint c{len(out)}"
        try:
            out.append(Constraint(constraint_id=f"c{len(out)}", **kw))
        except ValidationError as exc:
            raise BuildError(f"{cwhere}: {format_validation(exc)}") from None

    used_caps: set[str] = set()
    for i, inc in enumerate(include):
        iwhere = f"{where}: include[{i}]"
        unknown = set(inc) - _GENEVAL_INCLUDE_KEYS
        if unknown:
            raise BuildError(f"{iwhere}: unknown constraint type(s) {sorted(unknown)}")
        cls = classes[i]
        n = require(inc, "count", iwhere, int)
        if not 1 <= n <= MAX_COUNT:
            raise BuildError(f"{iwhere}: count must be >= 1 and at most {MAX_COUNT}, got {n}")
        cap = caps.get(cls)
        if cap is not None:
            used_caps.add(cls)
            if cap - 1 < n:
                raise BuildError(
                    f"{iwhere}: exclude count {cap} for {cls!r} contradicts include count {n}"
                )
        if n == 1 and cap is None:
            add(type=ConstraintType.object, subject=cls)
        else:
            add(
                type=ConstraintType.count,
                subject=cls,
                min_count=n,
                max_count=None if cap is None else cap - 1,
            )
        if "color" in inc:
            color = inc["color"]
            if color not in GENEVAL_COLORS:
                raise BuildError(
                    f"{iwhere}: color {color!r} is not a GenEval colour {GENEVAL_COLORS}"
                )
            add(type=ConstraintType.color, subject=cls, value=color)
        if "position" in inc:
            pos = inc["position"]
            if (
                not isinstance(pos, list)
                or len(pos) != 2
                or not isinstance(pos[0], str)
                or not isinstance(pos[1], int)
                or isinstance(pos[1], bool)
            ):
                raise BuildError(f"{iwhere}: position must be [relation, index], got {pos!r}")
            rel, j = pos
            if rel not in POSITION_RELATIONS:
                raise BuildError(
                    f"{iwhere}: position relation {rel!r} is not one of {POSITION_RELATIONS}"
                )
            if not 0 <= j < len(include) or j == i:
                raise BuildError(
                    f"{iwhere}: position refers to include[{j}], which is not another entry"
                )
            add(type=ConstraintType.position, subject=cls, relation=rel, value=classes[j], ref=j)
    for cls, m in caps.items():
        if cls in used_caps:
            continue
        if m == 1:
            add(type=ConstraintType.negative, subject=cls)
        else:
            add(type=ConstraintType.count, subject=cls, min_count=0, max_count=m - 1)
    return out


def build_geneval(path: str | os.PathLike[str]) -> list[Task]:
    """Tasks from GenEval's ``evaluation_metadata.jsonl`` (553 rows upstream).

    Each line: ``{tag, include: [{class, count, color?, position?}], exclude?, prompt}``;
    ``task_family`` = ``tag``, one of GenEval's six (``GENEVAL_TAGS``); constraints from
    ``geneval_constraints``. Raises ``BuildError`` with ``file:line`` and the field. Not de-duplicated (``build_tasks`` does that).
    """
    p = Path(path)
    stem = file_stem(p)
    tasks: list[Task] = []
    for lineno, row in json_lines(p):
        where = f"{p}:{lineno}"
        prompt = require(row, "prompt", where, str)
        tag = require(row, "tag", where, str)
        unknown = set(row) - {"tag", "include", "exclude", "prompt"}
        if unknown:
            raise BuildError(f"{where}: unknown field(s) {sorted(unknown)}")
        _known(tag, GENEVAL_TAGS, f"{where}: tag", f"a GenEval tag {GENEVAL_TAGS}")
        tasks.append(
            make_task(
                where,
                task_id=f"geneval/{stem}/{lineno}",
                prompt=prompt,
                task_family=tag,
                constraints=geneval_constraints(row, where),
                metadata={"source": "geneval", "file": p.name, "line": lineno, "tag": tag},
            )
        )
    return tasks


__all__ = ["build_geneval", "geneval_constraints"]
