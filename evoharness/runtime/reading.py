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
models are not on PyPI). Word classes come from closed lists below (determiners, numbers,
prepositions, conjunctions, pronouns, auxiliaries, negators) and, for open words, from
``lemminflect``'s English dictionary (``getAllLemmas``: the parts of speech a word form can
have, with their lemmas; ``getLemma(..., "NOUN")`` for words outside it). lemminflect was chosen
over ``inflect`` because it ships a part-of-speech lexicon as well as lemmas, which a grammar
without a tagger needs (``inflect`` only inflects words it is told are nouns).

- Clauses are split at ``.``, ``;``, ``:``, ``!``, ``?`` and newlines; quoted text is read by
  ``lexicon.find_texts`` and masked first.
- Multi-word class names (``hot dog``, ``teddy bear``) are joined into one word first.
- An object phrase is a maximal run ``[negator] [determiner|number]* modifier* head``:
  modifiers are colours (``COLOR_WORDS``), other attributes (``ATTRIBUTE_WORDS``: material,
  texture, shape, size), adjectives (dropped) and nouns (kept as a compound: ``oak tree``,
  ``pitcher's mound``); the head is the run's last word that can be a noun. A run ends at a
  preposition, conjunction, pronoun, auxiliary, punctuation, an ``-ing``/``-ed`` verb form, a
  word that can only be a verb, or — after a head — a noun/verb word followed by a determiner,
  number or preposition ("a cat that has black fur *bats* a red ornament").
- Framing words followed by ``of`` (``a photo of``, ``a close-up of``) and partitives
  (``a group of``, ``a slice of``, ``a pair of`` → 2; plural ``pairs of`` too; nested ones up
  to ``_MAX_PARTITIVE_DEPTH``) are not objects; ``in the style of …`` is skipped to the end of
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
  ``-ly`` adverbs, ``which``/``that``/``who``); "X with Y on it" gives Y ``on`` X.

OpenReading is pure and deterministic; it never raises on a string.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache

from lemminflect import getAllLemmas, getLemma

from evoharness.runtime.lexicon import (
    COUNT_WORDS,
    NEGATORS,
    PARTITIVES,
    PERSON_COLLECTIVES,
    PREDICATE_NEGATORS,
    RELATION_PHRASES,
    find_texts,
    lower_preserving,
    partitive,
    relation_of,
    shares_negation,
)
from evoharness.vocab import (
    COLORS,
    NAMES,
    PLURALS,
    SHAPE_WORDS,
    TEXTURE_WORDS,
    class_of,
    plural,
)

