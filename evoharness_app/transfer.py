"""Transfer (issue 30 item 4): how much of a run's gain carries over to prompts that no
evolution split came from.

The main job evolves on GenEval prompts plus the project's synthetic ones (two dataset
families; ``evoharness.tasks.split_prepare.build_run_splits``). Its test split is untouched
but drawn from the same two families, so a harness fitted to GenEval's templates scores
well there. The *transfer set* is a second distribution: a seeded sample of T2I-CompBench
*training* prompts (Huang et al. 2023, ``data/t2icompbench/*_train.txt``) and PartiPrompts
(Yu et al. 2022, ``data/partiprompts/PartiPrompts.tsv``), half each, read by the project's
builders (``evoharness.tasks.builders``). Neither family ever enters evolution.

- Label-free: every transfer constraint is what the fixed extractor (``rules-v1``,
  ``evoharness.tasks.labelfree.label_free``) reads from the prompt; no benchmark field
  (PartiPrompts' ``Challenge`` or ``Note``, a category) is read as a constraint. A prompt
  the extractor reads nothing checkable from is passed over (counted) and the next one in
  the seeded order taken, so the set has the size asked for whenever the data allows.
- Seeded: within each dataset the prompts are shuffled per category with
  ``random.Random(f"{seed}:{dataset}")`` and dealt round-robin over the categories, so the
  sample spreads over them and the same seed gives the same set.
- Disjoint by dataset family (the first part of ``task_id``: ``geneval``, ``synthetic``,
  ``t2icompbench``, ``partiprompts``) from every split of the run: ``TransferError``
  otherwise.

The figures (``transfer_scores``): the transfer set's constraint pass rate baseline →
evolved, official and internal, with the task-level bootstrap intervals of every pass rate
in the report (``Evaluation.split_rate``, ``evoharness.report.intervals.paired_rate``), and
the share of the test split's gain kept (``evoharness.report.models.TransferScores``).
"""

from __future__ import annotations

import os
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evoharness.tasks.models import Task
from evoharness.tasks.splits import family_groups

#: The transfer set's name where it is evaluated like a split (``Evaluation.splits``).
TRANSFER = "transfer"
#: The datasets of the transfer set, in the order their quotas are dealt (the first gets the
#: odd task), and where each lies under the shared data folder.
SOURCES: dict[str, Path] = {
    "t2icompbench": Path("data") / "t2icompbench",
    "partiprompts": Path("data") / "partiprompts" / "PartiPrompts.tsv",
}
#: The fixed extractor that reads the transfer constraints (``labelfree.EXTRACTORS``).
EXTRACTOR = "rules-v1"


class TransferError(ValueError):
    """The transfer set cannot be built: its data is missing (the message names the file),
    too few checkable prompts, or a dataset family shared with an evolution split."""


def dataset_family(task: Task) -> str:
    """The dataset a task came from: the first part of its ``task_id`` (every builder names
    tasks ``<source>/<file stem>/<line>``; ``evoharness.tasks.builders``)."""
    return task.task_id.split("/", 1)[0]


def transfer_inputs(shared_dir: str | os.PathLike[str]) -> dict[str, Path]:
    """Dataset → the file or folder the transfer set reads under ``shared_dir``. Raises
    ``TransferError`` naming the first that is missing (a T2I-CompBench folder without
    ``*_train.txt`` counts as missing)."""
    out = {name: Path(shared_dir) / rel for name, rel in SOURCES.items()}
    for name, p in out.items():
        ok = any(p.glob("*_train.txt")) if p.is_dir() else p.is_file()
        if not ok or not os.access(p, os.R_OK):
            what = f"{p}/*_train.txt" if name == "t2icompbench" else str(p)
            raise TransferError(
                f"{what}: {name} prompts for the transfer set not found or not readable "
                f"(EVOHARNESS_SHARED={shared_dir}; --transfer 0 runs without a transfer set)"
            )
    return out


@dataclass(frozen=True)
class TransferSet:
    """The transfer tasks (constraints read by ``extractor``, no benchmark label), how many
    each dataset gave (``sources``) and passed over for want of a checkable constraint
    (``nothing_checkable``), and the ``seed`` that drew them."""

    tasks: list[Task]
    sources: dict[str, int]
    nothing_checkable: dict[str, int]
    extractor: str
    seed: int
    evolution_sources: dict[str, int] = field(default_factory=dict)


def _seeded_order(tasks: Sequence[Task], seed: int, dataset: str) -> list[Task]:
    """``tasks`` shuffled within each ``task_family`` (category) by a ``random.Random``
    seeded with ``"{seed}:{dataset}"`` and dealt round-robin over the sorted categories
    (``splits.family_groups``). Not ``splits.stratified_order``: that one interleaves the
    families by a random offset, and changing the order would change every transfer set."""
    rng = random.Random(f"{seed}:{dataset}")
    queues = [q for _, q in family_groups(tasks)]
    for q in queues:
        rng.shuffle(q)
    out: list[Task] = []
    for i in range(max((len(q) for q in queues), default=0)):
        out.extend(q[i] for q in queues if i < len(q))
    return out


