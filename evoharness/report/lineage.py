"""The final harness's lineage in a run's round reports, and candidate ids a reader can tell
apart, for the run report and the main job's console summary.

With a beam, one round has one round report per beam branch, and the round core numbers
candidates per report (``r3-c1`` in branch 0 and again in branch 1). ``qualify_candidate_ids``
makes them unique for display by putting the branch in (``r3-b1-c1``); branch 0 keeps its ids.
(The round core should name them so itself; until then the report and the summary qualify them
here, from the report key's ``-b<i>`` suffix.)

Must not import services, workflows or the application (it is in the core).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from evoharness.trace.models import Candidate, CandidateStatus, RoundReport

_ROUND_PREFIX = re.compile(r"^r(?P<round>\d+)-(?P<rest>.+)$")


def qualified_id(candidate_id: str, round_no: int, beam: int) -> str:
    """``candidate_id`` of round ``round_no``'s beam branch ``beam`` made unique across the
    round's branches: ``r3-c1`` in branch 1 → ``r3-b1-c1``; unchanged in branch 0; an id
    not of the form ``r<round>-…`` gets ``@b<beam>``. Idempotent: a qualified id is kept."""
    if not beam or candidate_id.endswith(f"@b{beam}"):
        return candidate_id
    m = _ROUND_PREFIX.match(candidate_id)
    if m and int(m.group("round")) == round_no:
        if m.group("rest").startswith(f"b{beam}-"):
            return candidate_id
        return f"r{round_no}-b{beam}-{m.group('rest')}"
    return f"{candidate_id}@b{beam}"


def qualify_candidate_ids(report: RoundReport, beam: int) -> RoundReport:
    """A copy of ``report`` whose candidate ids (and the decision's) are ``qualified_id``'s
    for beam branch ``beam``; ``report`` itself when ``beam`` is 0."""
    if not beam:
        return report

    def q(cid: str) -> str:
        return qualified_id(cid, report.round, beam)

    return report.model_copy(
        update={
            "candidates": [
                c.model_copy(update={"candidate_id": q(c.candidate_id)}) for c in report.candidates
            ],
            "decision": report.decision.model_copy(
                update={
                    "candidate_id": q(report.decision.candidate_id)
                    if report.decision.candidate_id
                    else report.decision.candidate_id
                }
            ),
        }
    )


def _joined_beam(c: Candidate) -> bool:
    """Accepted, or passed its gate (a gate-passing candidate joins the beam)."""
    return bool(c.harness_id) and (
        c.status is CandidateStatus.accepted or (c.gate is not None and c.gate.accepted)
    )


def patch_lineage(
    rounds: Sequence[RoundReport], baseline_id: str, final_id: str
) -> list[tuple[RoundReport, Candidate]] | None:
    """The patches the final harness holds, in round order: each step (round report,
    candidate) from ``final_id`` back to ``baseline_id`` is a candidate whose harness is the
    child and whose round's parent is the step before it, among candidates that were
    accepted or passed their gate. ``[]`` when the final harness is the baseline; None when
    the chain does not reach the baseline through the reports given (a report missing)."""
    by_child: dict[str, tuple[RoundReport, Candidate]] = {}
    for r in rounds:
        for c in r.candidates:
            if _joined_beam(c) and c.harness_id not in by_child:
                by_child[c.harness_id] = (r, c)
    chain: list[tuple[RoundReport, Candidate]] = []
    cur = final_id
    while cur != baseline_id:
        step = by_child.get(cur)
        if step is None or len(chain) > len(rounds):
            return None
        chain.append(step)
        cur = step[0].parent_harness_id
    return sorted(chain, key=lambda s: s[0].round)


def _short(value: Any) -> str:
    if isinstance(value, dict):
        named = [str(value[k]) for k in ("kind", "name", "id") if value.get(k)]
        if named:
            return " ".join(dict.fromkeys(named))
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 40 else text[:39] + "…"


def describe_change(c: Candidate) -> str:
    """What a candidate's patch changes, in one line: each op and path, with a short value
    (a tool's or stage's kind and name; else its JSON, cut at 40 characters)."""
    if c.patch is None:
        return "no patch"
    return "; ".join(
        f"{op.get('op', '')} {op.get('path', '')}"
        + (f" = {_short(op['value'])}" if "value" in op else "")
        for op in c.patch.ops
    )


__all__ = ["describe_change", "patch_lineage", "qualified_id", "qualify_candidate_ids"]
