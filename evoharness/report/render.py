"""Render the HTML run report: one self-contained ``report.html``.

The page holds the run's summary, pass rates before/after (per split and per GenEval tag),
internal vs official scores per split (the internal verifier the gates used beside the
official scorer; a split whose internal gain exceeds its official gain by more than
``OVERFIT_MARGIN`` is flagged),
before/after image pairs for the same task and seed with per-constraint verdicts, and one
section per TRACE round: the decision (accepted patch diff by responsibility, or No-Patch
with its reason), No-Patch attributions, every candidate with its gate figures, and cost.

Images are embedded as ``data:`` URIs (default) or copied into ``out_dir/images/`` and linked
relatively; the page never references a remote or presigned URL and loads no script, font or
stylesheet from outside. The template is ``evoharness/report/template.html`` (Jinja2,
autoescaped; shipped as package data by the ``*.html`` pattern in pyproject.toml).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
from collections import defaultdict
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import jinja2

from evoharness.report.lineage import patch_lineage, qualify_candidate_ids
from evoharness.report.models import ImagePair, PassRate, RunReportInput, VerifierScores
from evoharness.tasks.io import atomic_write_bytes
from evoharness.trace.models import Candidate, DecisionKind, RoundReport

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SPLIT_ORDER = ("target", "heldout", "preservation", "test")
#: Internal gain minus official gain (GenEval overall, else constraint pass rate) above which
#: a split is flagged as pleasing the internal verifier more than the official scorer: two
#: percentage points, about one image in fifty.
OVERFIT_MARGIN = 0.02
#: Task ids named under the nothing-checkable count (the rest are counted, "and N more").
NOTHING_CHECKABLE_SHOWN = 20


class ReportError(ValueError):
    """The report cannot be rendered (missing or non-PNG image); the message names the file."""


def short_id(value: str, n: int = 12) -> str:
    """The first ``n`` characters of a content hash, for display (full id in a tooltip)."""
    return value[:n] if value else "—"


def _fmt_pct(x: float | None) -> str:
    return "—" if x is None else f"{100.0 * x:.1f}%"


def _fmt_delta(x: float | None, pct: bool = True) -> str:
    if x is None:
        return "—"
    return f"{100.0 * x:+.1f} pp" if pct else f"{x:+.3f}"


def _fmt_ci(ci: tuple[float, float] | None, delta: bool = False) -> str:
    """``[52.1%, 63.0%]`` (``delta``: ``[+1.2, +9.8] pp``); "" without an interval."""
    if ci is None:
        return ""
    lo, hi = ci
    if delta:
        return f"[{100.0 * lo:+.1f}, {100.0 * hi:+.1f}] pp"
    return f"[{100.0 * lo:.1f}%, {100.0 * hi:.1f}%]"


def _fmt_num(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:,.4g}" if abs(x) < 1e6 else f"{x:,.0f}"
    return str(x)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _duration(start: datetime, end: datetime | None) -> str:
    if end is None:
        return "running"
    secs = int((end - start).total_seconds())
    h, rem = divmod(secs, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h {m:02d}m {s:02d}s" if h else f"{m}m {s:02d}s"


class _Images:
    """Turns local PNG paths into ``src`` values: data URIs or copies under ``images/``."""

    def __init__(self, out_dir: Path, mode: Literal["embed", "copy"]):
        self.out_dir = out_dir
        self.mode = mode
        self.cache: dict[Path, str] = {}
        self.pending: dict[Path, Path] = {}

    def src(self, path: Path) -> str:
        path = Path(path)
        if path in self.cache:
            return self.cache[path]
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ReportError(f"{path}: cannot read image: {exc.strerror or exc}") from None
        if not data.startswith(PNG_SIGNATURE):
            raise ReportError(f"{path}: not a PNG file")
        if self.mode == "embed":
            src = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
        else:
            name = hashlib.sha256(data).hexdigest()[:20] + ".png"
            self.pending[self.out_dir / "images" / name] = path
            src = f"images/{name}"
        self.cache[path] = src
        return src

    def flush(self) -> None:
        """Copy the images collected in ``copy`` mode (after every one was checked)."""
        for dest, path in self.pending.items():
            if dest.exists():
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_suffix(".tmp")
            shutil.copyfile(path, tmp)
            os.replace(tmp, dest)
        self.pending.clear()


def candidate_label(c: Candidate) -> tuple[str, str]:
    """``(label, badge class)`` of a candidate: ``accepted``; ``rejected by the gate`` for a
    validated candidate the gate refused; ``passed the gate, not chosen`` when another
    candidate won; ``rejected by the checks`` when it never reached the gate."""
    if c.status.value == "accepted":
        return "accepted", "accepted"
    if c.status.value == "validated":
        if c.gate is not None and c.gate.accepted:
            return "passed the gate, not chosen", "validated"
        return "rejected by the gate", "rejected"
    if c.status.value == "rejected":
        return "rejected by the checks", "rejected"
    return c.status.value, c.status.value


def _features(when: Any) -> str:
    return ", ".join(str(w) for w in when) if isinstance(when, list | tuple) else str(when)


def patch_scope(patch: Any) -> str:
    """Which prompts a patch changes, in the words of text-to-image generation: "applies to
    every prompt" for a policy change (template, negative prompt or terms, a rewrite,
    parameters) or a middleware stage; otherwise the trigger (a tool's ``when`` features, a
    skill's or memory entry's triggers)."""
    triggers: list[str] = []
    for op in patch.ops:
        value = op.get("value")
        if isinstance(value, dict):
            if value.get("when"):
                triggers.append(f"prompts with {_features(value['when'])}")
            trig = value.get("triggers") or value.get("trigger")
            if isinstance(trig, dict):
                parts = [f"{k} {_features(v)}" for k, v in sorted(trig.items()) if v]
                if parts:
                    triggers.append("prompts matching " + "; ".join(parts))
            elif isinstance(trig, list | str) and trig:
                triggers.append(f"prompts matching {_features(trig)}")
    if triggers:
        return "; ".join(dict.fromkeys(triggers))
    resp = patch.responsibility.value
    if resp in ("policy", "middleware"):
        return "applies to every prompt"
    return f"prompts that use the changed {resp}"


def _candidate_row(c: Candidate) -> dict[str, Any]:
    g = c.gate
    label, badge = candidate_label(c)
    return {
        "id": c.candidate_id,
        "cluster": c.cluster_id,
        "responsibility": c.patch.responsibility.value if c.patch else "—",
        "scope": patch_scope(c.patch) if c.patch else "",
        "source": c.source,
        "status": c.status.value,
        "label": label,
        "badge": badge,
        "reject_reason": c.reject_reason,
        "answer": candidate_answer(c),
        "gate": None
        if g is None
        else {
            "delta_target": _fmt_delta(g.delta_target),
            "delta_target_raw": g.delta_target,
            "delta_heldout": _fmt_delta(g.delta_heldout),
            "delta_heldout_raw": g.delta_heldout,
            "delta_preservation": _fmt_delta(g.delta_preservation),
            "delta_preservation_raw": g.delta_preservation,
            "regression": f"{100.0 * g.regression:.1f} pp",
            "epsilon": f"{100.0 * g.epsilon:.1f} pp",
            "delta_cost": f"{g.delta_cost:+.3f}",
            "utility": f"{g.utility:+.4f}",
            "p_value": f"{g.p_value:.3g}",
            "n_discordant": g.n_discordant,
            "accepted": g.accepted,
            "reasons": g.reasons,
            "notes": g.notes,
            "ci95": {k: f"[{_fmt_delta(lo)}, {_fmt_delta(hi)}]" for k, (lo, hi) in g.ci95.items()},
            "look": g.look,
            "second_look": g.second_look,
            "seeds": ", ".join(str(x) for x in g.seeds) or "—",
            "p_holm": "—" if g.p_holm is None else f"{g.p_holm:.3g}",
            "test": g.test,
            "objective": g.objective,
            "tasks_changed": f"{g.n_tasks_changed}/{g.n_tasks}",
            "families": [
                {
                    "name": f or "(none)",
                    "tasks": int(r["tasks"]),
                    "delta": _fmt_delta(r["delta"]),
                    "regression": f"{100.0 * r['regression']:.1f} pp",
                    "epsilon": f"{100.0 * r['epsilon']:.1f} pp",
                    "failed": r["regression"] > r["epsilon"] + 1e-12,
                }
                for f, r in g.family_regressions.items()
            ],
        },
        "scope_probes": _scope_view(c.scope_probes),
    }


#: characters of a candidate's answer shown in the report (the excerpt the proposer keeps of a
#: dropped answer is at most 200)
ANSWER_CHARS = 600


def candidate_answer(c: Candidate) -> str:
    """What the proposer (rule, LLM or memory miner) answered for a candidate, in one string
    of at most ``ANSWER_CHARS`` characters: the patch's rationale and its RFC 6902 ops when it
    parsed, else the raw answer the checks refused (or the excerpt of one the proposer's own
    validator dropped); "" when there is none (a call that failed outright)."""
    if c.patch is not None:
        ops = "; ".join(
            f"{op.get('op', '')} {op.get('path', '')}"
            + (f" = {_json(op['value'])}" if "value" in op else "")
            for op in c.patch.ops
        )
        text = f"{c.patch.rationale} — {ops}" if c.patch.rationale else ops
    elif c.raw is None:
        return ""
    else:
        text = c.raw if isinstance(c.raw, str) else _json(c.raw)
    return text if len(text) <= ANSWER_CHARS else text[: ANSWER_CHARS - 1] + "…"


def _scope_view(sp: dict[str, Any]) -> dict[str, Any] | None:
    """The scope probes of a candidate for the template (None when none ran)."""
    if not sp:
        return None
    return {
        "ok": bool(sp.get("ok")),
        "scope": str(sp.get("scope", "")),
        "detail": str(sp.get("detail", "")),
        "groups": [
            {
                "name": k,
                "parent": _fmt_pct(v[0]),
                "candidate": _fmt_pct(v[1]),
                "lost": int(v[2]),
                "n": int(v[3]),
            }
            for k, v in (sp.get("groups") or {}).items()
        ],
    }


def _reject_kind(c: Candidate) -> str:
    """A short name of why a candidate was rejected: the check's name (``no_op``,
    ``scope_regression``, …) or the gate's first failed condition in words before its
    figures (``regression in family single_object``)."""
    if c.gate is not None:
        first = c.gate.reasons[0] if c.gate.reasons else "refused"
        return re.split(r"[\d(:=<>≥≤+-]", first, maxsplit=1)[0].strip() or "refused"
    return c.reject_reason.split(":")[0].strip() or "not validated"


def reject_reason(c: Candidate) -> str:
    """Why a candidate was not accepted, in one line: the check that rejected it
    (``no_op``, ``scope_regression``, ``duplicate``, …, with its detail), or the gate's failed
    conditions; "" for the accepted candidate and one that passed the gate but lost to
    another."""
    if c.status.value == "accepted" or (c.gate is not None and c.gate.accepted):
        return ""
    if c.gate is not None:
        return "gate: " + "; ".join(c.gate.reasons)
    return c.reject_reason or "not validated"


def _patch_view(c: Candidate | None) -> dict[str, Any] | None:
    if c is None or c.patch is None:
        return None
    groups: dict[str, list[dict[str, str]]] = defaultdict(list)
    for op in c.patch.ops:
        path = str(op.get("path", ""))
        resp = path.split("/")[1] if path.count("/") >= 1 else c.patch.responsibility.value
        groups[resp].append(
            {
                "op": str(op.get("op", "")),
                "path": path,
                "from": str(op.get("from", "")),
                "value": _json(op["value"]) if "value" in op else "",
            }
        )
    return {
        "candidate_id": c.candidate_id,
        "responsibility": c.patch.responsibility.value,
        "rationale": c.patch.rationale,
        "expected_effect": c.patch.expected_effect,
        "scope": patch_scope(c.patch),
        "groups": dict(groups),
    }


def _round_view(r: RoundReport, beam: int = 0) -> dict[str, Any]:
    by_id = {c.candidate_id: c for c in r.candidates}
    accepted = None
    if r.decision.kind is DecisionKind.accepted:
        accepted = by_id.get(r.decision.candidate_id or "") or next(
            (c for c in r.candidates if c.status.value == "accepted"), None
        )
    clusters = {c.cluster_id: c for c in r.clusters}
    attributions = [
        {
            "cluster": a.cluster_id,
            "symptom": clusters[a.cluster_id].symptom if a.cluster_id in clusters else "",
            "chosen": a.chosen,
            "score": f"{a.scores.get(a.chosen, 0.0):.2f}",
            "reasons": a.reasons,
        }
        for a in r.attributions
    ]
    return {
        "round": r.round,
        "beam": beam,
        "anchor": f"round-{r.round}" + (f"-b{beam}" if beam else ""),
        "parent": r.parent_harness_id,
        "decision": {
            "kind": r.decision.kind.value,
            "reason": r.decision.reason,
            "harness_id": r.decision.harness_id,
            "candidate_id": r.decision.candidate_id,
        },
        "patch": _patch_view(accepted),
        "attributions": attributions,
        "candidates": [_candidate_row(c) for c in r.candidates],
        "rejected": [
            {
                "id": c.candidate_id,
                "stage": "gate" if c.gate is not None else "checks",
                "kind": _reject_kind(c),
                "reason": reject_reason(c),
            }
            for c in r.candidates
            if reject_reason(c)
        ],
        "preservation": None
        if r.preservation is None
        else {
            "selected": len(r.preservation.task_ids),
            "pool": r.preservation.pool,
            "seeds": ", ".join(str(x) for x in r.preservation.selection_seeds),
            "families": ", ".join(f"{k} {v}" for k, v in r.preservation.families.items()),
            "classes": r.preservation.classes,
            "pool_classes": r.preservation.pool_classes,
            "min_pass_rate": f"{r.preservation.min_pass_rate:.0%}",
            "fallback": r.preservation.fallback,
            "notes": list(r.preservation.notes),
        },
        "pass_rates": {k: _fmt_pct(v) for k, v in r.pass_rates.items()},
        "cost": {k: _fmt_num(v) for k, v in r.cost.items()},
        "n_clusters": len(r.clusters),
    }


def _rates(rates: dict[str, Any], order: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    keys = [k for k in order if k in rates] + sorted(k for k in rates if k not in order)
    return [
        {
            "name": k,
            "before": _fmt_pct(rates[k].before),
            "after": _fmt_pct(rates[k].after),
            "before_w": round(100 * rates[k].before, 1),
            "after_w": round(100 * rates[k].after, 1),
            "delta": _fmt_delta(rates[k].delta),
            "delta_raw": rates[k].delta,
            "n": rates[k].n,
            "unit": rates[k].unit,
            "tasks": rates[k].tasks,
            "ci_before": _fmt_ci(rates[k].ci_before),
            "ci_after": _fmt_ci(rates[k].ci_after),
            "ci_delta": _fmt_ci(rates[k].ci_delta, delta=True),
        }
        for k in keys
    ]


def _rate_cells(r: PassRate | None) -> dict[str, Any]:
    if r is None:
        return {
            "before": "—",
            "after": "—",
            "delta": "—",
            "delta_raw": 0.0,
            "ci_before": "",
            "ci_after": "",
            "ci_delta": "",
        }
    return {
        "before": _fmt_pct(r.before),
        "after": _fmt_pct(r.after),
        "delta": _fmt_delta(r.delta),
        "delta_raw": r.delta,
        "ci_before": _fmt_ci(r.ci_before),
        "ci_after": _fmt_ci(r.ci_after),
        "ci_delta": _fmt_ci(r.ci_delta, delta=True),
    }


def _verifier_rows(scores: dict[str, VerifierScores]) -> list[dict[str, Any]]:
    keys = [k for k in SPLIT_ORDER if k in scores] + sorted(
        k for k in scores if k not in SPLIT_ORDER
    )
    rows = []
    for k in keys:
        v = scores[k]
        if v.internal_geneval is not None and v.official_geneval is not None:
            gap = v.internal_geneval.delta - v.official_geneval.delta
        else:
            gap = v.internal_constraint.delta - v.official_constraint.delta
        rows.append(
            {
                "name": k,
                "internal_constraint": _rate_cells(v.internal_constraint),
                "official_constraint": _rate_cells(v.official_constraint),
                "internal_geneval": _rate_cells(v.internal_geneval),
                "official_geneval": _rate_cells(v.official_geneval),
                "gap": _fmt_delta(gap),
                "flagged": gap > OVERFIT_MARGIN,
                "n": v.official_constraint.n,
                "tasks": v.official_constraint.tasks,
                "images": v.official_geneval.n if v.official_geneval is not None else 0,
            }
        )
    return rows


def _pair_view(p: ImagePair, images: _Images) -> dict[str, Any]:
    return {
        "task_id": p.task_id,
        "prompt": p.prompt,
        "seed": p.seed,
        "split": p.split,
        "family": p.task_family,
        "before_src": images.src(p.before_png),
        "after_src": images.src(p.after_png),
        "verdicts": [v.model_dump(mode="json") for v in p.verdicts],
        "n_pass_before": sum(v.before.value == "pass" for v in p.verdicts),
        "n_pass_after": sum(v.after.value == "pass" for v in p.verdicts),
        "verifier": p.verifier,
        "official": any(v.official_before is not None for v in p.verdicts),
        "label": p.label,
        "label_class": p.label.split()[0] if p.label else "",
    }


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(_load_template),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["short"] = short_id
    return env


def _load_template(name: str) -> str:
    return (resources.files("evoharness.report") / name).read_text(encoding="utf-8")


def _cost_rows(run: RunReportInput) -> list[dict[str, Any]]:
    """Baseline vs final cost per request (``run.request_cost``), one row per figure."""
    b, f = run.request_cost.get("baseline"), run.request_cost.get("final")
    if b is None or f is None:
        return []
    rows = []
    for name, key in (
        ("generator calls per request", "generator_calls"),
        ("generator-seconds per request", "generator_seconds"),
    ):
        x, y = getattr(b, key), getattr(f, key)
        rows.append(
            {
                "name": name,
                "before": f"{x:.2f}",
                "after": f"{y:.2f}",
                "ratio": f"×{y / x:.2f}" if x > 0 else "—",
                "worse": y > x + 1e-9,
            }
        )
    return rows


def _promotion_view(run: RunReportInput) -> dict[str, Any] | None:
    """The promotion decision (``run.promotion``) for the summary: what happened to the
    channel, the comparison it rests on, and the decision's line."""
    p = run.promotion
    if p is None:
        return None
    if p.moved:
        status = "moved (--force-promote) although not better" if p.forced else "moved"
    elif p.current_registration is not None and p.candidate_rate is None:
        status = "not moved: it already serves this harness"
    else:
        status = "not moved (refused): this run's harness is not better"
    compared = None
    if p.candidate_rate is not None and p.current_rate is not None:
        compared = {
            "basis": p.basis,
            "candidate": f"{p.candidate_rate:.3f}",
            "current": f"{p.current_rate:.3f}",
            "verdicts": p.verdicts,
        }
    return {
        "channel": p.channel,
        "moved": p.moved,
        "status": status,
        "line": p.line,
        "candidate": p.candidate_registration,
        "current": p.current_registration,
        "compared": compared,
    }


