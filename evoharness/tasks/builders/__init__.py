"""Dataset builders: turn benchmark prompt files into ``Task`` lists.

Every builder keeps prompts verbatim (only line endings and a UTF-8 BOM are removed), gives
each task a stable id ``<source>/<file stem>/<line>`` (the 1-based line of the file where the
row starts; never derived from the prompt text), drops later duplicates after
``normalize_prompt`` (case, punctuation, whitespace) keeping the first, and counts what it
dropped in the ``BuildSummary``. A malformed row stops the build with ``file:line`` (the
builders write nothing; ``write_jsonl`` writes through a temporary file and a rename).

Sources (see ``../shared/README.md`` for the files' quirks):

=============== ========================================= ====================================
dataset         input                                     task_family / constraints
=============== ========================================= ====================================
``geneval``     ``evaluation_metadata.jsonl`` (Ghosh et   GenEval ``tag``; exact object /
                al. 2023)                                 count / color / position constraints
``partiprompts`` ``PartiPrompts.tsv`` (Yu et al. 2022):   ``Category``; none (the policy
                ``Prompt, Category, Challenge, Note``     extractor reads the prompt)
``t2icompbench`` ``<category>_train.txt`` (Huang et al.   category from the file stem; none
                2023), one prompt per line, or a folder
                of them
``wise``        WISE-style JSON array or JSONL:           ``Category``; none (explanation in
                ``Prompt, Explanation, Category,          metadata)
                Subcategory, prompt_id``
``geneval2``    JSONL: ``prompt, atom_count, vqa_list     ``atoms_<atom_count>``; one ``vqa``
                [[question, answer]], skills``            constraint per VQA pair
``synthetic``   none: ``evoharness.tasks.synthetic``      whatever that module sets
``multiref``    none: the embedded reference library      ``multiref_<k>``; per reference a
                (``evoharness.sim.reference_library``)    count (exactly 1), colour, texture
=============== ========================================= ====================================

One module per benchmark (``geneval``, ``partiprompts``, ``t2icompbench``, ``wise``,
``geneval2``, ``synthetic``), the shared errors, summaries and row helpers in ``rows``; this
package dispatches (``build_tasks``), de-duplicates (``dedupe``) and re-exports the public names,
so ``from evoharness.tasks.builders import build_geneval`` keeps working.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from evoharness.tasks.builders.geneval import build_geneval, geneval_constraints
from evoharness.tasks.builders.geneval2 import build_geneval2
from evoharness.tasks.builders.partiprompts import build_partiprompts
from evoharness.tasks.builders.rows import BuildError, BuildResult, BuildSummary, input_files
from evoharness.tasks.builders.synthetic import load_synthetic
from evoharness.tasks.builders.t2icompbench import build_t2icompbench, t2icompbench_family
from evoharness.tasks.builders.wise import build_wise
from evoharness.tasks.io import load_tasks, write_jsonl
from evoharness.tasks.models import Task, normalize_prompt

#: Dataset names accepted by ``build_tasks`` (and ``evoharness build-tasks --dataset``).
DATASETS = (
    "geneval",
    "partiprompts",
    "t2icompbench",
    "wise",
    "geneval2",
    "synthetic",
    "multiref",
)
#: The datasets generated from a seed and a count, with no input file.
GENERATED: tuple[str, ...] = ("synthetic", "multiref")


FILE_BUILDERS: dict[str, Callable[[str | os.PathLike[str]], list[Task]]] = {
    "geneval": build_geneval,
    "partiprompts": build_partiprompts,
    "t2icompbench": build_t2icompbench,
    "wise": build_wise,
    "geneval2": build_geneval2,
}


def dedupe(tasks: list[Task], dataset: str) -> BuildResult:
    """Drop later tasks whose ``normalize_prompt`` equals an earlier one; raise
    ``BuildError`` on a duplicate ``task_id``. Returns the kept tasks and the summary."""
    kept: list[Task] = []
    first_by_key: dict[str, str] = {}
    ids: set[str] = set()
    summary = BuildSummary(dataset=dataset, rows=len(tasks))
    for t in tasks:
        if t.task_id in ids:
            raise BuildError(f"duplicate task_id {t.task_id!r}")
        ids.add(t.task_id)
        f = str(t.metadata.get("file", dataset))
        stats = summary.per_file.setdefault(f, {"rows": 0, "dropped": 0})
        stats["rows"] += 1
        key = normalize_prompt(t.prompt)
        if key in first_by_key:
            summary.dropped.append((t.task_id, first_by_key[key]))
            stats["dropped"] += 1
            continue
        first_by_key[key] = t.task_id
        kept.append(t)
    summary.kept = len(kept)
    summary.families = dict(sorted(Counter(t.task_family for t in kept).items()))
    return BuildResult(kept, summary)


def build_tasks(
    dataset: str,
    input_path: str | os.PathLike[str] | None = None,
    *,
    seed: int = 0,
    count: int = 0,
) -> BuildResult:
    """Build, de-duplicate and summarise the tasks of ``dataset`` (one of ``DATASETS``).

    ``input_path`` is required for every dataset but ``synthetic``, which ignores it and
    calls ``evoharness.tasks.synthetic.build_synthetic(seed=seed, count=count)``, and
    ``multiref``, which ignores it and calls ``build_multiref(seed, count or 12)`` (the
    embedded reference library's keys, local store: no bucket).
    Raises ``BuildError`` (``file:line``) on malformed input and ``ValueError`` for an
    unknown dataset. Nothing is written.
    """
    if dataset == "synthetic":
        tasks = load_synthetic(seed, count)
        inputs: list[str] = []
    elif dataset == "multiref":
        try:
            # imported here: the reference library draws with the simulator (numpy,
            # Pillow), which the CLI's light commands and the workflows' status never load
            from evoharness.tasks.builders.multiref import build_multiref

            tasks = build_multiref(seed, count or 12)
        except ValueError as exc:
            raise BuildError(f"multiref: {exc}") from None
        inputs = []
    elif dataset in FILE_BUILDERS:
        if input_path is None:
            raise BuildError(f"dataset {dataset!r} needs an input file")
        p = Path(input_path)
        if not p.exists():
            raise BuildError(f"{p}: no such file")
        tasks = FILE_BUILDERS[dataset](p)
        inputs = [str(f) for f in input_files(p, "*_train.txt")] if p.is_dir() else [str(p)]
    else:
        raise ValueError(f"unknown dataset {dataset!r}; choose one of {', '.join(DATASETS)}")
    result = dedupe(tasks, dataset)
    result.summary.inputs = inputs
    return result


__all__ = [
    "DATASETS",
    "GENERATED",
    "FILE_BUILDERS",
    "BuildError",
    "BuildResult",
    "BuildSummary",
    "build_geneval",
    "build_geneval2",
    "build_partiprompts",
    "build_t2icompbench",
    "build_tasks",
    "build_wise",
    "dedupe",
    "geneval_constraints",
    "load_tasks",
    "t2icompbench_family",
    "write_jsonl",
]
