"""The main job (``make evolve`` → ``evoharness evolve main``): evolve a harness on GenEval
prompts end to end, through the real platform on loopback.

1. bring the local stack up (``services.stack``) unless one is running;
2. build tasks from GenEval's ``evaluation_metadata.jsonl`` plus synthetic tasks for the
   failure modes GenEval lacks (quoted text, negation, long prompts), and prepare disjoint,
   family-stratified target / held-out / preservation / test splits (default 60/20/20/20;
   ``evoharness.tasks.splits.build_run_splits``); the test split is never given to the
   workflow, so no gate sees it;
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
   promote the result to channel ``dev`` only when it is better than what ``dev`` serves
   now on the same tasks and seeds (``evoharness_app.promotion``; ``--force-promote``
   overrides), write ``runs/<run_id>/report.html`` (internal and
   official scores side by side) and print the summary.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evoharness.evidence import EvidenceStatus
from evoharness.harness import Harness, diff, harness_id, load_dir
from evoharness.tasks.models import Task
from evoharness.tasks.splits import EVOLUTION_SPLITS

if TYPE_CHECKING:
    from evoharness_app.run_report import RoundReads

ROOT = Path(__file__).resolve().parents[1]


def default_shared_dir() -> Path:
    """The benchmark data folder: ``$EVOHARNESS_SHARED``, else ``shared`` beside the clone
    (``ROOT.parent / "shared"``), wherever the command runs from."""
    return Path(os.environ.get("EVOHARNESS_SHARED", ROOT.parent / "shared"))


#: The splits evolution reads; the test split (``FINAL``) is evaluated only before/after.
FINAL = "test"
SPLITS = (*EVOLUTION_SPLITS, FINAL)


@dataclass
class MainJobOptions:
    """Options of the main job. ``sizes``: (target, held-out, preservation, test) split
    sizes (three: no test split);
    ``synthetic_count``: synthetic tasks added to the GenEval tasks; ``seeds``: the K matched
    seeds; ``keep_stack``: leave a stack this job started running afterwards;
    ``sim_profile``: the embedded world's generator profile the stack serves (a shipped name
    such as ``flux-like`` or a YAML path; "" = ``configs/generation.yaml``'s, ``sdxl-like``); ``llm``: ``"local"`` starts the stack with the local model behind the
    LLM roles (``services.llm_local``)."""

    shared_dir: Path = field(default_factory=default_shared_dir)
    runs_dir: Path = Path("runs")
    stack_dir: Path = Path("runs/stack")
    run_id: str | None = None
    sizes: tuple[int, ...] = (60, 20, 20, 20)
    synthetic_count: int = 150
    seeds: tuple[int, ...] = (0, 1, 2, 3)
    max_rounds: int = 3
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


@dataclass
class SplitScore:
    """Pass rates of one harness on one split: ``constraint`` = mean over matched (task,
    seed, constraint) verdicts; ``geneval`` = GenEval per-tag accuracy and overall (images
    correct when all their constraints pass); ``families`` = image accuracy per family.
    Per task, for the report's task-level intervals: ``tasks`` = (verdicts, passing
    verdicts); ``images`` = (images, GenEval-correct images) and ``tags`` = GenEval tag, for
    the GenEval tasks."""

    constraint: float
    n_verdicts: int
    geneval: dict[str, Any]
    families: dict[str, float]
    tasks: dict[str, tuple[int, int]] = field(default_factory=dict)
    images: dict[str, tuple[int, int]] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)


@dataclass
class MainJobResult:
    """What the main job produced (also written to ``runs/<run_id>/summary.json``)."""

    run_id: str
    run_dir: Path
    report: Path
    baseline_harness_id: str
    final_harness_id: str
    scores: dict[str, dict[str, SplitScore]]  # harness role ("before"/"after") → split → score
    decisions: list[dict[str, Any]]
    accepted_diffs: list[dict[str, Any]]
    generator_calls: int
    cache_hits: int
    executions: int
    spend_usd: float
    promoted_registration: str
    timings: dict[str, float]
    #: the baseline's registration (the root of the promoted registration's lineage)
    baseline_registration: str = ""
    # the same images scored by the exact inspector with GenEval's rules (role → split)
    official_scores: dict[str, dict[str, SplitScore]] = field(default_factory=dict)
    # the generator the run evolved on (``sim/<profile>@<digest>`` for the embedded world)
    generator_id: str = ""
    internal_verifier: str = ""
    official_verifier: str = ""
    #: how evolution read its tasks (label-free or benchmark labels; the overlap check)
    mode: str = ""
    #: label-free: task ids of the prompts the extractor read nothing checkable from (left
    #: out of evolution), of ``prompts_read``; None with benchmark labels (issue 19)
    nothing_checkable: list[str] | None = None
    prompts_read: int = 0
    #: the promotion decision (``evoharness_app.promotion.PromotionDecision.to_doc``)
    promotion: dict[str, Any] = field(default_factory=dict)
    #: the patches the final harness holds, in round order (``patch_rows``; the last is the
    #: candidate it came from); None when its lineage is not known from the round reports
    patches: list[dict[str, Any]] | None = None
    #: ``baseline`` / ``final`` → generator calls and generator-seconds per request
    #: (``Evaluation.request_cost``)
    request_cost: dict[str, dict[str, float]] = field(default_factory=dict)
    #: round reports that could not be read (``"<key>: <error>"``)
    unreadable_rounds: list[str] = field(default_factory=list)


class MainJobInputError(ValueError):
    """The main job's input is unusable (the message names what and where); raised by
    ``check_inputs`` before anything is started or written."""


def check_inputs(opts: MainJobOptions) -> None:
    """Check what the job reads before it starts the stack or writes the run folder: the
    shared data folder (``opts.shared_dir``, ``$EVOHARNESS_SHARED``) and its GenEval
    metadata (``data/geneval/evaluation_metadata.jsonl``, as ``build_splits`` reads it), the
    baseline harness folder (``load_dir``) and the split sizes (``check_sizes``). Raises
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
    try:
        check_sizes(opts.sizes, "--sizes")
        load_dir(opts.baseline)
    except (SplitError, HarnessError) as exc:
        raise MainJobInputError(str(exc).strip().splitlines()[0]) from None


def _nothing_checkable(mode: Any) -> dict[str, Any]:
    """``nothing_checkable`` / ``prompts_read`` of a run's ``EvolutionMode`` (None: not
    recorded, or benchmark labels, where nothing is extracted)."""
    if mode is None or mode.benchmark_labels:
        return {"nothing_checkable": None, "prompts_read": 0}
    return {"nothing_checkable": list(mode.dropped), "prompts_read": mode.read}


def _new_run_id() -> str:
    return "geneval-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S")


