"""What the policy extractor reads from a prompt, for a person: ``explain``.

The rule extractor's constraints (``evoharness.runtime.extract``: what the harness's verifier
checks) beside everything else the open reading (``evoharness.runtime.reading``) finds, each
marked ``uncertain`` with the reason the verifier cannot check it; ``evoharness extract`` prints
it. Pure and deterministic; reads only the prompt.
"""

from __future__ import annotations

from typing import Any

from evoharness.runtime.extract import RuleExtractor
from evoharness.runtime.reading import read_open
from evoharness.tasks.models import RELATIONS, Constraint, ConstraintType
from evoharness.vocab import COLORS, SHAPE_WORDS, TEXTURE_WORDS


def _count_value(count: int | None) -> int | str:
    return "many" if count is None else count


def _text_key(t: str) -> str:
    return " ".join(t.casefold().split())


def explain(prompt: str, constraints: list[Constraint] | None = None) -> dict[str, Any]:
    """What the policy extractor reads from ``prompt``, as one JSON-able dict.

    ``constraints`` are the rule extractor's (``RuleExtractor().extract(prompt)`` when not
    given): what the harness's verifier will check. ``uncertain`` lists everything else the
    open reading (``read_open``) finds, each with a ``reason``: an object whose noun has no
    class in the vocabulary (with its count, colours and attributes), a colour the verifier does
    not name, any other attribute (the inspector does not check them), a relation outside
    ``tasks.models.RELATIONS`` (support ``on``, containment ``in``) or between unknown objects, a negated unknown object,
    a negation no constraint type states (a negated relation "not on a sofa", a negated count
    or qualified object "not two cats" / "no green apples", a negated class the prompt also
    asks for; each with ``negated``, the words as written) and a colour or attribute the
    prompt denies ("not black": ``negated`` "not black"), an action (a verb: ``verb`` its lemma,
    ``said`` as written, ``subject``/``object`` the nouns around it when read) — and anything the verifier could
    check that the rule extractor did not extract. ``nothing_checkable`` is
    true when there is no constraint; ``nothing_read`` when nothing at all was read.

    Shape: ``{"prompt", "constraints": [Constraint as JSON], "uncertain": [{"kind", ...,
    "reason"}], "checkable": int, "nothing_checkable": bool, "nothing_read": bool}``."""
    if constraints is None:
        constraints = RuleExtractor().extract(prompt)
    reading = read_open(prompt)
    by_type: dict[ConstraintType, list[Constraint]] = {}
    for c in constraints:
        by_type.setdefault(c.type, []).append(c)

    def has(t: ConstraintType, **want: object) -> bool:
        return any(all(getattr(c, k) == v for k, v in want.items()) for c in by_type.get(t, []))

    not_extracted = "the verifier could check it, but the rule extractor does not extract it"
    # a class's count covers all its phrases ("two red cars and a blue car": exactly 3); an
    # open count (None: at least two) leaves the maximum open
    phrase_counts: dict[str, list[int | None]] = {}
    for o in reading.objects:
        if o.cls is not None:
            phrase_counts.setdefault(o.cls, []).append(o.count)
    class_count: dict[str, dict[str, int | None]] = {}
    for cls, counts in phrase_counts.items():
        total = sum(2 if n is None else n for n in counts)
        if len(counts) == 1 and counts[0] is None:
            class_count[cls] = {"max_count": None}  # a bare plural: any minimum >= 2
        else:
            class_count[cls] = {"min_count": total, "max_count": None if None in counts else total}
    uncertain: list[dict[str, Any]] = []
    for o in reading.objects:
        item: dict[str, Any] = {"kind": "object", "noun": o.noun, "class": o.cls}
        item["count"] = _count_value(o.count)
        item["colors"] = list(o.colors)
        item["attributes"] = list(o.attributes)
        if o.cls is None:
            uncertain.append({**item, "reason": f"{o.noun!r} is not in the verifier's vocabulary"})
            continue
        cls = o.cls
        if not (has(ConstraintType.object, subject=cls) or has(ConstraintType.count, subject=cls)):
            uncertain.append({**item, "reason": not_extracted})
            continue
        if o.count != 1 and not has(ConstraintType.count, subject=cls, **class_count[cls]):
            uncertain.append(
                {
                    "kind": "count",
                    "noun": o.noun,
                    "class": cls,
                    "count": _count_value(o.count),
                    "reason": not_extracted,
                }
            )
        for col in o.colors:
            if col not in COLORS:
                reason: str | None = f"colour {col!r} is not one the verifier names"
            elif has(ConstraintType.color, subject=cls, value=col):
                reason = None
            else:
                reason = not_extracted
            if reason:
                uncertain.append(
                    {"kind": "colour", "noun": o.noun, "class": cls, "value": col, "reason": reason}
                )
        for attr in o.attributes:
            tex = TEXTURE_WORDS.get(attr) or SHAPE_WORDS.get(attr)
            if tex is None:
                reason = "the verifier checks the world's textures and shapes only, not this one"
            elif has(ConstraintType.attribute, subject=cls, value=tex):
                continue
            else:
                reason = not_extracted
            uncertain.append(
                {"kind": "attribute", "noun": o.noun, "class": cls, "value": attr, "reason": reason}
            )
    for r in reading.relations:
        a, b = reading.objects[r.subject], reading.objects[r.other]
        item = {"kind": "relation", "subject": a.noun, "relation": r.relation, "object": b.noun}
        if a.cls is None or b.cls is None:
            unknown = a.noun if a.cls is None else b.noun
            reason = f"{unknown!r} is not in the verifier's vocabulary"
        elif r.relation not in RELATIONS:
            reason = f"relation {r.relation!r} is not one the verifier checks"
        elif a.cls == b.cls:
            reason = (
                f"a relation between two {a.cls} objects: the verifier cannot tell which is which"
            )
        elif has(ConstraintType.position, subject=a.cls, relation=r.relation, value=b.cls):
            continue
        else:
            reason = not_extracted
        uncertain.append({**item, "reason": reason})
    required = {
        c.subject for t in (ConstraintType.object, ConstraintType.count) for c in by_type.get(t, [])
    }
    no_type = "no constraint type states it"
    for o in reading.negations:
        neg: dict[str, Any] = {"kind": "negation", "noun": o.noun, "class": o.cls}
        said = prompt[o.start : o.end]
        if o.scope:
            neg = {**neg, "negated": f"{o.scope} {said}"}
            reason = f"a negated relation ({o.scope!r}), not the object's absence: {no_type}"
        elif o.cls is None:
            reason = f"{o.noun!r} is not in the verifier's vocabulary"
        elif has(ConstraintType.negative, subject=o.cls):
            continue
        elif o.count not in (1, None) or o.colors or o.attributes:
            neg = {**neg, "negated": said}
            reason = (
                f"{said!r} negates a count or a qualified {o.noun}, not every {o.cls}: "
                f"{no_type} (a negative constraint would forbid every {o.cls})"
            )
        elif o.cls in required:
            reason = (
                f"the prompt also asks for a {o.cls}: a negative constraint would contradict it"
            )
        else:
            reason = not_extracted
        uncertain.append({**neg, "reason": reason})
    for o in reading.objects:
        for kind, values in (("colour", o.not_colors), ("attribute", o.not_attributes)):
            for v in values:
                uncertain.append(
                    {
                        "kind": kind,
                        "noun": o.noun,
                        "class": o.cls,
                        "value": v,
                        "negated": f"not {v}",
                        "reason": f"a {kind} the prompt denies: {no_type}",
                    }
                )
    for act in reading.actions:
        entry: dict[str, Any] = {"kind": "action", "verb": act.verb, "said": act.said}
        if act.subject is not None:
            entry["subject"] = reading.objects[act.subject].noun
        if act.other is not None:
            entry["object"] = reading.objects[act.other].noun
        uncertain.append({**entry, "reason": "no constraint type states an action"})
    extracted_texts = {_text_key(str(c.value)) for c in by_type.get(ConstraintType.text, [])}
    for t in reading.texts:
        if _text_key(t) not in extracted_texts:
            uncertain.append({"kind": "text", "value": t, "reason": not_extracted})
    return {
        "prompt": prompt,
        "constraints": [c.model_dump(mode="json", exclude_none=True) for c in constraints],
        "uncertain": uncertain,
        "checkable": len(constraints),
        "nothing_checkable": not constraints,
        "nothing_read": not constraints and not uncertain,
    }
