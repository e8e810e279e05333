"""The ``evoharness`` command (also ``python -m evoharness_app``).

Exit codes: 0 success, 1 bad input (a clear message names the file/line/field), 2 bad usage.
Each area registers its verbs in a module of ``evoharness_app.commands``.
"""

from __future__ import annotations

import importlib
import sys

import typer

app = typer.Typer(
    name="evoharness",
    help="Evolve the harness around a frozen text-to-image generator (TRACE).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

#: Modules under evoharness_app.commands that register verbs on ``app`` via ``register(app)``.
COMMAND_MODULES = [
    "tasks",  # build-tasks, prepare-splits, verify-splits
    "harness",  # harness validate|hash|diff|apply-patch
    "sim",  # eval geneval, sim render
    "run",  # run (one prompt through a harness)
    "evolve",  # evolve start|status|stop|approve
    "registry",  # registry ...
    "stack",  # up / down
    "serve",  # serve <service>
    "extract",  # extract PROMPT… | --input TASKS.jsonl
]


@app.command("version")
def version() -> None:
    """Print the evoharness version."""
    from importlib.metadata import version as _v

    typer.echo(_v("evoharness"))


class InputError(Exception):
    """Bad input: the CLI prints the message and exits with code 1."""


def _register() -> None:
    for name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(f"evoharness_app.commands.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"evoharness_app.commands.{name}":
                continue
            raise
        mod.register(app)


_register()


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the process exit code (0 ok, 1 bad input, 2 bad usage)."""
    try:
        app(args=argv, prog_name="evoharness")
    except InputError as exc:
        typer.echo(f"error: {exc}", err=True)
        return 1
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        typer.echo(str(code), err=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
