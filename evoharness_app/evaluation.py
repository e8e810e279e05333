"""The main job's before/after evaluation: every harness run on every split, scored by the
internal verifier and officially.

- ``evaluate_harness``: one harness on every (task, seed) of every split, through the
  services (``workflows.backends.TracePorts``; content-addressed, so executions the run
  already made are cache hits).
- ``score_officially``: the same executions with their evidence replaced by the official
  scorer's (``evoharness_app.official``) on the same stored images.
- ``score_split``: pass rates of one harness on one split (``SplitScore``).
- ``Evaluation``: the whole before/after evaluation of a run and the figures the report
  reads from it (task-level intervals, per-tag rates, cost per request, outcomes, image
  cards).

``FINAL`` names the untouched test split (``evoharness.tasks.splits.TEST_SPLIT``).
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evoharness.evidence import EvidenceStatus
from evoharness.harness import Harness
from evoharness.tasks.models import Task
from evoharness.tasks.splits import TEST_SPLIT

#: The untouched test split (``tasks.splits.TEST_SPLIT``), evaluated only before/after.
FINAL = TEST_SPLIT


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
        from evoharness.report import ConstraintVerdict, ImagePair, agent_trajectory

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
                description=describe_constraint(cons.get(eb.constraint_id)),
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
            agent_before=agent_trajectory(b.trace),
            agent_after=agent_trajectory(a.trace),
        )


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


def describe_constraint(c: Any) -> str:
    """One constraint in a few words (type, subject, relation, value, count range) for an
    image card; "" for None."""
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


def evaluate_harness(
    ports: Any,
    harness: Harness,
    splits: dict[str, list[Task]],
    seeds: tuple[int, ...],
    *,
    concurrency: int,
    progress: Callable[[int], None],
) -> dict[str, dict[tuple[str, int], Any]]:
    """Run ``harness`` on every (task, seed) of every split through ``ports.execute`` on
    ``concurrency`` threads; ``progress(1)`` after each. Returns split → (task_id, seed) →
    ``Execution``."""
    jobs = [(s, t, seed) for s in splits for t in splits[s] for seed in seeds]
    out: dict[str, dict[tuple[str, int], Any]] = {s: {} for s in splits}
    with concurrent.futures.ThreadPoolExecutor(concurrency) as pool:
        futs = {pool.submit(ports.execute, harness, t, seed): (s, t, seed) for s, t, seed in jobs}
        for fut in concurrent.futures.as_completed(futs):
            s, t, seed = futs[fut]
            out[s][(t.task_id, seed)] = fut.result()
            progress(1)
    return out


def score_officially(
    store: Any,
    splits: dict[str, list[Task]],
    runs: dict[str, dict[tuple[str, int], Any]],
    scorer: Any,
    *,
    concurrency: int,
    progress: Callable[[int], None],
) -> dict[str, dict[tuple[str, int], Any]]:
    """The executions of ``runs`` (split → (task_id, seed) → Execution) with their evidence
    replaced by ``scorer``'s (the official one, ``evoharness_app.official``) on the same
    image, read from ``store``. Raises ``ValueError`` naming the (split, (task, seed)) of an
    image that cannot be scored."""
    from evoharness_app.official import verify_images

    by_id = {t.task_id: t for s in splits for t in splits[s]}
    execs = {(s, k): ex for s, split in runs.items() for k, ex in split.items()}

    def read(ex: Any) -> Callable[[], bytes]:
        return lambda: store.get(ex.image.key)

    evidence = verify_images(
        scorer,
        {key: (read(ex), by_id[ex.task_id]) for key, ex in execs.items()},
        concurrency=concurrency,
        progress=progress,
    )
    out: dict[str, dict[tuple[str, int], Any]] = {s: {} for s in runs}
    for (s, k), ex in execs.items():
        out[s][k] = ex.model_copy(update={"evidence": evidence[(s, k)]})
    return out
