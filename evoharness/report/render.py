"""Render the HTML run report: one self-contained ``report.html``.

The page holds the run's summary, pass rates before/after (per split and per GenEval tag),
transfer (the same harnesses on prompts no evolution split came from, and the share of the
test split's gain kept),
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

This module lays out the page (context, images, template, writing); the formatted cells and
pass-rate rows are ``evoharness.report.cells``, the rounds' decisions and candidates
``evoharness.report.rounds``.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
from collections import defaultdict
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import jinja2

from evoharness.report.cells import (
    duration,
    fmt_delta,
    fmt_num,
    fmt_pct,
    rate_cells,
    rate_rows,
    short_id,
)
from evoharness.report.lineage import patch_lineage, qualify_candidate_ids
from evoharness.report.models import ImagePair, RunReportInput, VerifierScores
from evoharness.report.rounds import reject_reason, round_view
from evoharness.tasks.io import atomic_write_bytes
from evoharness.tasks.splits import SPLITS
from evoharness.trace.models import DecisionKind

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: Internal gain minus official gain (GenEval overall, else constraint pass rate) above which
#: a split is flagged as pleasing the internal verifier more than the official scorer: two
#: percentage points, about one image in fifty.
OVERFIT_MARGIN = 0.02
#: Task ids named under the nothing-checkable count (the rest are counted, "and N more").
NOTHING_CHECKABLE_SHOWN = 20


class ReportError(ValueError):
    """The report cannot be rendered (missing or non-PNG image); the message names the file."""


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


def _verifier_rows(scores: dict[str, VerifierScores]) -> list[dict[str, Any]]:
    keys = [k for k in SPLITS if k in scores] + sorted(k for k in scores if k not in SPLITS)
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
                "internal_constraint": rate_cells(v.internal_constraint),
                "official_constraint": rate_cells(v.official_constraint),
                "internal_geneval": rate_cells(v.internal_geneval),
                "official_geneval": rate_cells(v.official_geneval),
                "gap": fmt_delta(gap),
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
        "agents": [
            (tag, a.model_dump(mode="json"))
            for tag, a in (("before", p.agent_before), ("after", p.agent_after))
            if a is not None
        ],
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


def _transfer_view(run: RunReportInput) -> dict[str, Any] | None:
    """The transfer set's figures (``run.transfer``) for its section: official and internal
    constraint pass rate before → after, the test split's official gain beside them, the
    gain kept, and where the set came from."""
    t = run.transfer
    if t is None:
        return None
    rows = {"transfer set, official": t.official, "transfer set, internal": t.internal}
    if t.test_official is not None:
        rows["test split (untouched), official"] = t.test_official
    kept = t.gain_kept
    return {
        "rows": rate_rows(rows, tuple(rows)),
        "gain_kept": "—" if kept is None else fmt_pct(kept),
        "gain_kept_why": ""
        if kept is not None
        else "no test split"
        if t.test_official is None
        else "the test split gained nothing",
        "sources": ", ".join(f"{name} {n}" for name, n in t.sources.items()),
        "nothing_checkable": ", ".join(f"{name} {n}" for name, n in t.nothing_checkable.items()),
        "evolution": ", ".join(f"{name} {n}" for name, n in t.evolution_sources.items()),
        "extractor": t.extractor,
        "seeds": t.seeds,
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
            "duration": duration(run.started_at, run.finished_at),
            "generator": run.generator_id,
            "baseline": run.baseline_harness_id,
            "final": run.final_harness_id,
            "notes": run.notes,
            "mode": run.mode,
            "currency": run.currency,
        },
        "unreadable_rounds": run.unreadable_rounds,
        "promotion": _promotion_view(run),
        "transfer": _transfer_view(run),
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
            **rate_rows({head_split: head})[0],
            "official": None
            if head_official is None or head_official.official_geneval is None
            else rate_cells(head_official.official_geneval),
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
        "split_rates": rate_rows(run.split_pass_rates, SPLITS),
        "tag_rates": rate_rows(run.tag_pass_rates),
        "tag_split": run.tag_split,
        "verifier_rows": _verifier_rows(run.verifier_scores),
        "internal_verifier": run.internal_verifier,
        "official_verifier": run.official_verifier,
        "overfit_margin": fmt_pct(OVERFIT_MARGIN),
        "pairs": [_pair_view(p, images) for p in run.image_pairs],
        "rounds": [round_view(r, b) for r, b in zip(rounds, beams, strict=True)],
        "request_cost": _cost_rows(run),
        "requests": {k: v.requests for k, v in run.request_cost.items()},
        "spend": None if run.spend is None else f"{run.spend:,.4f}",
        "cost_keys": cost_keys,
        "cost_rows": [
            {
                "round": r.round if not b else f"{r.round} (branch {b})",
                "values": [fmt_num(r.cost[k]) if k in r.cost else "—" for k in cost_keys],
            }
            for r, b in zip(rounds, beams, strict=True)
        ],
        "cost_totals": [fmt_num(totals[k]) for k in cost_keys],
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
