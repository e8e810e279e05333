"""CLI verbs ``export-eval`` and ``export-trajectories``: a finished run's outputs for other
tools (``evoharness_app.exports``).

``evoharness export-eval --dataset geneval|geneval2|t2icompbench|wise RUN --out DIR`` writes
the images the run produced for its test split in the benchmark's own layout (with
``--harness DIR --tasks FILE.jsonl``: images generated now, into the run folder RUN), prints
the counts and lists missing or failed generations; tasks that collide under the layout stop it
(exit 1, each collision listed, nothing written). ``evoharness export-trajectories RUN --out
FILE.jsonl`` writes the best-vs-worst execution pairs (schema:
``docs/exports-trajectory.schema.json``). ``RUN`` is the run folder (``runs/<run_id>``).
Bad input exits 1 with a message naming the file or option.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

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
    harness: Annotated[
        Path | None,
        typer.Option(
            "--harness",
            help="Generate the images with this harness folder (with --tasks) instead of "
            "reading a run's: RUN is then the folder the generated run is written to.",
        ),
    ] = None,
    tasks: Annotated[
        Path | None,
        typer.Option("--tasks", help="Tasks JSON Lines file to generate (with --harness)."),
    ] = None,
    seeds: Annotated[
        str, typer.Option("--seeds", help="Seeds to generate with --harness, comma-separated.")
    ] = "0,1,2,3",
    generator: Annotated[
        str,
        typer.Option(
            "--generator",
            help="With --harness: sim (the embedded world) or grpc (the configured "
            "generation service).",
        ),
    ] = "sim",
    profile: Annotated[
        str, typer.Option("--profile", help="With --harness and sim: the generator profile.")
    ] = "",
) -> None:
    """Write the images a run produced for its test split (or, with --harness and --tasks,
    images generated now) in a benchmark's own layout (folders, file names, metadata files),
    for that benchmark's scoring code."""
    from evoharness_app.exports.benchmarks import ExportError, export_eval
    from evoharness_app.exports.run import RunReadError, open_run

    try:
        if harness is not None or tasks is not None:
            the_run = _generate(run, harness, tasks, seeds, generator, profile)
            harness_id = harness_id or the_run.final_harness_id or ""
        else:
            the_run = open_run(run, store)
        res = export_eval(
            the_run,
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


def _generate(
    folder: Path, harness: Path | None, tasks: Path | None, seeds: str, generator: str, profile: str
) -> Any:
    """``export-eval --harness --tasks``: the run folder ``folder`` with the harness's images
    of every (task, seed) (``exports.generate.generated_run``); generations that failed are
    printed (the export then lists them as missing). Bad input: ``InputError`` naming the
    option; also when every generation failed (nothing to export)."""
    from evoharness.harness import HarnessError, load_dir
    from evoharness.tasks.io import TaskFileError, load_tasks
    from evoharness_app.exports.generate import generated_run

    if harness is None or tasks is None:
        raise _input_error("--harness and --tasks go together: give both")
    try:
        seed_list = [int(x) for x in seeds.split(",") if x.strip()]
    except ValueError:
        raise _input_error(f"--seeds {seeds!r}: expected comma-separated integers") from None
    try:
        h, ts = load_dir(harness), load_tasks(tasks)
    except HarnessError as exc:
        raise _input_error(f"--harness {harness}: {exc}") from None
    except TaskFileError as exc:
        raise _input_error(f"--tasks {tasks}: {exc}") from None
    try:
        gen = generated_run(h, ts, seed_list, folder, generator=generator, profile=profile)
    except ValueError as exc:
        raise _input_error(str(exc)) from None
    for tid, s, why in gen.failed:
        typer.echo(f"generation failed: {tid} seed {s}: {why}", err=True)
    if gen.failed and not gen.stored:
        tid, s, why = gen.failed[0]
        raise _input_error(
            f"--tasks {tasks}: every generation failed ({len(gen.failed)}), nothing to export; "
            f"the first: {tid} seed {s}: {why}"
        )
    typer.echo(
        f"generated {gen.stored} image(s) of harness {gen.harness_id[:12]} into {folder}",
        err=True,
    )
    return gen.run


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
