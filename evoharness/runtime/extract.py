"""The rule-based policy extractor: read a prompt into the constraints it states.

This is how a harness *reads* a prompt (the Policy responsibility). It sees only the prompt,
never a task's constraints (docs/architecture.md, "the harness sees only what a production request
carries"). It implements ``evoharness.ports.PolicyExtractor``. The grammar it reads a prompt with
(object phrases, counts, colours, relations, negations, texts) is
``evoharness.runtime.rule_parse``; this module turns the parse into constraints, and reads a
prompt's features (what a skill trigger may name) and CLIP token count.

Constraint conventions (``evoharness.tasks.models``): a phrase with count 1 (or none, singular)
gives an ``object`` constraint; count n >= 2 gives a ``count`` constraint with
``min_count = max_count = n``; a plural without a count gives ``min_count = 2``, no maximum.
A class named in several phrases (refer-backs aside), one of them counted, gets one ``count``
constraint over all of them instead: the sum of the phrases' counts (an open plural adds 2 to
the minimum and leaves the maximum open; "two red cars and a blue car" → exactly 3; "a cat and
two cats" → 3); phrases all singular keep one ``object`` constraint each (judged on distinct
instances). A colour, texture or shape of a phrase with a written count n >= 2, or of any phrase
of such a summed class, carries ``min_count`` = that phrase's count (red 2, blue 1): that many
distinct instances must hold it. A relation between two phrases of one summed class is dropped.
Each colour gives a ``color`` constraint, each texture or shape an ``attribute`` constraint
(``value`` = the canonical ``vocab.TEXTURES`` / ``vocab.SHAPES`` name); relations ``position`` constraints (``ref`` = index of
the other object phrase among the prompt's object phrases); quoted text ``text`` constraints
(``subject = "text"``); negations ``negative`` constraints.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from evoharness.runtime.grammar import find_texts, lower_preserving
from evoharness.runtime.lexicon import COUNT_WORDS
from evoharness.runtime.mentions import ObjectMention, PromptParse, RelationMention, TextMention
from evoharness.runtime.rule_parse import TOKEN, parse_prompt
from evoharness.tasks.models import MAX_COUNT, Constraint, ConstraintType

#: CLIP's text encoder context length in tokens, incl. start and end tokens (Radford et al.
#: 2021, "Learning Transferable Visual Models From Natural Language Supervision").
CLIP_CONTEXT_TOKENS = 77


def clip_like_tokens(text: str) -> list[str]:
    """CLIP-like tokens of ``text``: lower-cased words (digits and letters, with an optional
    apostrophe suffix) and single punctuation characters. Approximates CLIP's BPE word split
    (Radford et al. 2021) without sub-word merges; start/end tokens are not included."""
    return TOKEN.findall(lower_preserving(text))


def token_count(text: str) -> int:
    """Number of CLIP-like tokens of ``text`` including the start and end tokens."""
    return len(clip_like_tokens(text)) + 2


def _unique_id(base: str, seen: dict[str, int]) -> str:
    n = seen.get(base, 0) + 1
    seen[base] = n
    return base if n == 1 else f"{base}#{n}"


def _constraint(
    seen: dict[str, int], ctype: ConstraintType, subject: str, **fields: Any
) -> Constraint:
    """A ``ctype`` constraint on ``subject`` with the other ``fields`` as given; its id is
    ``type:subject`` (``text`` for a text), ``#k`` appended for the k-th repeat in ``seen``."""
    base = ctype.value if ctype is ConstraintType.text else f"{ctype.value}:{subject}"
    return Constraint(constraint_id=_unique_id(base, seen), type=ctype, subject=subject, **fields)


