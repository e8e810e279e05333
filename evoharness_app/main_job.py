"""The main job (``make evolve`` → ``evoharness evolve main``): evolve a harness on GenEval
prompts end to end, through the real platform on loopback.

1. build tasks from GenEval's ``evaluation_metadata.jsonl`` plus synthetic tasks for the
   failure modes GenEval lacks (quoted text, negation, long prompts), and prepare disjoint,
   family-stratified target / held-out / preservation / test splits (default 60/20/20/20;
   ``evoharness.tasks.split_prepare.build_run_splits``) and the transfer set, in a staging
   folder moved into ``runs/<run_id>`` once the run id is known to be new; the test split is
   never given to the workflow, so no gate sees it. Malformed data is one line naming file
   and line before anything starts;
2. bring the local stack up (``services.stack``) unless one is running;
3. register ``harnesses/baseline`` in the registry and start ``EvolutionWorkflow`` through
   the Temporal client, with the generation and verification services (embedded simulator;
   the verification service's configured verifier, by default ``sim-detector``, which errs
   like a real detector + VLM) and the proposer service (as ``configs/proposer.yaml`` says:
   rule-based by default; with ``llm="local"`` the local model of ``services.llm_local``);
4. show live progress from the workflow's ``progress`` query;
5. evaluate baseline and final harness on every split, the untouched test split included
   (its before/after are the run's final figures; same tasks, same seeds; almost all
   evolution-split executions come from the content-addressed cache) with the internal
   verifier, and score
   the same images officially with the exact inspector (``SimInspector``, GenEval's rules);
   evaluate both on the transfer set too (``evoharness_app.transfer``: T2I-CompBench
   training prompts and PartiPrompts, families no evolution split came from) to say how
   much of the gain carries over;
   promote the result to channel ``dev`` only when it is better than what ``dev`` serves
   now on the same tasks and seeds (``evoharness_app.promotion``; ``--force-promote``
   overrides), write ``runs/<run_id>/report.html`` (internal and
   official scores side by side) and print the summary.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evoharness.harness import Harness, diff, harness_id, load_dir
from evoharness.tasks.models import Task
from evoharness.tasks.splits import EVOLUTION_SPLITS, SPLITS
from evoharness.trace.models import DEFAULT_MAX_ROUNDS, DEFAULT_SEEDS
from evoharness_app.evaluation import (
    FINAL,
    Evaluation,
    SplitScore,
    evaluate_harness,
    score_officially,
    score_split,
)
from evoharness_app.job_defaults import MAIN_JOB_SIZES, MAIN_JOB_SYNTHETIC, MAIN_JOB_TRANSFER
from evoharness_app.job_report import ReportInputs, patch_rows, write_report
from evoharness_app.summary import (
    MainJobResult,
    describe_proposer,
    nothing_checkable_fields,
    print_summary,
    registry_description,
    summary_doc,
)
from evoharness_app.transfer import TRANSFER, TransferSet, build_transfer_set, transfer_scores
from services.tracking import Tracker

#: Re-exported: the evolve command and the tests name them from here.
__all__ = [
    "FINAL",
    "ROOT",
    "SPLITS",
    "MainJob",
    "MainJobInputError",
    "MainJobOptions",
    "MainJobResult",
    "build_splits",
    "check_inputs",
    "default_shared_dir",
    "print_summary",
    "refuse_used_run_dir",
    "run_id_started",
]

ROOT = Path(__file__).resolve().parents[1]


def default_shared_dir() -> Path:
    """The benchmark data folder: ``$EVOHARNESS_SHARED``, else ``shared`` beside the clone
    (``ROOT.parent / "shared"``), wherever the command runs from."""
    return Path(os.environ.get("EVOHARNESS_SHARED", ROOT.parent / "shared"))


@dataclass
class MainJobOptions:
    """Options of the main job. ``sizes``: (target, held-out, preservation, test) split
    sizes (three: no test split);
    ``synthetic_count``: synthetic tasks added to the GenEval tasks; ``transfer``: tasks of
    the transfer set (``evoharness_app.transfer``; 0: none); ``seeds``: the K matched seeds;
    ``keep_stack``: leave a stack this job started running afterwards;
    ``sim_profile``: the embedded world's generator profile the stack serves (a shipped name
    such as ``flux-like`` or a YAML path; "" = ``configs/generation.yaml``'s, ``sdxl-like``); ``llm``: ``"local"`` starts the stack with the local model behind the
    LLM roles (``services.llm_local``)."""

    shared_dir: Path = field(default_factory=default_shared_dir)
    runs_dir: Path = Path("runs")
    stack_dir: Path = Path("runs/stack")
    run_id: str | None = None
    sizes: tuple[int, ...] = MAIN_JOB_SIZES
    synthetic_count: int = MAIN_JOB_SYNTHETIC
    transfer: int = MAIN_JOB_TRANSFER
    seeds: tuple[int, ...] = DEFAULT_SEEDS
    max_rounds: int = DEFAULT_MAX_ROUNDS
    split_seed: int = 0
    baseline: Path = ROOT / "harnesses" / "baseline"
    channel: str = "dev"
    keep_stack: bool = False
    llm: str | None = None
    eval_concurrency: int = 4
    pairs_in_report: int = 12
    sim_profile: str = ""
    #: move ``channel`` to the result even when it is not better than what it serves
    force_promote: bool = False
    #: experiment tracking (``EvolutionParams.tracking``, ``tracking_uri``; issue 33)
    tracking: Tracker | None = None
    tracking_uri: str | None = None
    #: the run's budgets by their ``EvolutionParams`` names (``budget_usd``, ...; issue 33)
    budgets: dict[str, Any] = field(default_factory=dict)
    #: ``protocol`` and ``search`` by their ``EvolutionParams`` names (issue 31; empty:
    #: TRACE); a search protocol proposes with the mutation proposer (``rule``)
    search: dict[str, Any] = field(default_factory=dict)


class MainJobInputError(ValueError):
    """The main job's input is unusable (the message names what and where); raised by
    ``check_inputs`` before anything is started or written."""


def check_inputs(opts: MainJobOptions) -> None:
    """Check what the job reads before it starts the stack or writes the run folder: the
    shared data folder (``opts.shared_dir``, ``$EVOHARNESS_SHARED``) and its GenEval
    metadata (``data/geneval/evaluation_metadata.jsonl``, as ``build_splits`` reads it), the
    baseline harness folder (``load_dir``), the split sizes (``check_sizes``) and, with
    ``opts.transfer``, the transfer set's data (``transfer_inputs``). Raises
    ``MainJobInputError`` with one line naming the first problem."""
    from evoharness.harness.io import HarnessError
    from evoharness.tasks.splits import SplitError, check_sizes

    shared = opts.shared_dir
    if not shared.is_dir():
        raise MainJobInputError(
            f"shared data folder {shared} does not exist (set EVOHARNESS_SHARED to the folder "
            "holding data/geneval/evaluation_metadata.jsonl)"
        )
    meta = shared / "data" / "geneval" / "evaluation_metadata.jsonl"
    if not meta.is_file() or not os.access(meta, os.R_OK):
        raise MainJobInputError(
            f"{meta}: GenEval metadata not found or not readable (EVOHARNESS_SHARED={shared})"
        )
    from evoharness_app.transfer import TransferError, transfer_inputs

    try:
        check_sizes(opts.sizes, "--sizes")
        load_dir(opts.baseline)
        if opts.transfer:
            transfer_inputs(shared)
    except (SplitError, HarnessError, TransferError) as exc:
        raise MainJobInputError(str(exc).strip().splitlines()[0]) from None


#: What marks a run folder as holding a run: a job never writes over any of them.
RUN_MARKERS = ("params.json", "summary.json", "splits", "tasks")


def refuse_used_run_dir(run_dir: Path) -> None:
    """Raise ``MainJobInputError`` naming ``run_dir`` when it already holds a run (one of
    ``RUN_MARKERS``): a run id is used once, and a finished run's parameters, splits and
    summary are never rewritten."""
    found = [m for m in RUN_MARKERS if (run_dir / m).exists()]
    if found:
        raise MainJobInputError(
            f"--run-id {run_dir.name}: {run_dir} already holds a run ({', '.join(found)}); "
            "give another run id"
        )


def refuse_started_on_temporal(temporal: str, run_id: str) -> None:
    """Raise ``MainJobInputError`` when run ``run_id``'s workflow exists on the Temporal
    server at ``temporal`` (running or closed: ``workflows.client.start`` starts a run id
    once); checked before the job writes the run's files or S3 keys. Temporal answering
    NOT_FOUND means the run id is free; any other RPC error propagates."""
    import asyncio

    from temporalio.service import RPCError, RPCStatusCode

    from workflows import client as wf
    from workflows.worker import connect

    async def started() -> bool:
        try:
            await wf.handle(await connect(temporal), run_id).describe()
        except RPCError as exc:
            if exc.status is RPCStatusCode.NOT_FOUND:
                return False
            raise
        return True

    if asyncio.run(started()):
        raise run_id_started(run_id)


def run_id_started(run_id: str) -> MainJobInputError:
    """The error for a run id whose workflow the stack's Temporal has already seen (found by
    ``refuse_started_on_temporal``, or by Temporal itself when the start races it)."""
    from workflows import client as wf

    return MainJobInputError(
        f"--run-id {run_id}: this run was already started on the stack's Temporal "
        f"(workflow {wf.workflow_id(run_id)}); give another run id"
    )


def _new_run_id() -> str:
    return "geneval-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S")


def build_splits(opts: MainJobOptions, run_dir: Path) -> dict[str, list[Task]]:
    """The run's splits in ``run_dir/splits`` (``evoharness.tasks.split_prepare.build_run_splits``):
    the names of ``SPLITS`` in order, without the test split when ``opts.sizes`` has three
    numbers.

    Raises ``evoharness.tasks.builders.BuildError`` / ``SplitError`` with file and line when
    the input data is malformed (nothing is written then)."""
    from evoharness.tasks.split_prepare import build_run_splits

    out = build_run_splits(
        opts.shared_dir, run_dir, opts.sizes, opts.synthetic_count, seed=opts.split_seed
    )
    return {s: out[s] for s in SPLITS if s in out}


@dataclass
class Staged:
    """A run's tasks and splits built before the stack starts, in ``folder`` (``tasks/``,
    ``splits/``; the manifest's paths are relative, so they move together)."""

    folder: Path
    splits: dict[str, list[Task]]
    transfer: TransferSet | None

    def move_into(self, run_dir: Path) -> None:
        """Move ``tasks/`` and ``splits/`` into ``run_dir`` (created if needed; it holds
        neither: ``refuse_used_run_dir``)."""
        run_dir.mkdir(parents=True, exist_ok=True)
        for child in sorted(self.folder.iterdir()):
            child.replace(run_dir / child.name)


