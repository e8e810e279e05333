"""CLI verb ``extract``: what the policy extractor reads from prompts, as JSON lines.

``evoharness extract PROMPT…`` or ``evoharness extract --input TASKS.jsonl`` prints one JSON
line per prompt (``evoharness.runtime.explanation.explain``): the constraints the harness's rule
extractor extracts (what its verifier will check), and under ``uncertain`` everything else the
open reading finds, each with its reason — never dropped silently. A prompt with nothing
checkable says so (``"nothing_checkable": true``), and a summary line on stderr counts them
and names the first ten (task ids, or the prompts themselves), each as a JSON string.
Bad input (an unreadable or malformed task file, or a prompt longer than
``evoharness.tasks.models.MAX_PROMPT_CHARS``)
exits 1 naming ``file:line`` or the prompt's position; no prompt and no ``--input``, or both, is
a usage error (exit 2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from evoharness.tasks.io import TaskFileError, load_tasks
from evoharness.tasks.models import MAX_PROMPT_CHARS, check_prompt_length

__all__ = ["MAX_PROMPT_CHARS", "extract_cmd", "register"]


def _input_error(msg: str) -> Exception:
    from evoharness_app.cli import InputError

    return InputError(msg)


def extract_cmd(
    prompts: Annotated[
        list[str] | None,
        typer.Argument(help="Prompts to read (or use --input).", show_default=False),
    ] = None,
    input: Annotated[
        Path | None,
        typer.Option("--input", help="Task file (JSON Lines, as written by build-tasks)."),
    ] = None,
) -> None:
    """Print what the policy extractor reads from each prompt (JSON lines): its constraints,
    and what the verifier cannot check marked ``uncertain`` with a reason."""
    if bool(prompts) == (input is not None):
        raise typer.BadParameter(
            "give prompts as arguments or --input TASKS.jsonl, not both and not neither",
            param_hint="PROMPTS / --input",
        )
    try:
        from evoharness.runtime.explanation import explain
    except ModuleNotFoundError as exc:  # pragma: no cover - a broken install
        raise _input_error(f"the open reading needs {exc.name!r}: pip install -e .") from None
    rows: list[dict[str, Any]] = []
    if input is not None:
        try:
            tasks = load_tasks(input)
        except TaskFileError as exc:
            raise _input_error(str(exc)) from None
        if not tasks:
            raise _input_error(f"{input}: no tasks")
        lines = _task_lines(input)
        for k, t in enumerate(tasks):
            _check_length(t.prompt, f"{input}:{lines[k]}: task {t.task_id!r}")
        for t in tasks:
            rows.append({"task_id": t.task_id, **explain(t.prompt)})
    else:
        for k, p in enumerate(prompts or [], start=1):
            _check_length(p, f"prompt argument {k}")
        rows = [explain(p) for p in prompts or []]
    for row in rows:
        typer.echo(json.dumps(row, ensure_ascii=False))
    empty = [r.get("task_id", r["prompt"]) for r in rows if r["nothing_checkable"]]
    typer.echo(
        f"{len(rows)} prompt(s); {len(empty)} with nothing checkable"
        + (
            # each as a JSON string: an empty, blank or punctuation-only prompt stays visible
            f": {', '.join(json.dumps(str(e), ensure_ascii=False) for e in empty[:10])}"
            + (" …" if len(empty) > 10 else "")
            if empty
            else ""
        ),
        err=True,
    )


def _check_length(prompt: str, where: str) -> None:
    """``InputError`` naming ``where`` when ``prompt`` is longer than ``MAX_PROMPT_CHARS``."""
    try:
        check_prompt_length(prompt)
    except ValueError as exc:
        raise _input_error(f"{where}: {exc}") from None


def _task_lines(path: Path) -> list[int]:
    """1-based line numbers of the non-blank lines of ``path``: the k-th task's line, as
    ``load_tasks`` reads them (blank lines skipped)."""
    raw = path.read_bytes().split(b"\n")
    return [n for n, line in enumerate(raw, start=1) if line.decode("utf-8").strip()]


def register(app: typer.Typer) -> None:
    """Add ``extract`` to ``app``."""
    app.command("extract")(extract_cmd)
