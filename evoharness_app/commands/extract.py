"""CLI verb ``extract``: what the policy extractor reads from prompts, as JSON lines.

``evoharness extract PROMPT…`` or ``evoharness extract --input TASKS.jsonl`` prints one JSON
line per prompt (``evoharness.runtime.reading.explain``): the constraints the harness's rule
extractor extracts (what its verifier will check), and under ``uncertain`` everything else the
open reading finds, each with its reason — never dropped silently. A prompt with nothing
checkable says so (``"nothing_checkable": true``), and a summary line on stderr counts them.
Bad input (an unreadable or malformed task file) exits 1 naming ``file:line``; no prompt and no
``--input``, or both, is a usage error (exit 2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from evoharness.tasks.io import TaskFileError, load_tasks


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
        from evoharness.runtime.reading import explain
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
        for t in tasks:
            rows.append({"task_id": t.task_id, **explain(t.prompt)})
    else:
        rows = [explain(p) for p in prompts or []]
    for row in rows:
        typer.echo(json.dumps(row, ensure_ascii=False))
    empty = [r.get("task_id", r["prompt"]) for r in rows if r["nothing_checkable"]]
    typer.echo(
        f"{len(rows)} prompt(s); {len(empty)} with nothing checkable"
        + (
            f": {', '.join(map(str, empty[:10]))}" + (" …" if len(empty) > 10 else "")
            if empty
            else ""
        ),
        err=True,
    )


def register(app: typer.Typer) -> None:
    """Add ``extract`` to ``app``."""
    app.command("extract")(extract_cmd)
