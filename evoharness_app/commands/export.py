"""CLI verbs ``export-eval`` and ``export-trajectories``: a finished run's outputs for other
tools (``evoharness_app.exports``).

``evoharness export-eval --dataset geneval|geneval2|t2icompbench|wise RUN --out DIR`` writes
the images the run produced for its test split in the benchmark's own layout, prints the
counts and lists missing or failed generations; tasks that collide under the layout stop it
(exit 1, each collision listed, nothing written). ``evoharness export-trajectories RUN --out
FILE.jsonl`` writes the best-vs-worst execution pairs (schema:
``docs/exports-trajectory.schema.json``). ``RUN`` is the run folder (``runs/<run_id>``).
Bad input exits 1 with a message naming the file or option.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

StoreDir = Annotated[
    Path | None,
    typer.Option(
        "--store",
        help="The run's artifact store as a folder (default: RUN/store when it exists, else "
        "the stack's S3 bucket).",
    ),
]
RunArg = Annotated[Path, typer.Argument(help="The run folder (runs/<run_id>).", show_default=False)]


def _input_error(msg: str) -> Exception:
    from evoharness_app.cli import InputError

    return InputError(msg)


def export_eval_cmd(
    run: RunArg,
    dataset: Annotated[
        str, typer.Option("--dataset", help="geneval | geneval2 | t2icompbench | wise.")
    ],
    out: Annotated[Path, typer.Option("--out", help="Output folder (new or empty).")],
    harness_id: Annotated[
        str,
        typer.Option(
            "--harness-id", help="Harness whose images to export (default: the run's final one)."
        ),
    ] = "",
    split: Annotated[str, typer.Option("--split", help="The run split to export.")] = "test",
    seed: Annotated[
        int | None,
        typer.Option(
            "--seed",
            help="Seed of the one image per prompt (geneval2, wise; default: the run's first).",
        ),
    ] = None,
    source: Annotated[
        Path | None,
        typer.Option("--source", help="Benchmark data folder (default: $EVOHARNESS_SHARED/data)."),
    ] = None,
    store: StoreDir = None,
) -> None:
    """Write the images a run produced for its test split in a benchmark's own layout
    (folders, file names, metadata files), for that benchmark's scoring code."""
    from evoharness_app.exports.benchmarks import ExportError, export_eval
    from evoharness_app.exports.run import RunReadError, open_run

    try:
        res = export_eval(
            open_run(run, store),
            dataset,
            out,
            harness_id=harness_id or None,
            split=split,
            seed=seed,
            source_dir=source,
        )
    except (ExportError, RunReadError) as exc:
        raise _input_error(str(exc)) from None
    for kind, rows in (("missing", res.missing), ("failed", res.failed)):
        for tid, s, why in rows:
            typer.echo(f"{kind}: {tid} seed {s}: {why}", err=True)
    typer.echo(
        f"{dataset}: {len(res.written)} image(s) written to {out}, {len(res.missing)} missing, "
        f"{len(res.failed)} failed, {len(res.not_in_benchmark)} task(s) of the {split} split "
        f"not from {dataset}; manifest {out / 'evoharness-export.json'}"
    )


def export_trajectories_cmd(
    run: RunArg,
    out: Annotated[Path, typer.Option("--out", help="Output JSON Lines file.")],
    min_reward_gap: Annotated[
        float,
        typer.Option(
            "--min-reward-gap", help="Keep a pair only when best - worst reward >= this (0..1)."
        ),
    ] = 0.0,
    store: StoreDir = None,
) -> None:
    """Write the run's best-vs-worst execution pairs (prompt, both programs and
    trajectories, image keys, verdicts, rewards) as JSON Lines; protocol failures are left
    out, and so are the tasks of the untouched test split."""
    from evoharness_app.exports.run import RunReadError, open_run
    from evoharness_app.exports.trajectories import export_trajectories

    try:
        stats = export_trajectories(open_run(run, store), out, min_reward_gap)
    except (RunReadError, ValueError) as exc:
        raise _input_error(str(exc)) from None
    if stats.unknown_task:
        typer.echo(
            f"{len(stats.unknown_task)} task(s) with executions in no split of the run: "
            + ", ".join(stats.unknown_task[:10]),
            err=True,
        )
    typer.echo(
        f"{stats.pairs} pair(s) written to {out} from {stats.tasks} task(s); left out: "
        f"{stats.protocol_failures} protocol failure(s), {stats.too_few} task(s) with fewer "
        f"than two usable executions, {stats.below_gap} with a reward gap not above "
        f"{min_reward_gap}, {stats.test_split} task(s) of the untouched test split"
    )


def register(app: typer.Typer) -> None:
    """Add ``export-eval`` and ``export-trajectories`` to the CLI."""
    app.command("export-eval")(export_eval_cmd)
    app.command("export-trajectories")(export_trajectories_cmd)
