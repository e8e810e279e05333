"""CLI verbs ``evolve start|status|stop|approve`` (TRACE evolution on Temporal).

``evolve start PARAMS`` starts ``EvolutionWorkflow`` with the parameters in a JSON or YAML
file (``workflows.params.EvolutionParams``); ``--dry-run-budget`` prints the budget estimate
(``evoharness.trace.budget.estimate_budget``) and calls nothing. The Temporal client lives in
``workflows`` and is imported only when a verb needs it, so the core keeps no dependency on
the workflow layer. Equivalent Temporal CLI::

    temporal workflow start --type EvolutionWorkflow --task-queue evoharness \\
        --workflow-id evolve-<run_id> --input-file params.json
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlparse

import typer
import yaml

from evoharness.harness.io import HarnessError, load_dir, loads
from evoharness.harness.schema import BestOfNStage, Harness, VerifyAndRepairStage
from evoharness.tasks.io import load_tasks
from evoharness.trace.budget import BudgetConfig, estimate_budget, load_prices

evolve_app = typer.Typer(
    name="evolve",
    help="Run TRACE evolution as a durable Temporal workflow.",
    no_args_is_help=True,
)

Address = Annotated[
    str, typer.Option("--address", envvar="TEMPORAL_ADDRESS", help="Temporal frontend host:port.")
]
Namespace = Annotated[str, typer.Option("--namespace", help="Temporal namespace.")]


def _input_error(msg: str) -> Exception:
    from evoharness.cli import InputError

    return InputError(msg)


def read_params_doc(path: Path) -> dict[str, Any]:
    """The parameters document in ``path`` (JSON or YAML). Raises ``InputError`` naming the
    file for a missing file or invalid syntax."""
    if not path.is_file():
        raise _input_error(f"{path}: no such file")
    text = path.read_text(encoding="utf-8")
    try:
        doc = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise _input_error(
            f"{path}: not valid {path.suffix.lstrip('.') or 'YAML'}: {exc}"
        ) from None
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
    ref = doc.get("harness") or {}
    h: Harness | None = None
    try:
        if ref.get("document") is not None:
            h = Harness.model_validate(ref["document"])
        elif str(ref.get("uri", "")).startswith("file://"):
            p = Path(urlparse(ref["uri"]).path)
            h = load_dir(p) if p.is_dir() else loads(p.read_bytes(), str(p))
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
        for name in ("target", "heldout", "preservation")
    }
    if not n["target"]:
        raise _input_error(f"{where}: splits.target is empty")
    backends = doc.get("backends") or {}
    return BudgetConfig(
        n_target=int(n["target"] or 0),
        n_heldout=int(n["heldout"] or 0),
        n_preservation=int(n["preservation"] or 0),
        seeds=len(doc.get("seeds") or [0, 1, 2, 3]),
        rounds=int(doc.get("max_rounds", 3)),
        max_clusters=int(doc.get("max_clusters", 3)),
        candidates_per_cluster=int(doc.get("candidates_per_cluster", 2)),
        generator_calls_per_execution=_calls_per_execution(doc, where),
        proposer="llm" if backends.get("proposer", "rule") not in ("rule", "hostile") else "rule",
    )


@evolve_app.command("start")
def start(
    params: Annotated[Path, typer.Argument(help="EvolutionParams as JSON or YAML.")],
    dry_run_budget: Annotated[
        bool, typer.Option("--dry-run-budget", help="Print the budget estimate; call nothing.")
    ] = False,
    address: Address = "127.0.0.1:7233",
    namespace: Namespace = "default",
    task_queue: Annotated[str, typer.Option("--task-queue")] = "evoharness",
    n_target: Annotated[
        int | None, typer.Option("--n-target", help="Dry run: target size.")
    ] = None,
    n_heldout: Annotated[int | None, typer.Option("--n-heldout")] = None,
    n_preservation: Annotated[int | None, typer.Option("--n-preservation")] = None,
    prices: Annotated[Path | None, typer.Option("--prices", help="Price table YAML.")] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Wait for the result.")] = False,
) -> None:
    """Start an evolution run (workflow id ``evolve-<run_id>``), or estimate its budget."""
    doc = read_params_doc(params)
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
    from pydantic import ValidationError

    from workflows.params import EvolutionParams

    try:
        p = EvolutionParams.model_validate(doc)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise _input_error(f"{params}: {'.'.join(map(str, err['loc']))}: {err['msg']}") from None

    async def go() -> None:
        from workflows import client as wc
        from workflows.worker import connect

        c = await connect(address, namespace)
        h = await wc.start(c, p, task_queue)
        typer.echo(f"started {h.id} (run {h.result_run_id}) on {task_queue}")
        if wait:
            res = await h.result()
            typer.echo(res.model_dump_json(indent=2, exclude={"best_harness"}))

    asyncio.run(go())


@evolve_app.command("status")
def status(
    run_id: Annotated[str, typer.Argument(help="The run id.")],
    address: Address = "127.0.0.1:7233",
    namespace: Namespace = "default",
) -> None:
    """Print the run's progress (round, phase, done/total, scores, spend) as JSON."""

    async def go() -> None:
        from workflows import client as wc
        from workflows.worker import connect

        p = await wc.progress(await connect(address, namespace), run_id)
        typer.echo(p.model_dump_json(indent=2))

    asyncio.run(go())


@evolve_app.command("stop")
def stop(
    run_id: Annotated[str, typer.Argument(help="The run id.")],
    reason: Annotated[str, typer.Option("--reason")] = "stop requested",
    address: Address = "127.0.0.1:7233",
    namespace: Namespace = "default",
) -> None:
    """Signal ``stop``: the current phase finishes, then the run ends."""

    async def go() -> None:
        from workflows import client as wc
        from workflows.worker import connect

        await wc.stop(await connect(address, namespace), run_id, reason)
        typer.echo(f"stop sent to evolve-{run_id}")

    asyncio.run(go())


@evolve_app.command("approve")
def approve(
    run_id: Annotated[str, typer.Argument(help="The run id.")],
    approver: Annotated[str, typer.Option("--approver", help="Who approves.")],
    harness_id: Annotated[str | None, typer.Option("--harness-id")] = None,
    note: Annotated[str, typer.Option("--note")] = "",
    address: Address = "127.0.0.1:7233",
    namespace: Namespace = "default",
) -> None:
    """Approve the promotion the run waits for (update ``approve_promotion``)."""

    async def go() -> None:
        from workflows import client as wc
        from workflows.params import Approval
        from workflows.worker import connect

        hid = await wc.approve(
            await connect(address, namespace),
            run_id,
            Approval(approver=approver, harness_id=harness_id, note=note),
        )
        typer.echo(f"approved promotion of {hid}")

    asyncio.run(go())


def register(app: typer.Typer) -> None:
    """Add the ``evolve`` verbs to the CLI."""
    app.add_typer(evolve_app)
