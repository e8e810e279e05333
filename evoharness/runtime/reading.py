"""The open reading of a prompt: every object phrase, not only the vocabulary's classes.

``RuleExtractor`` (``evoharness.runtime.extract``) turns into constraints only what the embedded
world's verifier can check (the world's classes, colours, textures and shapes, and the position
relations of ``tasks.models.RELATIONS``). This module reads everything else a prompt states, so
that nothing it asks for is dropped silently: objects of any noun, other attributes, relations
such as support ``on`` or containment ``in``. What the verifier
cannot check is marked ``uncertain`` (``explanation.explain``), never dropped. It is the harness's
reading of English prompts and knows nothing of the simulator (whose own text-encoder model,
``evoharness.sim.reader``, is a different thing).

Grammar (a chunk grammar over a word-class lexicon, no statistical tagger: spaCy's English
models are not on PyPI). Word classes come from closed lists (``runtime.lexicon``:
determiners, numbers, prepositions, conjunctions, pronouns, auxiliaries, negators) and, for
open words, from
``lemminflect``'s English dictionary (``getAllLemmas``: the parts of speech a word form can
have, with their lemmas; ``getLemma(..., "NOUN")`` for words outside it). lemminflect was chosen
over ``inflect`` because it ships a part-of-speech lexicon as well as lemmas, which a grammar
without a tagger needs (``inflect`` only inflects words it is told are nouns).

- Clauses are split at ``.``, ``;``, ``:``, ``!``, ``?`` and newlines; quoted text is read by
  ``grammar.find_texts`` and masked first.
- Multi-word class names (``hot dog``, ``teddy bear``) are joined into one word first.
- An object phrase (read by ``runtime.open_phrase.read_run``) is a maximal run ``[negator] [determiner|number]* modifier* head``:
  modifiers are colours (``COLOR_WORDS``), other attributes (``ATTRIBUTE_WORDS``: material,
  texture, shape, size), adjectives (dropped) and nouns (kept as a compound: ``oak tree``,
  ``pitcher's mound``); the head is the run's last word that can be a noun. A run ends at a
  preposition, conjunction, pronoun, auxiliary, punctuation, an ``-ing``/``-ed`` verb form, a
  word that can only be a verb, or — after a head — a noun/verb word followed by a determiner,
  number or preposition ("a cat that has black fur *bats* a red ornament").
- Framing words followed by ``of`` (``a photo of``, ``a close-up of``) and partitives
  (``a group of``, ``a slice of``, ``a pair of`` → 2; plural ``pairs of`` too; nested ones up
  to ``MAX_PARTITIVE_DEPTH``) are not objects; ``in the style of …`` is skipped to the end of
  the clause; ``made of <material>`` adds an attribute to the phrase before.
- Count: a number (digit or ``lexicon.COUNT_WORDS``, "two dozen" = 24; ``a``/``an``/``one`` = 1, ``both`` = 2) or, for
  a plural head without one, ``None`` = at least two ("many"). A number partitive multiplies a
  plural only ("two pairs of shoes" = 4; "a pair of glasses" = 1 plurale tantum); "a couple"
  with no ``of`` is 2 persons (``lexicon.PERSON_COLLECTIVES``); a class name that is the plural of
  another name of its class ("chopsticks") is plural.
- A third-person verb form right after an object phrase and before an article or number is the
  verb, not a noun ("black fur *bats* a red ornament"); ``the`` + a noun already read (singular,
  or plural without a number: "the pigs") refers back to it.
- Negation: ``no``, ``not``, ``never``, ``neither``, ``nor``, ``without`` (``any``), ``with
  no`` before a phrase; a phrase after a negated one joined by "or"/"nor" (or a comma in a
  list "or"/"nor" continues) is negated too ("without chairs or tables"); ``not``/``never``
  then prepositions negate a relation ("not on a sofa": the phrase is negated with ``scope``
  "not on"); ``not``/``never`` before colour or attribute words only deny them of the phrase
  before ("a cat that is not black": ``not_colors``).
- Relations between consecutive phrases of a clause, when the words between are one relation
  phrase (``lexicon.RELATION_PHRASES``, longest first) plus filler (auxiliaries, verb forms,
  ``-ly`` adverbs, ``which``/``that``/``who``, forms of posture and placement verbs only:
  ``grammar.placement_verb``); "X with Y on it" gives Y ``on`` X.
- Every other modifier before a head (adjectives, participles: "six sparkling sheep") is kept
  among the attributes as written; every verb outside the phrases is an action
  (``runtime.actions``): "jumping over" is no position, "hold" in "the lid hold the bands" no
  object (issue 30).

OpenReading is pure and deterministic; it never raises on a string.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field, replace

from evoharness.runtime.actions import ReadAction, read_actions
from evoharness.runtime.grammar import (
    find_texts,
    lower_preserving,
    placement_verb,
    relation_of,
    shares_negation,
)
from evoharness.runtime.lexicon import (
    ATTRIBUTE_WORDS,
    AUX,
    CONJUNCTIONS,
    NEGATORS,
    OPEN_FILLER,
    PREDICATE_NEGATORS,
    PREPOSITIONS,
    PRONOUNS,
    RELATION_NOUNS,
    RELATION_PHRASES,
)
from evoharness.runtime.open_phrase import (
    ReadObject,
    ReadTok,
    lemma,
    read_run,
    reads_as_verb,
    verb_after_phrase,
)
from evoharness.vocab import NAMES, class_of

#: a word is a run of Unicode letters/digits ("dalí", "irmãos" stay whole), else one symbol
_WORD = re.compile(r"[^\W_]+(?:[-'\u2019][^\W_]+)*(?:['\u2019]s)?|[^\s\w]|_")
_CLAUSE_END = frozenset(".;:!?\n")
_MULTI = sorted((w for w in NAMES if " " in w), key=lambda w: -len(w.split()))
#: multi-word names by their first word (longest first), so joining them is one look-up a token
_MULTI_BY_FIRST: dict[str, list[str]] = {}
for _name in _MULTI:
    _MULTI_BY_FIRST.setdefault(_name.split()[0], []).append(_name)


@dataclass(frozen=True)
class ReadRelation:
    """``objects[subject]`` is ``relation`` ``objects[other]`` (indices into ``objects``)."""

    subject: int
    relation: str
    other: int


@dataclass
class OpenReading:
    """The open reading of one prompt: objects (negated ones in ``negations``), relations,
    texts to render, and actions (the verbs it states: ``runtime.actions``)."""

    prompt: str
    objects: list[ReadObject] = field(default_factory=list)
    negations: list[ReadObject] = field(default_factory=list)
    relations: list[ReadRelation] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    actions: list[ReadAction] = field(default_factory=list)


def _tokens(prompt: str) -> tuple[list[ReadTok], list[str]]:
    texts, masked = find_texts(prompt, lower_preserving(prompt))
    toks: list[ReadTok] = []
    clause = 0
    for m in _WORD.finditer(masked):
        t = m.group(0)
        if t in _CLAUSE_END:
            clause += 1
            continue
        if "#" in t:
            continue
        toks.append(ReadTok(t.replace("\u2019", "'"), m.start(), m.end(), clause))
    # join multi-word class names into one token
    out: list[ReadTok] = []
    i = 0
    while i < len(toks):
        for c in _MULTI_BY_FIRST.get(toks[i].text, ()):
            parts = c.split()
            n = len(parts)
            window = [t.text for t in toks[i : i + n]]
            if (
                len(window) == n
                and window[:-1] == parts[:-1]
                and class_of(" ".join(window)) == NAMES[c]
            ):
                out.append(
                    ReadTok(" ".join(window), toks[i].start, toks[i + n - 1].end, toks[i].clause)
                )
                i += n
                break
        else:
            out.append(toks[i])
            i += 1
    return out, [t[0] for t in texts]


def read_open(prompt: str) -> OpenReading:
    """The open reading of ``prompt`` (grammar in the module docstring)."""
    toks, texts = _tokens(prompt)
    reading = OpenReading(prompt=prompt, texts=texts)
    mentions: list[ReadObject] = []
    i = 0
    carry_colors: list[str] = []
    carry_attrs: list[str] = []
    anchor: int | None = None  # mention that a list of bare colours attaches to
    alias: dict[int, ReadObject] = {}  # id of a repeated mention -> the mention it repeats
    # (noun, count 1 or None) -> index in mentions of its first such mention
    first_mention: dict[tuple[str, int | None], int] = {}
    while i < len(toks):
        t = toks[i]
        w = t.text
        # in the style of ... → skip to the clause end
        if w == "style" and i >= 2 and toks[i - 1].text == "the" and toks[i - 2].text == "in":
            c = t.clause
            while i < len(toks) and toks[i].clause == c and toks[i].text != ",":
                i += 1
            continue
        if not (_starts_phrase(w)):
            i += 1
            continue
        if (
            mentions
            and i > 0
            and mentions[-1].end == toks[i - 1].end
            and toks[i - 1].clause == t.clause
            and verb_after_phrase(toks, i, mentions[-1])
        ):
            i += 1  # "… black fur bats a red ornament": the verb after its subject's phrase
            continue
        res = read_run(toks, i, mentions)
        if res is None:
            i += 1
            continue
        j, obj, colors, attrs = res
        if obj is None:
            # a run of modifiers only: carry them over "and"/"," or attach after "in"/"of"
            nxt = toks[j].text if j < len(toks) else ""
            prev = toks[i - 1].text if i > 0 else ""
            ends = nxt in ("", ",", "and", "or") or toks[j].clause != t.clause
            if (
                w in PREDICATE_NEGATORS
                and (colors or attrs)
                and mentions
                and mentions[-1].clause == t.clause
            ):
                # "a cat that is not black": a colour denied of the phrase before
                m = mentions[-1]
                mentions[-1] = replace(
                    m,
                    not_colors=tuple(dict.fromkeys((*m.not_colors, *colors))),
                    not_attributes=tuple(dict.fromkeys((*m.not_attributes, *attrs))),
                )
            elif (
                prev in ("in", "of", "from", "to")
                and ends
                and mentions
                and mentions[-1].clause == t.clause
            ):
                anchor = len(mentions) - 1
                mentions[anchor] = _with(mentions[anchor], colors, attrs)
            elif prev in ("and", ",", "or") and anchor is not None:
                mentions[anchor] = _with(mentions[anchor], colors, attrs)
            elif nxt in ("and", ",", "or") and j + 1 < len(toks):
                carry_colors += colors
                carry_attrs += attrs
            i = max(j, i + 1)
            continue
        anchor = None
        if not obj.negated and mentions and mentions[-1].clause == obj.clause:
            nxt = toks[j].text if j < len(toks) and toks[j].clause == t.clause else ""
            obj = _negation_scope(toks, i, mentions[-1], obj, nxt)
        if carry_colors or carry_attrs:
            obj = _with(obj, carry_colors, carry_attrs)
            carry_colors, carry_attrs = [], []
        # "made of/from <material>" adds an attribute to the phrase before
        if (
            i >= 2
            and toks[i - 1].text in ("of", "from")
            and toks[i - 2].text == "made"
            and mentions
            and obj.noun in ATTRIBUTE_WORDS | {"water", "ice", "wood", "metal", "gold"}
        ):
            mentions[-1] = _with(mentions[-1], [], [obj.noun])
            i = j
            continue
        if t.text == "the" and obj.count in (1, None) and not obj.negated:
            # "the cat" / "the pigs" again: the one(s) already read (coreference by a definite
            # article; a plural refers back to a plural without a number)
            k = first_mention.get((obj.noun, obj.count))
            if (
                k is not None
                and set(obj.colors) <= set(mentions[k].colors)
                and set(obj.attributes) <= set(mentions[k].attributes)
            ):
                alias[id(obj)] = mentions[k]
        if obj.count in (1, None) and not obj.negated:
            first_mention.setdefault((obj.noun, obj.count), len(mentions))
        mentions.append(obj)
        i = j
    reading.objects = [m for m in mentions if not m.negated and id(m) not in alias]
    reading.negations = [m for m in mentions if m.negated]
    index = {id(m): k for k, m in enumerate(reading.objects)}
    index.update({k: index[id(m)] for k, m in alias.items()})
    related: set[tuple[int, int]] = set()
    reading.relations = _relations(toks, mentions, reading.objects, alias, related)
    reading.actions = read_actions(toks, mentions, index, related)
    return reading


def _negation_scope(
    toks: list[ReadTok], i: int, prev: ReadObject, obj: ReadObject, nxt: str
) -> ReadObject:
    """``obj`` (its run starting at token ``i``; ``nxt`` the word after it) under the negation
    before it, if any.

    A predicate negator (``PREDICATE_NEGATORS``) followed by one or more prepositions or
    relation words before ``obj`` negates a relation ("a dog that is not on a sofa"): ``obj``
    becomes negated with ``scope`` "not on" (no constraint type states it). A phrase after a
    negated phrase joined only by "or"/"nor"/"," (and articles, "any") shares its negation
    ("without chairs or tables"; after a bare comma only when ``nxt`` continues the list:
    "without chairs, tables or lamps", but "with no hat, a dog and a cat" keeps its dog)."""
    k = i - 1
    words: list[str] = []
    while k >= 0 and toks[k].end > prev.end and len(words) < 8:
        words.insert(0, toks[k].text)
        k -= 1
    if prev.negated and not prev.scope:
        if shares_negation(words, nxt):
            return replace(obj, negated=True)
        return obj
    for n, x in enumerate(words):
        if x in PREDICATE_NEGATORS:
            rest = [y for y in words[n + 1 :] if y not in ("a", "an", "the")]
            if rest and all(
                y in PREPOSITIONS or y in RELATION_NOUNS or any(y in k for k in RELATION_PHRASES)
                for y in rest
            ):
                return replace(obj, negated=True, scope=" ".join((x, *rest)))
    return obj


def _with(m: ReadObject, colors: list[str], attrs: list[str]) -> ReadObject:
    return replace(
        m,
        colors=tuple(dict.fromkeys((*m.colors, *colors))),
        attributes=tuple(dict.fromkeys((*m.attributes, *attrs))),
    )


def _starts_phrase(w: str) -> bool:
    if w in PREPOSITIONS or w in CONJUNCTIONS or w in PRONOUNS or w in AUX:
        return w in NEGATORS
    return w.isalnum() or "-" in w or "'" in w or " " in w or w in NEGATORS


def _relations(
    toks: list[ReadTok],
    mentions: list[ReadObject],
    objects: list[ReadObject],
    alias: dict[int, ReadObject],
    related: set[tuple[int, int]],
) -> list[ReadRelation]:
    """The relations between consecutive phrases (module docstring); adds to ``related`` each
    pair of mention positions ``(k, k + 1)`` a relation was read between."""
    index = {id(m): k for k, m in enumerate(objects)}
    for k, m in alias.items():
        index[k] = index[id(m)]
    by_start = {t.start: n for n, t in enumerate(toks)}
    ends = [t.end for t in toks]  # ascending: tokens do not overlap
    out: list[ReadRelation] = []
    owner: dict[int, int] = {}  # mention k -> mention k-1 when they read "X of Y"
    for k in range(len(mentions) - 1):
        a, b = mentions[k], mentions[k + 1]
        if a.clause != b.clause or a.negated or b.negated:
            continue
        # tokens strictly between the two phrases
        ta = bisect.bisect_right(ends, a.end) - 1
        tb = by_start.get(b.start)
        if tb is None:
            continue
        between = [t.text for t in toks[ta + 1 : tb]]
        if between == ["of"]:
            owner[k + 1] = owner.get(k, k)  # "a bottle of beer next to …": the bottle is
            continue
        ka = owner.get(k, k)
        ia, ib = index[id(mentions[ka])], index[id(b)]
        rel = _relation_of(between)
        if rel is not None:
            out.append(ReadRelation(ia, rel, ib))
            related.add((k, k + 1))
            continue
        # "X with (a) Y on it": Y on X
        if between and between[-1] in ("with", "has", "have"):
            k3 = bisect.bisect_right(ends, b.end)  # the first token after phrase b
            tail = _tail_relation(toks[k3 : k3 + 3], b)
            if tail is not None:
                out.append(ReadRelation(ib, tail, ia))
    return out


def _tail_relation(after_b: list[ReadTok], b: ReadObject) -> str | None:
    """``on``/``in`` when phrase ``b`` is followed by ``on it`` / ``in it`` (optionally after
    a verb form: "written on it"); ``after_b`` are the (up to three) tokens after ``b``."""
    after = [t.text for t in after_b if t.start >= b.end and t.clause == b.clause]
    for n in range(len(after)):
        if after[n] in ("on", "in") and n + 1 < len(after) and after[n + 1] in ("it", "them"):
            if all(reads_as_verb(x) for x in after[:n]):
                return "on" if after[n] == "on" else "in"
            return None
    return None


def _relation_of(words: list[str]) -> str | None:
    """The relation (``lexicon.RELATION_PHRASES``, support and containment included) the
    words between two object phrases state, or None: ``grammar.relation_of`` with this
    reader's filler (``OPEN_FILLER``, ``-ly`` adverbs, verb forms, "a few feet/inches")."""
    return relation_of(words, RELATION_PHRASES, _is_relation_filler)