class MainJob:
    """Runs the main job; ``say`` receives one-line status messages."""

    def __init__(self, opts: MainJobOptions, console: Any = None) -> None:
        from rich.console import Console

        self.opts = opts
        # piped output (tee, CI logs) gets a wide console instead of rich's 80 columns
        self.console = console or Console(width=None if Console().is_terminal else 160)
        self.timings: dict[str, float] = {}
        #: the run's id once ``run`` has chosen it (``opts.run_id`` or a generated one)
        self.run_id: str | None = opts.run_id

    def progress_bar(self) -> Any:
        """Progress on this console: rich's live bar (description, bar, done/total, elapsed)
        on a terminal, plain lines every few percent or 30 s elsewhere (a log file, a pipe,
        CI: ``evoharness_app.progress``)."""
        from rich.progress import BarColumn, MofNCompleteColumn, TimeElapsedColumn

        from evoharness_app.progress import progress_for

        return progress_for(
            self.console,
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
        )

    def _t(self, name: str, t0: float) -> None:
        self.timings[name] = round(time.monotonic() - t0, 2)

    # ------------------------------------------------------------------------------ stack
    def ensure_stack(self) -> tuple[Any, bool]:
        """The running stack's state, starting one if needed; (state, started_here)."""
        from services import stack
        from services.common.process import children_die_with_parent

        state = stack.read_state(self.opts.stack_dir)
        if state is not None and len(stack.running_components(state)) == len(state.components):
            if self.opts.llm and "llm" not in state.components:
                raise stack.StackError(
                    f"the stack running in {state.run_dir} has no local model; "
                    "stop it (`evoharness down`) to start one with --llm local"
                )
            want = self.opts.sim_profile
            if want and want != state.sim_profile:
                raise stack.StackError(
                    f"--profile {want}: the running stack in {state.run_dir} serves "
                    f"{state.sim_profile or 'the profile of configs/generation.yaml'}; "
                    "stop it (`evoharness down`) or run without --profile"
                )
            self.console.print(f"using the running stack in {state.run_dir}")
            return state, False
        if state is not None:
            stack.down(self.opts.stack_dir)
        self.console.print("starting the local stack (Temporal, S3, services, worker)…")
        # the job's own stack dies with the job, even a SIGKILLed one; --keep-stack keeps it
        with children_die_with_parent(not self.opts.keep_stack):
            state = stack.up(
                self.opts.stack_dir,
                llm=self.opts.llm,
                sim_profile=self.opts.sim_profile,
                on_started=lambda c: self.console.print(
                    f"  [green]✓[/] {c.name:<13} {c.address or '-':<22} pid {c.pid}"
                ),
            )
        return state, True

    def worker_settings(self, state: Any) -> Any:
        """``WorkerSettings`` pointing at the stack (``stores.stack_worker_settings``)."""
        from evoharness_app.stores import stack_worker_settings

        return stack_worker_settings(state)

    # ------------------------------------------------------------------------- evaluation
    def evaluate(
        self, ports: Any, harness: Harness, splits: dict[str, list[Task]], bar: Any, what: str
    ) -> dict[str, dict[tuple[str, int], Any]]:
        """Run ``harness`` on every (task, seed) of every split through the services
        (``evaluate_harness``), counted on progress bar ``bar`` as ``what``."""
        n = sum(len(v) for v in splits.values()) * len(self.opts.seeds)
        t = bar.add_task(what, total=n)
        return evaluate_harness(
            ports,
            harness,
            splits,
            self.opts.seeds,
            concurrency=self.opts.eval_concurrency,
            progress=lambda k: bar.advance(t, k),
        )

    def evaluate_before_after(
        self,
        ports: Any,
        store: Any,
        baseline: Harness,
        best: Harness,
        splits: dict[str, list[Task]],
    ) -> Evaluation:
        """``baseline`` and ``best`` on every split through the services, their images scored
        again by the official scorer (``evoharness_app.official``: the exact inspector,
        GenEval's rules; cached in ``store``), and each split scored (``score_split``)."""
        from evoharness_app.official import OFFICIAL_RULES, exact_inspector
        from workflows.backends import CachingVerifier

        with self.progress_bar() as bar:
            before = self.evaluate(ports, baseline, splits, bar, "evaluate baseline")
            after = self.evaluate(ports, best, splits, bar, "evaluate evolved")
            # official: the same images, the exact inspector, GenEval's rules
            scorer = CachingVerifier(exact_inspector(), store)
            n = sum(len(v) for v in splits.values()) * len(self.opts.seeds)
            to = bar.add_task("official scoring", total=2 * n)
            off = {
                role: score_officially(
                    store,
                    splits,
                    runs,
                    scorer,
                    concurrency=self.opts.eval_concurrency,
                    progress=lambda k: bar.advance(to, k),
                )
                for role, runs in (("before", before), ("after", after))
            }
        runs = {"before": before, "after": after}
        return Evaluation(
            splits,
            before,
            after,
            {role: {s: score_split(splits[s], r[s]) for s in splits} for role, r in runs.items()},
            off,
            {role: {s: score_split(splits[s], r[s]) for s in splits} for role, r in off.items()},
            ports.verifier.verifier_id,
            f"{scorer.verifier_id} {OFFICIAL_RULES}",
        )

    # ------------------------------------------------------------------------------- run
    def run(self) -> MainJobResult:
        """Run the whole job; returns its result. Raises ``MainJobInputError`` (nothing
        started or written) for unusable input (``check_inputs``) or a run folder that
        already holds a run (``refuse_used_run_dir``), and on infrastructure
        failure (the stack started here is stopped first)."""
        t_all = time.monotonic()
        opts = self.opts
        check_inputs(opts)  # before anything is started or written
        from services import stack

        with stack.job_lock(opts.stack_dir):  # one job at a time on a stack folder
            run_id = self.run_id = opts.run_id or _new_run_id()
            run_dir = (opts.runs_dir / run_id).resolve()
            refuse_used_run_dir(run_dir)  # before the stack starts or anything is written
            # the tasks and splits are built before the stack starts (malformed data is one
            # line, nothing started), in a staging folder beside the run folder ('.' never
            # starts a run id) that moves into it once Temporal has not seen the run id
            run_dir.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=f".{run_id}-", dir=run_dir.parent))
            try:
                t0 = time.monotonic()
                splits, tset = self.stage_tasks(staging)
                self._t("tasks_and_splits", t0)
                staged = Staged(staging, splits, tset)
                return self._run_on_stack(run_id, run_dir, staged, t_all)
            finally:
                shutil.rmtree(staging, ignore_errors=True)

    def stage_tasks(self, staging: Path) -> tuple[dict[str, list[Task]], TransferSet | None]:
        """The run's splits (``build_splits``) and transfer set (``transfer_set``) built in
        ``staging`` (``tasks/``, ``splits/``). Raises ``MainJobInputError`` with the first
        line of a ``BuildError`` / ``SplitError`` / ``TransferError`` (file and line of
        malformed data)."""
        from evoharness.tasks.io import TaskFileError
        from evoharness.tasks.splits import SplitError
        from evoharness_app.transfer import TransferError

        try:
            splits = build_splits(self.opts, staging)
            return splits, self.transfer_set(splits, staging)
        except (TaskFileError, SplitError, TransferError) as exc:  # BuildError: a TaskFileError
            raise MainJobInputError(str(exc).strip().splitlines()[0]) from None

    def _run_on_stack(
        self, run_id: str, run_dir: Path, staged: Staged, t_all: float
    ) -> MainJobResult:
        """``_run`` on the stack (``ensure_stack``), stopping a stack started here after."""
        opts = self.opts
        started_at = datetime.now(UTC)
        t0 = time.monotonic()
        state, started_here = self.ensure_stack()
        self._t("stack_up", t0)
        try:
            return self._run(run_id, run_dir, staged, state, started_at, t_all)
        finally:
            if started_here and not opts.keep_stack:
                from services import stack

                stack.down(opts.stack_dir)
                self.console.print("stack stopped (use --keep-stack to leave it running)")

    def transfer_set(self, splits: dict[str, list[Task]], run_dir: Path) -> TransferSet | None:
        """The run's transfer set (``build_transfer_set``: ``opts.transfer`` tasks drawn with
        ``opts.split_seed``, disjoint by dataset family from ``splits``), also written to
        ``run_dir/splits/transfer.jsonl``; None when ``opts.transfer`` is 0."""
        from evoharness.tasks.io import write_jsonl

        if not self.opts.transfer:
            return None
        tset = build_transfer_set(
            self.opts.shared_dir, self.opts.transfer, self.opts.split_seed, splits
        )
        write_jsonl(tset.tasks, run_dir / "splits" / f"{TRANSFER}.jsonl")
        return tset

    def _run(
        self,
        run_id: str,
        run_dir: Path,
        staged: Staged,
        state: Any,
        started_at: datetime,
        t_all: float,
    ) -> MainJobResult:
        from evoharness_app.registration import BestRegistration, LineageError, register_best
        from harness_registry import Lineage
        from services.registry.client import RegistryClient
        from services.registry.registrar import evolved_description, evolved_name
        from services.storage.s3 import S3ArtifactStore
        from workflows.backends import TracePorts
        from workflows.params import Backends, EvolutionParams, HarnessRef, Splits, TaskSource

        opts = self.opts
        # a run id the stack's Temporal has seen: refused before any file or S3 key is written
        refuse_started_on_temporal(state.address("temporal"), run_id)
        settings = self.worker_settings(state)
        store = S3ArtifactStore.from_settings(settings.s3)
        store.ensure_bucket()

        staged.move_into(run_dir)
        splits, tset = staged.splits, staged.transfer
        split_uris = {}
        for s in splits:
            key = f"runs/{run_id}/splits/{s}.jsonl"
            store.put(key, (run_dir / "splits" / f"{s}.jsonl").read_bytes(), "application/jsonl")
            split_uris[s] = f"s3://{settings.s3.bucket}/{key}"
        counts = {**{s: len(splits[s]) for s in splits}, TRANSFER: len(tset.tasks) if tset else 0}
        self.console.print(
            "tasks: "
            + ", ".join(f"{s} {n}" for s, n in counts.items() if n or s != TRANSFER)
            + f" × {len(opts.seeds)} seeds"
        )

        baseline = load_dir(opts.baseline)
        from services.stack import client_options

        opts_ = client_options(state)
        registry = RegistryClient(
            state.address("registry"),
            token=opts_["token"] or "",
            tls_ca_file=opts_["tls_ca_file"],
        )
        base_reg, _, _ = registry.put(
            baseline, Lineage(registered_by="make evolve", note=f"baseline of run {run_id}")
        )
        llm_url = state.env.get("EVOHARNESS_LLM_BASE_URL") or os.environ.get(
            "EVOHARNESS_LLM_BASE_URL", ""
        )
        params = EvolutionParams(
            run_id=run_id,
            harness=HarnessRef(document=baseline.to_document()),
            # the test split is never given to the workflow: no gate sees it
            splits=Splits(**{s: TaskSource(uri=split_uris[s]) for s in EVOLUTION_SPLITS}),
            seeds=list(opts.seeds),
            max_rounds=opts.max_rounds,
            backends=Backends(
                generator="grpc",
                verifier="grpc",
                proposer="rule" if opts.search else "grpc",
            ),
            **opts.search,
            # label-free (the default): evolution verifies what the frozen extractor reads
            # from each prompt; the run is refused if an evolution prompt overlaps the test
            # split it is scored on
            scored_on=[TaskSource(uri=split_uris[FINAL])] if FINAL in split_uris else [],
            tracking=opts.tracking,
            tracking_uri=opts.tracking_uri,
            **opts.budgets,
        )
        (run_dir / "params.json").write_text(params.model_dump_json(indent=2))
        self.console.print(f"proposer: {describe_proposer(llm_url)}")

        t0 = time.monotonic()
        result = self.evolve(state, params)
        self._t("evolution", t0)

        best = result.best_harness
        # Evaluate before and after on every split (content-addressed: mostly cache hits).
        t0 = time.monotonic()
        ports = TracePorts(settings, "grpc", "grpc", "rule", store=store)
        evaluation = self.evaluate_before_after(ports, store, baseline, best, splits)
        self._t("evaluation", t0)
        transfer = None
        if tset is not None:  # the same evaluation and scoring, on the transfer set
            t0 = time.monotonic()
            on = {TRANSFER: tset.tasks}
            t_eval = self.evaluate_before_after(ports, store, baseline, best, on)
            transfer = transfer_scores(tset, t_eval, evaluation, len(opts.seeds))
            self._t("transfer", t0)
        if FINAL in splits:  # the test split's records, for `evoharness export-eval`
            from evoharness_app.exports.run import store_test_records

            for runs in (evaluation.before, evaluation.after):
                store_test_records(store, run_id, runs[FINAL].values())
        scores = evaluation.scores

        # The registration to promote: the worker's own registration of the best harness
        # (registered with its real parent as it joined the frontier); by hand only when
        # the worker registered it elsewhere, each unregistered ancestor first.
        accepted_diffs = [diff(baseline, best)] if harness_id(best) != harness_id(baseline) else []

        def put(h: Harness, *, parent_id: str | None, round_: int) -> str:
            hid = harness_id(h)
            best_one = hid == result.best_harness_id
            lineage = Lineage(
                parent_id=parent_id,
                workflow_id=run_id,
                registered_by="make evolve",
                note=("best harness" if best_one else "ancestor of the best") + f" of run {run_id}",
                # the round that accepted it, and its own id: unique within the run
                name=evolved_name(baseline.name, run_id, round_, hid[:8]),
                description=registry_description(
                    run_id, result.decisions, harness_id(baseline), hid, round_, result.rounds
                )
                if best_one
                else evolved_description(run_id, round_, None),
                # the generator it was validated on: the runtime flags serving it to less
                generator_id=ports.generator.generator_id,
                generator_capabilities=getattr(ports.generator.inner, "capabilities", None),
            )
            rid, _, _ = registry.put(h, lineage)
            return str(rid)

        from evoharness_app.run_report import read_round_reports

        rounds = read_round_reports(store, list(result.report_keys))
        try:
            best_reg = register_best(
                registry, result, baseline, base_reg, reports=rounds.reports, store=store, put=put
            )
        except LineageError as exc:  # registered, but its lineage is not known: say so
            self.console.print(
                f"[yellow]lineage not registered: {exc}; the best harness is registered "
                "without a parent[/]",
                highlight=False,
            )
            best_reg = BestRegistration(
                put(best, parent_id=None, round_=result.rounds), by_worker=False
            )
        reg_id = best_reg.registration_id
        if best_reg.registered:
            self.console.print(
                f"[yellow]the worker did not register this run's harnesses in the registry: "
                f"registered {len(best_reg.registered)} here, each with its parent[/]"
            )
        promotion = self.promote(
            registry, ports, splits, (reg_id, harness_id(best)), baseline, scores, run_id
        )

        t0 = time.monotonic()
        report = write_report(
            ReportInputs(
                run_id=run_id,
                run_dir=run_dir,
                started_at=started_at,
                baseline=baseline,
                best=best,
                evaluation=evaluation,
                result=result,
                store=store,
                rounds=rounds,
                seeds=opts.seeds,
                pairs_in_report=opts.pairs_in_report,
                promotion=promotion.to_record(),
                llm=opts.llm,
                transfer=transfer,
            )
        )
        self._t("report", t0)
        self.timings["total"] = round(time.monotonic() - t_all, 2)
        out = MainJobResult(
            run_id=run_id,
            run_dir=run_dir,
            report=report,
            baseline_harness_id=harness_id(baseline),
            final_harness_id=harness_id(best),
            scores=scores,
            decisions=list(result.decisions),
            accepted_diffs=accepted_diffs,
            generator_calls=result.generator_calls,
            cache_hits=result.cache_hits,
            executions=result.executions,
            spend_usd=result.spend_usd,
            # what the channel serves from this run ("" when it was not moved to it)
            promoted_registration=reg_id
            if promotion.move
            else (promotion.current_registration or "")
            if promotion.current_harness_id == harness_id(best)
            else "",
            promotion=promotion.to_doc(),
            timings=dict(self.timings),
            baseline_registration=base_reg,
            official_scores=evaluation.official_scores,
            internal_verifier=evaluation.internal_verifier,
            official_verifier=evaluation.official_verifier,
            generator_id=ports.generator.generator_id,
            mode=result.mode.describe() if getattr(result, "mode", None) is not None else "",
            **nothing_checkable_fields(getattr(result, "mode", None)),
            patches=patch_rows(rounds, harness_id(baseline), harness_id(best)),
            request_cost=evaluation.request_cost(),
            unreadable_rounds=list(rounds.unreadable),
            tracking=getattr(result, "tracking", None),
            transfer=transfer,
            stopped=result.stopped,
            stopped_by=getattr(result, "stopped_by", ""),
        )
        (run_dir / "summary.json").write_text(json.dumps(summary_doc(out), indent=2))
        return out

    def promote(
        self,
        registry: Any,
        ports: Any,
        splits: dict[str, list[Task]],
        candidate: tuple[str, str],
        baseline: Harness,
        scores: dict[str, dict[str, SplitScore]],
        run_id: str,
    ) -> Any:
        """``evoharness_app.promotion.promote`` of ``candidate`` (registration id, harness
        id) to ``opts.channel``, what the channel serves evaluated here on ``splits`` when
        needed (through the execution cache); prints the decision's one line and returns it."""
        from evoharness_app.promotion import promote

        def score_current(h: Harness) -> dict[str, SplitScore]:
            with self.progress_bar() as bar:
                what = f"evaluate what {self.opts.channel} serves"
                runs = self.evaluate(ports, h, splits, bar, what)
            return {s: score_split(splits[s], runs[s]) for s in splits}

        decision = promote(
            registry,
            self.opts.channel,
            candidate,
            harness_id(baseline),
            scores,
            run_id,
            score_current=score_current,
            force=self.opts.force_promote,
        )
        self.console.print(decision.line, highlight=False)
        return decision

    def evolve(self, state: Any, params: Any) -> Any:
        """The evolution run of ``params`` on the stack's Temporal server
        (``evoharness_app.workflow_run.run_evolution``: progress on this console; Ctrl-C
        terminates the workflow, says so in one line and propagates)."""
        from evoharness_app.workflow_run import run_evolution

        return run_evolution(state.address("temporal"), params, self.console, self.progress_bar)
