"""Dataset builders: turn benchmark prompt files into ``Task`` lists.

Every builder keeps prompts verbatim (only line endings and a UTF-8 BOM are removed), gives
each task a stable id ``<source>/<file stem>/<line>`` (the 1-based line of the file where the
row starts; never derived from the prompt text), drops later duplicates after
``normalize_prompt`` (case, punctuation, whitespace) keeping the first, and counts what it
dropped in the ``BuildSummary``. A malformed row stops the build with ``file:line`` (the
builders write nothing; ``write_jsonl`` writes through a temporary file and a rename).

Sources (see ``../shared/README.md`` for the files' quirks):

=============== ========================================= ====================================
dataset         input                                     task_family / constraints
=============== ========================================= ====================================
``geneval``     ``evaluation_metadata.jsonl`` (Ghosh et   GenEval ``tag``; exact object /
                al. 2023)                                 count / color / position constraints
``partiprompts`` ``PartiPrompts.tsv`` (Yu et al. 2022):   ``Category``; none (the policy
                ``Prompt, Category, Challenge, Note``     extractor reads the prompt)
``t2icompbench`` ``<category>_train.txt`` (Huang et al.   category from the file stem; none
                2023), one prompt per line, or a folder
                of them
``wise``        WISE-style JSON array or JSONL:           ``Category``; none (explanation in
                ``Prompt, Explanation, Category,          metadata)
                Subcategory, prompt_id``
``geneval2``    JSONL: ``prompt, atom_count, vqa_list     ``atoms_<atom_count>``; one ``vqa``
                [[question, answer]], skills``            constraint per VQA pair
``synthetic``   none: ``evoharness.tasks.synthetic``      whatever that module sets
=============== ========================================= ====================================
"""

from __future__ import annotations

import csv
import importlib
import io
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evoharness.tasks.io import TaskFileError, format_validation, load_tasks, write_jsonl
from evoharness.tasks.models import (
    GENEVAL_COLORS,
    POSITION_RELATIONS,
    Constraint,
    ConstraintType,
    Task,
    normalize_prompt,
)

#: Dataset names accepted by ``build_tasks`` (and ``evoharness build-tasks --dataset``).
DATASETS = ("geneval", "partiprompts", "t2icompbench", "wise", "geneval2", "synthetic")


class BuildError(TaskFileError):
    """A malformed dataset file: bad JSON, a missing field, an unknown constraint type, a
    duplicate id. The message starts with ``file:line:``."""


@dataclass
class BuildSummary:
    """What a build read, kept and dropped.

    ``rows``: rows read (blank lines excluded); ``kept``: tasks returned; ``dropped`` lists
    ``(dropped task_id, task_id of the first occurrence)`` for every duplicate prompt after
    ``normalize_prompt``; ``families`` counts kept tasks per ``task_family``;
    ``per_file`` maps each input file to ``{"rows": n, "dropped": n}``.
    """

    dataset: str
    inputs: list[str] = field(default_factory=list)
    rows: int = 0
    kept: int = 0
    dropped: list[tuple[str, str]] = field(default_factory=list)
    families: dict[str, int] = field(default_factory=dict)
    per_file: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def n_dropped(self) -> int:
        """Number of duplicate prompts dropped."""
        return len(self.dropped)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form (for logs and manifests)."""
        return {
            "dataset": self.dataset,
            "inputs": list(self.inputs),
            "rows": self.rows,
            "kept": self.kept,
            "dropped_duplicates": self.n_dropped,
            "dropped": [list(p) for p in self.dropped],
            "families": dict(self.families),
            "per_file": {k: dict(v) for k, v in self.per_file.items()},
        }


@dataclass
class BuildResult:
    """``tasks`` in input order after de-duplication, and the ``summary``."""

    tasks: list[Task]
    summary: BuildSummary


# ---------------------------------------------------------------------------- helpers


def _read_text(path: Path) -> str:
    """The file's text, UTF-8 with an optional BOM; ``BuildError`` names the line of a bad
    byte."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise BuildError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise BuildError(f"{path}:{line}: not UTF-8: {exc.reason}") from None


