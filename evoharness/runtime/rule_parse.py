"""The rule extractor's grammar: read a prompt into object phrases, negations, relations, texts.

``parse_prompt`` is what ``evoharness.runtime.extract.RuleExtractor`` reads a prompt with (its
constraints come from the parse: ``extract.constraints_from_parse``). It sees only the prompt.
The words it reads are in ``evoharness.runtime.lexicon``, the matchers it shares with the open
reading in ``evoharness.runtime.grammar``; the parse's data in ``evoharness.runtime.mentions``.

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
"""

from __future__ import annotations

import re
from dataclasses import replace

from lemminflect import getAllLemmas

from evoharness.runtime.grammar import (
    find_texts,
    lower_preserving,
    mask_reference_mentions,
    placement_verb,
    relation_of,
    shares_negation,
)
from evoharness.runtime.lexicon import (
    AFTER_RELATION,
    COUNT_ARTICLES,
    COUNT_WORDS,
    NEGATORS,
    NOT_HEADS,
    PARTITIVE_FORMS,
    POSITION_PHRASES,
    POSITION_WORDS,
    PREDICATE_NEGATORS,
    RULE_FILLER,
    SCOPE_WORDS,
    SINGULAR_OF,
    STOP_WORDS,
    number_partitive,
    person_collective,
)
from evoharness.runtime.mentions import (
    ObjectMention,
    PromptParse,
    RelationMention,
    TextMention,
    Tok,
)
from evoharness.vocab import (
    COLORS,
    NAMES,
    PLURALS,
    SHAPE_WORDS,
    TEXTURE_WORDS,
    WORD_NUMBERS,
)

#: A CLIP-like token: a lower-case word (digits and letters, with an optional apostrophe
#: suffix) or one punctuation character (``extract.clip_like_tokens``).
TOKEN = re.compile(r"[a-z0-9]+(?:['\u2019][a-z]+)?|[^\sa-z0-9]")
_WORD = re.compile(r"[a-z0-9]+(?:['\u2019][a-z]+)?")
_CLAUSE_SEP = re.compile(r"[.;\n]")


def _class_forms() -> dict[tuple[str, ...], tuple[str, bool]]:
    """Every written form of a class: ``words -> (class, plural?)``. A name that is the ``-s``
    plural of another name of its class ("chopsticks" of "chopstick", "grapes") is plural."""
    forms: dict[tuple[str, ...], tuple[str, bool]] = {}
    for w, c in NAMES.items():
        forms[tuple(w.split())] = (c, False)
    for w, c in NAMES.items():
        v = SINGULAR_OF.get(w)
        if w.endswith("s") and v is not None and NAMES[v] == c:
            forms[tuple(w.split())] = (c, True)
    for p, c in PLURALS.items():
        key = tuple(p.split())
        if key not in forms:
            forms[key] = (c, True)
    return forms


_FORMS = _class_forms()
_MAX_FORM = max(len(k) for k in _FORMS)


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
    masked = mask_reference_mentions(masked)
    parse = PromptParse(prompt=prompt, clauses=_clauses(prompt, masked))
    for t, s, e, q in texts:
        parse.texts.append(TextMention(t, s, e, q, parse.clause_of(s)))
    toks = [Tok(m.group(0), m.start(), m.end()) for m in TOKEN.finditer(masked)]
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


def _grammar_word(w: str) -> bool:
    """Whether ``w`` is no plain word (punctuation, a symbol) or one this grammar reads
    itself: a stop word (``lexicon.STOP_WORDS``), a number word, a colour, texture or shape."""
    return (
        _WORD.fullmatch(w) is None
        or w in STOP_WORDS
        or w in COUNT_WORDS
        or w in COLORS
        or w in TEXTURE_WORDS
        or w in SHAPE_WORDS
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
        _grammar_word(w)
        or w in NOT_HEADS
        or w in POSITION_WORDS
        or w in RULE_FILLER
        or w in NEGATORS
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
            prev in COUNT_ARTICLES
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
    if not (nxt.text in COUNT_ARTICLES or nxt.text in ("the", "one") or nxt.text in COUNT_WORDS):
        return False
    w = prev.text
    if _grammar_word(w) or _match_class(toks, i - 1) is not None:
        return False
    lemmas = getAllLemmas(w)
    return "NOUN" in lemmas and "ADJ" not in lemmas


def _orange_is_colour(toks: list[Tok], i: int, parse: PromptParse) -> bool:
    """``toks[i]`` ("orange") is a colour: a class follows it, or a word of the same clause
    that is not a function word (``STOP_WORDS``), a relation word, a number or punctuation."""
    if _match_class(toks, i + 1) is not None:
        return True
    if i + 1 >= len(toks) or parse.clause_of(toks[i + 1].start) != parse.clause_of(toks[i].start):
        return False
    w = toks[i + 1].text
    return (
        _WORD.fullmatch(w) is not None
        and w not in STOP_WORDS
        and w not in POSITION_WORDS
        and w not in RULE_FILLER
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
        elif w in COUNT_ARTICLES:
            count, count_text, start = COUNT_ARTICLES[w], w, toks[j].start
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
            and w not in STOP_WORDS
            and w not in POSITION_WORDS
            and skipped < 2
            and (not colors or _is_adjective(w))
        ):
            skipped += 1  # "two large dogs", "three small yellow boxes"
        else:
            break
        j -= 1
    if count_text in COUNT_ARTICLES and plural:
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
            elif d in COUNT_ARTICLES or d in ("the", "any"):
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
    relation words (``SCOPE_WORDS``), at least one of them not an article, all in ``clause``
    and after ``used_until``."""
    k = j
    while (
        k > used_until
        and j - k < 4
        and toks[k].text in SCOPE_WORDS
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
    clause, and the words between them list it (``grammar.shares_negation``)."""
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
        between = [m.group(0) for m in TOKEN.finditer(masked[a.end : b.start])]
        rel = _relation_of(between)
        if rel is not None:
            out.append(RelationMention(k, rel, k + 1))
    return out


def _relation_of(words: list[str]) -> str | None:
    """The position relation the words between two object phrases state, or None.

    ``grammar.relation_of`` over ``lexicon.POSITION_PHRASES``, with this reader's filler:
    ``RULE_FILLER`` (be-words, "which", "the", "to", "on"…), forms of posture and placement
    verbs (``_is_verb_form`` and ``grammar.placement_verb``: "sitting", "floated", "stands";
    "jumping over", "chasing" state an action, no position: issue 30), ``-ly`` adverbs, "right" as an
    intensifier ("right next to"), and after the relation the other phrase's article,
    partitive ("a bunch of") and adjectives ("above the tall green trees"). "by" is not a
    relation after a past participle ("painted by")."""
    return relation_of(words, POSITION_PHRASES, _is_relation_filler, _not_an_agent)


def _is_relation_filler(words: list[str], i: int, rel: str | None) -> bool:
    w = words[i]
    return (
        w in RULE_FILLER
        or w == "right"
        or (len(w) > 3 and w.endswith("ly"))
        or (_is_verb_form(w) and placement_verb(w))
        or (rel is not None and (w in AFTER_RELATION or _is_adjective(w)))
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
