"""The Memory responsibility at compile time (step 2): guidelines whose trigger is a present
feature or a prompt keyword add their text; bundles retrieved through the ``MemoryStore`` port
(the harness's own bundles via ``BundleMemory`` when none is given) add what their
``decision_guidance`` asks for (``evoharness.memory.bundles``); other guidance keys are traced
as ignored."""

from __future__ import annotations

from typing import Any

from evoharness.harness.schema import Harness
from evoharness.ports import MemoryStore
from evoharness.runtime.bundle_memory import BundleMemory
from evoharness.runtime.harness_checks import PARAM_FIELDS, REWRITE_KINDS
from evoharness.runtime.steps import Rec, Requests, as_list, word_in

#: ``decision_guidance`` keys the compiler applies; others are traced as ignored.
APPLIED_GUIDANCE = {"append_text", "negative_terms", "rewrites", "params", "use_tools"}


def apply_memory(
    harness: Harness,
    store: MemoryStore | None,
    prompt: str,
    features: set[str],
    req: Requests,
    rec: Rec,
) -> None:
    """Add memory's requests to ``req`` when ``harness.memory.enabled`` (else do nothing).
    Traces ``memory/guideline`` per matching guideline and ``memory/retrieve`` per bundle hit
    (or one record saying no bundle was similar enough)."""
    h = harness
    if not h.memory.enabled:
        return
    for gi, g in enumerate(h.memory.guidelines):
        if g.trigger in features or word_in(g.trigger, prompt):
            req.append.append((g.text, f"memory.guidelines[{gi}]"))
            rec("memory", "guideline", index=gi, trigger=g.trigger, text=g.text)
    store = store or BundleMemory(b.model_dump(mode="json") for b in h.memory.bundles)
    hits = store.retrieve(prompt, h.memory.top_k, h.memory.min_similarity)
    for hit in hits:
        bid = str(hit.bundle.get("bundle_id", ""))
        guidance = hit.bundle.get("decision_guidance") or {}
        applied: dict[str, Any] = {}
        src = f"memory.bundle:{bid}"
        for t in as_list(guidance.get("append_text")):
            req.append.append((t, src))
            applied.setdefault("append_text", []).append(t)
        for t in as_list(guidance.get("negative_terms")):
            req.negative.append((t, src))
            applied.setdefault("negative_terms", []).append(t)
        for k in as_list(guidance.get("rewrites")):
            if k in REWRITE_KINDS:
                req.rewrites.append((k, src))
                applied.setdefault("rewrites", []).append(k)
        for k, v in sorted((guidance.get("params") or {}).items()):
            if k in PARAM_FIELDS and isinstance(v, int | float):
                req.params.append((k, src, v))
                applied.setdefault("params", {})[k] = v
        for name in as_list(guidance.get("use_tools")):
            # a declared tool's name, or a tool kind (every declared tool of it)
            names = [t.name for t in h.tools.tools if name in (t.name, t.kind)]
            req.tools.extend((n, src) for n in names)
            applied.setdefault("use_tools", []).extend(names)
        rec(
            "memory",
            "retrieve",
            bundle_id=bid,
            similarity=hit.similarity,
            applied=applied,
            ignored_keys=sorted(set(guidance) - APPLIED_GUIDANCE),
        )
    if not hits:
        rec(
            "memory",
            "retrieve",
            bundle_id=None,
            applied={},
            note="no bundle similar enough",
        )


__all__ = ["APPLIED_GUIDANCE", "apply_memory"]
