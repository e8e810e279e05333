"""What every dataset builder shares: ``BuildError``, ``BuildSummary`` / ``BuildResult``, and
the row helpers (text with ``file:line`` errors, JSON Lines and JSON arrays read with their line
numbers, field checks, task construction)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evoharness.tasks.io import TaskFileError, format_validation
from evoharness.tasks.models import Task


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


def read_text(path: Path) -> str:
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


def numbered_lines(text: str) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` with ``\\n`` / ``\\r\\n`` endings removed; a missing final
    newline is fine. Only ``\\n`` separates lines (not the other Unicode line breaks)."""
    parts = text.split("\n")
    if parts and parts[-1] == "":
        parts.pop()
    for i, line in enumerate(parts, start=1):
        yield i, line[:-1] if line.endswith("\r") else line


def refuse_json_object(where: str, line: str) -> None:
    """``BuildError`` naming ``where`` (``file:line``) when ``line`` parses as a JSON object: a
    text-format builder (one prompt per line) was given a JSON Lines file, whose rows would
    otherwise become prompts verbatim. A prompt that merely starts with ``{`` is kept."""
    text = line.strip()
    if not text.startswith("{"):
        return
    try:
        value = json.loads(text)
    except ValueError:
        return
    if isinstance(value, dict):
        raise BuildError(
            f"{where}: this line is a JSON object, not a prompt; this dataset reads one prompt "
            "per line (is this a JSON Lines file for another --dataset, such as geneval?)"
        )


def file_stem(path: Path) -> str:
    """The file name up to its first dot (``evaluation_metadata.jsonl`` -> ``evaluation_metadata``):
    the middle part of every task id ``<source>/<stem>/<line>``."""
    return path.name.split(".")[0] if path.suffix else path.name


def make_task(where: str, **kwargs: Any) -> Task:
    """``Task.model_validate(kwargs)``; ``BuildError`` naming ``where`` (``file:line``) and the
    bad field when it does not validate."""
    try:
        return Task.model_validate(kwargs)
    except ValidationError as exc:
        raise BuildError(f"{where}: invalid task: {format_validation(exc)}") from None


def require(obj: Any, key: str, where: str, kind: type | tuple[type, ...]) -> Any:
    """``obj[key]`` when ``obj`` is a dict holding ``key`` of type ``kind`` (``bool`` only when
    ``kind`` names it); else ``BuildError`` naming ``where``, the field and the value."""
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


def json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """``(line, value)`` for every non-blank JSON Lines row; ``BuildError`` with ``file:line`` on
    invalid JSON (``NaN`` and ``Infinity`` included)."""
    for lineno, line in numbered_lines(read_text(path)):
        if not line.strip():
            continue
        try:
            yield lineno, json.loads(line, parse_constant=_reject_constant)
        except ValueError as exc:
            raise BuildError(f"{path}:{lineno}: invalid JSON: {exc}") from None


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON")


def json_array(path: Path) -> Iterator[tuple[int, Any]]:
    """Elements of a top-level JSON array with the line each starts on."""
    text = read_text(path)
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


def input_files(input_path: Path, pattern: str) -> list[Path]:
    """``[input_path]`` for a file, the sorted ``pattern`` matches for a folder; ``BuildError``
    when the path does not exist or the folder has no match."""
    if input_path.is_dir():
        files = sorted(input_path.glob(pattern))
        if not files:
            raise BuildError(f"{input_path}: no {pattern} files in this folder")
        return files
    if not input_path.exists():
        raise BuildError(f"{input_path}: no such file")
    return [input_path]


__all__ = [
    "BuildError",
    "BuildResult",
    "BuildSummary",
    "read_text",
    "numbered_lines",
    "refuse_json_object",
    "file_stem",
    "make_task",
    "require",
    "json_lines",
    "json_array",
    "input_files",
]
