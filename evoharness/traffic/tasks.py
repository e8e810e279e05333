"""Evolution tasks from sampled traffic (issue 34): ``evoharness tasks from-traffic``.

The task set is label-free (``evoharness.tasks.labelfree``): each distinct prompt becomes one
task whose constraints the *fixed* extractor reads (never the serving harness's reading, which
evolution changes). Prompts are deduplicated after ``normalize_prompt``; the task id is
``traffic-<sha256 of the normalised prompt, 12 hex>`` so the same prompt gets the same id in
every task set built from any window. ``metadata`` keeps the source channel, how often the
prompt was seen, and when it was first and last seen.

``task_family`` (the stratum of split preparation and the per-family regression check) is read
from the constraints: ``single_object`` / ``multi_object`` when only objects are asked for, else
the sorted non-object constraint kinds joined by ``+`` (``count``, ``color+position``, ...).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from evoharness.tasks.labelfree import label_free
from evoharness.tasks.models import Constraint, ConstraintType, Task, normalize_prompt
from evoharness.traffic.drift import TrafficProfile
from evoharness.traffic.records import TrafficRecord


def family_of(constraints: Iterable[Constraint]) -> str:
    """The task family of a prompt read as ``constraints`` (module docstring)."""
    cons = [c for c in constraints if c.type is not ConstraintType.quality]
    kinds = sorted({c.type.value for c in cons if c.type is not ConstraintType.object})
    if kinds:
        return "+".join(kinds)
    objects = {c.subject for c in cons if c.type is ConstraintType.object}
    return "single_object" if len(objects) <= 1 else "multi_object"


class TrafficTaskManifest(BaseModel):
    """What a traffic task set was built from (written beside the task file)."""

    model_config = ConfigDict(extra="forbid")

    source: str = "traffic"
    channel: str
    since: dt.date
    until: dt.date
    created: dt.datetime
    extractor: str
    records: int = Field(ge=0)
    batches: int = Field(ge=0)
    unique_prompts: int = Field(ge=0)
    tasks: int = Field(ge=0)
    dropped_nothing_checkable: list[str] = Field(default_factory=list)
    families: dict[str, int] = Field(default_factory=dict)
    profile: TrafficProfile


@dataclass
class _Seen:
    prompt: str
    count: int = 0
    first: dt.datetime | None = None
    last: dt.datetime | None = None
    registrations: set[str] = field(default_factory=set)


def tasks_from_records(
    records: Iterable[TrafficRecord],
    *,
    channel: str,
    since: dt.date,
    until: dt.date,
    batches: int = 0,
    extractor: str = "rules-v1",
) -> tuple[list[Task], TrafficTaskManifest]:
    """One label-free task per distinct prompt of ``records`` (module docstring), ordered by
    first sighting, and the manifest. Raises ``LabelFreeError`` for an unknown extractor."""
    seen: dict[str, _Seen] = {}
    n = 0
    for r in records:
        n += 1
        s = seen.setdefault(normalize_prompt(r.prompt), _Seen(r.prompt))
        s.count += 1
        s.first = r.time if s.first is None or r.time < s.first else s.first
        s.last = r.time if s.last is None or r.time > s.last else s.last
        s.registrations.add(r.registration_id)
    ordered = sorted(seen.items(), key=lambda kv: (kv[1].first or dt.datetime.min, kv[0]))
    raw = [
        Task(
            task_id="traffic-" + hashlib.sha256(norm.encode("utf-8")).hexdigest()[:12],
            prompt=s.prompt,
            task_family="traffic",
        )
        for norm, s in ordered
    ]
    read, summary = label_free(raw, extractor)
    by_id = {t.task_id: s for t, (_, s) in zip(raw, ordered, strict=True)}
    tasks: list[Task] = []
    families: dict[str, int] = {}
    for t in read:
        s = by_id[t.task_id]
        fam = family_of(t.constraints)
        families[fam] = families.get(fam, 0) + 1
        meta = {
            **t.metadata,
            "source": f"traffic:{channel}",
            "seen": s.count,
            "first_seen": s.first.isoformat() if s.first else None,
            "last_seen": s.last.isoformat() if s.last else None,
        }
        tasks.append(t.model_copy(update={"task_family": fam, "metadata": meta}))
    manifest = TrafficTaskManifest(
        channel=channel,
        since=since,
        until=until,
        created=dt.datetime.now(dt.UTC),
        extractor=summary.extractor,
        records=n,
        batches=batches,
        unique_prompts=len(seen),
        tasks=len(tasks),
        dropped_nothing_checkable=summary.dropped,
        families=dict(sorted(families.items())),
        profile=TrafficProfile.of(
            (t.constraints for t in tasks), source=f"traffic:{channel} {since}..{until}"
        ),
    )
    return tasks, manifest
