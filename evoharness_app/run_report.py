"""The HTML report of any run from what it left in S3 (``evoharness evolve report RUN_ID``).

A run started by hand (``evolve start``, the Temporal CLI) writes its round reports to
``runs/<run_id>/round-NNN.json``; that is all this reads, so it needs neither Temporal nor the
worker. Pass rates come from the rounds themselves: *before* is the starting harness as the
first round measured it (the gate's parent figures, or the round's own pass rates when it
gated nothing), *after* is the harness the last round chose; a run that kept its starting
harness shows one measurement for both (the last round's). Before/after image pairs need
an evaluation of both harnesses on the same tasks and seeds, which only ``make evolve``
(``evoharness_app.main_job``) runs; the report says so. The run's mode
(``runs/<run_id>/mode.json``, written when the run loaded its tasks) gives the report its
evolution mode and the count of prompts with nothing checkable (issue 19); a run that
predates it says "not recorded". A round report that cannot be read is named, with its error,
on the page and on stderr, never dropped silently (``read_round_reports``); beam branches'
reports (``round-NNN-b<i>.json``) are read with their branch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from evoharness.report import PassRate, RunReportInput
from evoharness.trace.models import RoundReport
from evoharness.trace.preservation import run_notes

#: Round report keys of a run: ``runs/<run_id>/round-NNN.json``, and
#: ``round-NNN-b<i>.json`` for beam branch i > 0 (``workflows.evolution``).
ROUND_KEY = re.compile(r"^runs/(?P<run>[^/]+)/round-(?P<n>\d+)(?:-b(?P<b>\d+))?\.json$")


def beam_of(key: str) -> int:
    """The beam branch of a round report key (0: the head's, or not a round report key)."""
    m = ROUND_KEY.match(key)
    return int(m.group("b")) if m and m.group("b") else 0


@dataclass
class RoundReads:
    """The round reports of a run as read: ``reports`` with each one's beam branch in
    ``beams`` (same length), and ``unreadable``: ``"<key>: <error>"`` for each report that
    could not be fetched or did not parse."""

    reports: list[RoundReport] = field(default_factory=list)
    beams: list[int] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)


def read_round_reports(store: Any, keys: list[str]) -> RoundReads:
    """Read the round reports at ``keys`` from ``store`` (anything with ``get(key)``), in the
    order given. A report that cannot be fetched or parsed is listed in ``unreadable`` with
    its key and the error's first line, not raised: the report shows the rest and names it."""
    from pydantic import ValidationError

    from services.storage.s3 import ArtifactStoreError

    out = RoundReads()
    for key in keys:
        try:
            report = RoundReport.model_validate_json(store.get(key))
        except ValidationError as exc:
            e = exc.errors()[0]
            loc = ".".join(str(x) for x in e["loc"]) or "the document"
            n = exc.error_count()
            out.unreadable.append(f"{key}: not a round report ({n} error(s); {loc}: {e['msg']})")
            continue
        except (ValueError, OSError, KeyError, ArtifactStoreError) as exc:
            why = (str(exc).strip().splitlines() or [""])[0] or type(exc).__name__
            out.unreadable.append(f"{key}: {why}")
            continue
        out.reports.append(report)
        out.beams.append(beam_of(key))
    return out


class RunNotInStore(LookupError):
    """No round report of the run is in the bucket."""


def round_keys(store: Any, run_id: str) -> list[str]:
    """The run's round report keys in round order. Raises ``RunNotInStore`` when none."""
    keys = [k for k in store.list_keys(f"runs/{run_id}/") if ROUND_KEY.match(k)]
    if not keys:
        raise RunNotInStore(
            f"no round report under s3://{store.bucket}/runs/{run_id}/ (round-NNN.json): "
            "wrong run id or bucket, or no round has finished yet"
        )
    return sorted(keys, key=lambda k: (int(ROUND_KEY.match(k).group("n")), beam_of(k)))  # type: ignore[union-attr]


