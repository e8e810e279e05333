"""One object phrase of the open reading, and the word classes it is read by.

``read_run`` reads the object phrase that starts at a token (its determiners, number,
modifiers and head noun, through partitives and framing words); ``evoharness.runtime.reading``
walks a prompt with it and relates the phrases it reads (grammar in that module's docstring).
Word classes: the closed lists of ``evoharness.runtime.lexicon`` and, for open words,
lemminflect's English dictionary (``parts_of_speech``, ``lemma``).

Pure and deterministic; never raises on a string.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from lemminflect import getAllLemmas, getLemma

from evoharness.runtime.lexicon import (
    ARTICLES,
    ATTRIBUTE_WORDS,
    AUX,
    COLOR_WORDS,
    CONJUNCTIONS,
    COUNT_WORDS,
    DETERMINERS,
    FRAMING,
    ING_NOUNS,
    LEMMA_OVERRIDES,
    NEGATORS,
    PARTITIVES,
    PERSON_COLLECTIVES,
    PLURAL_DETERMINERS,
    PLURALIA_TANTUM,
    PREPOSITIONS,
    PRONOUNS,
    RELATION_NOUNS,
    SINGULAR_OF,
    SUBJECT_PRONOUNS,
    partitive,
)
from evoharness.vocab import NAMES, PLURALS, class_of

#: Degree words before an adjective: not attributes of their own ("a *very* large dog").
INTENSIFIERS = frozenset("very really so too quite extremely pretty rather fairly super".split())

#: Nested partitives read as one phrase ("a stack of a pile of …"); deeper ones are nouns.
MAX_PARTITIVE_DEPTH = 8


@dataclass(frozen=True)
class ReadTok:
    """One word or symbol of a prompt (lower case; multi-word class names joined), with its
    character span and the index of its clause."""

    text: str
    start: int
    end: int
    clause: int


@dataclass(frozen=True)
class ReadObject:
    """An object phrase: ``noun`` (singular lemma, compounds kept), ``cls`` (its class in the
    vocabulary, or None), ``count`` (1, n, or None = at least two), colours (canonical names),
    other attributes (as written), ``negated``, and the character span of the phrase.
    ``scope`` is set on a negated phrase whose negation is of a relation, not of the object
    ("not on a sofa": ``"not on"``); ``not_colors`` / ``not_attributes`` are colours and other
    attributes the prompt denies of the object ("a cat that is not black")."""

    noun: str
    cls: str | None
    count: int | None
    colors: tuple[str, ...]
    attributes: tuple[str, ...]
    start: int
    end: int
    clause: int
    negated: bool = False
    scope: str = ""
    not_colors: tuple[str, ...] = ()
    not_attributes: tuple[str, ...] = ()


@lru_cache(maxsize=65536)
def parts_of_speech(word: str) -> frozenset[str]:
    """The parts of speech ``word`` can have (lemminflect's dictionary; empty when unknown)."""
    w = word.replace("\u2019", "'")
    if w.endswith("'s"):
        return frozenset({"NOUN"})
    return frozenset(getAllLemmas(w))


@lru_cache(maxsize=65536)
def lemma(word: str) -> tuple[str, bool]:
    """``(singular lemma, plural?)`` of a noun word form (lemminflect; ``LEMMA_OVERRIDES``)."""
    w = word.replace("\u2019", "'")
    if w in LEMMA_OVERRIDES:
        return LEMMA_OVERRIDES[w], w not in PLURALIA_TANTUM
    if w in NAMES:  # a class name or synonym, singular (or a plurale tantum such as "glasses")
        v = SINGULAR_OF.get(w)
        if w.endswith("s") and v is not None and NAMES[v] == NAMES[w]:
            return v, True  # the plural of another name of its class: "chopsticks", "grapes"
        return w, False
    if w in SINGULAR_OF:  # a plural of one: "women" -> "woman", "strawberries" -> "strawberry"
        return SINGULAR_OF[w], True
    if w in PLURALS:  # GenEval's naive plurals ("persons") and alternative forms ("cacti")
        return PLURALS[w], True
    if w in PLURALIA_TANTUM or " " in w or w.endswith("'s") or w.endswith("ss"):
        return w, False
    known = getAllLemmas(w)
    if not known and not w.endswith("s"):
        return w, False  # outside the dictionary and not an -s plural ("fedora")
    lemmas = known.get("NOUN") or getLemma(w, "NOUN")
    lem = lemmas[0] if lemmas else w
    return lem, lem != w


def reads_as_verb(w: str) -> bool:
    """Whether ``w`` reads as a verb: an ``-ing``/``-ed`` form the lexicon lists as a verb (or
    does not know), or a word that can only be a verb."""
    pos = parts_of_speech(w)
    if w.endswith("ing") or w.endswith("ed"):
        return "VERB" in pos or not pos
    return "VERB" in pos and not pos & {"NOUN", "ADJ"}


def can_be_noun(w: str) -> bool:
    """Whether ``w`` can be a noun (or is unknown to the lexicon and not a function word)."""
    if " " in w:
        return True
    pos = parts_of_speech(w)
    return "NOUN" in pos or (not pos and not w.isdigit())


def read_run(
    toks: list[ReadTok], i: int, mentions: list[ReadObject], depth: int = 0
) -> tuple[int, ReadObject | None, list[str], list[str]] | None:
    """Read one object phrase starting at token ``i``; returns ``(next index, object or None,
    colours, attributes)`` or None when no phrase starts here. ``depth`` counts the partitives
    read around it ("a group of a pile of …"; at most ``MAX_PARTITIVE_DEPTH``)."""
    if i >= len(toks):
        return None  # "a pair of" at the end of the prompt
    clause = toks[i].clause
    negated = False
    j = i
    if toks[j].text in NEGATORS:
        negated = True
        j += 1
        if j < len(toks) and toks[j].text == "any":
            j += 1
    elif toks[j].text == "with" and j + 1 < len(toks) and toks[j + 1].text == "no":
        negated = True
        j += 2
    count: int | None = None
    plural_det = False
    had_det = False
    start_char = toks[i].start
    words: list[ReadTok] = []
    skipped: list[str] = []  # participles read as modifiers: "a parked car", "six sparkling sheep"
    has_noun = False  # a word of ``words`` can be a noun
    has_plain_noun = False  # … and is no colour or attribute word
    while j < len(toks) and toks[j].clause == clause:
        w = toks[j].text
        if words and (w in ARTICLES or w in DETERMINERS):
            break  # "a white bathroom a sink": a new phrase
        if w.isdigit() and not words:
            count = int(w)
        elif (
            w in COUNT_WORDS
            and not words
            and not (w == "dozen" and j + 1 < len(toks) and toks[j + 1].text == "of")
        ):
            # "a dozen eggs" = 12, "two dozen eggs" = 24 ("a dozen of" is a partitive)
            count = COUNT_WORDS[w] * (count if w == "dozen" and count else 1)
        elif w in ("a", "an") and not words:
            count = 1 if count is None else count
        elif w == "both" and not words:
            count = 2
        elif w in DETERMINERS and not words:
            plural_det = plural_det or w in PLURAL_DETERMINERS
            had_det = True
        elif w == "lots" and not words and j + 1 < len(toks) and toks[j + 1].text == "of":
            plural_det = True
            j += 1
        elif w in PREPOSITIONS or w in CONJUNCTIONS or w in PRONOUNS or w in AUX:
            break
        elif w in NEGATORS or w == ",":
            break
        elif not (w[0].isalnum()):
            break
        elif w in RELATION_NOUNS and j + 1 < len(toks) and toks[j + 1].text in ("of", "to", "side"):
            break
        elif (
            words
            and reads_as_verb(w)
            and w not in ATTRIBUTE_WORDS
            and w not in COLOR_WORDS
            and (w not in ING_NOUNS or _verb_complement_next(toks, j, clause))
        ):
            break  # "a fox *running* under a bridge"; "running shoes", "an oil painting of" stay
        elif (
            not words
            and "VERB" in parts_of_speech(w)
            and j > 0
            and toks[j - 1].text in SUBJECT_PRONOUNS
        ):
            return None  # "he stands": a verb after a subject pronoun
        elif not words and infinitive(toks, j):
            return None  # "about to release a balloon": a verb, not a noun
        elif (
            words
            and third_person(w)
            and class_of(w) is None
            and has_plain_noun
            and _before_verb_context(toks, j, clause)
        ):
            break  # "the collar naps on", "the man looks angry": a verb after its subject
        elif (
            not words
            and reads_as_verb(w)
            and w not in ATTRIBUTE_WORDS
            and not _nominal_ing(w, j, toks)
        ):
            if count is not None or plural_det:
                # "a parked car": a participle modifier after a determiner
                skipped.append(w)
                j += 1
                continue
            return None
        elif words and _verb_after_plural(words[-1].text, w, toks, j, clause):
            break  # "two kids mix paint": a plural subject, then its verb
        else:
            # after a head noun, a noun/verb word followed by a determiner/number/preposition is a verb
            if (
                words
                and "VERB" in parts_of_speech(w)
                and has_noun
                and j + 1 < len(toks)
                and (toks[j + 1].text in ARTICLES or toks[j + 1].text in COUNT_WORDS)
            ):
                break
            words.append(toks[j])
            if can_be_noun(w):
                has_noun = True
                has_plain_noun = has_plain_noun or (
                    w not in COLOR_WORDS and w not in ATTRIBUTE_WORDS
                )
        j += 1
    if not words:
        return None
    # partitive / framing word followed by "of": the phrase is the one after "of"
    head_w = words[-1].text
    if j < len(toks) and toks[j].text == "of" and toks[j].clause == clause and len(words) >= 1:
        part = partitive(head_w)  # "pair of", "pairs of", "groups of"
        if part is not None and depth < MAX_PARTITIVE_DEPTH:
            inner = read_run(toks, j + 1, mentions, depth + 1)
            if inner is None:
                return j + 1, None, [], []
            k, obj, c, a = inner
            if obj is not None:
                n = PARTITIVES[part]
                if n is not None and obj.count is None:
                    # "a pair of shoes" = 2, "two pairs of shoes" = 4, "pairs of shoes" ≥ 2;
                    # a singular or plurale tantum keeps its count ("a pair of glasses" = 1)
                    times = count if count is not None else (None if part != head_w else 1)
                    n_read = None if times is None else n * times
                else:
                    n_read = obj.count
                outer = modifiers(words[:-1])
                obj = ReadObject(
                    obj.noun,
                    obj.cls,
                    n_read,
                    tuple(dict.fromkeys((*outer[0], *obj.colors))),
                    tuple(dict.fromkeys((*outer[1], *obj.attributes))),
                    start_char,
                    obj.end,
                    clause,
                    negated or obj.negated,
                )
            return k, obj, c, a
        if head_w in FRAMING:
            return j + 1, None, [], []
    colors, attrs = modifiers(words)
    # the head: the last word that can be a noun; colour/attribute words at the end are the
    # head only when nothing nominal precedes them ("an orange", "a glass")
    # ``nominal``: indices into ``words`` (a set beside it: membership tests stay O(1), so one
    # long run of nouns is read in linear time)
    nominal = [
        k
        for k, x in enumerate(words)
        if x.text not in COLOR_WORDS and x.text not in ATTRIBUTE_WORDS and can_be_noun(x.text)
    ]
    last_k = len(words) - 1
    if not nominal:
        last = words[-1].text
        if class_of(last) is not None or (
            last in ATTRIBUTE_WORDS
            and "NOUN" in parts_of_speech(last)
            and last not in ("square", "round")
        ):
            nominal = [last_k]
            colors = [c for c in colors if c != COLOR_WORDS.get(last)]
            attrs = [a for a in attrs if a != last]
        elif (
            (count is not None or had_det)
            and last not in COLOR_WORDS
            and last not in ATTRIBUTE_WORDS
        ):
            nominal = [last_k]  # "the remote was …": the lexicon knows only the adjective
        elif last in ("square", "round", "circle", "diamond", "cylinder") and (
            count is not None or had_det
        ):
            nominal = [last_k]
            attrs = [a for a in attrs if a != last]
        else:
            return j, None, colors, attrs
    last_w = words[-1].text
    if (
        last_w in ATTRIBUTE_WORDS
        and "NOUN" in parts_of_speech(last_w)
        and nominal[-1] != last_k
        and all("ADJ" in parts_of_speech(words[k].text) for k in nominal)
    ):
        nominal = [last_k]  # "a dark square", "a big diamond": the shape word is the noun
        attrs = [a for a in attrs if a != last_w]
    hi = nominal[-1]
    head = words[hi]
    is_nominal = set(nominal)
    # keep only the contiguous noun modifiers right before the head
    mods: list[str] = []
    k = hi - 1
    while k >= 0 and k in is_nominal and words[k].text not in DETERMINERS:
        mods.append(words[k].text)
        k -= 1
    mods.reverse()
    # every other modifier word before the head ("six *sparkling* sheep", "a *rusty* bike") is
    # kept as an attribute as written: one the verifier cannot check ends in an uncertain mark
    attrs = (
        attrs
        + skipped
        + [
            x.text
            for x in words[: k + 1]
            if x.text not in COLOR_WORDS
            and x.text not in ATTRIBUTE_WORDS
            and x.text not in DETERMINERS
            and x.text not in INTENSIFIERS
            and x.text.isalpha()
            and not x.text.endswith("ly")
        ]
    )
    lem, plural = lemma(head.text)
    noun = " ".join([*mods, lem]) if mods else lem
    cls = class_of(noun) or class_of(lem)
    if (
        mods
        and class_of(noun) is None
        and cls is not None
        and all("ADJ" in parts_of_speech(m) for m in mods)
    ):
        noun = lem  # "crisp hot dogs": an adjective, not a compound
    if count is None:
        count = None if (plural or plural_det) else 1
    elif count == 1 and plural and head.text not in PLURALIA_TANTUM:
        count = None  # "a leather shoes": the plural noun wins
    if lem in PERSON_COLLECTIVES:  # "a couple is dancing" (no "of" follows: not a partitive)
        noun, cls = "person", class_of("person")
        count = None if count is None else PERSON_COLLECTIVES[lem] * count
    return (
        j,
        ReadObject(
            noun=noun,
            cls=cls,
            count=count,
            colors=tuple(dict.fromkeys(colors)),
            attributes=tuple(dict.fromkeys(attrs)),
            start=start_char,
            end=words[-1].end,
            clause=clause,
            negated=negated,
        ),
        [],
        [],
    )


def _verb_after_plural(prev: str, w: str, toks: list[ReadTok], j: int, clause: int) -> bool:
    """Whether ``w`` (token ``j``) is the verb of the plural noun ``prev`` before it: ``prev``
    is an ``-s`` plural (no plurale tantum) and ``_base_verb_then_word`` ("two kids *mix*
    paint"; "sports car" stays one noun: "car" is no verb)."""
    if prev in PLURALIA_TANTUM or not prev.endswith("s") or prev.endswith("ss"):
        return False
    return lemma(prev)[1] and _base_verb_then_word(w, toks, j, clause)


def _base_verb_then_word(w: str, toks: list[ReadTok], j: int, clause: int) -> bool:
    """Whether ``w`` (token ``j``) is a verb's base form that is no class name, followed in its
    clause by a word that is no preposition or conjunction."""
    if class_of(w) is not None or w not in getAllLemmas(w).get("VERB", ()):
        return False
    if j + 1 >= len(toks) or toks[j + 1].clause != clause:
        return False
    nxt = toks[j + 1].text
    return nxt not in PREPOSITIONS and nxt not in CONJUNCTIONS and nxt.isalnum()


def verb_after_phrase(toks: list[ReadTok], i: int, prev: ReadObject) -> bool:
    """Whether token ``i``, right after the object phrase ``prev`` in its clause, is that
    phrase's verb, not a new phrase: a verb's third-person or base form (no class name) before an
    article or number ("black fur *bats* a red ornament", "the metallic lid *hold* the bands"),
    or a base form after a plural phrase ("two kids *mix* paint")."""
    w = toks[i].text
    if i + 1 >= len(toks) or toks[i + 1].clause != toks[i].clause:
        return False
    before_det = toks[i + 1].text in ARTICLES or toks[i + 1].text in COUNT_WORDS
    if third_person(w) and before_det:
        return True
    if class_of(w) is not None or w not in getAllLemmas(w).get("VERB", ()):
        return False
    return before_det or (prev.count != 1 and _base_verb_then_word(w, toks, i, toks[i].clause))


def _verb_complement_next(toks: list[ReadTok], j: int, clause: int) -> bool:
    """Whether the token after ``j`` starts a verb's complement: an article, or a preposition
    other than ``of`` (the ``-ing`` word at ``j`` is then a verb, not a noun)."""
    if j + 1 >= len(toks) or toks[j + 1].clause != clause:
        return False
    nxt = toks[j + 1].text
    return nxt in ARTICLES or (nxt in PREPOSITIONS and nxt != "of")


def infinitive(toks: list[ReadTok], i: int) -> bool:
    """Whether token ``i`` is a verb's base form after ``to`` and before an article or number
    ("about to *release* a balloon", "trying to *catch* a frisbee"; "next to a dog" is not: "a"
    is no verb)."""
    if i == 0 or i + 1 >= len(toks) or toks[i - 1].text != "to":
        return False
    w, nxt = toks[i].text, toks[i + 1].text
    return (
        toks[i + 1].clause == toks[i].clause
        and (nxt in ARTICLES or nxt in COUNT_WORDS)
        and w in getAllLemmas(w).get("VERB", ())
    )


def third_person(w: str) -> bool:
    """Whether ``w`` is a verb's third-person ``-s`` form (``looks``, ``rises``)."""
    if not w.endswith("s") or w.endswith("ss"):
        return False
    verbs = getAllLemmas(w).get("VERB", ())
    return bool(verbs) and w not in verbs


def _before_verb_context(toks: list[ReadTok], j: int, clause: int) -> bool:
    """Whether the word after token ``j`` is where a verb's complement starts: an ``-ly``
    adverb, a preposition other than ``of``, or a word that can only be an adjective."""
    if j + 1 >= len(toks) or toks[j + 1].clause != clause:
        return False
    nxt = toks[j + 1].text
    pos = parts_of_speech(nxt)
    return (
        nxt.endswith("ly")
        or (nxt in PREPOSITIONS and nxt != "of")
        or ("ADJ" in pos and "NOUN" not in pos)
    )


def _nominal_ing(w: str, j: int, toks: list[ReadTok]) -> bool:
    """An ``-ing`` word read as a noun: one of ``ING_NOUNS`` after a determiner."""
    return (
        w in ING_NOUNS
        and j > 0
        and (toks[j - 1].text in DETERMINERS or toks[j - 1].text in ("a", "an"))
    )


def modifiers(words: list[ReadTok]) -> tuple[list[str], list[str]]:
    """The colours (canonical names, ``COLOR_WORDS``) and other attributes
    (``ATTRIBUTE_WORDS``, as written) among ``words``, in order."""
    colors = [COLOR_WORDS[x.text] for x in words if x.text in COLOR_WORDS]
    attrs = [x.text for x in words if x.text in ATTRIBUTE_WORDS]
    return colors, attrs
