"""The actions of the open reading: the verbs a prompt states, which no constraint type states.

"a turtle playing with a penguin", "a dog chasing a cat", "the wooden spoon and glass bowl mix
the whisk": the verb is something the prompt asks for that the verifier cannot check, so it must
end in an ``uncertain`` mark (``explanation.explain``), never be dropped silently nor read as a
position or an object noun (issue 30). ``read_actions`` finds them in the tokens the object
phrases of ``evoharness.runtime.reading`` leave over.

A token outside every object phrase is a verb when it reads as one (``open_phrase.reads_as_verb``:
an ``-ing``/``-ed`` form, or a word only the verb class has), an infinitive before its object
("about *to release* a balloon": ``open_phrase.infinitive``) or when it can be a verb and follows
an object phrase directly ("the glass jar and metallic lid *hold* the bands", "two kids *mix*
paint"). Auxiliaries and the open reading's filler (be, have), framing words ("a photo of"),
partitives, "made of" and the tokens of an ``in the style of …`` tail are not actions. A posture
or placement verb (``lexicon.PLACEMENT_VERBS``: sitting, placed, hanging) that a relation was read
after is stated by that relation and gives no action; any other verb gives one. The action's
subject is the nearest object phrase before the verb in its clause; its object the next phrase
when only particles, prepositions, articles and ``-ly`` adverbs (``lexicon.VERB_PARTICLES``)
stand between ("climbing up a tree", "playing with a penguin").

Pure and deterministic; never raises on a token list.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from evoharness.runtime.grammar import placement_verb, verb_lemma
from evoharness.runtime.lexicon import (
    ARTICLES,
    AUX,
    CONJUNCTIONS,
    COUNT_WORDS,
    DETERMINERS,
    FRAMING,
    NEGATORS,
    OPEN_FILLER,
    PREPOSITIONS,
    PRONOUNS,
    VERB_PARTICLES,
    partitive,
)
from evoharness.runtime.open_phrase import (
    ReadObject,
    ReadTok,
    infinitive,
    parts_of_speech,
    reads_as_verb,
)

#: Words never read as a verb here: function words of every closed list.
_CLOSED = AUX | OPEN_FILLER | PREPOSITIONS | CONJUNCTIONS | PRONOUNS | ARTICLES | DETERMINERS
_CLOSED = _CLOSED | NEGATORS | frozenset(COUNT_WORDS) | frozenset({"made", "can", "will", "to"})


@dataclass(frozen=True)
class ReadAction:
    """A verb the prompt states: ``verb`` (its lemma), ``said`` (the word as written, with the
    particles up to its object: "playing with"), ``subject`` and ``other`` (indices into the
    reading's ``objects``, or None when no phrase is there), ``start``/``end`` the verb's span."""

    verb: str
    said: str
    subject: int | None
    other: int | None
    start: int
    end: int


def read_actions(
    toks: list[ReadTok],
    mentions: list[ReadObject],
    index: dict[int, int],
    related: set[tuple[int, int]],
) -> list[ReadAction]:
    """The actions among ``toks`` (module docstring). ``mentions`` are the object phrases in
    order (negated ones included), ``index`` maps ``id(mention)`` to its index in the reading's
    ``objects`` (repeated and negated mentions map to the object they repeat or not at all),
    ``related`` holds the pairs of mention positions (k, k + 1) a relation was read between."""
    starts = [m.start for m in mentions]
    ends = [m.end for m in mentions]
    out: list[ReadAction] = []
    skip_clause: int | None = None
    for i, t in enumerate(toks):
        w = t.text
        if skip_clause == t.clause and w != ",":
            continue
        skip_clause = None
        if w == "style" and i >= 2 and toks[i - 1].text == "the" and toks[i - 2].text == "in":
            skip_clause = t.clause  # "in the style of …": skipped to the clause end or comma
            continue
        k = bisect.bisect_right(starts, t.start) - 1  # the last phrase starting at or before t
        if k >= 0 and t.end <= ends[k]:
            continue  # inside an object phrase
        if not _is_verb(toks, i, k, mentions):
            continue
        before = k if k >= 0 and mentions[k].clause == t.clause else None
        after = k + 1 if k + 1 < len(mentions) and mentions[k + 1].clause == t.clause else None
        if placement_verb(w) and before is not None and (before, before + 1) in related:
            continue  # "a cat sitting on top of a car": the relation states it
        j = i + 1
        stop = mentions[after].start if after is not None else -1
        while (
            j < len(toks)
            and toks[j].clause == t.clause
            and toks[j].start != stop
            and _particle(toks[j].text)
        ):
            j += 1
        other = None
        if after is not None and j < len(toks) and toks[j].start == stop:
            other = index.get(id(mentions[after]))
        said = " ".join(x.text for x in toks[i:j] if x.text not in ARTICLES)
        subject = index.get(id(mentions[before])) if before is not None else None
        out.append(ReadAction(verb_lemma(w), said, subject, other, t.start, t.end))
    return out


def _particle(w: str) -> bool:
    return w in VERB_PARTICLES or w in ARTICLES or w.endswith("ly")


def _is_verb(toks: list[ReadTok], i: int, k: int, mentions: list[ReadObject]) -> bool:
    """Whether token ``i`` (outside every phrase; ``k`` the last phrase before it) is a verb."""
    w = toks[i].text
    if w in _CLOSED or not w.isalpha() or w in FRAMING or partitive(w) is not None:
        return False
    if reads_as_verb(w) or infinitive(toks, i):
        return True
    prev_is_phrase = k >= 0 and i > 0 and toks[i - 1].end == mentions[k].end
    return prev_is_phrase and "VERB" in parts_of_speech(w)
