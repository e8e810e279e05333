"""The main job's summary: what it produced (``MainJobResult``), as JSON
(``summary_doc``, ``runs/<run_id>/summary.json``) and on the console (``print_summary``:
scores before/after per split, the patches the final harness holds with their gate figures,
cost per request, the promotion, timings), and the sentences the registry reuses
(``registry_description``) and the job prints as it starts (``describe_proposer``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evoharness_app.evaluation import FINAL, SplitScore


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
    #: where the run was tracked (``workflows.params.TrackingStatus``; None: not tracked)
    tracking: Any = None
    #: why evolution stopped and which limit (``evoharness.trace.run_budget.StopKind``)
    stopped: str = ""
    stopped_by: str = ""
    #: baseline → evolved on the transfer set (``evoharness.report.models.TransferScores``;
    #: None: ``--transfer 0``)
    transfer: Any = None


def nothing_checkable_fields(mode: Any) -> dict[str, Any]:
    """``nothing_checkable`` / ``prompts_read`` of a run's ``EvolutionMode`` (None: not
    recorded, or benchmark labels, where nothing is extracted)."""
    if mode is None or mode.benchmark_labels:
        return {"nothing_checkable": None, "prompts_read": 0}
    return {"nothing_checkable": list(mode.dropped), "prompts_read": mode.read}


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
        "stopped": {"by": r.stopped_by, "reason": r.stopped},
        "promoted_registration": r.promoted_registration,
        "baseline_registration": r.baseline_registration,
        "promotion": r.promotion,
        "timings_s": r.timings,
        "patches": r.patches,
        "request_cost": r.request_cost,
        "unreadable_rounds": r.unreadable_rounds,
        "tracking": r.tracking.model_dump() if r.tracking is not None else None,
        "transfer": transfer_doc(r.transfer),
    }


def transfer_doc(t: Any) -> dict[str, Any] | None:
    """``summary.json``'s ``transfer`` block of a run's ``TransferScores`` (None: none):
    where the transfer set came from, its official constraint pass rate before → after with
    the gain and its paired 95% interval, the internal verifier's, the untouched test split's
    official gain, and ``gain_kept`` = transfer gain / test gain (null when the test gain is
    ≤ 0 or there is no test split)."""
    if t is None:
        return None

    def rate(p: Any) -> dict[str, Any] | None:
        if p is None:
            return None
        return {
            "before": p.before,
            "after": p.after,
            "gain": p.delta,
            "gain_ci95": list(p.ci_delta) if p.ci_delta is not None else None,
            "tasks": p.tasks,
            "verdicts": p.n,
        }

    return {
        "note": "datasets no evolution split came from; constraints read by the fixed "
        "extractor, no benchmark label",
        "sources": t.sources,
        "nothing_checkable": t.nothing_checkable,
        "extractor": t.extractor,
        "evolution_sources": t.evolution_sources,
        "seeds": t.seeds,
        "measure": "constraint pass rate",
        "official": rate(t.official),
        "internal": rate(t.internal),
        "test_official": rate(t.test_official),
        "gain_kept": t.gain_kept,
    }


def transfer_line(t: Any) -> str:
    """The console's one line on transfer (``TransferScores``): official constraint pass
    rate on the transfer set before → after, the gain with its 95% interval, and the share
    of the test split's gain kept."""
    o = t.official
    ci = "" if o.ci_delta is None else f" (95% CI {o.ci_delta[0]:+.3f}..{o.ci_delta[1]:+.3f})"
    src = " + ".join(f"{n} {name}" for name, n in t.sources.items())
    kept = t.gain_kept
    if t.test_official is None:
        tail = "no test split to compare with"
    elif kept is None:
        tail = f"gain kept: n/a (test gain {t.test_official.delta:+.3f} ≤ 0)"
    else:
        tail = f"gain kept {100.0 * kept:.0f}% of the test split's {t.test_official.delta:+.3f}"
    return (
        f"transfer ({src}, never evolved on): official constraint pass rate "
        f"{o.before:.3f} → {o.after:.3f}, gain {o.delta:+.3f}{ci}; {tail}"
    )


#: The proposer service's configuration file in the stack (``services.stack`` passes it).
PROPOSER_CONFIG = Path(__file__).resolve().parents[1] / "configs" / "proposer.yaml"


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
    if r.stopped:
        by = f" (stopped by {r.stopped_by})" if r.stopped_by else ""
        console.print(f"evolution stopped: {r.stopped}{by}", highlight=False)
    if r.transfer is not None:
        console.print(transfer_line(r.transfer), highlight=False, soft_wrap=True)
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
