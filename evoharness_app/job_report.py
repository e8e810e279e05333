"""The main job's HTML report (``runs/<run_id>/report.html``): what ``write_report`` assembles
from a run's before/after evaluation, its round reports and its promotion decision.

- ``ReportInputs``: everything the report reads, one object.
- ``write_report``: the figures with task-level intervals, a balanced sample of
  before/after image cards (``select_image_pairs``) with the internal and the official
  verdicts, cost per request, the round reports and the notes on how the run was made.
- The final harness's lineage over the round reports (``final_lineage``): the patches the
  image cards may credit (``credited_patches``) and the summary's rows (``patch_rows``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evoharness.harness import Harness, harness_id
from evoharness.tasks.splits import SPLITS
from evoharness_app.evaluation import FINAL, Evaluation, Outcome
from evoharness_app.summary import nothing_checkable_fields

if TYPE_CHECKING:
    from evoharness_app.run_report import RoundReads


@dataclass(frozen=True)
class ReportInputs:
    """What ``write_report`` reads: run ``run_id`` (started at ``started_at``, UTC) writing
    into ``run_dir``; the ``baseline`` and the ``best`` harness; their ``evaluation``; the
    workflow's ``result`` (``workflows.params.EvolutionResult``: mode, spend); the artifact
    ``store`` holding the images; the round reports as read (``rounds``); the promotion
    decision (``promotion``: ``evoharness.report.models.PromotionRecord``, None: none was
    made); the run's ``seeds``, the number of image cards (``pairs_in_report``), its
    ``llm`` option (``MainJobOptions.llm``) and its ``transfer`` figures
    (``evoharness_app.transfer.transfer_scores``; None: not measured)."""

    run_id: str
    run_dir: Path
    started_at: datetime
    baseline: Harness
    best: Harness
    evaluation: Evaluation
    result: Any
    store: Any
    rounds: RoundReads
    seeds: tuple[int, ...]
    pairs_in_report: int
    promotion: Any = None
    llm: str | None = None
    #: baseline → evolved on the transfer set (``TransferScores``; None: not measured)
    transfer: Any = None


def write_report(inp: ReportInputs) -> Path:
    """Write ``inp.run_dir/report.html`` with images copied into ``inp.run_dir/images`` and
    return its path: ``evaluation``'s before/after figures with task-level intervals, its images with the
    internal and the official verdicts, cost per request, and the round reports
    ``rounds`` (each beam branch's, candidate ids qualified with it; the ones that could
    not be read named on the page and on stderr), and the promotion decision
    ``promotion`` (``evoharness.report.models.PromotionRecord``; None: none was made); the
    names are ``inp``'s fields (``ReportInputs``)."""
    from evoharness.report import ImagePair, RunReportInput, render_report
    from evoharness.report.models import RequestCost
    from evoharness.trace.preservation import run_notes as preservation_run_notes

    for problem in inp.rounds.unreadable:  # the summary repeats them on the console
        print(f"round report not read: {problem}", file=sys.stderr)
    splits = inp.evaluation.splits
    # per-tag figures on the untouched test split when there is one (no gate saw it)
    tag_split = FINAL if FINAL in splits else "target"
    # image pairs: a balanced, labelled sample (select_image_pairs), one card per task;
    # only the patches the final harness holds are credited
    credited = credited_patches(inp.rounds, harness_id(inp.baseline), harness_id(inp.best))
    picked = select_image_pairs(inp.evaluation.outcomes(), credited, inp.pairs_in_report)
    img_dir = inp.run_dir / "images"
    img_dir.mkdir(exist_ok=True)
    pairs: list[ImagePair] = [
        inp.evaluation.image_pair(o, label, inp.store, img_dir) for o, label in picked
    ]
    mode = getattr(inp.result, "mode", None)
    notes = [
        "Benchmark labels and the official scorer are used only for the before/after "
        "figures of this report, never by evolution unless its mode says so.",
        "Generator: the embedded CPU simulator (evoharness.sim), a behavioural model of a "
        "diffusion generator; internal verifier (gates, pass rates above): "
        f"{inp.evaluation.internal_verifier or 'the verification service'}; official scorer: "
        "the exact pixel-level inspector with GenEval's rules.",
        f"Before/after: baseline vs best harness on the same tasks and seeds "
        f"({len(inp.seeds)} per task).",
        (
            f"Final figures: the untouched test split ({len(splits[FINAL])} tasks), which "
            "the workflow never received, so no gate saw it; target, held-out and "
            "preservation were read by every gate."
            if FINAL in splits
            else "No test split (three split sizes): every figure comes from a split the "
            "gates have seen."
        ),
    ]
    n_llm = sum(c.source == "llm" for r in inp.rounds.reports for c in r.candidates)
    if inp.llm or n_llm:
        from services.llm_local import LOCAL_MODEL_ID

        who = (
            f"{LOCAL_MODEL_ID} on the local llama.cpp server"
            if inp.llm == "local"
            else "the language model behind the proposer service"
        )
        notes.append(
            f"LLM roles (localizer, patch proposer): {who}, {n_llm} candidate(s) from it. "
            "Each candidate shows the answer it came from ('llm answer'); answers the "
            "proposer's validator dropped are rejected candidates with their reason; each "
            "cluster's attribution lists the localizer's reasons; tokens per round are in "
            "the cost table."
        )
    elif not getattr(inp.result, "search_report_key", ""):
        notes.append("Localizer and patch proposer: rule-based (no language model).")
    notes += search_notes(inp.result, inp.store)
    notes += preservation_run_notes(inp.rounds.reports)
    stopped = str(getattr(inp.result, "stopped", "") or "")
    if stopped:
        by = getattr(inp.result, "stopped_by", "") or ""
        notes.append(
            f"Evolution stopped after round {getattr(inp.result, 'rounds', '?')}: {stopped}"
            + (f" (stopped by {by})." if by else ".")
        )
    cost = inp.evaluation.request_cost()
    run = RunReportInput(
        run_id=inp.run_id,
        started_at=inp.started_at,
        finished_at=datetime.now(UTC),
        baseline_harness_id=harness_id(inp.baseline),
        final_harness_id=harness_id(inp.best),
        split_pass_rates={s: inp.evaluation.split_rate(s) for s in splits},
        tag_pass_rates=inp.evaluation.tag_rates(tag_split),
        tag_split=tag_split,
        verifier_scores=inp.evaluation.verifier_scores(),
        internal_verifier=inp.evaluation.internal_verifier,
        official_verifier=inp.evaluation.official_verifier,
        mode=mode.describe() if mode is not None else "not recorded",
        **nothing_checkable_fields(mode),
        rounds=inp.rounds.reports,
        beams=inp.rounds.beams,
        unreadable_rounds=inp.rounds.unreadable,
        request_cost={k: RequestCost.model_validate(v) for k, v in cost.items()},
        spend=float(getattr(inp.result, "spend_usd", 0.0)),
        promotion=inp.promotion,
        transfer=inp.transfer,
        image_pairs=pairs,
        notes=notes,
    )
    return render_report(run, inp.run_dir, images="copy")