def build_splits(opts: MainJobOptions, run_dir: Path) -> dict[str, list[Task]]:
    """The run's splits in ``run_dir/splits`` (``evoharness.tasks.splits.build_run_splits``):
    the names of ``SPLITS`` in order, without the test split when ``opts.sizes`` has three
    numbers.

    Raises ``evoharness.tasks.builders.BuildError`` / ``SplitError`` with file and line when
    the input data is malformed (nothing is written then)."""
    from evoharness.tasks.splits import build_run_splits

    out = build_run_splits(
        opts.shared_dir, run_dir, opts.sizes, opts.synthetic_count, seed=opts.split_seed
    )
    return {s: out[s] for s in SPLITS if s in out}


def score_split(tasks: list[Task], executions: dict[tuple[str, int], Any]) -> SplitScore:
    """Score one harness's executions (``(task_id, seed) → Execution``) on one split."""
    from evoharness.tasks.geneval_score import geneval_scores, task_tag

    verdicts = passed = 0
    by_image: dict[str, list[Any]] = {}
    fam: dict[str, list[int]] = {}
    per_task: dict[str, tuple[int, int]] = {}
    by_id = {t.task_id: t for t in tasks}
    for (tid, seed), ex in executions.items():
        ev = list(ex.evidence)
        verdicts += len(ev)
        ok_here = sum(e.status is EvidenceStatus.passed for e in ev)
        passed += ok_here
        n0, k0 = per_task.get(tid, (0, 0))
        per_task[tid] = (n0 + len(ev), k0 + ok_here)
        by_image[f"{tid}@{seed}"] = ev
        ok = all(e.status is EvidenceStatus.passed for e in ev)
        f = fam.setdefault(by_id[tid].task_family, [0, 0])
        f[0] += int(ok)
        f[1] += 1
    geneval_tasks = [t for t in tasks if t.task_id.startswith("geneval/")]
    gv_ids = {t.task_id for t in geneval_tasks}
    gv_images = {k: v for k, v in by_image.items() if k.rsplit("@", 1)[0] in gv_ids}
    gv = geneval_scores(geneval_tasks, gv_images)
    # per task, by GenEval's own rules (each task scored alone: its tag's images and correct)
    images: dict[str, tuple[int, int]] = {}
    for t in geneval_tasks:
        one = geneval_scores(
            [t], {k: v for k, v in gv_images.items() if k.rsplit("@", 1)[0] == t.task_id}
        )["per_tag"]
        (row,) = one.values()
        images[t.task_id] = (int(row["images"]), int(row["correct"]))
    return SplitScore(
        constraint=passed / verdicts if verdicts else 0.0,
        n_verdicts=verdicts,
        geneval=gv,
        families={k: c / n for k, (c, n) in sorted(fam.items())},
        tasks=per_task,
        images=images,
        tags={t.task_id: task_tag(t) for t in geneval_tasks},
    )


@dataclass
class Evaluation:
    """The before/after evaluation of one run, for its report: ``splits``; ``before`` /
    ``after`` (split → (task_id, seed) → Execution, internal verifier's evidence);
    ``official`` (role → split → the same executions with the official scorer's evidence);
    ``scores`` / ``official_scores`` (role → split → ``SplitScore``); the two verifiers'
    ids."""

    splits: dict[str, list[Task]]
    before: dict[str, dict[tuple[str, int], Any]]
    after: dict[str, dict[tuple[str, int], Any]]
    scores: dict[str, dict[str, SplitScore]]
    official: dict[str, dict[str, dict[tuple[str, int], Any]]] = field(default_factory=dict)
    official_scores: dict[str, dict[str, SplitScore]] = field(default_factory=dict)
    internal_verifier: str = ""
    official_verifier: str = ""

    def split_rate(self, split: str, scores: dict[str, dict[str, SplitScore]] | None = None) -> Any:
        """The split's constraint pass rate before → after (``PassRate`` with task-level
        intervals) by the internal verifier, or by ``scores`` (e.g. the official ones)."""
        from evoharness.report.intervals import paired_rate

        sc = scores or self.scores
        return paired_rate(sc["before"][split].tasks, sc["after"][split].tasks)

    def geneval_rate(self, split: str, scores: dict[str, dict[str, SplitScore]]) -> Any:
        """GenEval overall before → after (mean of the tag accuracies over the tags GenEval
        averages) with task-level intervals; None without GenEval tasks."""
        from evoharness.report.intervals import paired_rate

        b, a = scores["before"][split], scores["after"][split]
        keep = set(b.geneval.get("overall_tags") or ())
        tasks = [t for t, tag in b.tags.items() if tag in keep and t in a.images]
        if not tasks:
            return None
        return paired_rate(
            {t: b.images[t] for t in tasks},
            {t: a.images[t] for t in tasks},
            unit="images",
            groups={t: b.tags[t] for t in tasks},
        )

    def tag_rates(self, split: str) -> dict[str, Any]:
        """GenEval accuracy per tag on ``split``, before → after, each with the tasks it rests
        on and task-level intervals."""
        from evoharness.report.intervals import paired_rate

        b, a = self.scores["before"][split], self.scores["after"][split]
        out = {}
        for tag in sorted(set(b.tags.values())):
            tasks = [t for t, g in b.tags.items() if g == tag and t in a.images]
            out[tag] = paired_rate(
                {t: b.images[t] for t in tasks}, {t: a.images[t] for t in tasks}, unit="images"
            )
        return out

    def verifier_scores(self) -> dict[str, Any]:
        """Per split, the internal verifier's and the official scorer's figures side by side
        (``VerifierScores``); empty without official scores."""
        from evoharness.report import VerifierScores

        if not self.official_scores:
            return {}
        return {
            s: VerifierScores(
                internal_constraint=self.split_rate(s),
                official_constraint=self.split_rate(s, self.official_scores),
                internal_geneval=self.geneval_rate(s, self.scores),
                official_geneval=self.geneval_rate(s, self.official_scores),
            )
            for s in self.splits
        }

    def request_cost(self) -> dict[str, dict[str, float]]:
        """``baseline`` / ``final``: generator calls and generator-seconds per request over
        the same requests (every split): each image generated counts, cached or not
        (``Execution.programs``), at what it cost when made
        (``Execution.nominal_generator_seconds``)."""
        out = {}
        for role, runs in (("baseline", self.before), ("final", self.after)):
            execs = [ex for split in runs.values() for ex in split.values()]
            n = len(execs) or 1
            out[role] = {
                "generator_calls": sum(len(ex.programs) or 1 for ex in execs) / n,
                "generator_seconds": sum(ex.nominal_generator_seconds for ex in execs) / n,
                "requests": len(execs),
            }
        return out

    def outcomes(self) -> list[Outcome]:
        """Every (task, seed) of every split: did all its constraints pass before / after."""
        by_id = {t.task_id: t for s in self.splits for t in self.splits[s]}
        out = []
        for s in self.splits:
            for (tid, seed), b in self.before[s].items():
                a = self.after[s][(tid, seed)]
                out.append(
                    Outcome(
                        split=s,
                        task_id=tid,
                        seed=seed,
                        before_pass=all(e.status is EvidenceStatus.passed for e in b.evidence),
                        after_pass=all(e.status is EvidenceStatus.passed for e in a.evidence),
                        constraint_types=frozenset(c.type.value for c in by_id[tid].constraints),
                    )
                )
        return out

    def image_pair(self, o: Outcome, label: str, store: Any, img_dir: Path) -> Any:
        """The before/after card of outcome ``o``: both images written into ``img_dir``,
        each constraint's internal verdicts (the verifier named) and official ones."""
        from evoharness.report import ConstraintVerdict, ImagePair

        task = next(t for t in self.splits[o.split] if t.task_id == o.task_id)
        key = (o.task_id, o.seed)
        b, a = self.before[o.split][key], self.after[o.split][key]
        paths = []
        for tag, ex in (("before", b), ("after", a)):
            p = img_dir / f"{o.task_id.replace('/', '__')}__{o.seed}__{tag}.png"
            p.write_bytes(store.get(ex.image.key))
            paths.append(p)
        official = {
            role: {e.constraint_id: e.status for e in self.official[role][o.split][key].evidence}
            for role in ("before", "after")
            if key in self.official.get(role, {}).get(o.split, {})
        }
        cons = {c.constraint_id: c for c in task.constraints}
        verdicts = [
            ConstraintVerdict(
                constraint_id=eb.constraint_id,
                type=cons[eb.constraint_id].type.value if eb.constraint_id in cons else "",
                description=_describe(cons.get(eb.constraint_id)),
                before=eb.status,
                after=ea.status,
                note="; ".join(
                    f"{tag}: {e.note}" for tag, e in (("before", eb), ("after", ea)) if e.note
                ),
                official_before=official.get("before", {}).get(eb.constraint_id),
                official_after=official.get("after", {}).get(eb.constraint_id),
            )
            for eb, ea in zip(b.evidence, a.evidence, strict=False)
        ]
        return ImagePair(
            task_id=o.task_id,
            prompt=task.prompt,
            seed=o.seed,
            split=o.split,
            task_family=task.task_family,
            before_png=paths[0],
            after_png=paths[1],
            verdicts=verdicts,
            verifier=self.internal_verifier,
            label=label,
        )


