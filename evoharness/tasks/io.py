"""Task files: JSON Lines, one ``Task`` per line, written atomically.

``write_jsonl`` writes a temporary file beside the target and renames it over the target at
the end (``os.replace``), so a failure never leaves a half-written task file. ``load_tasks``
reads one back and stops at the first bad line with ``file:line``.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from pydantic import ValidationError

from evoharness.tasks.models import Task


class TaskFileError(ValueError):
    """A malformed task or dataset file. The message starts with ``file:line:`` where known."""


def format_validation(exc: ValidationError) -> str:
    """One line per pydantic error: ``field.path: message``."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        parts.append(f"{loc or '<root>'}: {err['msg']}")
    return "; ".join(parts)


def task_line(task: Task) -> str:
    """The JSON Lines form of one task (no trailing newline). Deterministic for equal tasks."""
    return task.model_dump_json()


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary sibling file and ``os.replace``.

    The parent directory is created. Raises ``OSError`` on I/O failure; the target is then
    untouched and the temporary file removed.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        # mkstemp creates 0600; give the file the mode a plain open() would (0666 & ~umask).
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        try:
            os.unlink(tmp_name)
        except FileNotFoundError:
            pass
        raise
    return target


def _same_file(a: Path, b: Path) -> bool:
    """True when ``a`` and ``b`` name one file: the same path after resolving symbolic
    links, or (both existing) the same inode, which also catches hard links."""
    if a.resolve() == b.resolve():
        return True
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def refuse_output_over_input(
    inputs: Iterable[str | os.PathLike[str]], outputs: Iterable[str | os.PathLike[str]]
) -> None:
    """Raise ``TaskFileError`` naming both paths when an output file is one of the inputs
    (same path, a symbolic or a hard link to it), or lies inside an input folder, before
    anything is read or written. ``inputs`` may be files or folders."""
    ins = [Path(p) for p in inputs]
    for out in (Path(p) for p in outputs):
        for src in ins:
            if src.is_dir():
                folder = src.resolve()
                if folder == out.resolve() or folder in out.resolve().parents:
                    raise TaskFileError(
                        f"{out}: output lies inside the input folder {src}; "
                        "choose an output outside it (nothing written)"
                    )
            elif _same_file(src, out):
                raise TaskFileError(
                    f"{out}: output is the input file {src}; writing it would overwrite "
                    "the input (nothing written)"
                )


def refuse_missing_parent(path: str | os.PathLike[str], option: str) -> None:
    """Raise ``TaskFileError`` naming ``option``, ``path`` and the folder when the folder an
    output (a file, or a folder the command creates) goes into does not exist: every CLI
    output needs an existing parent, so a mistyped ``--output /nonexistent_dir/x.jsonl``
    creates no folder tree."""
    parent = Path(path).parent
    if not parent.is_dir():
        what = "is not a folder" if parent.exists() else "does not exist"
        raise TaskFileError(
            f"{option} {path}: the folder {parent} {what}; create it first (nothing written)"
        )


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def dumps_tasks(tasks: Iterable[Task]) -> bytes:
    """UTF-8 JSON Lines bytes of ``tasks``, one per line, each line ending in ``\\n``."""
    return "".join(task_line(t) + "\n" for t in tasks).encode("utf-8")


def write_jsonl(tasks: Iterable[Task], path: str | os.PathLike[str]) -> Path:
    """Write ``tasks`` to ``path`` as JSON Lines, atomically (temp file + rename).

    Raises ``TaskFileError`` on a duplicate ``task_id`` before anything is written.
    """
    tasks = list(tasks)
    seen: set[str] = set()
    for t in tasks:
        if t.task_id in seen:
            raise TaskFileError(f"{path}: duplicate task_id {t.task_id!r}; nothing written")
        seen.add(t.task_id)
    return atomic_write_bytes(path, dumps_tasks(tasks))


def load_tasks(path: str | os.PathLike[str]) -> list[Task]:
    """Read a JSON Lines task file written by ``write_jsonl`` (or any file of Task lines).

    Blank lines are skipped. Raises ``TaskFileError`` with ``file:line`` for unreadable
    UTF-8, bad JSON, a line that is not a valid ``Task`` (naming its task id when it has one,
    and the field), or a duplicate
    ``task_id`` (naming the line of its first occurrence).
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise TaskFileError(f"{p}: cannot read: {exc.strerror or exc}") from None
    tasks: list[Task] = []
    first_line: dict[str, int] = {}
    for lineno, line in enumerate(raw.split(b"\n"), start=1):
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TaskFileError(f"{p}:{lineno}: not UTF-8: {exc.reason}") from None
        if not text.strip():
            continue
        try:
            obj = json.loads(text, parse_constant=_reject_constant)
        except ValueError as exc:
            raise TaskFileError(f"{p}:{lineno}: invalid JSON: {exc}") from None
        try:
            task = Task.model_validate(obj)
        except ValidationError as exc:
            tid = obj.get("task_id") if isinstance(obj, dict) else None
            who = f" task {tid!r}:" if isinstance(tid, str) and tid else ""
            raise TaskFileError(
                f"{p}:{lineno}:{who} invalid task: {format_validation(exc)}"
            ) from None
        if task.task_id in first_line:
            raise TaskFileError(
                f"{p}:{lineno}: duplicate task_id {task.task_id!r} "
                f"(first at line {first_line[task.task_id]})"
            )
        first_line[task.task_id] = lineno
        tasks.append(task)
    return tasks


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not valid JSON")


__all__ = [
    "TaskFileError",
    "atomic_write_bytes",
    "dumps_tasks",
    "format_validation",
    "load_tasks",
    "refuse_missing_parent",
    "task_line",
    "write_jsonl",
]