def build_context(run: RunReportInput, images: _Images) -> dict[str, Any]:
    """The template's variables (plain strings and numbers, formatted for display). Candidate
    ids are qualified with their beam branch (``evoharness.report.lineage``)."""
    beams = run.beams or [0] * len(run.rounds)
    rounds = [qualify_candidate_ids(r, b) for r, b in zip(run.rounds, beams, strict=True)]
    totals: dict[str, float] = defaultdict(float)
    for r in rounds:
        for k, v in r.cost.items():
            totals[k] += v
    cost_keys = sorted({k for r in rounds for k in r.cost})
    round_numbers = sorted({r.round for r in rounds})
    accepted_in = {r.round for r in rounds if r.decision.kind is DecisionKind.accepted}
    lineage = patch_lineage(rounds, run.baseline_harness_id, run.final_harness_id)
    # the headline: the untouched test split when there is one (no gate read it)
    head_split = "test" if "test" in run.split_pass_rates else "target"
    head = run.split_pass_rates.get(head_split)
    head_official = run.verifier_scores.get(head_split)
    return {
        "run": {
            "id": run.run_id,
            "title": run.title,
            "started": run.started_at.isoformat(timespec="seconds"),
            "finished": run.finished_at.isoformat(timespec="seconds") if run.finished_at else "",
            "duration": _duration(run.started_at, run.finished_at),
            "generator": run.generator_id,
            "baseline": run.baseline_harness_id,
            "final": run.final_harness_id,
            "notes": run.notes,
            "mode": run.mode,
            "currency": run.currency,
        },
        "unreadable_rounds": run.unreadable_rounds,
        "promotion": _promotion_view(run),
        "nothing_checkable": None
        if run.nothing_checkable is None
        else {
            "count": len(run.nothing_checkable),
            "of": run.prompts_read,
            "shown": run.nothing_checkable[:NOTHING_CHECKABLE_SHOWN],
            "more": max(0, len(run.nothing_checkable) - NOTHING_CHECKABLE_SHOWN),
        },
        "headline": None
        if head is None
        else {
            "split": head_split,
            "untouched": head_split == "test",
            **_rates({head_split: head})[0],
            "official": None
            if head_official is None or head_official.official_geneval is None
            else _rate_cells(head_official.official_geneval),
        },
        "n_rounds": len(round_numbers),
        "n_reports": len(rounds),
        "n_accepted": sum(r.decision.kind is DecisionKind.accepted for r in rounds),
        "n_no_patch": len(set(round_numbers) - accepted_in),
        "n_candidates": sum(len(r.candidates) for r in rounds),
        "n_rejected": sum(1 for r in rounds for c in r.candidates if reject_reason(c)),
        "lineage": None
        if lineage is None
        else [{"round": r.round, "id": c.candidate_id} for r, c in lineage],
        "split_rates": _rates(run.split_pass_rates, SPLIT_ORDER),
        "tag_rates": _rates(run.tag_pass_rates),
        "tag_split": run.tag_split,
        "verifier_rows": _verifier_rows(run.verifier_scores),
        "internal_verifier": run.internal_verifier,
        "official_verifier": run.official_verifier,
        "overfit_margin": _fmt_pct(OVERFIT_MARGIN),
        "pairs": [_pair_view(p, images) for p in run.image_pairs],
        "rounds": [_round_view(r, b) for r, b in zip(rounds, beams, strict=True)],
        "request_cost": _cost_rows(run),
        "requests": {k: v.requests for k, v in run.request_cost.items()},
        "spend": None if run.spend is None else f"{run.spend:,.4f}",
        "cost_keys": cost_keys,
        "cost_rows": [
            {
                "round": r.round if not b else f"{r.round} (branch {b})",
                "values": [_fmt_num(r.cost[k]) if k in r.cost else "—" for k in cost_keys],
            }
            for r, b in zip(rounds, beams, strict=True)
        ],
        "cost_totals": [_fmt_num(totals[k]) for k in cost_keys],
    }


def render_html(
    run: RunReportInput, out_dir: Path, images: Literal["embed", "copy"] = "embed"
) -> str:
    """The report's HTML text (images resolved as in ``render_report``)."""
    return _render(run, _Images(Path(out_dir), images))


def _render(run: RunReportInput, images: _Images) -> str:
    template = _environment().get_template("template.html")
    return template.render(**build_context(run, images))


def render_report(
    run: RunReportInput,
    out_dir: str | os.PathLike[str],
    *,
    images: Literal["embed", "copy"] = "embed",
) -> Path:
    """Write ``out_dir/report.html`` (atomically) and return its path.

    ``images="embed"`` puts every PNG into the page as a ``data:`` URI (one self-contained
    file); ``"copy"`` copies them into ``out_dir/images/`` (named by content hash) and links
    them relatively. Raises ``ReportError`` naming an image that is missing or not a PNG
    (nothing is written then).
    """
    out = Path(out_dir)
    resolver = _Images(out, images)
    html = _render(run, resolver)
    resolver.flush()
    return atomic_write_bytes(out / "report.html", html.encode("utf-8"))


__all__ = ["ReportError", "build_context", "render_html", "render_report", "short_id"]
