"""The rule-based policy extractor: read a prompt into the constraints it states.

This is how a harness *reads* a prompt (the Policy responsibility). It sees only the prompt,
never a task's constraints (docs/architecture.md, "the harness sees only what a production request
carries"). It implements ``evoharness.ports.PolicyExtractor``.

Grammar it reads (a plain object-phrase grammar of English prompts: GenEval's templates and
the wording of compositional benchmarks), over the vocabulary of ``evoharness.vocab``:

- clauses are separated by ``.``, ``;`` or newlines;
- an object phrase is ``[count] [colour or texture ...] class``: count is a digit, a number word
  (``NUMBER_WORDS``), ``a``/``an``/``one``; colours are GenEval colour names; textures are the
  words of ``vocab.TEXTURE_WORDS`` ("wooden", "metal", "striped", …) and shapes those of
  ``vocab.SHAPE_WORDS`` ("round", "square", …); the class is one of
  the 80 classes, singular or plural (``vocab.PLURALS``, including GenEval's naive plurals
  such as ``persons``), longest match first (``hot dog`` before ``dog``). ``orange`` is a colour
  when another class or a content word of its clause follows it ("orange flowers"), else the
  fruit. A singular class name followed by a head noun is that noun's modifier, not an object
  ("clock tower", "basketball player": the head-noun rule; the head is a word lemminflect's
  lexicon lists as a noun and not as an inflected verb, so "a dog runs" keeps its dog);
- counts: "a"/"an" before a plural noun give way to the plural ("a few dogs", "a leather
  shoes" → at least two); a number partitive before "of" multiplies ("a pair of shoes" → 2,
  "two pairs of socks" → 4, "a couple of dogs" → 2, ``lexicon.PARTITIVES``; "a pair of
  glasses" names one plurale tantum); other partitives ("a herd of", "a bunch of") keep the
  noun's own count; "both" before a plural is 2; "a couple" / "two couples" not followed by
  "of" are persons (2 / 4); a hyphenated modifier is one word ("two beat-up baseballs"); a
  plural class form between a noun and an article is a verb ("fur bats a ball");
- a definite phrase ("the cat", "the pigs": no count) of a class already read with the same
  number, stating no colour, texture or shape the first did not, refers back to it: it states
  no constraint of its own, and its relations are the first phrase's;
- a relation between two consecutive object phrases of one clause (``lexicon.POSITION_PHRASES``:
  ``left of``, ``to the left of``, ``right of``, ``above``, ``on top of``, ``over``,
  ``below``, ``under``, ``beneath``, ``on the bottom of``; ``next to``, ``beside``, ``by``,
  ``on side of``, ``near``, ``close to``, ``around``; ``behind``, ``hidden by``, ``in front
  of``), with filler (be-words, verb forms such as "sitting" or "floated", ``-ly`` adverbs;
  after the relation the other phrase's article, adjectives and partitive), makes the first
  phrase's object ``relation`` the second's (GenEval's convention: "a dog right of a teddy
  bear" → dog right of teddy bear). Support and containment ("a cat on a table", "a dog in a
  car") are no position rule and give no relation;
- ``no X`` / ``without X`` / ``not X`` / ``never X`` / ``neither X`` / ``nor X`` negate an
  object phrase (also through a partitive: "without any pairs of shoes"); a phrase joined to a
  negated one by "or"/"nor" (or by a comma in a list that "or"/"nor" continues) shares its
  negation ("without any chairs or tables"; "and" does not: "with no hat and a dog"). A
  negative constraint forbids every object of the class, so only a bare negated class gives
  one: a negated count or qualified phrase ("not two cats", "no green apples"), a negation of
  a class the prompt also asks for, and a phrase after a negated relation ("not"/"never" then
  prepositions: "a dog that is not on a sofa") give no constraint at all
  (``PromptParse.scoped``; ``explanation.explain`` lists them as uncertain);
- text in double or single (straight or typographic) quotes — a single quote opens only
  after a non-letter and closes only before one, and an apostrophe between two letters
  inside it does not close it ("a book titled 'The Cat's Hat'"), so apostrophes are not
  quotes — or
  unquoted after ``saying`` / ``that says`` / ``that reads`` / ``with the text`` /
  ``with the words`` (to the end of the clause or comma), is text to render.

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

import bisect
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from lemminflect import getAllLemmas

from evoharness.runtime.lexicon import (
    COUNT_WORDS,
    NEGATORS,
    PARTITIVE_FORMS,
    POSITION_PHRASES,
    PREDICATE_NEGATORS,
    find_texts,
    lower_preserving,
    number_partitive,
    person_collective,
    relation_of,
    shares_negation,
)
from evoharness.tasks.models import MAX_COUNT, Constraint, ConstraintType
from evoharness.vocab import (
    COLORS,
    NAMES,
    PLURALS,
    SHAPE_WORDS,
    TEXTURE_WORDS,
    WORD_NUMBERS,
    plural,
)

#: CLIP's text encoder context length in tokens, incl. start and end tokens (Radford et al.
#: 2021, "Learning Transferable Visual Models From Natural Language Supervision").
CLIP_CONTEXT_TOKENS = 77

_TOKEN = re.compile(r"[a-z0-9]+(?:['\u2019][a-z]+)?|[^\sa-z0-9]")
_WORD = re.compile(r"[a-z0-9]+(?:['\u2019][a-z]+)?")
_CLAUSE_SEP = re.compile(r"[.;\n]")

_COUNT_ARTICLES = {"a": 1, "an": 1}
#: Words between a predicate negator and an object phrase that make the negation one of a
#: relation, not of the object ("not on a sofa", "never next to the dog"): prepositions and the
#: words of relation phrases.
_SCOPE_WORDS = frozenset(
    """on in at into onto inside within from with by to of under over above below beneath
    underneath behind beside near next close left right top bottom front side the a an""".split()
)
#: words that may sit between a count/colour and the class ("two large dogs"); at most 2.
_STOP = {
    "and",
    "or",
    "nor",
    "never",
    "neither",
    "of",
    "with",
    "without",
    "no",
    "not",
    "the",
    "a",
    "an",
    "in",
    "on",
    "at",
    "to",
    "is",
    "are",
    "left",
    "right",
    "above",
    "below",
    "under",
    "over",
    "beneath",
    "next",
    "photo",
    "picture",
    "image",
    "says",
    "saying",
}
_RELATION_FILLER = {
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "being",
    "who",
    "up",
    "very",
    "either",
    "which",
    "that",
    "located",
    "positioned",
    "placed",
    "sitting",
    "standing",
    "the",
    "side",
    "to",
    "on",
    "at",
    "of",
    "just",
    "directly",
}
#: Filler after a relation phrase, before the other object phrase's own words.
#: Words that start a position relation phrase, other than the prepositions that begin longer
#: wording ("to the left of", "on top of", "at the bottom of", "in front of").
_RELATION_WORDS = frozenset(k[0] for k in POSITION_PHRASES) - {"in", "on", "to", "at"}
_AFTER_RELATION = frozenset({"a", "an", "the", "of", "each", "some"}) | PARTITIVE_FORMS


def _class_forms() -> dict[tuple[str, ...], tuple[str, bool]]:
    """Every written form of a class: ``words -> (class, plural?)``. A name that is the ``-s``
    plural of another name of its class ("chopsticks" of "chopstick", "grapes") is plural."""
    forms: dict[tuple[str, ...], tuple[str, bool]] = {}
    for w, c in NAMES.items():
        forms[tuple(w.split())] = (c, False)
    singular_of = {plural(v): v for v in NAMES if plural(v) != v}
    for w, c in NAMES.items():
        v = singular_of.get(w)
        if w.endswith("s") and v is not None and NAMES[v] == c:
            forms[tuple(w.split())] = (c, True)
    for p, c in PLURALS.items():
        key = tuple(p.split())
        if key not in forms:
            forms[key] = (c, True)
    return forms


_FORMS = _class_forms()
_MAX_FORM = max(len(k) for k in _FORMS)


def clip_like_tokens(text: str) -> list[str]:
    """CLIP-like tokens of ``text``: lower-cased words (digits and letters, with an optional
    apostrophe suffix) and single punctuation characters. Approximates CLIP's BPE word split
    (Radford et al. 2021) without sub-word merges; start/end tokens are not included."""
    return _TOKEN.findall(lower_preserving(text))


def token_count(text: str) -> int:
    """Number of CLIP-like tokens of ``text`` including the start and end tokens."""
    return len(clip_like_tokens(text)) + 2


@dataclass(frozen=True)
class Tok:
    """One word/punctuation token with its character span in the prompt."""

    text: str
    start: int
    end: int


@dataclass(frozen=True)
class ObjectMention:
    """An object phrase: ``[count] [colours and textures] class``.

    ``start``/``end`` span the phrase (count through class name) in the prompt;
    ``noun_start`` is where the class name starts; ``count`` is None when no count word is
    written (singular → 1 is implied, plural → "several"); ``count_text`` is the count token as
    written; ``negated`` marks "no X"/"without X", whose ``neg_start`` is the negator's start.
    ``refers_to`` marks a definite repeat ("a cat … The cat has …"): the index of the earlier
    phrase it refers back to; it states no constraint of its own. ``scope`` is set when the
    phrase lies under a negation that is not its absence — a negated relation ("not on a
    sofa": ``"not on"``) — and the phrase then states no constraint (``PromptParse.scoped``).
    """

    cls: str
    count: int | None
    count_text: str | None
    colors: tuple[str, ...]
    plural: bool
    start: int
    noun_start: int
    end: int
    clause: int
    negated: bool = False
    neg_start: int = -1
    textures: tuple[str, ...] = ()  # canonical ``vocab.TEXTURES`` names, in prompt order
    shapes: tuple[str, ...] = ()  # canonical ``vocab.SHAPES`` names, in prompt order
    definite: bool = False  # "the" right before the phrase (no count written)
    refers_to: int | None = None  # index in ``PromptParse.objects`` of the phrase it repeats
    scope: str = ""  # the negated relation's words ("not on"), when under one

    @property
    def implied_count(self) -> int | None:
        """The count the phrase states: the written count, 1 for a bare singular, None for a
        bare plural (at least two)."""
        if self.count is not None:
            return self.count
        return None if self.plural else 1


@dataclass(frozen=True)
class TextMention:
    """Text to render: ``text`` with its span (quotes included when ``quoted``)."""

    text: str
    start: int
    end: int
    quoted: bool
    clause: int


@dataclass(frozen=True)
class RelationMention:
    """``objects[subject]`` is ``relation`` ``objects[other]`` (indices into ``objects``)."""

    subject: int
    relation: str
    other: int


@dataclass
class PromptParse:
    """Everything the rule extractor read from one prompt (character spans index it).

    ``negations`` are the phrases stated absent (each a ``negative`` constraint); ``scoped``
    are phrases under a negation no constraint type states, so they give no constraint at all:
    a negated relation ("not on a sofa"), a negated count or qualified object ("not two cats",
    "no green apples": a negative constraint would forbid every cat / apple), and a negation
    of a class the prompt also asks for."""

    prompt: str
    objects: list[ObjectMention] = field(default_factory=list)
    negations: list[ObjectMention] = field(default_factory=list)
    scoped: list[ObjectMention] = field(default_factory=list)
    relations: list[RelationMention] = field(default_factory=list)
    texts: list[TextMention] = field(default_factory=list)
    clauses: list[tuple[int, int]] = field(default_factory=list)

    def clause_of(self, pos: int) -> int:
        """Index of the clause containing character ``pos`` (the last clause when none does).

        ``clauses`` are ordered, non-overlapping spans, so a binary search finds it
        (O(log k); a linear scan made long prompts quadratic)."""
        i = bisect.bisect_right(self.clauses, pos, key=lambda c: c[0]) - 1
        if i >= 0 and pos < self.clauses[i][1]:
            return i
        return len(self.clauses) - 1


def _clauses(text: str, masked: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    start = 0
    for m in _CLAUSE_SEP.finditer(masked):
        spans.append((start, m.start()))
        start = m.end()
    spans.append((start, len(text)))
    return spans


def parse_prompt(prompt: str) -> PromptParse:
    """Read ``prompt`` into object phrases, negations, relations and texts (see module doc).

    Pure and deterministic; never raises on any string."""
    low = lower_preserving(prompt)
    texts, masked = find_texts(prompt, low)
    parse = PromptParse(prompt=prompt, clauses=_clauses(prompt, masked))
    for t, s, e, q in texts:
        parse.texts.append(TextMention(t, s, e, q, parse.clause_of(s)))
    toks = [Tok(m.group(0), m.start(), m.end()) for m in _TOKEN.finditer(masked)]
    toks = [t for t in toks if "#" not in t.text]
    mentions: list[ObjectMention] = []
    objects: list[ObjectMention] = []  # the mentions not negated, as read so far
    first: dict[tuple[str, bool], int] = {}  # (class, plural) -> its first index in objects
    i = 0
    used_until = -1  # token index up to which tokens belong to an earlier phrase
    while i < len(toks):
        match = _match_class(toks, i)
        if match is None:
            person = _person_collective(toks, i, parse)
            if person is not None:
                m = _read_phrase(prompt, toks, i, 1, "person", True, used_until, parse)
                size = person_collective(toks[i].text) or 1
                n = None if toks[i].text.endswith("s") and m.count is None else (m.count or 1)
                mentions.append(
                    replace(m, count=None if n is None else size * n, count_text=toks[i].text)
                )
                used_until = i
            i += 1
            continue
        n_words, cls, plural = match
        # a plural class form used as a verb between a noun and its object ("a cat that has
        # black fur bats a red ornament")
        if plural and n_words == 1 and _verb_between_nouns(toks, i, parse):
            i += 1
            continue
        # "orange" followed by a class or another word of its phrase ("orange flowers",
        # "orange juice") is a colour, not the fruit
        if toks[i].text == "orange" and n_words == 1 and _orange_is_colour(toks, i, parse):
            i += 1
            continue
        # a singular class name right before a head noun modifies it ("clock tower",
        # "basketball player", "shoe rack"): the object is the head, not the class
        if not plural and _is_modifier(toks, i + n_words, parse.clause_of(toks[i].start), parse):
            i += n_words
            continue
        mention = _read_phrase(prompt, toks, i, n_words, cls, plural, used_until, parse)
        if mentions and not mention.negated and not mention.scope:
            k0 = i  # first token of the phrase
            while k0 - 1 > used_until and toks[k0 - 1].start >= mention.start:
                k0 -= 1
            between = [t.text for t in toks[used_until + 1 : k0]]
            nxt = toks[i + n_words].text if i + n_words < len(toks) else ""
            if _shares_negation(mentions[-1], mention, between, nxt):
                # "without chairs or tables": the list shares its first phrase's negation
                mention = replace(mention, negated=True, neg_start=toks[used_until + 1].start)
        if not mention.negated and not mention.scope:
            key = (mention.cls, mention.plural)
            k = first.get(key)
            if mention.definite and k is not None and _adds_nothing(mention, objects[k]):
                mention = replace(mention, refers_to=k)  # "a cat … The cat has …"
            elif k is None:
                first[key] = len(objects)
            objects.append(mention)
        mentions.append(mention)
        used_until = i + n_words - 1
        i += n_words
    parse.objects = [m for m in mentions if not m.negated and not m.scope]
    required = {m.cls for m in parse.objects}
    for m in mentions:
        if m.scope:
            parse.scoped.append(m)
        elif m.negated:
            # a negative constraint forbids every object of the class: only for a bare
            # negated class ("no dogs", "not a cat", "without a pair of shoes") that the
            # prompt does not also ask for ("a cat, not two cats", "no green apples")
            bare = m.count in (None, 1) or number_partitive(m.count_text) is not None
            plain = bare and not (m.colors or m.textures or m.shapes)
            (parse.negations if plain and m.cls not in required else parse.scoped).append(m)
    parse.relations = _relations(prompt, masked, parse.objects)
    return parse


#: Words after a class name that never make it a noun modifier (prepositions, adverbs and
#: conjunctions the lexicon also lists as nouns: "a cat inside a box", "a microphone while").
_NOT_HEADS = frozenset(
    """inside outside behind beside besides near next front back top bottom side middle
    together alone here there today now home away up down in out off while when where as
    because so but yet then than very too also""".split()
)


def _is_modifier(toks: list[Tok], j: int, clause: int, parse: PromptParse) -> bool:
    """Whether ``toks[j]`` is the head noun of a compound whose modifier is the class name
    just before it (the head-noun rule, issue 19): same clause, a word lemminflect's lexicon
    lists as a noun and not as an inflected verb (``runs``, ``parked``, ``sitting``: the class
    is their subject), not an ``-ing`` form, and none of the function, relation, count,
    colour or texture words the grammar reads."""
    if j >= len(toks) or parse.clause_of(toks[j].start) != clause:
        return False
    w = toks[j].text
    if (
        _WORD.fullmatch(w) is None
        or w in _STOP
        or w in _NOT_HEADS
        or w in _RELATION_WORDS
        or w in _RELATION_FILLER
        or w in NEGATORS
        or w in COUNT_WORDS
        or w in COLORS
        or w in TEXTURE_WORDS
        or w in SHAPE_WORDS
        or w.isdigit()
        or w.endswith("ing")
    ):
        return False
    lemmas = getAllLemmas(w)
    if "NOUN" not in lemmas:
        return False
    verb = lemmas.get("VERB", ())
    aux = lemmas.get("AUX", ())
    return not aux and all(v == w for v in verb)


def _person_collective(toks: list[Tok], i: int, parse: PromptParse) -> bool | None:
    """True when ``toks[i]`` names a number of persons ("a couple is dancing", "two young
    couples": ``lexicon.PERSON_COLLECTIVES``): not followed by "of" (then it is a partitive) and
    preceded by an article, a number, an adjective or nothing in its clause."""
    w = toks[i].text
    if person_collective(w) is None:
        return None
    clause = parse.clause_of(toks[i].start)
    if i + 1 < len(toks) and toks[i + 1].text == "of":
        return None
    if i > 0 and parse.clause_of(toks[i - 1].start) == clause:
        prev = toks[i - 1].text
        if not (
            prev in _COUNT_ARTICLES
            or prev in ("the", "one")
            or prev in COUNT_WORDS
            or prev.isdigit()
            or (_is_adjective(prev) and not _is_verb_form(prev))
        ):
            return None
    return True


def _verb_between_nouns(toks: list[Tok], i: int, parse: PromptParse) -> bool:
    """Whether the plural class form ``toks[i]`` is a verb's third-person form here: the
    lexicon lists it as one, a noun outside the vocabulary stands right before it (its
    subject: not an article, number, adjective, colour or function word) and an article or
    number right after it (its object)."""
    if i == 0 or i + 1 >= len(toks) or not _is_verb_form(toks[i].text):
        return False
    clause = parse.clause_of(toks[i].start)
    prev, nxt = toks[i - 1], toks[i + 1]
    if parse.clause_of(prev.start) != clause or parse.clause_of(nxt.start) != clause:
        return False
    if not (nxt.text in _COUNT_ARTICLES or nxt.text in ("the", "one") or nxt.text in COUNT_WORDS):
        return False
    w = prev.text
    if (
        _WORD.fullmatch(w) is None
        or w in _STOP
        or w in COUNT_WORDS
        or w in COLORS
        or w in TEXTURE_WORDS
        or w in SHAPE_WORDS
        or _match_class(toks, i - 1) is not None
    ):
        return False
    lemmas = getAllLemmas(w)
    return "NOUN" in lemmas and "ADJ" not in lemmas


def _orange_is_colour(toks: list[Tok], i: int, parse: PromptParse) -> bool:
    """``toks[i]`` ("orange") is a colour: a class follows it, or a word of the same clause
    that is not a function word (``_STOP``), a relation word, a number or punctuation."""
    if _match_class(toks, i + 1) is not None:
        return True
    if i + 1 >= len(toks) or parse.clause_of(toks[i + 1].start) != parse.clause_of(toks[i].start):
        return False
    w = toks[i + 1].text
    return (
        _WORD.fullmatch(w) is not None
        and w not in _STOP
        and w not in _RELATION_WORDS
        and w not in _RELATION_FILLER
        and w not in COUNT_WORDS
        and not w.isdigit()
    )


def _match_class(toks: list[Tok], i: int) -> tuple[int, str, bool] | None:
    for n in range(min(_MAX_FORM, len(toks) - i), 0, -1):
        key = tuple(t.text for t in toks[i : i + n])
        hit = _FORMS.get(key)
        if hit is not None:
            return n, hit[0], hit[1]
    return None


def _read_phrase(
    prompt: str,
    toks: list[Tok],
    i: int,
    n_words: int,
    cls: str,
    plural: bool,
    used_until: int,
    parse: PromptParse,
) -> ObjectMention:
    j = i - 1
    colors: list[str] = []
    textures: list[str] = []
    shapes: list[str] = []
    skipped = 0
    count: int | None = None
    count_text: str | None = None
    start = toks[i].start
    clause = parse.clause_of(toks[i].start)
    while j > used_until and parse.clause_of(toks[j].start) == clause:
        w = toks[j].text
        if w in COLORS:
            colors.insert(0, w)
            start = toks[j].start
        elif w in TEXTURE_WORDS:
            textures.insert(0, TEXTURE_WORDS[w])
            start = toks[j].start
        elif w in SHAPE_WORDS:
            shapes.insert(0, SHAPE_WORDS[w])
            start = toks[j].start
        elif w.isdigit():
            count, count_text, start = int(w), w, toks[j].start
            j -= 1
            break
        elif w in COUNT_WORDS:
            count, count_text, start = COUNT_WORDS[w], w, toks[j].start
            d = toks[j - 1].text if j - 1 > used_until else ""
            if w == "dozen" and (d.isdigit() or d in WORD_NUMBERS):  # "two dozen eggs" = 24
                count *= int(d) if d.isdigit() else WORD_NUMBERS[d]
                start = toks[j - 1].start
                j -= 1
            j -= 1
            break
        elif w in _COUNT_ARTICLES:
            count, count_text, start = _COUNT_ARTICLES[w], w, toks[j].start
            j -= 1
            break
        elif w == "both" and plural and j == i - 1:
            count, count_text, start = 2, w, toks[j].start
            j -= 1
            break
        elif w == "and" and colors:
            pass  # "a red and white bus"
        elif _hyphen_joins(toks, j, used_until):
            j -= 2  # "beat-up", "well-worn": one modifier word, not two
            continue
        elif (
            _WORD.fullmatch(w)
            and w not in _STOP
            and w not in _RELATION_WORDS
            and skipped < 2
            and (not colors or _is_adjective(w))
        ):
            skipped += 1  # "two large dogs", "three small yellow boxes"
        else:
            break
        j -= 1
    if count_text in _COUNT_ARTICLES and plural:
        count, count_text = None, None  # "a leather shoes", "a few dogs": the plural noun wins
    # a partitive before "of": "a pair of shoes" = 2 shoes; "without any pairs of shoes"
    if (
        count is None
        and j - 1 > used_until
        and toks[j].text == "of"
        and toks[j - 1].text in PARTITIVE_FORMS
        and parse.clause_of(toks[j - 1].start) == clause
    ):
        part = toks[j - 1].text
        j -= 2
        times: int | None = None if part.endswith("s") else 1  # "pairs of": two or more
        if j > used_until and parse.clause_of(toks[j].start) == clause:
            d = toks[j].text
            if d.isdigit() or d in COUNT_WORDS:
                times = int(d) if d.isdigit() else COUNT_WORDS[d]
                j -= 1
            elif d in _COUNT_ARTICLES or d in ("the", "any"):
                j -= 1
        size = number_partitive(part)
        if size is not None and plural:
            count = None if times is None else size * times
            count_text = part
            start = toks[j + 1].start
    definite = (
        count is None
        and j > used_until
        and j >= 0
        and toks[j].text == "the"
        and parse.clause_of(toks[j].start) == clause
    )
    negated = False
    neg_start = -1
    if j > used_until and j >= 0 and toks[j].text in NEGATORS:
        negated = True
        neg_start = toks[j].start
        if toks[j].text == "no" and j - 1 > used_until and toks[j - 1].text == "with":
            neg_start = toks[j - 1].start
    scope = "" if negated else _negated_relation(toks, j, used_until, clause, parse)
    # leading unknown adjectives are not part of the phrase unless a count precedes them
    if count is None and not colors and not textures and not shapes:
        start = toks[i].start
    return ObjectMention(
        cls=cls,
        count=count,
        count_text=count_text,
        colors=tuple(colors),
        plural=plural,
        start=start,
        noun_start=toks[i].start,
        end=toks[i + n_words - 1].end,
        clause=clause,
        negated=negated,
        neg_start=neg_start,
        textures=tuple(textures),
        shapes=tuple(shapes),
        definite=definite,
        scope=scope,
    )


def _negated_relation(
    toks: list[Tok], j: int, used_until: int, clause: int, parse: PromptParse
) -> str:
    """The words of a negated relation ending at ``toks[j]`` ("not on", "never next to"), or
    "": a predicate negator (``lexicon.PREDICATE_NEGATORS``) followed by up to four prepositions or
    relation words (``_SCOPE_WORDS``), at least one of them not an article, all in ``clause``
    and after ``used_until``."""
    k = j
    while (
        k > used_until
        and j - k < 4
        and toks[k].text in _SCOPE_WORDS
        and parse.clause_of(toks[k].start) == clause
    ):
        k -= 1
    if (
        k < j
        and k > used_until
        and toks[k].text in PREDICATE_NEGATORS
        and any(t.text not in ("a", "an", "the") for t in toks[k + 1 : j + 1])
        and parse.clause_of(toks[k].start) == clause
    ):
        return " ".join(t.text for t in toks[k : j + 1] if t.text not in ("a", "an", "the"))
    return ""


def _shares_negation(prev: ObjectMention, m: ObjectMention, between: list[str], nxt: str) -> bool:
    """Whether phrase ``m`` shares the negation of the negated phrase ``prev`` before it: same
    clause, and the words between them list it (``lexicon.shares_negation``)."""
    return prev.negated and prev.clause == m.clause and shares_negation(between, nxt)


def _adds_nothing(m: ObjectMention, earlier: ObjectMention) -> bool:
    """Whether ``m`` states no colour, texture or shape that ``earlier`` does not."""
    return (
        set(m.colors) <= set(earlier.colors)
        and set(m.textures) <= set(earlier.textures)
        and set(m.shapes) <= set(earlier.shapes)
    )


def _hyphen_joins(toks: list[Tok], j: int, used_until: int) -> bool:
    """Whether ``toks[j]`` is a hyphen inside one word ("beat-up": no space either side)."""
    return (
        toks[j].text == "-"
        and j - 1 > used_until
        and j + 1 < len(toks)
        and toks[j - 1].end == toks[j].start
        and toks[j].end == toks[j + 1].start
        and _WORD.fullmatch(toks[j - 1].text) is not None
    )


def _relations(prompt: str, masked: str, objects: list[ObjectMention]) -> list[RelationMention]:
    out: list[RelationMention] = []
    for k in range(len(objects) - 1):
        a, b = objects[k], objects[k + 1]
        if a.clause != b.clause:
            continue
        between = [m.group(0) for m in _TOKEN.finditer(masked[a.end : b.start])]
        rel = _relation_of(between)
        if rel is not None:
            out.append(RelationMention(k, rel, k + 1))
    return out


def _relation_of(words: list[str]) -> str | None:
    """The position relation the words between two object phrases state, or None.

    ``lexicon.relation_of`` over ``lexicon.POSITION_PHRASES``, with this reader's filler:
    ``_RELATION_FILLER`` (be-words, "which", "the", "to", "on"…), verb forms
    (``_is_verb_form``: "sitting", "floated", "stands"), ``-ly`` adverbs, "right" as an
    intensifier ("right next to"), and after the relation the other phrase's article,
    partitive ("a bunch of") and adjectives ("above the tall green trees"). "by" is not a
    relation after a past participle ("painted by")."""
    return relation_of(words, POSITION_PHRASES, _is_relation_filler, _not_an_agent)


def _is_relation_filler(words: list[str], i: int, rel: str | None) -> bool:
    w = words[i]
    return (
        w in _RELATION_FILLER
        or w == "right"
        or (len(w) > 3 and w.endswith("ly"))
        or _is_verb_form(w)
        or (rel is not None and (w in _AFTER_RELATION or _is_adjective(w)))
    )


def _not_an_agent(words: list[str], i: int) -> bool:
    """False for "by" after a past participle ("painted by": an agent, not a relation)."""
    return not (words[i] == "by" and i > 0 and _past_participle(words[i - 1]))


def _is_verb_form(w: str) -> bool:
    """Whether ``w`` is an inflected verb form by lemminflect's lexicon: an ``-ing``/``-ed``
    form, or a third-person ``-s`` form ("stands"), whose verb lemma differs from ``w``."""
    if _WORD.fullmatch(w) is None or w.isdigit():
        return False
    verbs = getAllLemmas(w).get("VERB", ())
    if not verbs or w in verbs:
        return False
    return w.endswith(("ing", "ed", "en", "s"))


def _past_participle(w: str) -> bool:
    """An ``-ed``/``-en`` verb form ("painted", "chatted", "drawn")."""
    return w.endswith(("ed", "en", "wn")) and _is_verb_form(w)


def _is_adjective(w: str) -> bool:
    """A word lemminflect's lexicon lists as an adjective ("tall", "small")."""
    return _WORD.fullmatch(w) is not None and "ADJ" in getAllLemmas(w)


def _unique_id(base: str, seen: dict[str, int]) -> str:
    n = seen.get(base, 0) + 1
    seen[base] = n
    return base if n == 1 else f"{base}#{n}"


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
                    Constraint(
                        constraint_id=_unique_id(f"count:{m.cls}", seen),
                        type=ConstraintType.count,
                        subject=m.cls,
                        value=hi,
                        min_count=lo,
                        max_count=hi,
                    )
                )
            elif n == 1:
                out.append(
                    Constraint(
                        constraint_id=_unique_id(f"object:{m.cls}", seen),
                        type=ConstraintType.object,
                        subject=m.cls,
                    )
                )
            else:
                out.append(
                    Constraint(
                        constraint_id=_unique_id(f"count:{m.cls}", seen),
                        type=ConstraintType.count,
                        subject=m.cls,
                        value=n,
                        min_count=2 if n is None else n,
                        max_count=n,
                    )
                )
        # a colour/attribute of a counted phrase holds for that many instances
        each = n if n is not None and (n >= 2 or group is not None) else None
        for c in m.colors:
            out.append(
                Constraint(
                    constraint_id=_unique_id(f"color:{m.cls}", seen),
                    type=ConstraintType.color,
                    subject=m.cls,
                    value=c,
                    min_count=each,
                )
            )
        for tx in (*m.textures, *m.shapes):
            out.append(
                Constraint(
                    constraint_id=_unique_id(f"attribute:{m.cls}", seen),
                    type=ConstraintType.attribute,
                    subject=m.cls,
                    value=tx,
                    min_count=each,
                )
            )
    for r in parse.relations:
        ka, kb = canon[r.subject], canon[r.other]
        if emitted[ka] == emitted[kb]:
            continue  # one object, or two phrases of one summed count ("a car left of two cars")
        a, b = parse.objects[ka], parse.objects[kb]
        if a.cls == b.cls:
            continue  # "a red car next to a blue car": a verifier cannot tell which car is which
        out.append(
            Constraint(
                constraint_id=_unique_id(f"position:{a.cls}", seen),
                type=ConstraintType.position,
                subject=a.cls,
                relation=r.relation,
                value=b.cls,
                ref=emitted[kb],
            )
        )
    for t in parse.texts:
        out.append(
            Constraint(
                constraint_id=_unique_id("text", seen),
                type=ConstraintType.text,
                subject="text",
                value=t.text,
            )
        )
    for m in parse.negations:
        out.append(
            Constraint(
                constraint_id=_unique_id(f"negative:{m.cls}", seen),
                type=ConstraintType.negative,
                subject=m.cls,
            )
        )
    return out


class RuleExtractor:
    """The default ``PolicyExtractor``: ``RuleExtractor().extract(prompt) -> list[Constraint]``.

    Deterministic, pure, no I/O. See the module docstring for the grammar and conventions."""

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