#: Colour words and the colour each names (GenEval's ten plus an extension).
COLOR_WORDS: dict[str, str] = {
    **{c: c for c in COLORS},
    "grey": "gray",
    "gray": "gray",
    "gold": "gold",
    "golden": "gold",
    "silver": "silver",
    "beige": "beige",
}
#: Other attributes read as such before a noun: materials, textures, shapes, sizes.
ATTRIBUTE_WORDS = (
    frozenset(
        """wooden wood metallic metal glass plastic leather fabric rubber velvet silk suede marble
    stone cardboard brick crystal mahogany paper ceramic porcelain cotton wool woolen denim
    steel iron copper bronze concrete wicker straw fluffy furry fuzzy smooth rough prickly
    plush soft hard shiny sleek gleaming glossy matte studded textured striped spotted dotted
    polka-dot checkered dashed colorful colourful round square oval circular rectangular
    triangular spherical cubic cylindrical conical pyramidal pentagonal hexagonal octagonal
    diamond teardrop crescent oblong concentric heart-shaped star-shaped flame-like sharp
    pointy curved big small large tiny huge giant tall short long thick thin wide narrow""".split()
    )
    | frozenset(TEXTURE_WORDS)
    | frozenset(SHAPE_WORDS)
)
#: Words that are never objects when followed by ``of`` (the medium or framing of the image).
FRAMING = frozenset(
    """photo photograph picture image painting drawing sketch illustration portrait render
    rendering close-up closeup view shot snapshot cartoon artwork depiction side back front
    top bottom edge middle corner cross-section""".split()
)
_DETERMINERS = frozenset(
    """the this that these those its his her their my our your some several many any each
    every all another other few multiple numerous various""".split()
)
_PLURAL_DETERMINERS = frozenset(
    "these those some several many multiple numerous various few".split()
)
_PREPOSITIONS = frozenset(
    """of in on at with without by to from into onto under over above below behind near beside
    besides between around through across against inside outside up down for like as past
    toward towards upon atop beneath underneath among along during after before within off via
    about per than surrounding alongside""".split()
)
_CONJUNCTIONS = frozenset(
    "and or but nor while because which that who whom whose where when if so then yet".split()
)
_PRONOUNS = frozenset(
    """it he him she they them itself himself herself themselves each one ones someone
    something everything nothing everyone other others we us you i me""".split()
)
_AUX = frozenset(
    "is are was were be been being am has have had do does did will would can could should may might must".split()
)
_PLURALIA_TANTUM = frozenset(
    "glasses clothes scissors pants jeans trousers shorts binoculars headphones sunglasses goggles skis".split()
)
_LEMMA_OVERRIDES = {"leaves": "leaf", "people": "person", "glasses": "glasses"}
#: words that end an object phrase when ``of``/``to`` follows ("a dog next to", "left of").
_RELATION_NOUNS = frozenset("next close left right front top bottom side".split())
#: ``-ing`` words read as nouns inside a phrase (the lexicon also lists them as verb forms).
ING_NOUNS = frozenset(
    """painting building drawing ceiling clothing frosting icing pudding earring bedding railing
    wedding filling topping stuffing dumpling sibling seedling duckling awning carving engraving
    etching sling string ring king wing swing spring cutting sewing washing swimming frying
    rocking living waiting fishing walking baking rolling sleeping shopping running""".split()
)
#: Nested partitives read as one phrase ("a stack of a pile of …"); deeper ones are nouns.
_MAX_PARTITIVE_DEPTH = 8
_SUBJECT_PRONOUNS = frozenset("he she it they we i you".split())
_ARTICLES = frozenset("a an the his her its their some my our your".split())
_FILLER = frozenset(
    "which that who is are was were be being been has have had just directly right up".split()
)
#: a word is a run of Unicode letters/digits ("dalí", "irmãos" stay whole), else one symbol
_WORD = re.compile(r"[^\W_]+(?:[-'\u2019][^\W_]+)*(?:['\u2019]s)?|[^\s\w]|_")
_CLAUSE_END = frozenset(".;:!?\n")
_MULTI = sorted((w for w in NAMES if " " in w), key=lambda w: -len(w.split()))
#: multi-word names by their first word (longest first), so joining them is one look-up a token
_MULTI_BY_FIRST: dict[str, list[str]] = {}
for _name in _MULTI:
    _MULTI_BY_FIRST.setdefault(_name.split()[0], []).append(_name)
#: plural → singular of every class name and synonym (``vocab.plural``).
_SINGULAR = {plural(w): w for w in NAMES if plural(w) != w}


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


@dataclass(frozen=True)
class ReadRelation:
    """``objects[subject]`` is ``relation`` ``objects[other]`` (indices into ``objects``)."""

    subject: int
    relation: str
    other: int


@dataclass
class OpenReading:
    """The open reading of one prompt: objects (negated ones in ``negations``), relations,
    and texts to render."""

    prompt: str
    objects: list[ReadObject] = field(default_factory=list)
    negations: list[ReadObject] = field(default_factory=list)
    relations: list[ReadRelation] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class _Tok:
    text: str
    start: int
    end: int
    clause: int


@lru_cache(maxsize=65536)
def _pos(word: str) -> frozenset[str]:
    """The parts of speech ``word`` can have (lemminflect's dictionary; empty when unknown)."""
    w = word.replace("\u2019", "'")
    if w.endswith("'s"):
        return frozenset({"NOUN"})
    return frozenset(getAllLemmas(w))


