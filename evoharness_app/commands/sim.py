"""CLI verbs of the embedded CPU world: ``eval geneval`` and ``sim render``.

``sim render`` draws one program with the *simulator* (``evoharness.sim.SimGenerator``, a
behavioural model, not a neural generator). ``eval geneval`` scores a folder of images with the
simulator's pixel-level inspector and GenEval's rules.

Image naming for ``eval geneval``: ``<task_id with "/" replaced by "__">__<seed>.png``, e.g.
``geneval__evaluation_metadata__0__3.png`` for task ``geneval/evaluation_metadata/0`` seed 3
(any suffix after the last ``__`` is accepted as the seed/variant).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from evoharness.program import MAX_SEED
from evoharness.tasks.io import atomic_write_bytes


def _input_error(msg: str) -> Exception:
    from evoharness_app.cli import InputError

    return InputError(msg)


def image_name(task_id: str, seed: int | str) -> str:
    """File name of an image of ``task_id`` at ``seed``: ``<task_id, / → __>__<seed>.png``."""
    return f"{task_id.replace('/', '__')}__{seed}.png"


def _check_output(path: Path | None, option: str) -> None:
    """Refuse an output path that is a directory or whose folder does not exist, before
    anything is computed or written."""
    from evoharness.tasks.io import TaskFileError, refuse_missing_parent

    if path is not None and path.is_dir():
        raise _input_error(f"{option} {path}: is a directory, expected a file path")
    if path is not None:
        try:
            refuse_missing_parent(path, option)
        except TaskFileError as exc:
            raise _input_error(str(exc)) from None


def _atomic_write(path: Path, data: bytes, option: str = "--out") -> None:
    # temp file + rename, with the mode a plain open() would give (not mkstemp's 0600)
    try:
        atomic_write_bytes(path, data)
    except OSError as exc:
        raise _input_error(f"{option} {path}: cannot write: {exc.strerror or exc}") from None


def render(
    prompt: Annotated[str, typer.Option(help="The prompt.")],
    out: Annotated[Path, typer.Option("--out", help="PNG file to write.")],
    seed: Annotated[
        int,
        typer.Option(
            help="Generator seed (0 .. 2^53-1, exact in canonical JSON).", min=0, max=MAX_SEED
        ),
    ] = 0,
    negative_prompt: Annotated[str, typer.Option(help="Negative prompt.")] = "",
    steps: Annotated[int, typer.Option(help="Denoising steps (simulated).")] = 30,
    guidance_scale: Annotated[float, typer.Option(help="Guidance scale (simulated).")] = 5.0,
    width: Annotated[int, typer.Option(help="Width in px (multiple of 8).")] = 512,
    height: Annotated[int, typer.Option(help="Height in px (multiple of 8).")] = 512,
    layout: Annotated[
        Path | None,
        typer.Option(help="JSON file: list of {label, box [x0,y0,x1,y1] in 0..1, color?, text?}."),
    ] = None,
    manifest: Annotated[
        Path | None, typer.Option(help="Also write the scene manifest (JSON) here.")
    ] = None,
    profile: Annotated[
        str,
        typer.Option(
            help="Generator profile: sd15-like, sdxl-like, flux-like, or a profile YAML path."
        ),
    ] = "sdxl-like",
) -> None:
    """Render one program with the embedded simulator (a behavioural model of a text-to-image
    generator, not a neural network) and write the PNG."""
    from pydantic import ValidationError

    from evoharness.capabilities import UnsupportedConditioning
    from evoharness.program import Program
    from evoharness.sim import SimGenerator
    from evoharness.sim.profiles import ProfileError, load_profile

    _check_output(out, "--out")
    named = [("--out", out), ("--manifest", manifest), ("--layout", layout)]
    for i, (opt_a, a) in enumerate(named):
        for opt_b, b in named[i + 1 :]:
            if a is not None and b is not None and a.resolve() == b.resolve():
                raise typer.BadParameter(
                    f"{opt_b} {b} is the same file as {opt_a} {a}; give each its own path",
                    param_hint=opt_b,
                )
    try:
        params = load_profile(profile)
    except ProfileError as exc:
        raise _input_error(f"--profile: {exc}") from None
    _check_output(manifest, "--manifest")
    try:
        items = json.loads(layout.read_text(encoding="utf-8")) if layout else None
    except OSError as exc:
        raise _input_error(f"--layout {layout}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise _input_error(f"--layout {layout}: invalid JSON: {exc}") from None
    try:
        program = Program.model_validate(
            {
                "prompt": prompt,
                "negative_prompt": negative_prompt,
                "seed": seed,
                "params": {
                    "steps": steps,
                    "guidance_scale": guidance_scale,
                    "width": width,
                    "height": height,
                },
                "layout": items,
            }
        )
        image = SimGenerator(params).generate(program)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        src = f"--layout {layout}: " if layout and where.startswith("layout") else ""
        raise _input_error(f"{src}program field {where}: {first['msg']}") from exc
    except (ValueError, UnsupportedConditioning) as exc:
        raise _input_error(str(exc)) from exc
    _atomic_write(out, image.png)
    if manifest is not None:
        _atomic_write(manifest, json.dumps(image.manifest, indent=2).encode("utf-8"), "--manifest")
    n_objects = len((image.manifest or {}).get("objects", []))
    typer.echo(
        f"wrote {out} ({image.width}x{image.height}, {n_objects} objects, "
        f"{image.seconds * 1000:.0f} ms, {image.generator_id})"
    )


def eval_geneval(
    images: Annotated[Path, typer.Option("--images", help="Folder of PNG images.")],
    tasks: Annotated[Path, typer.Option("--tasks", help="Task file (JSON Lines).")],
    out: Annotated[
        Path | None, typer.Option("--out", help="Write per-image evidence (JSON Lines) here.")
    ] = None,
) -> None:
    """Score images with GenEval's rules using the simulator's pixel-level inspector (the
    official scorer of ``evoharness_app.official``, which the main job's official figures use).

    Images are named ``<task_id with / replaced by __>__<seed>.png``. Prints per-tag accuracy
    and the overall score (mean over the six GenEval tags) as JSON. Every task is expected to
    have an image for each seed found in the folder; a missing image counts as a failure and
    ``missing_images`` says how many were missing.
    """
    from rich.console import Console
    from rich.progress import Progress

    from evoharness.tasks.geneval_score import geneval_scores
    from evoharness.tasks.io import TaskFileError, load_tasks, refuse_output_over_input
    from evoharness_app.official import exact_inspector, verify_images

    if not images.is_dir():
        raise _input_error(f"--images {images}: not a folder")
    _check_output(out, "--out")
    try:
        refuse_output_over_input([tasks], [out] if out is not None else [])
    except TaskFileError as exc:
        raise _input_error(f"--out {exc}") from None
    try:
        task_list = load_tasks(tasks)
    except (OSError, TaskFileError, ValueError) as exc:
        raise _input_error(f"--tasks {tasks}: {exc}") from exc
    if not task_list:
        raise _input_error(f"--tasks {tasks}: no tasks (empty file?); nothing to score")
    by_stem = {t.task_id.replace("/", "__"): t for t in task_list}
    files = sorted(images.glob("*.png"))
    work = []
    for f in files:
        stem, _, suffix = f.stem.rpartition("__")
        if stem in by_stem:
            work.append((f, by_stem[stem], suffix))
    if not work:
        raise _input_error(
            f"--images {images}: no image named <task_id with / → __>__<seed>.png for "
            f"any task in {tasks}"
        )
    # the official scorer, as the main job's official figures use it (evoharness_app.official)
    with Progress(transient=True, console=Console(stderr=True)) as bar:
        t = bar.add_task("inspecting", total=len(work))
        try:
            by_file = verify_images(
                exact_inspector(),
                {f: (f.read_bytes, task) for f, task, _ in work},
                progress=lambda k: bar.advance(t, k),
            )
        except ValueError as exc:
            raise _input_error(str(exc)) from exc
    evidence = {}
    lines = []
    for f, task, suffix in work:
        ev = by_file[f]
        evidence[f"{task.task_id}@{suffix}"] = ev
        lines.append(
            json.dumps(
                {
                    "image": f.name,
                    "task_id": task.task_id,
                    "seed": suffix,
                    "correct": all(e.passed for e in ev),
                    "evidence": [e.model_dump(mode="json") for e in ev],
                }
            )
        )
    scores = geneval_scores(task_list, evidence)
    if out is not None:
        _atomic_write(out, ("\n".join(lines) + "\n").encode("utf-8"))
    typer.echo(json.dumps(scores, indent=2))
    if scores["missing_images"]:
        typer.echo(
            f"warning: {scores['missing_images']} image(s) missing "
            f"({len(scores['missing'])} task(s) without any image); each counts as a failure",
            err=True,
        )


def register(app: typer.Typer) -> None:
    """Add ``eval geneval`` and ``sim render`` to the CLI."""
    eval_app = typer.Typer(help="Evaluate generated images (GenEval rules).", no_args_is_help=True)
    eval_app.command("geneval")(eval_geneval)
    sim_app = typer.Typer(
        help="The embedded CPU world: a behavioural text-to-image simulator.",
        no_args_is_help=True,
    )
    sim_app.command("render")(render)
    app.add_typer(eval_app, name="eval")
    app.add_typer(sim_app, name="sim")
