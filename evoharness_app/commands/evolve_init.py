"""``evolve init``: write the parameters of one's own run (``workflows.params.EvolutionParams``)
from a split folder and a harness, checked before anything is written; registered on
``evolve_app`` by ``evoharness_app.commands.evolve``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from evoharness.harness.io import HarnessError, load_dir
from evoharness.tasks.io import load_tasks
from evoharness.tasks.models import Split
from evoharness.tasks.splits import EVOLUTION_SPLITS, TEST_SPLIT
from evoharness.trace.models import DEFAULT_MAX_ROUNDS, DEFAULT_SEEDS
from evoharness_app.commands.evolve_params import run_id_option
from evoharness_app.errors import InputError


def s3_store_from_env() -> Any:
    """The artifact store of ``EVOHARNESS_S3__*`` (``eval "$(evoharness env)"`` sets them)."""
    from services.common.settings import ServiceSettings, load_settings
    from services.storage.s3 import S3ArtifactStore

    return S3ArtifactStore.from_settings(load_settings(ServiceSettings).s3)


def init(
    splits: Annotated[
        Path,
        typer.Option("--splits", help="Split folder from `evoharness prepare-splits --out`."),
    ],
    harness: Annotated[
        Path, typer.Option("--harness", help="Starting harness (directory or JSON).")
    ] = Path("harnesses/baseline"),
    out: Annotated[
        Path, typer.Option("--out", help="Parameters file to write (.json, or .yaml/.yml).")
    ] = Path("params.json"),
    run_id: Annotated[
        str,
        typer.Option(
            "--run-id",
            callback=run_id_option,
            help="Run id (default: `<split folder>-<UTC time>`).",
        ),
    ] = "",
    seeds: Annotated[int, typer.Option("--seeds", min=1, help="K matched seeds.")] = len(
        DEFAULT_SEEDS
    ),
    rounds: Annotated[int, typer.Option("--rounds", min=1)] = DEFAULT_MAX_ROUNDS,
    backends: Annotated[
        str,
        typer.Option(
            "--backends",
            help="grpc: the generation/verification/proposer services the worker is "
            "configured with (the local stack, a cluster); sim: the embedded simulator "
            "inside the worker.",
        ),
    ] = "grpc",
    upload: Annotated[
        bool,
        typer.Option(
            "--upload",
            help="Upload harness and splits to S3 (EVOHARNESS_S3__* settings, e.g. from "
            "`evoharness env`) and point at s3:// URIs, for a worker that cannot read "
            "this machine's files.",
        ),
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing --out.")] = False,
) -> None:
    """Write the parameters of your own run (``workflows.params.EvolutionParams``) for
    ``evolve start`` or ``temporal workflow start --input-file``: your harness and splits as
    ``file://`` URIs of this machine, or uploaded to S3 with ``--upload``. Everything is
    checked (the harness loads, the split files parse and match the sha256 their
    ``manifest.json`` records) before anything is written."""
    import time

    from evoharness.canonical import canonical_json
    from evoharness.tasks.io import (
        TaskFileError,
        atomic_write_bytes,
        refuse_missing_parent,
        refuse_output_over_input,
    )
    from evoharness.tasks.split_manifest import MANIFEST, check_split_hashes
    from evoharness.tasks.splits import SplitError

    if backends not in ("grpc", "sim"):
        raise typer.BadParameter("expected grpc or sim", param_hint="--backends")
    if out.exists() and not force:
        raise InputError(f"--out {out}: exists (pass --force to replace it)")
    if out.suffix not in (".json", ".yaml", ".yml"):
        raise typer.BadParameter("must end in .json, .yaml or .yml", param_hint="--out")
    try:
        refuse_missing_parent(out, "--out")
    except TaskFileError as exc:
        raise InputError(str(exc)) from None
    try:
        h = load_dir(harness)
    except HarnessError as exc:
        raise InputError(f"--harness {exc}") from None
    if not splits.is_dir():
        raise InputError(f"--splits {splits}: not a folder (create it with prepare-splits)")
    files: dict[str, Path] = {}
    counts: dict[str, int] = {}
    for name in EVOLUTION_SPLITS:
        f = splits / f"{name}.jsonl"
        if not f.is_file():
            if name == Split.target:
                raise InputError(f"--splits {splits}: no target.jsonl (run prepare-splits)")
            continue
        try:
            n = len(load_tasks(f))
        except (OSError, TaskFileError) as exc:
            raise InputError(f"--splits {exc}") from None
        if name == Split.target and n == 0:
            raise InputError(f"{f}: no tasks")
        counts[name] = n
        files[name] = f
    try:
        # once the inputs are known to be a harness and a split folder (their errors come
        # first): a params file inside the split folder or the harness would replace or add
        # to the run's own inputs (a harness directory refuses unknown files)
        refuse_output_over_input([harness, splits], [out])
    except TaskFileError as exc:
        raise InputError(f"--out {exc}") from None
    if (splits / f"{TEST_SPLIT}.jsonl").is_file():
        files[TEST_SPLIT] = splits / f"{TEST_SPLIT}.jsonl"  # scored-on only: never evolved on
    if (splits / MANIFEST).is_file():
        try:  # a split edited after prepare-splits is not the split its manifest describes
            check_split_hashes(splits, list(files))
        except SplitError as exc:
            raise InputError(
                f"--splits {exc} (prepare the splits again, or `evoharness verify-splits "
                f"{splits}` to see what changed)"
            ) from None
    else:
        typer.echo(
            f"note: {splits} has no {MANIFEST}: the split files are not checked against "
            "their hashes (prepare-splits writes one)",
            err=True,
        )
    rid = run_id or f"{splits.resolve().name}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"
    if upload:
        from services.storage.s3 import ArtifactStoreError

        try:
            store = s3_store_from_env()
            store.ensure_bucket()
            hkey = f"runs/{rid}/inputs/harness.json"
            store.put(hkey, canonical_json(h.to_document()), "application/json")
            harness_uri = f"s3://{store.bucket}/{hkey}"
            split_uris = {}
            for name, f in files.items():
                key = f"runs/{rid}/inputs/{name}.jsonl"
                store.put(key, f.read_bytes(), "application/jsonl")
                split_uris[name] = f"s3://{store.bucket}/{key}"
        except (ArtifactStoreError, ValueError) as exc:
            raise InputError(f"--upload: {exc}") from None
    else:
        harness_uri = f"file://{harness.resolve()}"
        split_uris = {name: f"file://{f.resolve()}" for name, f in files.items()}
    doc: dict[str, Any] = {
        "run_id": rid,
        "harness": {"uri": harness_uri},
        "splits": {name: {"uri": uri} for name, uri in split_uris.items() if name != TEST_SPLIT},
        "scored_on": [{"uri": split_uris[TEST_SPLIT]}] if TEST_SPLIT in split_uris else [],
        "seeds": list(range(seeds)),
        "max_rounds": rounds,
        "backends": {
            "generator": backends,
            "verifier": backends,
            "proposer": "grpc" if backends == "grpc" else "rule",
        },
    }
    from pydantic import ValidationError

    from workflows.params import EvolutionParams

    try:
        EvolutionParams.model_validate(doc)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(f"{'.'.join(map(str, err['loc']))}: {err['msg']}") from None
    text = (
        json.dumps(doc, indent=2) + "\n"
        if out.suffix == ".json"
        else yaml.safe_dump(doc, sort_keys=False)
    )
    atomic_write_bytes(out, text.encode("utf-8"))
    warn_few_test_units(counts)
    where = "S3" if upload else "this machine's files (file://)"
    typer.echo(f"wrote {out}: run {rid}, harness and {len(files)} split(s) from {where}")
    typer.echo(f"next: evoharness evolve start {out}   # then: evoharness evolve status {rid}")


def warn_few_test_units(counts: dict[str, int]) -> None:
    """Say on stderr when the splits are too small for the gate to accept a patch: its test
    units are the tasks of ``GateConfig.test_splits`` (target + held-out by default), and with
    fewer than ``min_changed_tasks`` of them no patch can be accepted; with fewer than twice
    that, more than half of them must change."""
    from evoharness.trace.gates import GateConfig, min_changed_tasks

    cfg = GateConfig()
    n = sum(counts.get(s, 0) for s in cfg.test_splits)
    m = min_changed_tasks(cfg.alpha)
    if n >= 2 * m:
        return
    units = " + ".join(f"{counts.get(s, 0)} {s}" for s in cfg.test_splits)
    why = (
        f"no patch can be accepted: the gate's sign-flip test needs at least {m} of them to "
        f"change (p < alpha={cfg.alpha})"
        if n < m
        else f"a patch is accepted only when at least {m} of them change (with exactly {m}, "
        f"every one for the better: sign-flip test, p < alpha={cfg.alpha}; Holm's correction "
        "over several candidates asks for more)"
    )
    typer.echo(
        f"note: the gate's test units are {n} task(s) ({units}); {why}. Expect No-Patch "
        f"rounds; prepare-splits --sizes 24,8,8 or more gives the test room.",
        err=True,
    )