@lru_cache(maxsize=65536)
def lemma(word: str) -> tuple[str, bool]:
    """``(singular lemma, plural?)`` of a noun word form (lemminflect; ``_LEMMA_OVERRIDES``)."""
    w = word.replace("\u2019", "'")
    if w in _LEMMA_OVERRIDES:
        return _LEMMA_OVERRIDES[w], w not in _PLURALIA_TANTUM
    if w in NAMES:  # a class name or synonym, singular (or a plurale tantum such as "glasses")
        v = _SINGULAR.get(w)
        if w.endswith("s") and v is not None and NAMES[v] == NAMES[w]:
            return v, True  # the plural of another name of its class: "chopsticks", "grapes"
        return w, False
    if w in _SINGULAR:  # a plural of one: "women" -> "woman", "strawberries" -> "strawberry"
        return _SINGULAR[w], True
    if w in PLURALS:  # GenEval's naive plurals ("persons") and alternative forms ("cacti")
        return PLURALS[w], True
    if w in _PLURALIA_TANTUM or " " in w or w.endswith("'s") or w.endswith("ss"):
        return w, False
    known = getAllLemmas(w)
    if not known and not w.endswith("s"):
        return w, False  # outside the dictionary and not an -s plural ("fedora")
    lemmas = known.get("NOUN") or getLemma(w, "NOUN")
    lem = lemmas[0] if lemmas else w
    return lem, lem != w


def _is_verb_form(w: str) -> bool:
    """Whether ``w`` reads as a verb: an ``-ing``/``-ed`` form the lexicon lists as a verb (or
    does not know), or a word that can only be a verb."""
    pos = _pos(w)
    if w.endswith("ing") or w.endswith("ed"):
        return "VERB" in pos or not pos
    return "VERB" in pos and not pos & {"NOUN", "ADJ"}


def _nominal(w: str) -> bool:
    """Whether ``w`` can be a noun (or is unknown to the lexicon and not a function word)."""
    if " " in w:
        return True
    pos = _pos(w)
    return "NOUN" in pos or (not pos and not w.isdigit())


def _tokens(prompt: str) -> tuple[list[_Tok], list[str]]:
    texts, masked = find_texts(prompt, lower_preserving(prompt))
    toks: list[_Tok] = []
    clause = 0
    for m in _WORD.finditer(masked):
        t = m.group(0)
        if t in _CLAUSE_END:
            clause += 1
            continue
        if "#" in t:
            continue
        toks.append(_Tok(t.replace("\u2019", "'"), m.start(), m.end(), clause))
    # join multi-word class names into one token
    out: list[_Tok] = []
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
                    _Tok(" ".join(window), toks[i].start, toks[i + n - 1].end, toks[i].clause)
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
            and _third_person(w)
            and i + 1 < len(toks)
            and (toks[i + 1].text in _ARTICLES or toks[i + 1].text in COUNT_WORDS)
        ):
            i += 1  # "… black fur bats a red ornament": the verb after its subject's phrase
            continue
        res = _read_run(toks, i, mentions)
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
    reading.relations = _relations(toks, mentions, reading.objects, alias)
    return reading


