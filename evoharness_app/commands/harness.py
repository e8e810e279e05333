"""CLI verbs ``harness validate|hash|diff|apply-patch``.

A harness argument is a harness directory or a single JSON document. Bad input raises
``evoharness_app.cli.InputError`` (exit 1).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from evoharness.harness import (
    HarnessError,
    PatchError,
    apply_patch,
    diff,
    harness_id,
    load_dir,
    save_dir,
)
from evoharness.harness.schema import Harness

harness_app = typer.Typer(
    name="harness",
    help="Validate, hash, diff and patch harness directories.",
    no_args_is_help=True,
)

HarnessPath = Annotated[Path, typer.Argument(help="Harness directory or JSON document.")]


def _load(path: Path) -> Harness:
    from evoharness_app.cli import InputError

    try:
        return load_dir(path)
    except HarnessError as exc:
        raise InputError(str(exc)) from None


@harness_app.command("validate")
def validate(path: HarnessPath) -> None:
    """Check a harness against the schema (migrating older schema versions) and that it
    compiles (e.g. every tool a skill uses is declared); print its id. What compiles but
    does nothing (a tool only an agent calls, without an agent) is a warning on stderr."""
    from evoharness.harness.io import locate_field
    from evoharness.runtime import HarnessCompileError
    from evoharness.runtime.harness_checks import harness_warnings
    from evoharness.runtime.runtime import check_harness
    from evoharness_app.cli import InputError

    h = _load(path)
    try:
        check_harness(h)
    except HarnessCompileError as exc:
        raise InputError(f"{locate_field(path, exc.field) or path}: {exc}") from None
    for field, message in harness_warnings(h):
        typer.echo(f"warning: {locate_field(path, field) or path}: {message}", err=True)
    typer.echo(f"ok: {path} is a valid harness (schema_version {h.schema_version})")
    typer.echo(harness_id(h))


@harness_app.command("hash")
def hash_(path: HarnessPath) -> None:
    """Print the harness_id: sha256 of the RFC 8785 canonical JSON."""
    typer.echo(harness_id(_load(path)))


@harness_app.command("diff")
def diff_cmd(
    a: Annotated[Path, typer.Argument(help="The old harness.")],
    b: Annotated[Path, typer.Argument(help="The new harness.")],
) -> None:
    """Print the RFC 6902 JSON Patch from A to B, grouped by responsibility (JSON)."""
    grouped = diff(_load(a), _load(b))
    typer.echo(json.dumps(grouped, indent=2, sort_keys=True, ensure_ascii=False))


@harness_app.command("apply-patch")
def apply_patch_cmd(
    path: HarnessPath,
    patch: Annotated[
        Path,
        typer.Argument(help="Patch JSON: {responsibility, ops, rationale?, expected_effect?}."),
    ],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the patched harness here.")
    ] = None,
) -> None:
    """Apply a JSON Patch inside its responsibility's boundary contract.

    Prints the new harness_id and, with --output, writes the patched harness directory; a
    result that does not compile (``harness validate``) is refused, and one that equals the
    input is said so on stderr. The input harness is never changed."""
    from evoharness_app.cli import InputError

    if output is not None:
        from evoharness.tasks.io import TaskFileError, refuse_missing_parent

        try:
            refuse_missing_parent(output, "--output")
        except TaskFileError as exc:
            raise InputError(str(exc)) from None
        src, dst = path.resolve(), output.resolve()
        if dst == src or src in dst.parents:
            raise InputError(
                f"--output {output}: is the input harness {path} or inside it; write the "
                "patched harness elsewhere (nothing written)"
            )
    h = _load(path)
    try:
        doc: Any = json.loads(patch.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{patch}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise InputError(f"{patch}: invalid JSON: {exc}") from None
    try:
        new = apply_patch(h, doc)
    except PatchError as exc:
        raise InputError(f"{patch}: {exc}") from None
    from evoharness.runtime import HarnessCompileError
    from evoharness.runtime.runtime import check_harness

    try:
        check_harness(new)
    except HarnessCompileError as exc:
        raise InputError(f"{patch}: the patched harness does not compile: {exc}") from None
    if harness_id(new) == harness_id(h):
        typer.echo(
            f"{patch}: the patch changes nothing: the patched harness is identical to {path}",
            err=True,
        )
    if output is not None:
        try:
            save_dir(new, output)
        except HarnessError as exc:
            raise InputError(f"--output {exc}") from None
        except OSError as exc:
            raise InputError(f"--output {output}: cannot write: {exc.strerror or exc}") from None
        typer.echo(f"wrote {output}")
    typer.echo(harness_id(new))


def register(app: typer.Typer) -> None:
    """Add the ``harness`` command group to ``app``."""
    app.add_typer(harness_app, name="harness")
