"""CLI verbs for tasks: ``build-tasks``, ``prepare-splits``, ``verify-splits``.

Bad input (malformed file, failed verification) raises ``evoharness_app.cli.InputError`` →
exit 1; a bad option is a usage error → exit 2.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from evoharness.tasks.builders import (
    DATASETS,
    GENERATED,
    BuildSummary,
    build_tasks,
    write_jsonl,
)
from evoharness.tasks.io import TaskFileError, refuse_missing_parent, refuse_output_over_input
from evoharness.tasks.split_manifest import MANIFEST, verify_splits
from evoharness.tasks.split_prepare import prepare_splits
from evoharness.tasks.splits import NO_TEST_SPLIT, SPLITS, SplitError, check_sizes

#: Upper bound of ``build-tasks --count`` for the generated datasets (synthetic, multiref):
#: 100,000 synthetic tasks take about 7 s and already repeat most prompts (dropped as
#: duplicates); a million ran for minutes without a word. Above it: a usage error (exit 2).
MAX_GENERATED_COUNT = 100_000

Dataset = enum.StrEnum("Dataset", {d: d for d in DATASETS})  # type: ignore[misc]


def _input_error(exc: Exception) -> Exception:
    from evoharness_app.cli import InputError

    return InputError(str(exc))


def print_summary(summary: BuildSummary, output: Path, console: Console | None = None) -> None:
    """Print a builder summary: rows read, tasks kept, duplicates dropped, families."""
    console = console or Console()
    console.print(
        f"[bold]{summary.dataset}[/]: read {summary.rows} rows, kept {summary.kept} tasks, "
        f"dropped {summary.n_dropped} duplicate prompt(s) → {output}"
    )
    if len(summary.per_file) > 1:
        table = Table("file", "rows", "dropped duplicates")
        for f, s in summary.per_file.items():
            table.add_row(f, str(s["rows"]), str(s["dropped"]))
        console.print(table)
    for dropped, first in summary.dropped[:10]:
        console.print(f"  duplicate {dropped} (same prompt as {first})")
    if summary.n_dropped > 10:
        console.print(f"  ... and {summary.n_dropped - 10} more")
    fams = ", ".join(f"{k} {v}" for k, v in summary.families.items())
    console.print(f"families: {fams}")


def build_tasks_cmd(
    dataset: Annotated[Dataset, typer.Option("--dataset", help="Which dataset format to read.")],
    output: Annotated[Path, typer.Option("--output", help="Task file to write (JSON Lines).")],
    input: Annotated[
        Path | None,
        typer.Option(
            "--input",
            help="Dataset file (or T2I-CompBench folder); not for the generated datasets "
            "(synthetic, multiref).",
        ),
    ] = None,
    seed: Annotated[
        int, typer.Option(help="Seed (the generated datasets: synthetic, multiref).", min=0)
    ] = 0,
    count: Annotated[
        int | None,
        typer.Option(
            help="Number of tasks to generate (synthetic: required, duplicate prompts are "
            f"then dropped; multiref: default 12; at most {MAX_GENERATED_COUNT}).",
            min=1,
            show_default=False,
        ),
    ] = None,
) -> None:
    """Build a task file (JSON Lines) from a benchmark's prompt file.

    Prompts are kept verbatim; duplicate prompts (after normalisation) are dropped and
    reported. Nothing is written when the input is malformed (exit 1, file:line)."""
    name = str(dataset.value)
    generated = name in GENERATED
    if not generated and input is None:
        raise typer.BadParameter("--input is required for this dataset", param_hint="--input")
    if generated and input is not None:
        raise typer.BadParameter(f"{name} tasks are generated; drop --input", param_hint="--input")
    if name == "synthetic" and count is None:
        raise typer.BadParameter("--count >= 1 is required for synthetic", param_hint="--count")
    if not generated and count is not None:
        raise typer.BadParameter(
            f"{name} tasks are read from --input; drop --count", param_hint="--count"
        )
    if generated and count is not None and count > MAX_GENERATED_COUNT:
        raise typer.BadParameter(
            f"{count} is above the limit of {MAX_GENERATED_COUNT} tasks for a generated "
            f"dataset ({name}); nothing written",
            param_hint="--count",
        )
    if output.is_dir():
        raise _input_error(
            TaskFileError(
                f"--output {output}: is a directory, expected a file path (nothing written)"
            )
        )
    try:
        refuse_missing_parent(output, "--output")
        if input is not None:
            refuse_output_over_input([input], [output])
        result = build_tasks(name, input, seed=seed, count=count or 0)
        if not result.tasks:
            raise TaskFileError(f"{input}: no tasks (empty file?); nothing written")
        write_jsonl(result.tasks, output)
    except (TaskFileError, OSError) as exc:
        raise _input_error(exc) from None
    print_summary(result.summary, output)


def parse_sizes(text: str) -> tuple[int, ...]:
    """``--sizes`` text as 3 or 4 split sizes (``evoharness.tasks.splits.check_sizes``);
    ``typer.BadParameter`` (a usage error, exit 2) naming the text otherwise. Shared by
    ``prepare-splits``, ``evolve main`` and ``evolve local``."""
    try:
        parts = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise typer.BadParameter(
            f"expected three or four integers like 500,100,100,100, got {text!r}"
        ) from None
    if len(parts) not in (3, 4) or any(p < 0 for p in parts):
        raise typer.BadParameter(
            f"expected three or four integers >= 0 like 500,100,100,100 "
            f"(target,heldout,preservation[,test]), got {text!r}"
        )
    if sum(parts) == 0:
        raise typer.BadParameter(
            f"all sizes are 0 in {text!r}: at least one split needs a task (e.g. 60,20,20,20)"
        )
    try:
        return check_sizes(parts, f"--sizes {text!r}")  # the target split must not be empty
    except SplitError as exc:
        raise typer.BadParameter(str(exc)) from None


def prepare_splits_cmd(
    tasks: Annotated[
        list[Path], typer.Argument(help="Task files (JSON Lines), in priority order.")
    ],
    out: Annotated[Path, typer.Option("--out", help="Folder for the split files and manifest.")],
    sizes: Annotated[
        str,
        typer.Option(
            help="target,heldout,preservation,test sizes (three: no test split; target must "
            "be > 0, the others may be 0); shrunk in proportion (said so) if too few tasks."
        ),
    ] = "500,100,100,100",
    seed: Annotated[int, typer.Option(help="Seed for the stratified shuffle.", min=0)] = 0,
    force: Annotated[
        bool,
        typer.Option("--force", help="Replace the split files and manifest already in --out."),
    ] = False,
) -> None:
    """Split task files into disjoint target / heldout / preservation / test sets.

    Seeded and stratified by task_family (preservation also over the object vocabulary);
    writes a manifest with counts, seed and the sha256 of every input and split file. The
    test split is never seen by a gate; with three sizes there is none (said so). Split files
    already in --out (a params file may point at them) are replaced only with --force."""
    parts = parse_sizes(sizes)
    outputs = [out / n for n in (*(f"{s}.jsonl" for s in SPLITS), MANIFEST)]
    try:
        refuse_missing_parent(out, "--out")
        refuse_output_over_input(tasks, outputs)  # first: an input would be lost even so
        if out.is_dir():
            known = {p.resolve() for p in (*outputs, *tasks)}
            stray = sorted(
                f.name
                for f in out.iterdir()
                if not f.name.startswith(".") and f.resolve() not in known
            )
            if stray:
                raise SplitError(
                    f"--out {out}: holds other files ({', '.join(stray[:5])}), which "
                    "verify-splits refuses in a split folder; move them out or choose another "
                    "folder (nothing written)"
                )
        existing = [p.name for p in outputs if p.exists()]
        if existing and not force:
            raise SplitError(
                f"--out {out}: holds split files already ({', '.join(existing)}), which a "
                "params file or run may point at; pass --force to replace them, or choose "
                "another folder (nothing written)"
            )
        manifest = prepare_splits(tasks, out, parts, seed)
    except (TaskFileError, SplitError, OSError) as exc:
        raise _input_error(exc) from None
    console = Console()
    table = Table("split", "tasks", "families", "object classes")
    for name in SPLITS:
        if name not in manifest["splits"]:
            continue
        entry = manifest["splits"][name]
        table.add_row(
            name, str(entry["count"]), str(len(entry["families"])), str(entry.get("classes", ""))
        )
    console.print(table)
    actual, requested = list(manifest["sizes"]), list(manifest["sizes_requested"])
    if actual != requested:
        console.print(
            f"[yellow]only {sum(actual)} tasks for the {sum(requested)} requested: sizes shrunk "
            f"to {','.join(map(str, actual))} (in proportion to --sizes)[/]"
        )
    if "test" not in manifest["splits"]:
        console.print(f"[yellow]{NO_TEST_SPLIT}[/]")
    console.print(
        f"dropped {manifest['dropped_duplicates']} duplicate prompt(s); "
        f"manifest → {out / 'manifest.json'}"
    )


def verify_splits_cmd(
    manifest: Annotated[Path, typer.Argument(help="manifest.json or the split folder.")],
) -> None:
    """Re-check a split folder against its manifest.

    Checks hashes, counts, disjointness and a byte-for-byte rebuild from the inputs; exits 1
    naming the first mismatching file."""
    try:
        m = verify_splits(manifest)
    except (SplitError, TaskFileError, OSError) as exc:
        raise _input_error(exc) from None
    counts = ", ".join(f"{n} {m['splits'][n]['count']}" for n in SPLITS if n in m["splits"])
    typer.echo(f"ok: {counts} (seed {m['seed']})")


def register(app: typer.Typer) -> None:
    """Add ``build-tasks``, ``prepare-splits`` and ``verify-splits`` to ``app``."""
    app.command("build-tasks")(build_tasks_cmd)
    app.command("prepare-splits")(prepare_splits_cmd)
    app.command("verify-splits")(verify_splits_cmd)