def search_notes(result: Any, store: Any) -> list[str]:
    """The report's notes on a non-TRACE run (issue 31): the protocol and its settings,
    each step's best selection score and cumulative generator calls, and where the search
    report is (``EvolutionResult.search_report_key``); [] for a TRACE run, or one note
    when the search report cannot be read."""
    from evoharness.search.protocols import SearchRun

    key = str(getattr(result, "search_report_key", "") or "")
    if not key:
        return []
    try:
        run = SearchRun.model_validate_json(store.get(key))
    except Exception as exc:  # noqa: BLE001 - the report is written whatever is missing
        return [f"Search report {key} not readable: {exc}"]
    c = run.config
    steps = "; ".join(
        f"step {p.iteration}: {p.best_score:.3f} after {p.generator_calls:.0f} calls"
        for p in run.points
    )
    ran = sum(r.check == "ok" for r in run.candidates)
    return [
        f"Search protocol {c.protocol} (docs/protocols.md): K = {c.candidates} candidates, "
        f"beam B = {c.beam}, T = {c.iterations} iterations on seeds {list(c.seeds)}; the "
        "mutation proposer (seeded schema edits, feedback = the target split); candidates "
        "ranked on held-out + preservation, which the proposer never sees; no localizer, "
        f"no gate. {ran} of {len(run.candidates)} proposed candidates ran (the others failed "
        f"the proposal checks). Best selection score per step: {steps}. Stopped: "
        f"{run.stopped}. Search report: {key}."
    ]


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
