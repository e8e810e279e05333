"""Label-free evolution (issue 16; EvoGen's protocol): evolution's verifier checks the
constraints a *fixed* extractor reads from each prompt, never a benchmark's labels.

With ``benchmark_labels: false`` (the default of ``workflows.params.EvolutionParams``) every
evolution task's constraints are replaced by what the extractor named in the parameters
reads from the prompt (``label_free``). The extractor is frozen for the run: its id carries a
digest of its source (``extractor_id``), recorded at the run's start and checked at every
continuation. It is *not* the evolving harness's extractor: a harness reads prompts through
its own Policy, which evolution changes; this one never changes during a run.

What is kept: the prompt, ``task_id``, ``task_family`` (the stratum splits and the per-family
regression check use; a benchmark's family name, not a constraint), ``metadata.split``, and a
``quality`` constraint (a generic image check added at split preparation, not a label). What
goes: every benchmark constraint and the rest of the metadata. Benchmark labels and official
scorers are used only to evaluate a run (``evoharness evolve main``'s before/after and the
report's official columns).
"""

from __future__ import annotations

import hashlib
import inspect
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from evoharness.tasks.models import Constraint, ConstraintType, Task


def _rule_extractor() -> Any:
    from evoharness.runtime.extract import RuleExtractor

    return RuleExtractor()


def _rule_sources() -> list[Any]:
    import evoharness.runtime.extract as extract
    import evoharness.runtime.grammar as grammar
    import evoharness.runtime.lexicon as lexicon
    import evoharness.runtime.mentions as mentions
    import evoharness.runtime.rule_parse as rule_parse
    import evoharness.vocab as vocab

    # the grammar the extractor reads by, not only its entry point: a change to the lexicon
    # changes what it extracts (issue 30)
    return [extract, rule_parse, mentions, grammar, lexicon, vocab]


#: Extractors a run may name: name → (factory, modules whose source the id digests).
EXTRACTORS: dict[str, tuple[Callable[[], Any], Callable[[], list[Any]]]] = {
    "rules-v1": (_rule_extractor, _rule_sources),
}


class LabelFreeError(ValueError):
    """An unknown extractor name, or an extractor that changed during a run."""


def extractor_id(name: str) -> str:
    """``<name>@<sha256[:12]>`` of the extractor's source files (``EXTRACTORS``): two runs, or
    two continuations of one run, used the same extractor exactly when the ids are equal.
    Raises ``LabelFreeError`` for an unknown name."""
    if name not in EXTRACTORS:
        raise LabelFreeError(f"extractor {name!r} is not one of {sorted(EXTRACTORS)}")
    h = hashlib.sha256()
    for mod in EXTRACTORS[name][1]():
        h.update(inspect.getsource(mod).encode("utf-8"))
    return f"{name}@{h.hexdigest()[:12]}"


@dataclass(frozen=True)
class LabelFreeSummary:
    """What ``label_free`` did: ``extractor`` id, tasks kept, and tasks dropped because the
    extractor read no constraint from their prompt (nothing to verify)."""

    extractor: str
    kept: int
    dropped: list[str]
    #: what the prompts state that no constraint checks, per kind (``object``, ``attribute``,
    #: ``action``, …): the ``uncertain`` marks of ``explanation.explain`` (issue 30)
    uncertain: dict[str, int] = field(default_factory=dict)


def label_free(
    tasks: Sequence[Task], name: str = "rules-v1"
) -> tuple[list[Task], LabelFreeSummary]:
    """``tasks`` with their constraints replaced by extractor ``name``'s reading of each prompt
    (the module docstring says what is kept); a task whose prompt yields no constraint (and
    has no ``quality`` constraint) is dropped and named in the summary, which also counts per
    kind what the prompts state that no constraint checks (``uncertain``: the marks of
    ``evoharness.runtime.explanation.explain``, every prompt). Raises ``LabelFreeError`` for
    an unknown extractor."""
    from evoharness.runtime.explanation import explain  # lemminflect's lexicon: load on use

    eid = extractor_id(name)
    ex = EXTRACTORS[name][0]()
    out: list[Task] = []
    dropped: list[str] = []
    uncertain: Counter[str] = Counter()
    for t in tasks:
        quality = [c for c in t.constraints if c.type is ConstraintType.quality]
        read: list[Constraint] = list(ex.extract(t.prompt))
        uncertain.update(u["kind"] for u in explain(t.prompt, read)["uncertain"])
        taken = {c.constraint_id for c in read}
        cons = read + [q for q in quality if q.constraint_id not in taken]
        if not cons:
            dropped.append(t.task_id)
            continue
        meta: dict[str, Any] = {"constraints_from": eid}
        if "split" in t.metadata:
            meta["split"] = t.metadata["split"]
        out.append(t.model_copy(update={"constraints": cons, "metadata": meta}, deep=True))
    return out, LabelFreeSummary(
        extractor=eid, kept=len(out), dropped=dropped, uncertain=dict(sorted(uncertain.items()))
    )


__all__ = ["EXTRACTORS", "LabelFreeError", "LabelFreeSummary", "extractor_id", "label_free"]