def constraints_from_parse(parse: PromptParse) -> list[Constraint]:
    """The constraints a parse states (conventions in the module docstring).

    Order: per object phrase its object/count constraint then its colours; then positions,
    texts, negations. Ids are ``type:subject`` (``#k`` appended for repeats). A phrase that
    refers back to an earlier one (``ObjectMention.refers_to``) states nothing of its own; its
    relations are the earlier phrase's, and ``ref`` indexes the object/count constraints."""
    seen: dict[str, int] = {}
    out: list[Constraint] = []
    canon = [k if m.refers_to is None else m.refers_to for k, m in enumerate(parse.objects)]
    phrases: dict[str, list[int]] = {}  # class -> its object phrases (no refer-backs)
    for k, m in enumerate(parse.objects):
        if m.refers_to is None:
            phrases.setdefault(m.cls, []).append(k)
    # a class named in several phrases, one of them counted: one count over all of them
    summed = {
        cls: ks
        for cls, ks in phrases.items()
        if len(ks) > 1 and any(parse.objects[k].implied_count != 1 for k in ks)
    }
    emitted: dict[int, int] = {}  # object phrase -> index among object/count constraints
    for k, m in enumerate(parse.objects):
        if m.refers_to is not None:
            continue
        n = m.implied_count
        group = summed.get(m.cls)
        if group is not None and k != group[0]:
            emitted[k] = emitted[group[0]]  # counted in the class's count constraint
        else:
            emitted[k] = len(set(emitted.values()))
            if group is not None:
                counts = [parse.objects[j].implied_count for j in group]
                lo = min(sum(2 if c is None else c for c in counts), MAX_COUNT)
                hi = None if None in counts else lo
                out.append(
                    _constraint(
                        seen, ConstraintType.count, m.cls, value=hi, min_count=lo, max_count=hi
                    )
                )
            elif n == 1:
                out.append(_constraint(seen, ConstraintType.object, m.cls))
            else:
                out.append(
                    _constraint(
                        seen,
                        ConstraintType.count,
                        m.cls,
                        value=n,
                        min_count=2 if n is None else n,
                        max_count=n,
                    )
                )
        # a colour/attribute of a counted phrase holds for that many instances
        each = n if n is not None and (n >= 2 or group is not None) else None
        for c in m.colors:
            out.append(_constraint(seen, ConstraintType.color, m.cls, value=c, min_count=each))
        for tx in (*m.textures, *m.shapes):
            out.append(_constraint(seen, ConstraintType.attribute, m.cls, value=tx, min_count=each))
    for r in parse.relations:
        ka, kb = canon[r.subject], canon[r.other]
        if emitted[ka] == emitted[kb]:
            continue  # one object, or two phrases of one summed count ("a car left of two cars")
        a, b = parse.objects[ka], parse.objects[kb]
        if a.cls == b.cls:
            continue  # "a red car next to a blue car": a verifier cannot tell which car is which
        out.append(
            _constraint(
                seen,
                ConstraintType.position,
                a.cls,
                relation=r.relation,
                value=b.cls,
                ref=emitted[kb],
            )
        )
    for t in parse.texts:
        out.append(_constraint(seen, ConstraintType.text, "text", value=t.text))
    for m in parse.negations:
        out.append(_constraint(seen, ConstraintType.negative, m.cls))
    return out


class RuleExtractor:
    """The default ``PolicyExtractor``: ``RuleExtractor().extract(prompt) -> list[Constraint]``.

    Deterministic, pure, no I/O. The grammar is ``runtime.rule_parse``'s, the constraint
    conventions are in this module's docstring."""

    def extract(self, prompt: str) -> list[Constraint]:
        """Constraints stated by ``prompt`` (possibly empty; never raises on a string)."""
        return constraints_from_parse(parse_prompt(prompt))

    def parse(self, prompt: str) -> PromptParse:
        """The full parse (object phrases with spans) the constraints come from."""
        return parse_prompt(prompt)


#: Prompt features a skill trigger or tool ``when`` may name.
FEATURES = ("count", "color", "position", "text", "negation", "long_prompt", "multi_object")


def prompt_features(prompt: str, constraints: Iterable[Constraint]) -> set[str]:
    """Features of a prompt, from its extracted constraints and its length.

    ``count``: a count constraint; ``color``/``position``/``text``: such a constraint;
    ``negation``: a negative constraint; ``long_prompt``: more than 77 CLIP-like tokens
    including start/end tokens (CLIP's context, Radford et al. 2021); ``multi_object``: two or
    more object/count constraints. Returns a subset of ``FEATURES``."""
    feats: set[str] = set()
    n_objects = 0
    for c in constraints:
        t = c.type
        if t is ConstraintType.count:
            feats.add("count")
            n_objects += 1
        elif t is ConstraintType.object:
            n_objects += 1
        elif t is ConstraintType.color:
            feats.add("color")
        elif t is ConstraintType.position:
            feats.add("position")
        elif t is ConstraintType.text:
            feats.add("text")
        elif t is ConstraintType.negative:
            feats.add("negation")
    if n_objects >= 2:
        feats.add("multi_object")
    if token_count(prompt) > CLIP_CONTEXT_TOKENS:
        feats.add("long_prompt")
    return feats


__all__ = [
    "CLIP_CONTEXT_TOKENS",
    "COUNT_WORDS",
    "FEATURES",
    "ObjectMention",
    "PromptParse",
    "RelationMention",
    "RuleExtractor",
    "TextMention",
    "clip_like_tokens",
    "constraints_from_parse",
    "find_texts",
    "lower_preserving",
    "parse_prompt",
    "prompt_features",
    "token_count",
]
