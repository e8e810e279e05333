"""The English prompt lexicon both prompt readers share: words and the relation-phrase matcher.

Owned here, used by the rule extractor (``evoharness.runtime.extract``: the constraints the
verifier checks) and by the open reading (``evoharness.runtime.reading``: everything else a
prompt states). Each reader keeps only its own grammar (how a phrase is delimited, which
words are filler); the words themselves — numbers, negators, partitives, relation phrases —
and the way a relation phrase is matched between two object phrases are written once, here.
Text to render (quoted or after "saying") is found here too, so both readers mask the same
spans.

The lexicon describes English prompts, never the simulator (``evoharness.sim``). It imports
only ``evoharness.vocab`` (the 80 classes' names and number words) and
``evoharness.tasks.models`` (the position relations the verifier checks), nothing from
``runtime``'s readers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from evoharness.tasks.models import RELATIONS
from evoharness.vocab import WORD_NUMBERS

#: Number words: ``vocab.WORD_NUMBERS`` (zero to twelve, shared with the simulator's reader)
#: and the rest of English's one-word numbers up to twenty, the tens, and "dozen" before a
#: plural ("a dozen eggs").
COUNT_WORDS: dict[str, int] = {
    **WORD_NUMBERS,
    **{
        w: 13 + k
        for k, w in enumerate(
            "thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty".split()
        )
    },
    **{
        w: 30 + 10 * k
        for k, w in enumerate("thirty forty fifty sixty seventy eighty ninety".split())
    },
    "dozen": 12,
}

#: Words that negate the object phrase after them ("no cats", "without a hat").
NEGATORS = frozenset({"no", "not", "without", "never", "neither", "nor"})
#: Negators that deny a predicate ("is not on a sofa", "is not black") as well as a phrase.
PREDICATE_NEGATORS = frozenset({"not", "never"})
#: Connectives after which a phrase shares the negation of the phrase before it ("without
#: chairs or tables", "no cats, dogs or birds"): disjunction distributes the negation, "and"
#: does not ("with no hat and a dog").
NEG_LIST = frozenset({"or", "nor", ","})


def shares_negation(between: list[str], nxt: str) -> bool:
    """Whether a phrase shares the negation of the negated phrase before it, given
    ``between`` (the words between the two phrases) and ``nxt`` (the word right after it).

    ``between`` must start with a list connective (``NEG_LIST``) and hold only connectives,
    articles and "any"; a bare comma counts only when ``nxt`` continues the list with
    "or"/"nor"/"," ("without chairs, tables or lamps"; "with no hat, a dog and a cat" keeps
    its dog)."""
    if not between or between[0] not in NEG_LIST:
        return False
    if not set(between) <= NEG_LIST | {"a", "an", "the", "any"}:
        return False
    return between != [","] or nxt in NEG_LIST


#: Partitive and collective nouns (singular): not objects themselves; the noun after ``of`` is
#: ("a herd of cows"). The value is the number a partitive states ("a pair of shoes" = 2,
#: "two pairs of socks" = 4, "a couple of dogs" = 2, "a dozen of eggs" = 12, with a plural
#: noun; "a pair of glasses" is one plurale tantum), or None: the noun keeps its own count.
PARTITIVES: dict[str, int | None] = {
    "pair": 2,
    "couple": 2,
    "dozen": 12,
    **{
        w: None
        for w in """group herd flock pack swarm school bunch stack pile set slice piece lot lots
        row collection cluster crowd handful variety kind type sort bouquet number""".split()
    },
}


def partitive(word: str) -> str | None:
    """The singular partitive (a key of ``PARTITIVES``) ``word`` is a form of ("pairs" →
    "pair"), or None."""
    if word in PARTITIVES:
        return word
    if word.endswith("s") and word[:-1] in PARTITIVES:
        return word[:-1]
    return None


#: Every written form of a partitive, singular and ``-s`` plural.
PARTITIVE_FORMS = frozenset(PARTITIVES) | frozenset(w + "s" for w in PARTITIVES)
#: Nouns naming a number of persons when no ``of`` follows ("a couple is dancing" = 2
#: persons, "two couples" = 4).
PERSON_COLLECTIVES: dict[str, int] = {"couple": 2}

#: Relation phrases (as word tuples) and the canonical relation each states. GenEval's wording
#: ("left of", "right of", "above", "below") and its paraphrases ("to the left of", "on the
#: left side of", "on top of", "over", "under", "beneath"); T2I-CompBench's spatial ("next
#: to", "near", "on side of", "on the bottom of", "on the top of") and 3D-spatial ("behind",
#: "in front of", "hidden by") wording, and their plain-English synonyms ("beside", "by",
#: "close to", "around", "surrounding", "against"); support ``on`` and containment ``in``,
#: which are no position rule (``POSITION_PHRASES`` leaves them out). Short forms ("top",
#: "side of", "left side of") match inside the longer wording a reader's filler surrounds
#: ("at the top of", "to the side of").
RELATION_PHRASES: dict[tuple[str, ...], str] = {
    tuple(k.split()): v
    for k, v in {
        "to the left of": "left of",
        "on the left of": "left of",
        "on the left side of": "left of",
        "left side of": "left of",
        "left of": "left of",
        "to the right of": "right of",
        "on the right of": "right of",
        "on the right side of": "right of",
        "right side of": "right of",
        "right of": "right of",
        "on top of": "above",
        "on the top of": "above",
        "at the top of": "above",
        "top": "above",
        "above": "above",
        "over": "above",
        "atop": "above",
        "below": "below",
        "under": "below",
        "beneath": "below",
        "underneath": "below",
        "on the bottom of": "below",
        "at the bottom of": "below",
        "bottom": "below",
        "behind": "behind",
        "hidden by": "behind",
        "in front of": "in front of",
        "next to": "next to",
        "beside": "next to",
        "by": "next to",
        "on side of": "next to",
        "on the side of": "next to",
        "side of": "next to",
        "on either side of": "next to",
        "either side of": "next to",
        "by the side of": "next to",
        "to the side of": "next to",
        "alongside": "next to",
        "against": "next to",
        "near": "near",
        "close to": "near",
        "around": "near",
        "surrounding": "near",
        "surrounded by": "near",
        "on": "on",
        "onto": "on",
        "in": "in",
        "inside": "in",
        "within": "in",
    }.items()
}
#: The relation phrases that state a position rule (``tasks.models.RELATIONS``): what the
#: rule extractor turns into ``position`` constraints.
POSITION_PHRASES: dict[tuple[str, ...], str] = {
    k: v for k, v in RELATION_PHRASES.items() if v in RELATIONS
}
#: Words that start a relation phrase.
RELATION_WORDS = frozenset(k[0] for k in RELATION_PHRASES)


def relation_of(
    words: list[str],
    phrases: Mapping[tuple[str, ...], str],
    is_filler: Callable[[list[str], int, str | None], bool],
    is_relation_at: Callable[[list[str], int], bool] = lambda words, i: True,
) -> str | None:
    """The relation the ``words`` between two object phrases state, or None.

    The words must be one relation phrase of ``phrases`` (matched longest first at each
    position; repeats of the same relation allowed, two different relations give None) plus
    words ``is_filler(words, i, relation_so_far)`` accepts. ``is_relation_at(words, i)`` may
    refuse a phrase match at ``i`` (then the word must be filler): the rule extractor refuses
    "by" after a past participle ("painted by" is an agent). Each reader passes its own filler,
    so the matching itself is written once."""
    longest = max((len(k) for k in phrases), default=0)
    rel: str | None = None
    i = 0
    while i < len(words):
        hit: tuple[int, str] | None = None
        for n in range(min(longest, len(words) - i), 0, -1):
            r = phrases.get(tuple(words[i : i + n]))
            if r is not None:
                hit = (n, r)
                break
        if hit is not None and is_relation_at(words, i):
            if rel is not None and hit[1] != rel:
                return None
            rel = hit[1]
            i += hit[0]
            continue
        if is_filler(words, i, rel):
            i += 1
            continue
        return None
    return rel


_QUOTED = re.compile(
    r"\"([^\"\n]+)\"|\u201c([^\u201d\n]+)\u201d|\u2018([^\u2019\n]+)\u2019|(?<!\w)'((?:[^'\n]|(?<=\w)'(?=\w))+?)'(?!\w)"
)
_UNQUOTED_TEXT = re.compile(
    r"\b(?:saying|that\s+says|which\s+says|that\s+reads|which\s+reads|"
    r"with\s+the\s+(?:text|words?))\s+(?!\")([^.;,\n\"\u201c]+)",
    re.IGNORECASE,
)


def lower_preserving(text: str) -> str:
    """Lower case that keeps every character's position (a character whose lower case is
    longer stays as it is), so spans in the result index ``text``."""
    return "".join(ch.lower() if len(ch.lower()) == 1 else ch for ch in text)


def find_texts(text: str, low: str) -> tuple[list[tuple[str, int, int, bool]], str]:
    """Quoted and 'saying ...' texts of ``text`` (``low`` = ``lower_preserving(text)``):
    ``([(text, start, end, quoted)], low with those spans masked by '#')``.

    Text in double or single (straight or typographic) quotes — a single quote opens only
    after a non-letter and closes only before one, and an apostrophe between two letters
    inside it does not close it ("a book titled 'The Cat's Hat'") — or unquoted after
    ``saying`` / ``that says`` / ``that reads`` / ``with the text`` / ``with the words`` (to
    the end of the clause or comma)."""
    found: list[tuple[str, int, int, bool]] = []
    masked = list(low)
    for m in _QUOTED.finditer(text):
        inner = next(g for g in m.groups() if g is not None)
        if inner.strip():
            found.append((inner.strip(), m.start(), m.end(), True))
            for i in range(m.start(), m.end()):
                masked[i] = "#"
    masked_s = "".join(masked)
    for m in _UNQUOTED_TEXT.finditer(masked_s):
        s, e = m.start(1), m.end(1)
        inner = text[s:e].strip()
        if inner and "#" not in masked_s[s:e]:
            e = s + len(text[s:e].rstrip())
            found.append((inner, s, e, False))
            for i in range(s, e):
                masked[i] = "#"
    found.sort(key=lambda t: t[1])
    return found, "".join(masked)


def number_partitive(word: str | None) -> int | None:
    """The number the partitive ``word`` states ("pair"/"pairs" → 2, "dozen" → 12), or None
    for any other word (a collective such as "herd" included)."""
    p = partitive(word) if word else None
    return None if p is None else PARTITIVES[p]


def person_collective(word: str) -> int | None:
    """The number of persons ``word`` names ("couple"/"couples" → 2), or None
    (``PERSON_COLLECTIVES``, singular or ``-s`` plural)."""
    if word in PERSON_COLLECTIVES:
        return PERSON_COLLECTIVES[word]
    if word.endswith("s"):
        return PERSON_COLLECTIVES.get(word[:-1])
    return None