def check_disjoint(transfer: Sequence[Task], splits: Mapping[str, Sequence[Task]]) -> None:
    """Raise ``TransferError`` when a transfer task's dataset family (``dataset_family``) is
    also a family of a split in ``splits`` (name → tasks), naming both."""
    ours = {dataset_family(t) for t in transfer}
    for name, tasks in splits.items():
        shared = ours & {dataset_family(t) for t in tasks}
        if shared:
            raise TransferError(
                f"transfer set and split {name!r} share dataset famil"
                f"{'ies' if len(shared) > 1 else 'y'} {sorted(shared)}: the transfer set "
                "must come from a distribution no evolution split came from"
            )


def build_transfer_set(
    shared_dir: str | os.PathLike[str],
    n: int,
    seed: int,
    splits: Mapping[str, Sequence[Task]],
    *,
    extractor: str = EXTRACTOR,
) -> TransferSet:
    """``n`` transfer tasks (module docstring): ``n // 2`` PartiPrompts and the rest
    T2I-CompBench training prompts, each dataset in its seeded order, constraints read by
    ``extractor``; checked disjoint by dataset family from every split of ``splits`` (name →
    tasks; ``evolution_sources`` counts their families). Raises ``TransferError`` for
    missing data (naming the file), a dataset with fewer than its quota of checkable
    prompts, or a shared family; ``BuildError`` with ``file:line`` for malformed data."""
    from evoharness.tasks.builders import build_tasks
    from evoharness.tasks.labelfree import extractor_id, label_free

    if n < 0:
        raise TransferError(f"transfer set size {n} is negative")
    inputs = transfer_inputs(shared_dir)
    quotas = dict(zip(SOURCES, (n - n // 2, n // 2), strict=True))
    tasks: list[Task] = []
    skipped: dict[str, int] = {}
    for name, path in inputs.items():
        order = _seeded_order(build_tasks(name, path).tasks, seed, name)
        want, got, passed_over = quotas[name], 0, 0
        # the extractor reads a few more prompts than needed at a time: a few are uncheckable
        step = max(8, want + want // 2)
        for i in range(0, len(order), step):
            if got >= want:
                break
            chunk = order[i : i + step]
            read = {t.task_id: t for t in label_free(chunk, extractor)[0]}
            for t in chunk:
                if got >= want:
                    break
                if t.task_id in read:
                    tasks.append(read[t.task_id])
                    got += 1
                else:
                    passed_over += 1
        if got < want:
            raise TransferError(
                f"{path}: only {got} {name} prompts with a checkable constraint, "
                f"{want} needed for --transfer {n}"
            )
        skipped[name] = passed_over
    check_disjoint(tasks, splits)
    evolution = Counter(dataset_family(t) for s in splits.values() for t in s)
    return TransferSet(
        tasks=tasks,
        sources=dict(Counter(dataset_family(t) for t in tasks)),
        nothing_checkable=skipped,
        extractor=extractor_id(extractor),
        seed=seed,
        evolution_sources=dict(sorted(evolution.items())),
    )


def transfer_scores(tset: TransferSet, transfer_eval: Any, evaluation: Any, seeds: int) -> Any:
    """The run's ``TransferScores`` (``evoharness.report.models``): ``transfer_eval`` is the
    main job's before/after evaluation of the transfer set (``Evaluation`` with the one split
    ``TRANSFER``), ``evaluation`` the run's own (its untouched test split, when there is one,
    gives the gain ``gain_kept`` divides by); ``seeds`` per task."""
    from evoharness.report.models import TransferScores
    from evoharness_app.evaluation import FINAL

    test = None
    if FINAL in evaluation.splits and evaluation.official_scores:
        test = evaluation.split_rate(FINAL, evaluation.official_scores)
    return TransferScores(
        sources=tset.sources,
        nothing_checkable=tset.nothing_checkable,
        extractor=tset.extractor,
        evolution_sources=tset.evolution_sources,
        seeds=seeds,
        official=transfer_eval.split_rate(TRANSFER, transfer_eval.official_scores),
        internal=transfer_eval.split_rate(TRANSFER),
        test_official=test,
    )


__all__ = [
    "EXTRACTOR",
    "SOURCES",
    "TRANSFER",
    "TransferError",
    "TransferSet",
    "build_transfer_set",
    "check_disjoint",
    "dataset_family",
    "transfer_inputs",
    "transfer_scores",
]
