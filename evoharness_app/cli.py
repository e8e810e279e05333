"""The ``evoharness`` command (also ``python -m evoharness_app``).

Exit codes: 0 success, 1 bad input (a clear message names the file/line/field), 2 bad usage.
Each area registers its verbs in a module of ``evoharness_app.commands``.
"""

from __future__ import annotations

import importlib
import sys

import typer

from evoharness_app.errors import InputError

app = typer.Typer(
    name="evoharness",
    help="Evolve the harness around a frozen text-to-image generator (TRACE).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # help text is the commands' docstrings, written with ``code`` spans and wrapped lines:
    # Markdown renders a double-backtick span as code and joins wrapped lines into paragraphs
    # (Typer's default "rich" mode shows the backticks and keeps every line break); passed
    # down to every sub-command group
    rich_markup_mode="markdown",
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
    "export",  # export-eval, export-trajectories
    "traffic",  # tasks from-traffic, traffic reference|drift|canary-check
    "schedule",  # schedule create|list|pause|unpause|trigger|delete
]


@app.command("version")
def version() -> None:
    """Print the evoharness version."""
    from importlib.metadata import version as _v

    typer.echo(_v("evoharness"))


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


def _run(argv: list[str] | None) -> int:
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


#: Loaded once a Temporal client has been created in this process (its Rust core's threads).
TEMPORAL_CORE = "temporalio.bridge.temporal_sdk_bridge"


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the process exit code (0 ok, 1 bad input, 2 bad usage).

    As the process's entry point (``argv`` None: the ``evoharness`` script, ``python -m
    evoharness_app``) after a command used a Temporal client, the process ends here with
    ``os._exit`` once stdout/stderr are flushed: the client's Rust core keeps threads that
    can abort CPython's finalization ("Fatal Python error: PyGILState_Release", exit 134 —
    temporalio/sdk-python#300), which turned a successful ``evolve start`` into a crash
    about half the time. Called with ``argv`` (tests, other Python code) it only returns."""
    code = _run(argv)
    if argv is None and TEMPORAL_CORE in sys.modules:
        import os

        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed pipe: nothing more to say
                pass
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
