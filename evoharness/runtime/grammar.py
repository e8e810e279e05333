"""The English prompt grammar both prompt readers share: the matchers, written once.

The rule extractor (``evoharness.runtime.rule_parse``) and the open reading
(``evoharness.runtime.reading``) each delimit object phrases their own way, but they match
what lies between and around the phrases the same way, here: text to render (quoted or after
"saying"; both readers mask the same spans), lower-casing that keeps character positions, the
relation phrase between two object phrases (``relation_of``, each reader passing its own
filler), the verbs a relation phrase may follow (``verb_lemma``, ``placement_verb``) and the
negation a listed phrase shares (``shares_negation``). The words these read are in
``evoharness.runtime.lexicon``.

Pure functions over strings; they never raise on any string.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import lru_cache

from lemminflect import getAllLemmas, getLemma

from evoharness.runtime.lexicon import NEG_LIST, PLACEMENT_VERBS
from evoharness.vocab import REFERENCE_MENTION


@lru_cache(maxsize=65536)
def verb_lemma(word: str) -> str:
    """The verb lemma of a word form ("playing" → ``play``, "chases" → ``chase``, "cut" →
    ``cut``): lemminflect's dictionary, else its rules; the word itself when neither gives one."""
    known = getAllLemmas(word).get("VERB")
    if known:
        return known[0]
    guessed = getLemma(word, "VERB")
    return guessed[0] if guessed else word


def placement_verb(word: str) -> bool:
    """Whether ``word`` is a form of a posture or placement verb (``lexicon.PLACEMENT_VERBS``:
    "sitting", "placed", "stands"), the only verbs a position phrase may follow: "a cat
    jumping over a dog" states an action, not that the cat is above the dog (issue 30)."""
    return verb_lemma(word) in PLACEMENT_VERBS


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


#: A prompt's binding of an object to a reference image, as a whole: "from image 1", "in
#: reference 2", "(image 3)", "image 2's" (``vocab.REFERENCE_MENTION``).
_BINDING = re.compile(
    r"\(\s*" + REFERENCE_MENTION + r"\s*\)"
    r"|(?:\b(?:from|in|of)\s+(?:the\s+)?)?" + REFERENCE_MENTION + r"(?:'s\b)?",
    re.IGNORECASE,
)


def mask_reference_mentions(masked: str) -> str:
    """``masked`` with every binding to a reference image ("from image 1", "image 2's",
    "(reference 3)") blanked out (the same length, so spans hold): a reference is not an
    object the prompt asks for, and its wording must not break the relations around it."""
    return _BINDING.sub(lambda m: " " * len(m.group(0)), masked)