def _lines(text: str) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` with ``\\n`` / ``\\r\\n`` endings removed; a missing final
    newline is fine. Only ``\\n`` separates lines (not the other Unicode line breaks)."""
    parts = text.split("\n")
    if parts and parts[-1] == "":
        parts.pop()
    for i, line in enumerate(parts, start=1):
        yield i, line[:-1] if line.endswith("\r") else line


def _stem(path: Path) -> str:
    return path.name.split(".")[0] if path.suffix else path.name


def _task(where: str, **kwargs: Any) -> Task:
    try:
        return Task.model_validate(kwargs)
    except ValidationError as exc:
        raise BuildError(f"{where}: invalid task: {format_validation(exc)}") from None


def _require(obj: Any, key: str, where: str, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(obj, dict):
        raise BuildError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    if key not in obj:
        raise BuildError(f"{where}: missing field {key!r}")
    value = obj[key]
    if not isinstance(value, kind) or isinstance(value, bool) and bool not in _as_tuple(kind):
        names = "/".join(t.__name__ for t in _as_tuple(kind))
        raise BuildError(f"{where}: field {key!r} must be {names}, got {value!r}")
    return value


def _as_tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    for lineno, line in _lines(_read_text(path)):
        if not line.strip():
            continue
        try:
            yield lineno, json.loads(line, parse_constant=_reject_constant)
        except ValueError as exc:
            raise BuildError(f"{path}:{lineno}: invalid JSON: {exc}") from None


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON")


def _json_array(path: Path) -> Iterator[tuple[int, Any]]:
    """Elements of a top-level JSON array with the line each starts on."""
    text = _read_text(path)
    decoder = json.JSONDecoder(parse_constant=_reject_constant)
    ws = re.compile(r"\s*")

    def line_of(pos: int) -> int:
        return text.count("\n", 0, pos) + 1

    def fail(pos: int, msg: str) -> BuildError:
        return BuildError(f"{path}:{line_of(pos)}: invalid JSON: {msg}")

    pos = ws.match(text, 0).end()  # type: ignore[union-attr]
    if text[pos : pos + 1] != "[":
        raise fail(pos, "expected '[' (a JSON array of objects)")
    pos = ws.match(text, pos + 1).end()  # type: ignore[union-attr]
    if text[pos : pos + 1] == "]":
        end = ws.match(text, pos + 1).end()  # type: ignore[union-attr]
        if end != len(text):
            raise fail(end, "extra data after the array")
        return
    while True:
        try:
            value, end = decoder.raw_decode(text, pos)
        except ValueError as exc:
            pos_err = getattr(exc, "pos", pos)
            raise fail(pos_err, str(exc)) from None
        yield line_of(pos), value
        pos = ws.match(text, end).end()  # type: ignore[union-attr]
        ch = text[pos : pos + 1]
        if ch == ",":
            pos = ws.match(text, pos + 1).end()  # type: ignore[union-attr]
            continue
        if ch == "]":
            end = ws.match(text, pos + 1).end()  # type: ignore[union-attr]
            if end != len(text):
                raise fail(end, "extra data after the array")
            return
        raise fail(pos, "expected ',' or ']'")


def _files(input_path: Path, pattern: str) -> list[Path]:
    if input_path.is_dir():
        files = sorted(input_path.glob(pattern))
        if not files:
            raise BuildError(f"{input_path}: no {pattern} files in this folder")
        return files
    if not input_path.exists():
        raise BuildError(f"{input_path}: no such file")
    return [input_path]


# ---------------------------------------------------------------------------- GenEval

_GENEVAL_INCLUDE_KEYS = {"class", "count", "color", "position"}


def geneval_constraints(row: dict[str, Any], where: str) -> list[Constraint]:
    """Exact constraints of one GenEval metadata row, ids ``c0, c1, ...`` in this order:

    for each ``include`` entry ``i``: an ``object`` constraint (count 1, no cap) or a
    ``count`` constraint (``min_count`` = ``include.count``; ``max_count`` = m - 1 when an
    ``exclude`` entry of the same class has count m, e.g. the counting tag's n + 1); then a
    ``color`` constraint when the entry has ``color``; then a ``position`` constraint when it
    has ``position: [relation, j]`` (``value`` = class of include ``j``, ``ref`` = j).
    An ``exclude`` class not in ``include`` becomes a ``negative`` constraint (m = 1) or a
    ``count`` with min 0, max m - 1. Unknown keys raise ``BuildError`` ("unknown constraint
    type"). Semantics: GenEval's ``evaluate_images.py`` (Ghosh et al. 2023).
    """
    include = _require(row, "include", where, list)
    exclude = row.get("exclude", [])
    if not isinstance(exclude, list):
        raise BuildError(f"{where}: field 'exclude' must be a list, got {exclude!r}")
    caps: dict[str, int] = {}
    for k, ex in enumerate(exclude):
        ewhere = f"{where}: exclude[{k}]"
        cls = _require(ex, "class", ewhere, str)
        m = _require(ex, "count", ewhere, int)
        unknown = set(ex) - {"class", "count"}
        if unknown:
            raise BuildError(f"{ewhere}: unknown constraint type(s) {sorted(unknown)}")
        if m < 1:
            raise BuildError(f"{ewhere}: count must be >= 1, got {m}")
        if cls in caps:
            raise BuildError(f"{ewhere}: class {cls!r} excluded twice")
        caps[cls] = m
    classes: list[str] = []
    for i, inc in enumerate(include):
        classes.append(_require(inc, "class", f"{where}: include[{i}]", str))
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
        n = _require(inc, "count", iwhere, int)
        if n < 1:
            raise BuildError(f"{iwhere}: count must be >= 1, got {n}")
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
    ``task_family`` = ``tag``; constraints from ``geneval_constraints``. Raises ``BuildError``
    with ``file:line``. Not de-duplicated (``build_tasks`` does that).
    """
    p = Path(path)
    stem = _stem(p)
    tasks: list[Task] = []
    for lineno, row in _json_lines(p):
        where = f"{p}:{lineno}"
        prompt = _require(row, "prompt", where, str)
        tag = _require(row, "tag", where, str)
        unknown = set(row) - {"tag", "include", "exclude", "prompt"}
        if unknown:
            raise BuildError(f"{where}: unknown field(s) {sorted(unknown)}")
        tasks.append(
            _task(
                where,
                task_id=f"geneval/{stem}/{lineno}",
                prompt=prompt,
                task_family=tag,
                constraints=geneval_constraints(row, where),
                metadata={"source": "geneval", "file": p.name, "line": lineno, "tag": tag},
            )
        )
    return tasks


# ----------------------------------------------------------------------- PartiPrompts

_PARTI_COLUMNS = ("Prompt", "Category", "Challenge", "Note")


def build_partiprompts(path: str | os.PathLike[str]) -> list[Task]:
    """Tasks from ``PartiPrompts.tsv`` (1,632 rows upstream, header
    ``Prompt  Category  Challenge  Note``). Read with ``csv`` and ``QUOTE_NONE`` so quotes
    inside prompts stay verbatim. ``task_family`` = ``Category``; ``Challenge`` and ``Note`` go
    to metadata; no constraints. Raises ``BuildError`` with ``file:line``.
    """
    p = Path(path)
    stem = _stem(p)
    reader = csv.reader(
        io.StringIO(_read_text(p), newline=""), delimiter="\t", quoting=csv.QUOTE_NONE
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
            _task(
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


# ---------------------------------------------------------------------- T2I-CompBench

_SPLIT_SUFFIX = re.compile(r"_(train|val|test)$")


def t2icompbench_family(path: Path) -> str:
    """``color_train.txt`` → ``color``; ``3d_spatial_val.txt`` → ``3d_spatial``."""
    return _SPLIT_SUFFIX.sub("", _stem(path))


def build_t2icompbench(path: str | os.PathLike[str]) -> list[Task]:
    """Tasks from T2I-CompBench prompt files: one prompt per line (CRLF or LF, final newline
    optional, blank lines skipped). ``path`` is one ``*.txt`` file or a folder whose
    ``*_train.txt`` files are read in name order. ``task_family`` = category from the file
    stem. Raises ``BuildError`` naming the file.
    """
    tasks: list[Task] = []
    for f in _files(Path(path), "*_train.txt"):
        stem = _stem(f)
        family = t2icompbench_family(f)
        for lineno, line in _lines(_read_text(f)):
            if not line.strip():
                continue
            tasks.append(
                _task(
                    f"{f}:{lineno}",
                    task_id=f"t2icompbench/{stem}/{lineno}",
                    prompt=line,
                    task_family=family,
                    metadata={"source": "t2icompbench", "file": f.name, "line": lineno},
                )
            )
    return tasks


# ------------------------------------------------------------------------------- WISE


def build_wise(path: str | os.PathLike[str]) -> list[Task]:
    """Tasks from WISE-style files: a JSON array (or JSON Lines) of objects with
    ``Prompt, Explanation, Category, Subcategory, prompt_id``. ``task_family`` =
    ``Category``; ``Subcategory``, ``prompt_id`` and ``Explanation`` (what a correct image
    shows; for the verifier, never the harness) go to metadata. A duplicate ``prompt_id``
    raises ``BuildError`` naming both lines.
    """
    p = Path(path)
    stem = _stem(p)
    text_start = _read_text(p).lstrip()[:1]
    rows = _json_array(p) if text_start == "[" else _json_lines(p)
    tasks: list[Task] = []
    seen: dict[str, int] = {}
    for lineno, row in rows:
        where = f"{p}:{lineno}"
        prompt = _require(row, "Prompt", where, str)
        explanation = _require(row, "Explanation", where, str)
        category = _require(row, "Category", where, str)
        sub = _require(row, "Subcategory", where, str)
        pid = _require(row, "prompt_id", where, (int, str))
        key = str(pid)
        if key in seen:
            raise BuildError(f"{where}: duplicate prompt_id {pid!r} (first at line {seen[key]})")
        seen[key] = lineno
        tasks.append(
            _task(
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


# --------------------------------------------------------------------------- GenEval2


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
    stem = _stem(p)
    tasks: list[Task] = []
    for lineno, row in _json_lines(p):
        where = f"{p}:{lineno}"
        prompt = _require(row, "prompt", where, str)
        atoms = _require(row, "atom_count", where, int)
        vqa = _require(row, "vqa_list", where, list)
        skills = _require(row, "skills", where, list)
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
            _task(
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


# --------------------------------------------------------------------------- dispatcher


def _synthetic(seed: int, count: int) -> list[Task]:
    try:
        mod = importlib.import_module("evoharness.tasks.synthetic")
    except ModuleNotFoundError as exc:
        if exc.name == "evoharness.tasks.synthetic":
            raise BuildError(
                "dataset 'synthetic' needs evoharness.tasks.synthetic.build_synthetic, "
                "which is not installed in this checkout"
            ) from None
        raise
    fn = getattr(mod, "build_synthetic", None)
    if fn is None:
        raise BuildError("evoharness.tasks.synthetic has no build_synthetic(seed, count)")
    return list(fn(seed=seed, count=count))


FILE_BUILDERS: dict[str, Callable[[str | os.PathLike[str]], list[Task]]] = {
    "geneval": build_geneval,
    "partiprompts": build_partiprompts,
    "t2icompbench": build_t2icompbench,
    "wise": build_wise,
    "geneval2": build_geneval2,
}


def dedupe(tasks: list[Task], dataset: str) -> BuildResult:
    """Drop later tasks whose ``normalize_prompt`` equals an earlier one; raise
    ``BuildError`` on a duplicate ``task_id``. Returns the kept tasks and the summary."""
    kept: list[Task] = []
    first_by_key: dict[str, str] = {}
    ids: set[str] = set()
    summary = BuildSummary(dataset=dataset, rows=len(tasks))
    for t in tasks:
        if t.task_id in ids:
            raise BuildError(f"duplicate task_id {t.task_id!r}")
        ids.add(t.task_id)
        f = str(t.metadata.get("file", dataset))
        stats = summary.per_file.setdefault(f, {"rows": 0, "dropped": 0})
        stats["rows"] += 1
        key = normalize_prompt(t.prompt)
        if key in first_by_key:
            summary.dropped.append((t.task_id, first_by_key[key]))
            stats["dropped"] += 1
            continue
        first_by_key[key] = t.task_id
        kept.append(t)
    summary.kept = len(kept)
    summary.families = dict(sorted(Counter(t.task_family for t in kept).items()))
    return BuildResult(kept, summary)


def build_tasks(
    dataset: str,
    input_path: str | os.PathLike[str] | None = None,
    *,
    seed: int = 0,
    count: int = 0,
) -> BuildResult:
    """Build, de-duplicate and summarise the tasks of ``dataset`` (one of ``DATASETS``).

    ``input_path`` is required for every dataset but ``synthetic``, which ignores it and
    calls ``evoharness.tasks.synthetic.build_synthetic(seed=seed, count=count)``.
    Raises ``BuildError`` (``file:line``) on malformed input and ``ValueError`` for an
    unknown dataset. Nothing is written.
    """
    if dataset == "synthetic":
        tasks = _synthetic(seed, count)
        inputs: list[str] = []
    elif dataset in FILE_BUILDERS:
        if input_path is None:
            raise BuildError(f"dataset {dataset!r} needs an input file")
        p = Path(input_path)
        if not p.exists():
            raise BuildError(f"{p}: no such file")
        tasks = FILE_BUILDERS[dataset](p)
        inputs = [str(f) for f in _files(p, "*_train.txt")] if p.is_dir() else [str(p)]
    else:
        raise ValueError(f"unknown dataset {dataset!r}; choose one of {', '.join(DATASETS)}")
    result = dedupe(tasks, dataset)
    result.summary.inputs = inputs
    return result


__all__ = [
    "DATASETS",
    "FILE_BUILDERS",
    "BuildError",
    "BuildResult",
    "BuildSummary",
    "build_geneval",
    "build_geneval2",
    "build_partiprompts",
    "build_t2icompbench",
    "build_tasks",
    "build_wise",
    "dedupe",
    "geneval_constraints",
    "load_tasks",
    "t2icompbench_family",
    "write_jsonl",
]
