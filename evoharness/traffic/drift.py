"""How far recent traffic is from the tasks a harness was evolved on (issue 34).

A ``TrafficProfile`` summarises a set of prompts by the constraints read from them, as two
distributions: ``kinds`` — the share of prompts that ask for each constraint type (object,
count, colour, position, text, negative, attribute, ...) — and ``classes`` — the share of
object mentions per object class (the ``subject`` of object, count, colour and attribute
constraints). Both are counts; ``distribution`` normalises them.

``drift`` is the Jensen–Shannon distance (the square root of the Jensen–Shannon divergence,
base 2, so it lies in [0, 1]: 0 for identical distributions, 1 for disjoint ones; Lin 1991,
"Divergence measures based on the Shannon entropy", IEEE Trans. Inf. Theory 37(1); computed by
``scipy.spatial.distance.jensenshannon``) between a reference profile (the tasks the serving
harness was evolved on) and a window of recent traffic, per distribution.

``failure_rates`` is the recent share of failed verdicts per constraint type (uncertain verdicts
are not counted either way), the second signal the drift alerts watch.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from evoharness.tasks.models import Constraint, ConstraintType
from evoharness.traffic.records import TrafficRecord

#: Constraint types whose ``subject`` is an object class.
_CLASS_TYPES = {
    ConstraintType.object,
    ConstraintType.count,
    ConstraintType.color,
    ConstraintType.attribute,
}


class TrafficProfile(BaseModel):
    """Counts of constraint kinds (per prompt) and object classes (per mention) over ``n``
    prompts; ``source`` says where they came from (a task file, a channel and its dates)."""

    model_config = ConfigDict(extra="forbid")

    n: int = Field(default=0, ge=0)
    kinds: dict[str, int] = Field(default_factory=dict)
    classes: dict[str, int] = Field(default_factory=dict)
    source: str = ""
    created: dt.datetime | None = None

    @classmethod
    def of(cls, prompts: Iterable[Sequence[Constraint]], source: str = "") -> TrafficProfile:
        """The profile of prompts given by their constraints (one sequence per prompt).
        ``quality`` constraints are split-preparation checks, not something a prompt asks
        for, and are left out."""
        kinds: Counter[str] = Counter()
        classes: Counter[str] = Counter()
        n = 0
        for cons in prompts:
            n += 1
            kinds.update({str(c.type.value) for c in cons if c.type is not ConstraintType.quality})
            classes.update(c.subject for c in cons if c.type in _CLASS_TYPES)
        return cls(
            n=n,
            kinds=dict(kinds),
            classes=dict(classes),
            source=source,
            created=dt.datetime.now(dt.UTC),
        )

    @classmethod
    def of_records(cls, records: Iterable[TrafficRecord], source: str = "") -> TrafficProfile:
        """The profile of sampled records (the constraints the serving harness read)."""
        return cls.of((r.constraints for r in records), source)


def distribution(counts: Mapping[str, int]) -> dict[str, float]:
    """``counts`` normalised to sum 1 (empty when the total is 0)."""
    total = sum(counts.values())
    return {k: v / total for k, v in counts.items()} if total else {}


def js_distance(p: Mapping[str, int], q: Mapping[str, int]) -> float | None:
    """Jensen–Shannon distance (base 2, in [0, 1]) between two count maps over the union of
    their keys; None when either is empty (nothing to compare)."""
    from scipy.spatial.distance import jensenshannon

    if not sum(p.values()) or not sum(q.values()):
        return None
    keys = sorted(set(p) | set(q))
    d = float(jensenshannon([p.get(k, 0) for k in keys], [q.get(k, 0) for k in keys], base=2))
    return min(1.0, max(0.0, d))


def drift(reference: TrafficProfile, recent: TrafficProfile) -> dict[str, float]:
    """``{"kinds": d, "classes": d}``: the Jensen–Shannon distance per distribution; a
    distribution empty on either side is left out."""
    out: dict[str, float] = {}
    for name in ("kinds", "classes"):
        d = js_distance(getattr(reference, name), getattr(recent, name))
        if d is not None:
            out[name] = d
    return out


def failure_rates(records: Iterable[TrafficRecord]) -> dict[str, float]:
    """Per constraint type: failed / (passed + failed) verdicts over ``records``; types with no
    decided verdict are left out."""
    failed: Counter[str] = Counter()
    decided: Counter[str] = Counter()
    for r in records:
        for v in r.verdicts:
            if v.status == "uncertain":
                continue
            decided[v.type] += 1
            failed[v.type] += v.status == "fail"
    return {k: failed[k] / n for k, n in decided.items() if n}