def _before(first: RoundReport) -> dict[str, float]:
    """The starting harness's pass rate per split, as the first round measured it."""
    for c in first.candidates:
        if c.gate is not None and c.gate.pass_rates:
            return {s: float(v["parent"]) for s, v in c.gate.pass_rates.items() if "parent" in v}
    return dict(first.pass_rates)


def _modified(store: Any, key: str) -> datetime | None:
    try:
        st = store.client.stat_object(store.bucket, key)
    except Exception:  # noqa: BLE001 - the time is only a label
        return None
    t = getattr(st, "last_modified", None)
    return t.astimezone(UTC) if isinstance(t, datetime) else None


def _mode(store: Any, run_id: str) -> Any:
    """The run's ``EvolutionMode`` from ``runs/<run_id>/mode.json``; None when it is not
    there (a run started before it was written). Raises ``ValueError`` naming the key when
    it does not parse."""
    from workflows.params import EvolutionMode, run_mode_key

    key = run_mode_key(run_id)
    if key not in store.list_keys(key):
        return None
    try:
        return EvolutionMode.model_validate_json(store.get(key))
    except ValueError as exc:
        raise ValueError(f"s3://{store.bucket}/{key}: not a run mode: {exc}") from None


def run_report_input(store: Any, run_id: str) -> RunReportInput:
    """A ``RunReportInput`` from the run's round reports in ``store`` (an
    ``S3ArtifactStore``). A round report that does not parse is left out and named in
    ``unreadable_rounds``. Raises ``RunNotInStore``, or ``ValueError`` naming every key when
    no round report parses."""
    keys = round_keys(store, run_id)
    reads = read_round_reports(store, keys)
    if not reads.reports:
        raise ValueError(
            f"s3://{store.bucket}/runs/{run_id}/: no round report parses: "
            + "; ".join(reads.unreadable)
        )
    rounds = reads.reports
    heads = [r for r, b in zip(rounds, reads.beams, strict=True) if b == 0] or rounds
    first, last = heads[0], heads[-1]
    after = last.pass_rates
    unchanged = last.decision.harness_id == first.parent_harness_id
    # a run that kept its starting harness has one harness and one measurement: the first
    # round's gate figures for it come from other (fresh) seeds than the last round's, and
    # their difference is seed noise, not a change
    before = dict(after) if unchanged else _before(first)
    split_rates = {s: PassRate(before=before[s], after=after[s]) for s in after if s in before}
    mode = _mode(store, run_id)
    label_free = mode is not None and not mode.benchmark_labels
    started = _modified(store, keys[0]) or datetime.now(UTC)
    finished = _modified(store, keys[-1])
    return RunReportInput(
        run_id=run_id,
        started_at=started,
        finished_at=finished if finished and finished >= started else None,
        baseline_harness_id=first.parent_harness_id,
        final_harness_id=last.decision.harness_id,
        split_pass_rates=split_rates,
        mode=mode.describe() if mode is not None else "not recorded",
        nothing_checkable=list(mode.dropped) if label_free else None,
        prompts_read=mode.read if label_free else 0,
        rounds=rounds,
        beams=reads.beams,
        unreadable_rounds=reads.unreadable,
        notes=[
            f"Rendered from the run's {len(rounds)} round report(s) in "
            f"s3://{store.bucket}/runs/{run_id}/ (evoharness evolve report).",
            (
                "Pass rates: the run kept its starting harness, so before and after are the "
                "same measurement (the last round's executions of it)."
                if unchanged
                else "Pass rates: before = the starting harness as the first round measured "
                "it; after = the harness the last round chose, on that round's executions "
                "(seeds as the run's parameters set them)."
            ),
            "Times: when the first and the last round report were written.",
            "No before/after images: they need an evaluation of both harnesses on the same "
            "tasks and seeds, which `make evolve` adds around the workflow.",
            *run_notes(rounds),
        ],
    )