def final_lineage(rounds: RoundReads, baseline_id: str, final_id: str) -> Any:
    """``evoharness.report.lineage.patch_lineage`` over a run's round reports, candidate ids
    qualified with their beam branch: the patches the final harness holds, or None when the
    chain does not reach the baseline through the reports read."""
    from evoharness.report.lineage import patch_lineage, qualify_candidate_ids

    reports = [
        qualify_candidate_ids(r, b) for r, b in zip(rounds.reports, rounds.beams, strict=True)
    ]
    return patch_lineage(reports, baseline_id, final_id)


def credited_patches(rounds: RoundReads, baseline_id: str, final_id: str) -> list[tuple[str, str]]:
    """The patches the report's image grid may credit: ``(candidate id, constraint type of
    the cluster it targeted)`` for each patch the final harness holds (``final_lineage``);
    a patch accepted on another beam branch is not among them."""
    out = []
    for r, c in final_lineage(rounds, baseline_id, final_id) or []:
        cl = next((k for k in r.clusters if k.cluster_id == c.cluster_id), None)
        out.append((c.candidate_id, cl.constraint_type if cl is not None else ""))
    return out


def patch_rows(rounds: RoundReads, baseline_id: str, final_id: str) -> list[dict[str, Any]] | None:
    """One row per patch the final harness holds (``final_lineage``), in round order, for
    the summary: ``round``, ``candidate_id`` (qualified), ``responsibility``, ``change``
    (``describe_change``), ``source`` and its gate figures (``delta_target``, ``p_value``,
    ``p_holm``, ``delta_heldout``, ``delta_cost``, ``utility``; None when it has no gate).
    The last row is the candidate the final harness came from. None when not traceable."""
    from evoharness.report.lineage import describe_change

    lineage = final_lineage(rounds, baseline_id, final_id)
    if lineage is None:
        return None
    rows = []
    for r, c in lineage:
        g = c.gate
        rows.append(
            {
                "round": r.round,
                "candidate_id": c.candidate_id,
                "responsibility": c.patch.responsibility.value if c.patch else "",
                "change": describe_change(c),
                "source": c.source,
                "gate": None
                if g is None
                else {
                    "delta_target": g.delta_target,
                    "p_value": g.p_value,
                    "p_holm": g.p_holm,
                    "delta_heldout": g.delta_heldout,
                    "delta_cost": g.delta_cost,
                    "utility": g.utility,
                },
            }
        )
    return rows


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
        """``WorkerSettings`` pointing at the stack (for evaluation through the services)."""
        from workflows.backends import load_worker_settings

        env = state.env  # the stack's S3 settings; os.environ is left untouched
        return load_worker_settings(
            s3={
                "endpoint": env["EVOHARNESS_S3__ENDPOINT"],
                "access_key": env["EVOHARNESS_S3__ACCESS_KEY"],
                "secret_key": env["EVOHARNESS_S3__SECRET_KEY"],
                "bucket": env.get("EVOHARNESS_S3__BUCKET", "evoharness"),
                "secure": env.get("EVOHARNESS_S3__SECURE", "false") == "true",
            },
            worker={
                "temporal_address": state.address("temporal"),
                "generation_address": state.address("generation"),
                "verification_address": state.address("verification"),
                "proposer_address": state.address("proposer"),
            },
            # the stack's bearer token and CA (services.stack: auth on by default)
            server={"metrics_port": -1, "auth_token": env.get("EVOHARNESS_TOKEN", "")},
            client={"tls_ca_file": env.get("EVOHARNESS_CLIENT__TLS_CA_FILE")},
        )

    # ------------------------------------------------------------------------- evaluation
    def evaluate(
        self,
        ports: Any,
        harness: Harness,
        splits: dict[str, list[Task]],
        label: str,
        progress: Callable[[int], None],
    ) -> dict[str, dict[tuple[str, int], Any]]:
        """Run ``harness`` on every (task, seed) of every split through the services."""
        jobs = [(s, t, seed) for s in splits for t in splits[s] for seed in self.opts.seeds]
        out: dict[str, dict[tuple[str, int], Any]] = {s: {} for s in splits}
        with concurrent.futures.ThreadPoolExecutor(self.opts.eval_concurrency) as pool:
            futs = {
                pool.submit(ports.execute, harness, t, seed): (s, t, seed) for s, t, seed in jobs
            }
            for fut in concurrent.futures.as_completed(futs):
                s, t, seed = futs[fut]
                out[s][(t.task_id, seed)] = fut.result()
                progress(1)
        return out

    def official(
        self,
        store: Any,
        splits: dict[str, list[Task]],
        runs: dict[str, dict[tuple[str, int], Any]],
        verifier: Any,
        progress: Callable[[int], None],
    ) -> dict[str, dict[tuple[str, int], Any]]:
        """The executions of ``runs`` (split → (task_id, seed) → Execution) with their
        evidence replaced by ``verifier``'s (the official scorer) on the same stored image."""
        by_id = {t.task_id: t for s in splits for t in splits[s]}

        def score(ex: Any) -> Any:
            task = by_id[ex.task_id]
            ev = verifier.verify(store.get(ex.image.key), task.constraints, task.prompt)
            return ex.model_copy(update={"evidence": ev})

        out: dict[str, dict[tuple[str, int], Any]] = {s: {} for s in runs}
        with concurrent.futures.ThreadPoolExecutor(self.opts.eval_concurrency) as pool:
            futs = {
                pool.submit(score, ex): (s, k)
                for s, execs in runs.items()
                for k, ex in execs.items()
            }
            for fut in concurrent.futures.as_completed(futs):
                s, k = futs[fut]
                out[s][k] = fut.result()
                progress(1)
        return out

    # ------------------------------------------------------------------------------- run
    def run(self) -> MainJobResult:
        """Run the whole job; returns its result. Raises ``MainJobInputError`` (nothing
        started or written) for unusable input (``check_inputs``), and on infrastructure
        failure (the stack started here is stopped first)."""
        t_all = time.monotonic()
        opts = self.opts
        check_inputs(opts)  # before anything is started or written
        from services import stack

        with stack.job_lock(opts.stack_dir):  # one job at a time on a stack folder
            run_id = self.run_id = opts.run_id or _new_run_id()
            run_dir = (opts.runs_dir / run_id).resolve()
            made = not run_dir.exists()
            run_dir.mkdir(parents=True, exist_ok=True)
            try:
                return self._run_on_stack(run_id, run_dir, t_all)
            finally:
                if made and not any(run_dir.iterdir()):  # failed before writing anything
                    run_dir.rmdir()

    def _run_on_stack(self, run_id: str, run_dir: Path, t_all: float) -> MainJobResult:
        """``_run`` on the stack (``ensure_stack``), stopping a stack started here after."""
        opts = self.opts
        started_at = datetime.now(UTC)
        t0 = time.monotonic()
        state, started_here = self.ensure_stack()
        self._t("stack_up", t0)
        try:
            return self._run(run_id, run_dir, state, started_at, t_all)
        finally:
            if started_here and not opts.keep_stack:
                from services import stack

                stack.down(opts.stack_dir)
                self.console.print("stack stopped (use --keep-stack to leave it running)")

    def _run(
        self, run_id: str, run_dir: Path, state: Any, started_at: datetime, t_all: float
    ) -> MainJobResult:

        from evoharness_app.registration import BestRegistration, LineageError, register_best
        from services.registry.client import RegistryClient
        from services.registry.registrar import evolved_description, evolved_name
        from services.storage.s3 import S3ArtifactStore
        from workflows.backends import CachingVerifier, TracePorts
        from workflows.params import Backends, EvolutionParams, HarnessRef, Splits, TaskSource

        opts = self.opts
        settings = self.worker_settings(state)
        store = S3ArtifactStore.from_settings(settings.s3)
        store.ensure_bucket()

        t0 = time.monotonic()
        splits = build_splits(opts, run_dir)
        split_uris = {}
        for s in splits:
            key = f"runs/{run_id}/splits/{s}.jsonl"
            store.put(key, (run_dir / "splits" / f"{s}.jsonl").read_bytes(), "application/jsonl")
            split_uris[s] = f"s3://{settings.s3.bucket}/{key}"
        self._t("tasks_and_splits", t0)
        self.console.print(
            "tasks: "
            + ", ".join(f"{s} {len(splits[s])}" for s in splits)
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
            baseline, registered_by="make evolve", note=f"baseline of run {run_id}"
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
            backends=Backends(generator="grpc", verifier="grpc", proposer="grpc"),
            # label-free (the default): evolution verifies what the frozen extractor reads
            # from each prompt; the run is refused if an evolution prompt overlaps the test
            # split it is scored on
            scored_on=[TaskSource(uri=split_uris[FINAL])] if FINAL in split_uris else [],
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
        n = sum(len(v) for v in splits.values()) * len(opts.seeds)
        with self.progress_bar() as bar:
            tb = bar.add_task("evaluate baseline", total=n)
            before = self.evaluate(ports, baseline, splits, "before", lambda k: bar.advance(tb, k))
            ta = bar.add_task("evaluate evolved", total=n)
            after = self.evaluate(ports, best, splits, "after", lambda k: bar.advance(ta, k))
            # official: the same images, the exact inspector, GenEval's rules
            official_verifier = CachingVerifier(_exact_inspector(), store)
            to = bar.add_task("official scoring", total=2 * n)
            off = {
                role: self.official(
                    store, splits, runs, official_verifier, lambda k: bar.advance(to, k)
                )
                for role, runs in (("before", before), ("after", after))
            }
        self._t("evaluation", t0)
        if FINAL in splits:  # the test split's records, for `evoharness export-eval`
            from evoharness_app.exports.run import store_test_records

            for runs in (before, after):
                store_test_records(store, run_id, runs[FINAL].values())
        scores = {
            "before": {s: score_split(splits[s], before[s]) for s in splits},
            "after": {s: score_split(splits[s], after[s]) for s in splits},
        }
        official_scores = {
            role: {s: score_split(splits[s], off[role][s]) for s in splits} for role in off
        }
        internal_id = ports.verifier.verifier_id
        official_id = f"{official_verifier.verifier_id} (exact, GenEval rules)"

        # The registration to promote: the worker's own registration of the best harness
        # (registered with its real parent as it joined the frontier); by hand only when
        # the worker registered it elsewhere, each unregistered ancestor first.
        accepted_diffs = [diff(baseline, best)] if harness_id(best) != harness_id(baseline) else []

        def put(h: Harness, *, parent_id: str | None, round_: int) -> str:
            hid = harness_id(h)
            best_one = hid == result.best_harness_id
            rid, _, _ = registry.put(
                h,
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
        evaluation = Evaluation(
            splits, before, after, scores, off, official_scores, internal_id, official_id
        )
        report = self.write_report(
            run_id,
            run_dir,
            started_at,
            baseline,
            best,
            evaluation,
            result,
            store,
            rounds,
            promotion=promotion.to_record(),
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
            official_scores=official_scores,
            internal_verifier=internal_id,
            official_verifier=official_id,
            generator_id=ports.generator.generator_id,
            mode=result.mode.describe() if getattr(result, "mode", None) is not None else "",
            **_nothing_checkable(getattr(result, "mode", None)),
            patches=patch_rows(rounds, harness_id(baseline), harness_id(best)),
            request_cost=evaluation.request_cost(),
            unreadable_rounds=list(rounds.unreadable),
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
        """Move ``opts.channel`` to ``candidate`` (registration id, harness id: the run's best
        harness) only when it is better than what the channel serves now
        (``evoharness_app.promotion.decide_promotion``; ``opts.force_promote`` moves it
        anyway), and print the decision's one line. What the channel serves is scored on the
        same splits and seeds as ``scores`` (role → split; "before" is the baseline's, "after"
        the candidate's): the baseline's figures when it serves the baseline, else its harness
        is evaluated here (through the execution cache: a harness evaluated before costs no
        generation). Returns the ``PromotionDecision``. Raises ``PromotionError`` when the
        registry cannot say what the channel serves (only a channel never promoted to means
        "nothing"), ``StalePromotion`` when it moved meanwhile."""
        from evoharness_app.promotion import decide_promotion, serving

        opts = self.opts
        now = serving(registry, opts.channel)
        current = None if now is None else (now.registration_id, now.harness_id)
        current_scores = None
        if now is not None and now.harness_id != candidate[1]:
            if now.harness_id == harness_id(baseline):
                current_scores = scores["before"]
            else:
                n = sum(len(v) for v in splits.values()) * len(opts.seeds)
                with self.progress_bar() as bar:
                    t = bar.add_task(f"evaluate what {opts.channel} serves", total=n)
                    runs = self.evaluate(
                        ports, now.harness, splits, "current", lambda k: bar.advance(t, k)
                    )
                current_scores = {s: score_split(splits[s], runs[s]) for s in splits}
        decision = decide_promotion(
            opts.channel,
            candidate,
            current,
            scores["after"],
            current_scores,
            test_split=FINAL,
            force=opts.force_promote,
        )
        if decision.move:
            registry.promote(
                opts.channel,
                candidate[0],
                expected=current[0] if current else None,
                actor="make evolve",
                reason=f"run {run_id}" + (" (--force-promote)" if decision.forced else ""),
            )
        self.console.print(decision.line, highlight=False)
        return decision

    def evolve(self, state: Any, params: Any) -> Any:
        """The evolution run of ``params`` on the stack (``_evolve``). Ctrl-C ends the run
        with the job: its workflow is terminated (left alone it would sit in the stack's
        Temporal database and carry on unseen at the next ``evoharness up``, with nothing
        evaluated, reported or promoted), one line says so, and ``KeyboardInterrupt``
        propagates (the stack started here is then stopped)."""
        try:
            return asyncio.run(self._evolve(state, params))
        except KeyboardInterrupt:
            self.console.print(self._end_interrupted(state, params.run_id), highlight=False)
            raise

    def _end_interrupted(self, state: Any, run_id: str) -> str:
        """Terminate run ``run_id``'s workflow after a Ctrl-C; the line to print."""
        from temporalio.service import RPCError, RPCStatusCode

        from workflows import client as wf
        from workflows.worker import connect

        wid = wf.workflow_id(run_id)

        async def terminate() -> None:
            client = await connect(state.address("temporal"))
            await client.get_workflow_handle(wid).terminate(
                reason="interrupted (Ctrl-C) in evoharness evolve main"
            )

        try:
            asyncio.run(asyncio.wait_for(terminate(), 15))
        except RPCError as exc:
            if exc.status is RPCStatusCode.NOT_FOUND:  # not started yet, or already closed
                return f"interrupted: run {run_id} (workflow {wid}) was not running"
            return self._left_running(run_id, wid, exc.message)
        except (OSError, RuntimeError, TimeoutError) as exc:
            return self._left_running(run_id, wid, str(exc) or type(exc).__name__)
        return (
            f"interrupted: run {run_id} terminated (workflow {wid}); nothing was evaluated or "
            "promoted"
        )

    @staticmethod
    def _left_running(run_id: str, wid: str, why: str) -> str:
        return (
            f"interrupted: run {run_id} (workflow {wid}) could not be terminated ({why}); it "
            f"carries on at the next `evoharness up`: end it with `evoharness evolve stop "
            f"{run_id}`"
        )

    async def _evolve(self, state: Any, params: Any) -> Any:
        """Start the workflow and follow it until it closes. Progress comes from the
        ``progress`` query; completion from ``describe`` polling (robust to a slow dev
        server, unlike one long-poll on the result)."""
        from temporalio.client import WorkflowExecutionStatus
        from temporalio.service import RPCError

        from workflows import client as wf
        from workflows.worker import connect

        client = await connect(state.address("temporal"))
        await wf.start(client, params)
        handle = wf.handle(client, params.run_id)
        self.console.print(f"started workflow {handle.id} on task queue evoharness")
        with self.progress_bar() as bar:
            task = bar.add_task("evolution", total=None)
            while True:
                try:
                    p = await wf.progress(client, params.run_id)
                    desc = (
                        f"round {p.round} {p.phase:<9} calls {p.generator_calls:>5} "
                        f"cache hits {p.cache_hits:>5}"
                    )
                    bar.update(task, description=desc, completed=p.done, total=p.total or None)
                except RPCError:
                    pass  # between two runs of continue_as_new, or a busy server
                try:
                    d = await handle.describe()
                    if d.status not in (None, WorkflowExecutionStatus.RUNNING):
                        break
                except RPCError:
                    pass
                await asyncio.sleep(0.5)
        for attempt in range(5):
            try:
                return await handle.result()
            except RPCError:
                if attempt == 4:
                    raise
                await asyncio.sleep(1.0)
        raise AssertionError("unreachable")

    def write_report(
        self,
        run_id: str,
        run_dir: Path,
        started_at: datetime,
        baseline: Harness,
        best: Harness,
        evaluation: Evaluation,
        result: Any,
        store: Any,
        rounds: RoundReads,
        promotion: Any = None,
    ) -> Path:
        """Write ``run_dir/report.html`` with images copied into ``run_dir/images``:
        ``evaluation``'s before/after figures with task-level intervals, its images with the
        internal and the official verdicts, cost per request, and the round reports
        ``rounds`` (each beam branch's, candidate ids qualified with it; the ones that could
        not be read named on the page and on stderr), and the promotion decision
        ``promotion`` (``evoharness.report.models.PromotionRecord``; None: none was made)."""
        from evoharness.report import ImagePair, RunReportInput, render_report
        from evoharness.report.models import RequestCost
        from evoharness.trace.preservation import run_notes as preservation_run_notes

        for problem in rounds.unreadable:  # the summary repeats them on the console
            print(f"round report not read: {problem}", file=sys.stderr)
        splits = evaluation.splits
        # per-tag figures on the untouched test split when there is one (no gate saw it)
        tag_split = FINAL if FINAL in splits else "target"
        # image pairs: a balanced, labelled sample (select_image_pairs), one card per task;
        # only the patches the final harness holds are credited
        credited = credited_patches(rounds, harness_id(baseline), harness_id(best))
        picked = select_image_pairs(evaluation.outcomes(), credited, self.opts.pairs_in_report)
        img_dir = run_dir / "images"
        img_dir.mkdir(exist_ok=True)
        pairs: list[ImagePair] = [
            evaluation.image_pair(o, label, store, img_dir) for o, label in picked
        ]
        mode = getattr(result, "mode", None)
        notes = [
            "Benchmark labels and the official scorer are used only for the before/after "
            "figures of this report, never by evolution unless its mode says so.",
            "Generator: the embedded CPU simulator (evoharness.sim), a behavioural model of a "
            "diffusion generator; internal verifier (gates, pass rates above): "
            f"{evaluation.internal_verifier or 'the verification service'}; official scorer: "
            "the exact pixel-level inspector with GenEval's rules.",
            f"Before/after: baseline vs best harness on the same tasks and seeds "
            f"({len(self.opts.seeds)} per task).",
            (
                f"Final figures: the untouched test split ({len(splits[FINAL])} tasks), which "
                "the workflow never received, so no gate saw it; target, held-out and "
                "preservation were read by every gate."
                if FINAL in splits
                else "No test split (three split sizes): every figure comes from a split the "
                "gates have seen."
            ),
        ]
        n_llm = sum(c.source == "llm" for r in rounds.reports for c in r.candidates)
        if self.opts.llm or n_llm:
            from services.llm_local import LOCAL_MODEL_ID

            who = (
                f"{LOCAL_MODEL_ID} on the local llama.cpp server"
                if self.opts.llm == "local"
                else "the language model behind the proposer service"
            )
            notes.append(
                f"LLM roles (localizer, patch proposer): {who}, {n_llm} candidate(s) from it. "
                "Each candidate shows the answer it came from ('llm answer'); answers the "
                "proposer's validator dropped are rejected candidates with their reason; each "
                "cluster's attribution lists the localizer's reasons; tokens per round are in "
                "the cost table."
            )
        else:
            notes.append("Localizer and patch proposer: rule-based (no language model).")
        notes += preservation_run_notes(rounds.reports)
        cost = evaluation.request_cost()
        run = RunReportInput(
            run_id=run_id,
            started_at=started_at,
            finished_at=datetime.now(UTC),
            baseline_harness_id=harness_id(baseline),
            final_harness_id=harness_id(best),
            split_pass_rates={s: evaluation.split_rate(s) for s in splits},
            tag_pass_rates=evaluation.tag_rates(tag_split),
            tag_split=tag_split,
            verifier_scores=evaluation.verifier_scores(),
            internal_verifier=evaluation.internal_verifier,
            official_verifier=evaluation.official_verifier,
            mode=mode.describe() if mode is not None else "not recorded",
            **_nothing_checkable(mode),
            rounds=rounds.reports,
            beams=rounds.beams,
            unreadable_rounds=rounds.unreadable,
            request_cost={k: RequestCost.model_validate(v) for k, v in cost.items()},
            spend=float(getattr(result, "spend_usd", 0.0)),
            promotion=promotion,
            image_pairs=pairs,
            notes=notes,
        )
        return render_report(run, run_dir, images="copy")


@dataclass(frozen=True)
class Outcome:
    """One (task, seed) of the before/after evaluation: did every constraint pass."""

    split: str
    task_id: str
    seed: int
    before_pass: bool
    after_pass: bool
    constraint_types: frozenset[str] = frozenset()

    @property
    def kind(self) -> str:
        """``improved``, ``regressed``, ``unchanged failure`` or ``unchanged pass``."""
        if self.after_pass != self.before_pass:
            return "improved" if self.after_pass else "regressed"
        return "unchanged pass" if self.after_pass else "unchanged failure"


def select_image_pairs(
    outcomes: list[Outcome], accepted: list[tuple[str, str]], n: int
) -> list[tuple[Outcome, str]]:
    """A balanced, labelled sample of at most ``n`` before/after cards, one per task: first
    one example per accepted patch (``accepted``: ``(candidate_id, constraint type of the
    cluster it targeted)``; an improved task with that constraint type if any, labelled
    ``example of patch <id>``), then improvements, regressions and unchanged failures in
    turn (labelled so), then unchanged passes if room is left. Deterministic: outcomes are
    taken in (split, task, seed) order."""
    order = {name: i for i, name in enumerate(SPLITS)}
    ranked = sorted(outcomes, key=lambda o: (order.get(o.split, 9), o.task_id, o.seed))
    used: set[str] = set()
    out: list[tuple[Outcome, str]] = []

    def take(o: Outcome, label: str) -> None:
        used.add(o.task_id)
        out.append((o, label))

    for cid, ctype in accepted:
        if len(out) >= n:
            break
        fits = [
            o
            for o in ranked
            if o.task_id not in used and (not ctype or ctype in o.constraint_types)
        ]
        pick = next((o for o in fits if o.kind == "improved"), fits[0] if fits else None)
        if pick is not None:
            take(pick, f"example of patch {cid} ({pick.kind})")
    queues = {
        kind: [o for o in ranked if o.kind == kind]
        for kind in ("improved", "regressed", "unchanged failure", "unchanged pass")
    }
    for kinds in (("improved", "regressed", "unchanged failure"), ("unchanged pass",)):
        progress = True
        while len(out) < n and progress:
            progress = False
            for kind in kinds:
                q = queues[kind]
                while q and q[0].task_id in used:
                    q.pop(0)
                if q and len(out) < n:
                    take(q.pop(0), kind)
                    progress = True
    return out


def _exact_inspector() -> Any:
    """A ``SimInspector`` (the official scorer) built without changing ``os.environ``:
    importing OpenCV sets ``LD_LIBRARY_PATH`` and Qt variables, and the inspector sets
    default BLAS thread counts; the main job must leave its caller's environment alone."""
    before = dict(os.environ)
    try:
        from evoharness.sim import SimInspector

        return SimInspector()
    finally:
        for k in set(os.environ) - set(before):
            del os.environ[k]
        os.environ.update(before)


def _describe(c: Any) -> str:
    if c is None:
        return ""
    parts = [c.type.value, c.subject]
    if c.relation:
        parts.append(c.relation)
    if c.value is not None:
        parts.append(str(c.value))
    if c.min_count is not None:
        parts.append(f"{c.min_count}..{c.max_count if c.max_count is not None else '∞'}")
    return " ".join(parts)


def summary_doc(r: MainJobResult) -> dict[str, Any]:
    """A JSON-able summary of the run."""

    def sc(s: SplitScore) -> dict[str, Any]:
        return {
            "constraint_pass_rate": s.constraint,
            "verdicts": s.n_verdicts,
            "geneval_overall": s.geneval["overall"],
            "geneval_per_tag": {k: v["accuracy"] for k, v in s.geneval["per_tag"].items()},
            "families": s.families,
        }

    final: dict[str, Any] = {"split": None}
    if FINAL in r.scores.get("before", {}):
        b, a = r.scores["before"][FINAL], r.scores["after"][FINAL]
        final = {
            "split": FINAL,
            "note": "untouched: the workflow never received it, so no gate saw it",
            "constraint_pass_rate": {"before": b.constraint, "after": a.constraint},
            "geneval_overall": {"before": b.geneval["overall"], "after": a.geneval["overall"]},
            "verdicts": a.n_verdicts,
        }
        if FINAL in r.official_scores.get("before", {}):
            ob, oa = r.official_scores["before"][FINAL], r.official_scores["after"][FINAL]
            final["official_constraint_pass_rate"] = {
                "before": ob.constraint,
                "after": oa.constraint,
            }
            final["official_geneval_overall"] = {
                "before": ob.geneval["overall"],
                "after": oa.geneval["overall"],
            }
    return {
        "run_id": r.run_id,
        "report": str(r.report),
        "final": final,
        "baseline_harness_id": r.baseline_harness_id,
        "final_harness_id": r.final_harness_id,
        "generator_id": r.generator_id,
        "verifiers": {"internal": r.internal_verifier, "official": r.official_verifier},
        "mode": r.mode,
        "nothing_checkable": None
        if r.nothing_checkable is None
        else {
            "prompts": len(r.nothing_checkable),
            "of": r.prompts_read,
            "tasks": r.nothing_checkable,
        },
        "scores": {role: {s: sc(v) for s, v in d.items()} for role, d in r.scores.items()},
        "official_scores": {
            role: {s: sc(v) for s, v in d.items()} for role, d in r.official_scores.items()
        },
        "decisions": r.decisions,
        "accepted_diffs": r.accepted_diffs,
        "generator_calls": r.generator_calls,
        "cache_hits": r.cache_hits,
        "executions": r.executions,
        "spend_usd": r.spend_usd,
        "promoted_registration": r.promoted_registration,
        "baseline_registration": r.baseline_registration,
        "promotion": r.promotion,
        "timings_s": r.timings,
        "patches": r.patches,
        "request_cost": r.request_cost,
        "unreadable_rounds": r.unreadable_rounds,
    }


#: The proposer service's configuration file in the stack (``services.stack`` passes it).
PROPOSER_CONFIG = ROOT / "configs" / "proposer.yaml"


def describe_proposer(llm_url: str, config: Path = PROPOSER_CONFIG) -> str:
    """What the stack's proposer service uses, for the main job's ``proposer:`` line.
    ``llm_url``: the local model's address when the stack runs one (``--llm local``), which
    the service is pointed at. Otherwise the service runs as ``config`` and the
    ``EVOHARNESS_*`` environment say (``services.proposer.server.ProposerSettings``), read
    here the same way: ``rule-based``, or the model it names, with a note that ``--llm`` was
    not given. A stack already running was started with its own settings; this reads the
    current ones."""
    if llm_url:
        return f"LLM ({llm_url})"
    from pydantic import ValidationError

    from services.common.settings import load_settings
    from services.proposer.server import ProposerSettings

    try:
        settings = load_settings(ProposerSettings, config if config.is_file() else None)
    except (ValueError, ValidationError) as exc:
        reason = str(exc).strip().splitlines()[0]
        return f"as {config} says (not readable here: {reason})"
    if settings.backend == "rule":
        return "rule-based"
    return (
        f"LLM ({settings.openai.model} at {settings.openai.base_url}): {config} names it; "
        "--llm was not given, so the proposer service uses the configured model"
    )


def accepted_steps(decisions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every accepted patch of a run's ``decisions``, in round order: a round with a beam
    records each beam entry's outcome under ``beam`` (its decision is the best of them),
    and each of its accepted entries is a patch (``round`` copied in)."""
    out: list[dict[str, Any]] = []
    for d in decisions:
        for e in d.get("beam") or [d]:
            if e.get("kind") == "accepted":
                out.append({**e, "round": d.get("round")})
    return out


def patches_in_final(
    decisions: list[dict[str, Any]], baseline_id: str, final_id: str
) -> list[dict[str, Any]] | None:
    """The accepted patches (``accepted_steps``) the final harness holds, in round order: the
    chain of accepted ``parent_harness_id`` → ``harness_id`` steps from ``final_id`` back to
    ``baseline_id``; a patch accepted on another frontier entry is not in it. None when the
    chain does not reach the baseline (the final harness came from a gate-passing candidate
    the frontier kept, which no decision records)."""
    by_child = {d.get("harness_id"): d for d in accepted_steps(decisions)}
    chain: list[dict[str, Any]] = []
    cur = final_id
    while cur != baseline_id:
        step = by_child.get(cur)
        if step is None or step in chain:
            return None
        chain.append(step)
        cur = step.get("parent_harness_id", "")
    return sorted(chain, key=lambda d: d.get("round") or 0)


def accepted_sentence(accepted: list[dict[str, Any]], in_final: list[dict[str, Any]] | None) -> str:
    """``2 patches accepted (rounds 1, 2); the final harness holds 1 of them (round 2)``: how
    many patches were accepted and which of them the final harness holds (``in_final`` of
    ``patches_in_final``; None: not known from the decisions, the report has the lineage)."""

    def rounds(ds: list[dict[str, Any]]) -> str:
        nums = ", ".join(str(d.get("round", "?")) for d in ds)
        return f"round{'s' if len(ds) > 1 else ''} {nums}"

    n = len(accepted)
    head = f"{n} patch{'es' if n > 1 else ''} accepted ({rounds(accepted)}); the final harness"
    if in_final is None:
        return f"{head} descends from a gate-passing candidate (its lineage is in the report)"
    if len(in_final) == n:
        return f"{head} holds {'it' if n == 1 else 'both' if n == 2 else f'all {n}'}"
    if not in_final:
        return f"{head} {'does not hold it' if n == 1 else 'holds none of them'}"
    return f"{head} holds {len(in_final)} of them ({rounds(in_final)})"


def registry_description(
    run_id: str,
    decisions: list[dict[str, Any]],
    baseline_id: str,
    best_id: str,
    accepted_in: int,
    rounds: int,
) -> str:
    """The registry description of run ``run_id``'s best harness ``best_id``: the round that
    accepted it, then the end-of-run summary's sentence (``accepted_sentence``) on the
    accepted patches — beam entries included — and which of them the harness holds."""
    head = f"Best harness of run {run_id}: accepted in round {accepted_in} of {rounds}"
    accepted = accepted_steps(decisions)
    if not accepted:
        return f"{head}."
    return (
        f"{head}; {accepted_sentence(accepted, patches_in_final(decisions, baseline_id, best_id))}."
    )


def _gate_cells(g: dict[str, Any] | None) -> list[str]:
    """Δtarget, p (Holm), Δheld-out, Δcost, utility of a ``patch_rows`` gate, as printed."""
    if g is None:
        return ["-"] * 5
    holm = "" if g.get("p_holm") is None else f" (Holm {g['p_holm']:.3g})"
    return [
        f"{100.0 * g['delta_target']:+.1f} pp",
        f"{g['p_value']:.3g}{holm}",
        f"{100.0 * g['delta_heldout']:+.1f} pp",
        f"{100.0 * g['delta_cost']:+.1f}%",
        f"{g['utility']:+.4f}",
    ]


def _came_from(row: dict[str, Any]) -> str:
    """The line naming the candidate the final harness came from, with its gate figures."""
    cells = dict(
        zip(
            ("Δtarget", "p", "Δheld-out", "Δcost", "utility"), _gate_cells(row["gate"]), strict=True
        )
    )
    return (
        f"the final harness came from {row['candidate_id']} ({row['responsibility']}, round "
        f"{row['round']}): " + ", ".join(f"{k} {v}" for k, v in cells.items())
    )


def _decisions_table(r: MainJobResult) -> Any:
    """One row per patch the final harness holds (candidate id, responsibility, what it
    changed, its gate figures) and one per No-Patch round; without the lineage
    (``r.patches`` None), one row per round's decision with its reason."""
    from rich.table import Table

    if r.patches is None:
        d = Table(title="decisions (the final harness's lineage is not known: see the report)")
        for col in ("round", "decision", "reason"):
            d.add_column(col)
        for dec in r.decisions:
            d.add_row(*(str(dec.get(k, "")) for k in ("round", "kind", "reason")))
        return d
    d = Table(title="decisions: the patches the final harness holds, and the No-Patch rounds")
    for col in ("round", "decision", "patch", "what it changed"):
        d.add_column(col)
    for col in ("Δtarget", "p (Holm)", "Δheld-out", "Δcost", "utility"):
        d.add_column(col, justify="right")
    rows: list[tuple[int, list[str]]] = []
    for i, p in enumerate(r.patches):
        last = i == len(r.patches) - 1
        rows.append(
            (
                int(p["round"]),
                [
                    str(p["round"]),
                    "accepted → final" if last else "accepted",
                    f"{p['candidate_id']} ({p['responsibility']})",
                    p["change"],
                    *_gate_cells(p["gate"]),
                ],
            )
        )
    for dec in r.decisions:
        if dec.get("kind") == "no_patch":
            reason = str(dec.get("reason", ""))
            cells = [str(dec.get("round", "")), "No-Patch", "", reason, *[""] * 5]
            rows.append((int(dec.get("round") or 0), cells))
    for _, cells in sorted(rows, key=lambda x: x[0]):
        d.add_row(*cells)
    return d


def promotion_sentence(r: MainJobResult) -> str:
    """What became of the channel: ``channel dev serves registration <id> (…)`` with the
    promotion decision's line (``evoharness_app.promotion``) when it serves this run's
    harness, else ``channel dev not moved: <why>`` (the decision's reasons and figures)."""
    p = r.promotion
    line = str(p.get("line") or "")
    channel = p.get("channel") or "the channel"
    if r.promoted_registration:
        return f"channel {channel} serves registration {r.promoted_registration}: {line}"
    if not p:
        return f"{channel} not moved: no promotion decision was recorded"
    prefix = f"channel {channel} not moved: "
    return line if line.startswith(prefix) else prefix + line


def print_summary(r: MainJobResult, console: Any) -> None:
    """Print the summary tables: scores before/after per split, decisions, cost, timings."""
    from rich.table import Table

    t = Table(
        title=f"run {r.run_id} on {r.generator_id or 'the deployed generator'}: baseline → "
        f"evolved (internal verifier {r.internal_verifier})"
    )
    t.add_column("split")
    t.add_column("constraint pass rate", justify="right")
    t.add_column("GenEval overall", justify="right")
    if r.official_scores:
        t.add_column("official constraint", justify="right")
        t.add_column("official GenEval", justify="right")
    tags = sorted(
        {tag for d in r.scores.values() for s in d.values() for tag in s.geneval["per_tag"]}
    )
    for tag in tags:
        t.add_column(tag, justify="right")
    for s in r.scores["before"]:
        b, a = r.scores["before"][s], r.scores["after"][s]

        def cell(x: float, y: float) -> str:
            colour = "green" if y > x + 1e-9 else "red" if y < x - 1e-9 else "white"
            return f"{x:.3f} → [{colour}]{y:.3f}[/]"

        row = [
            f"{s} (untouched)" if s == FINAL else s,
            cell(b.constraint, a.constraint),
            cell(b.geneval["overall"], a.geneval["overall"]),
        ]
        if r.official_scores:
            ob, oa = r.official_scores["before"][s], r.official_scores["after"][s]
            row += [
                cell(ob.constraint, oa.constraint),
                cell(ob.geneval["overall"], oa.geneval["overall"]),
            ]
        for tag in tags:
            bt, at = b.geneval["per_tag"].get(tag), a.geneval["per_tag"].get(tag)
            row.append(cell(bt["accuracy"], at["accuracy"]) if bt and at else "-")
        t.add_row(*row)
    console.print(t)
    console.print(_decisions_table(r))
    if r.patches:
        console.print(_came_from(r.patches[-1]), highlight=False)
    for dec in r.decisions:
        for note in dec.get("preservation", []):
            console.print(f"[yellow]round {dec.get('round', '')}: {note}[/]")
    accepted = accepted_steps(r.decisions)
    if accepted:
        console.print(
            accepted_sentence(
                accepted, patches_in_final(r.decisions, r.baseline_harness_id, r.final_harness_id)
            )
        )
    if r.accepted_diffs:
        console.print(
            "net change baseline → evolved, by responsibility (each patch's ops are in the report):"
        )
    for g in r.accepted_diffs:
        for resp, ops in g.items():
            console.print(f"  [bold]{resp}[/]: " + "; ".join(f"{o['op']} {o['path']}" for o in ops))
    cb, cf = r.request_cost.get("baseline"), r.request_cost.get("final")
    if cb and cf:
        console.print(
            f"cost per request (baseline → final, same {int(cf['requests'])} requests): "
            f"generator calls {cb['generator_calls']:.2f} → {cf['generator_calls']:.2f}, "
            f"generator-seconds {cb['generator_seconds']:.2f} → {cf['generator_seconds']:.2f}",
            highlight=False,
        )
    for problem in r.unreadable_rounds:
        console.print(f"[yellow]round report not read: {problem}[/]", highlight=False)
    console.print(
        f"evolution: generator calls {r.generator_calls}, cache hits {r.cache_hits}, executions "
        f"{r.executions}, spend ${r.spend_usd:.4f}"
    )
    console.print(promotion_sentence(r), highlight=False)
    console.print("timings (s): " + ", ".join(f"{k} {v}" for k, v in r.timings.items()))
    if r.mode:
        console.print(f"evolution mode: {r.mode}")
    if r.nothing_checkable:
        console.print(
            f"[yellow]nothing checkable read from {len(r.nothing_checkable)} of "
            f"{r.prompts_read} prompt(s)[/] (left out of evolution): "
            + ", ".join(r.nothing_checkable[:10])
            + (" …" if len(r.nothing_checkable) > 10 else "")
        )
    console.print(f"report: {r.report}")