def _negation_scope(
    toks: list[_Tok], i: int, prev: ReadObject, obj: ReadObject, nxt: str
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
                y in _PREPOSITIONS or y in _RELATION_NOUNS or any(y in k for k in RELATION_PHRASES)
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
    if w in _PREPOSITIONS or w in _CONJUNCTIONS or w in _PRONOUNS or w in _AUX:
        return w in NEGATORS
    return w.isalnum() or "-" in w or "'" in w or " " in w or w in NEGATORS


def _read_run(
    toks: list[_Tok], i: int, mentions: list[ReadObject], depth: int = 0
) -> tuple[int, ReadObject | None, list[str], list[str]] | None:
    """Read one object phrase starting at token ``i``; returns ``(next index, object or None,
    colours, attributes)`` or None when no phrase starts here. ``depth`` counts the partitives
    read around it ("a group of a pile of …"; at most ``_MAX_PARTITIVE_DEPTH``)."""
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
    words: list[_Tok] = []
    has_noun = False  # a word of ``words`` can be a noun
    has_plain_noun = False  # … and is no colour or attribute word
    while j < len(toks) and toks[j].clause == clause:
        w = toks[j].text
        if words and (w in _ARTICLES or w in _DETERMINERS):
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
        elif w in _DETERMINERS and not words:
            plural_det = plural_det or w in _PLURAL_DETERMINERS
            had_det = True
        elif w == "lots" and not words and j + 1 < len(toks) and toks[j + 1].text == "of":
            plural_det = True
            j += 1
        elif w in _PREPOSITIONS or w in _CONJUNCTIONS or w in _PRONOUNS or w in _AUX:
            break
        elif w in NEGATORS or w == ",":
            break
        elif not (w[0].isalnum()):
            break
        elif (
            w in _RELATION_NOUNS and j + 1 < len(toks) and toks[j + 1].text in ("of", "to", "side")
        ):
            break
        elif (
            words
            and _is_verb_form(w)
            and w not in ATTRIBUTE_WORDS
            and w not in COLOR_WORDS
            and w not in ING_NOUNS
        ):
            break
        elif not words and "VERB" in _pos(w) and j > 0 and toks[j - 1].text in _SUBJECT_PRONOUNS:
            return None  # "he stands": a verb after a subject pronoun
        elif (
            words
            and _third_person(w)
            and class_of(w) is None
            and has_plain_noun
            and _before_verb_context(toks, j, clause)
        ):
            break  # "the collar naps on", "the man looks angry": a verb after its subject
        elif (
            not words
            and _is_verb_form(w)
            and w not in ATTRIBUTE_WORDS
            and not _nominal_ing(w, j, toks)
        ):
            if count is not None or plural_det:
                # "a parked car": a participle modifier after a determiner
                j += 1
                continue
            return None
        else:
            # after a head noun, a noun/verb word followed by a determiner/number/preposition is a verb
            if (
                words
                and "VERB" in _pos(w)
                and has_noun
                and j + 1 < len(toks)
                and (toks[j + 1].text in _ARTICLES or toks[j + 1].text in COUNT_WORDS)
            ):
                break
            words.append(toks[j])
            if _nominal(w):
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
        if part is not None and depth < _MAX_PARTITIVE_DEPTH:
            inner = _read_run(toks, j + 1, mentions, depth + 1)
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
                outer = _modifiers(words[:-1])
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
    colors, attrs = _modifiers(words)
    # the head: the last word that can be a noun; colour/attribute words at the end are the
    # head only when nothing nominal precedes them ("an orange", "a glass")
    # ``nominal``: indices into ``words`` (a set beside it: membership tests stay O(1), so one
    # long run of nouns is read in linear time)
    nominal = [
        k
        for k, x in enumerate(words)
        if x.text not in COLOR_WORDS and x.text not in ATTRIBUTE_WORDS and _nominal(x.text)
    ]
    last_k = len(words) - 1
    if not nominal:
        last = words[-1].text
        if class_of(last) is not None or (
            last in ATTRIBUTE_WORDS and "NOUN" in _pos(last) and last not in ("square", "round")
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
        and "NOUN" in _pos(last_w)
        and nominal[-1] != last_k
        and all("ADJ" in _pos(words[k].text) for k in nominal)
    ):
        nominal = [last_k]  # "a dark square", "a big diamond": the shape word is the noun
        attrs = [a for a in attrs if a != last_w]
    hi = nominal[-1]
    head = words[hi]
    is_nominal = set(nominal)
    # keep only the contiguous noun modifiers right before the head
    mods: list[str] = []
    k = hi - 1
    while k >= 0 and k in is_nominal and words[k].text not in _DETERMINERS:
        mods.append(words[k].text)
        k -= 1
    mods.reverse()
    lem, plural = lemma(head.text)
    noun = " ".join([*mods, lem]) if mods else lem
    cls = class_of(noun) or class_of(lem)
    if mods and class_of(noun) is None and cls is not None and all("ADJ" in _pos(m) for m in mods):
        noun = lem  # "crisp hot dogs": an adjective, not a compound
    if count is None:
        count = None if (plural or plural_det) else 1
    elif count == 1 and plural and head.text not in _PLURALIA_TANTUM:
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


def _third_person(w: str) -> bool:
    """Whether ``w`` is a verb's third-person ``-s`` form (``looks``, ``rises``)."""
    if not w.endswith("s") or w.endswith("ss"):
        return False
    verbs = getAllLemmas(w).get("VERB", ())
    return bool(verbs) and w not in verbs


def _before_verb_context(toks: list[_Tok], j: int, clause: int) -> bool:
    """Whether the word after token ``j`` is where a verb's complement starts: an ``-ly``
    adverb, a preposition other than ``of``, or a word that can only be an adjective."""
    if j + 1 >= len(toks) or toks[j + 1].clause != clause:
        return False
    nxt = toks[j + 1].text
    pos = _pos(nxt)
    return (
        nxt.endswith("ly")
        or (nxt in _PREPOSITIONS and nxt != "of")
        or ("ADJ" in pos and "NOUN" not in pos)
    )


def _nominal_ing(w: str, j: int, toks: list[_Tok]) -> bool:
    """An ``-ing`` word read as a noun: one of ``ING_NOUNS`` after a determiner."""
    return (
        w in ING_NOUNS
        and j > 0
        and (toks[j - 1].text in _DETERMINERS or toks[j - 1].text in ("a", "an"))
    )


def _modifiers(words: list[_Tok]) -> tuple[list[str], list[str]]:
    colors = [COLOR_WORDS[x.text] for x in words if x.text in COLOR_WORDS]
    attrs = [x.text for x in words if x.text in ATTRIBUTE_WORDS]
    return colors, attrs


def _relations(
    toks: list[_Tok],
    mentions: list[ReadObject],
    objects: list[ReadObject],
    alias: dict[int, ReadObject],
) -> list[ReadRelation]:
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
            continue
        # "X with (a) Y on it": Y on X
        if between and between[-1] in ("with", "has", "have"):
            k3 = bisect.bisect_right(ends, b.end)  # the first token after phrase b
            tail = _tail_relation(toks[k3 : k3 + 3], b)
            if tail is not None:
                out.append(ReadRelation(ib, tail, ia))
    return out


def _tail_relation(after_b: list[_Tok], b: ReadObject) -> str | None:
    """``on``/``in`` when phrase ``b`` is followed by ``on it`` / ``in it`` (optionally after
    a verb form: "written on it"); ``after_b`` are the (up to three) tokens after ``b``."""
    after = [t.text for t in after_b if t.start >= b.end and t.clause == b.clause]
    for n in range(len(after)):
        if after[n] in ("on", "in") and n + 1 < len(after) and after[n + 1] in ("it", "them"):
            if all(_is_verb_form(x) for x in after[:n]):
                return "on" if after[n] == "on" else "in"
            return None
    return None


def _relation_of(words: list[str]) -> str | None:
    """The relation (``lexicon.RELATION_PHRASES``, support and containment included) the
    words between two object phrases state, or None: ``lexicon.relation_of`` with this
    reader's filler (``_FILLER``, ``-ly`` adverbs, verb forms, "a few feet/inches")."""
    return relation_of(words, RELATION_PHRASES, _is_relation_filler)


def _is_relation_filler(words: list[str], i: int, rel: str | None) -> bool:
    w = words[i]
    return (
        w in _FILLER or w.endswith("ly") or _is_verb_form(w) or w in ("a", "few", "feet", "inches")
    )


__all__ = [
    "ATTRIBUTE_WORDS",
    "COLOR_WORDS",
    "FRAMING",
    "PARTITIVES",
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
    (nouns = subject, other), ``negation``, ``text`` (nouns empty)."""
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
    return out