def _is_relation_filler(words: list[str], i: int, rel: str | None) -> bool:
    w = words[i]
    return (
        w in OPEN_FILLER
        or w.endswith("ly")
        or (reads_as_verb(w) and placement_verb(w))
        or w in ("a", "few", "feet", "inches")
    )


__all__ = [
    "RELATION_PHRASES",
    "ReadObject",
    "ReadRelation",
    "OpenReading",
    "lemma",
    "read_open",
    "reading_atoms",
]


def reading_atoms(reading: OpenReading) -> list[tuple[str, tuple[str, ...], str | int | None]]:
    """The reading as ``(kind, nouns, value)`` atoms: ``object`` (value None), ``count`` (the
    number, or ``"many"``; only counts other than 1), ``colour``, ``attribute``, ``relation``
    (nouns = subject, other), ``negation``, ``text``, ``action`` (the verb's lemma; nouns
    empty)."""
    out: list[tuple[str, tuple[str, ...], str | int | None]] = []
    for o in reading.objects:
        out.append(("object", (o.noun,), None))
        if o.count != 1:
            out.append(("count", (o.noun,), "many" if o.count is None else o.count))
        out += [("colour", (o.noun,), c) for c in o.colors]
        out += [("attribute", (o.noun,), a) for a in o.attributes]
    for r in reading.relations:
        a, b = reading.objects[r.subject], reading.objects[r.other]
        out.append(("relation", (a.noun, b.noun), r.relation))
    out += [("negation", (o.noun,), None) for o in reading.negations]
    out += [("text", (), t) for t in reading.texts]
    out += [("action", (), a.verb) for a in reading.actions]
    return out
