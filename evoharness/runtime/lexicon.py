"""The English prompt lexicon both prompt readers share: the words, written once.

Owned here, used by the rule extractor (``evoharness.runtime.rule_parse``: the constraints the
verifier checks) and by the open reading (``evoharness.runtime.reading``: everything else a
prompt states). Here are the word tables — numbers, negators, partitives, relation phrases,
function words, colour and attribute words — and the look-ups over them; how a phrase is read
(the shared matchers: relation phrases, negation lists, text to render) is in
``evoharness.runtime.grammar``, each reader's own phrase grammar in its module. A few tables
belong to one reader's grammar (the rule extractor's ``STOP_WORDS``, ``RULE_FILLER``, …; the
open reading's ``DETERMINERS``, ``OPEN_FILLER``, …); they are here so that every English word
list of the harness is in one place, and their comments say whose they are.

The lexicon describes English prompts, never the simulator (``evoharness.sim``). It imports
only ``evoharness.vocab`` (the classes' names, colours, textures, shapes and number words) and
``evoharness.tasks.models`` (the position relations the verifier checks), nothing from
``runtime``.
"""

from __future__ import annotations

from evoharness.tasks.models import RELATIONS
from evoharness.vocab import COLORS, NAMES, SHAPE_WORDS, TEXTURE_WORDS, WORD_NUMBERS, plural

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


# The rule extractor's words (``runtime.rule_parse``).

#: Articles that state a count of one.
COUNT_ARTICLES = {"a": 1, "an": 1}
#: Words between a predicate negator and an object phrase that make the negation one of a
#: relation, not of the object ("not on a sofa", "never next to the dog"): prepositions and the
#: words of relation phrases.
SCOPE_WORDS = frozenset(
    """on in at into onto inside within from with by to of under over above below beneath
    underneath behind beside near next close left right top bottom front side the a an""".split()
)
#: Words that end the run of words the rule extractor reads before a class name (function,
#: relation and framing words); other words may sit between a count/colour and the class
#: ("two large dogs"; at most 2).
STOP_WORDS = {
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
#: The rule extractor's filler around a relation phrase (be-words, "which", "the", "to", …).
RULE_FILLER = {
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
#: Words that start a position relation phrase, other than the prepositions that begin longer
#: wording ("to the left of", "on top of", "at the bottom of", "in front of").
POSITION_WORDS = frozenset(k[0] for k in POSITION_PHRASES) - {"in", "on", "to", "at"}
#: Filler after a relation phrase, before the other object phrase's own words.
AFTER_RELATION = frozenset({"a", "an", "the", "of", "each", "some"}) | PARTITIVE_FORMS
#: Words after a class name that never make it a noun modifier (prepositions, adverbs and
#: conjunctions the lexicon also lists as nouns: "a cat inside a box", "a microphone while").
NOT_HEADS = frozenset(
    """inside outside behind beside besides near next front back top bottom side middle
    together alone here there today now home away up down in out off while when where as
    because so but yet then than very too also""".split()
)


# The open reading's words (``runtime.reading``, ``runtime.open_phrase``).

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
#: Determiners and quantifiers that open an object phrase (no count of their own).
DETERMINERS = frozenset(
    """the this that these those its his her their my our your some several many any each
    every all another other few multiple numerous various""".split()
)
#: The determiners that make their phrase plural ("some dogs": at least two).
PLURAL_DETERMINERS = frozenset(
    "these those some several many multiple numerous various few".split()
)
#: Prepositions: they end an object phrase.
PREPOSITIONS = frozenset(
    """of in on at with without by to from into onto under over above below behind near beside
    besides between around through across against inside outside up down for like as past
    toward towards upon atop beneath underneath among along during after before within off via
    about per than surrounding alongside""".split()
)
#: Conjunctions and relative words: they end an object phrase.
CONJUNCTIONS = frozenset(
    "and or but nor while because which that who whom whose where when if so then yet".split()
)
#: Pronouns: never an object phrase's head.
PRONOUNS = frozenset(
    """it he him she they them itself himself herself themselves each one ones someone
    something everything nothing everyone other others we us you i me""".split()
)
#: Auxiliary and modal verbs: they end an object phrase.
AUX = frozenset(
    "is are was were be been being am has have had do does did will would can could should may might must".split()
)
#: Nouns plural in form that name one thing ("a pair of glasses" is one).
PLURALIA_TANTUM = frozenset(
    "glasses clothes scissors pants jeans trousers shorts binoculars headphones sunglasses goggles skis".split()
)
#: Noun lemmas lemminflect gets wrong or ambiguous, written out.
LEMMA_OVERRIDES = {"leaves": "leaf", "people": "person", "glasses": "glasses"}
#: Words that end an object phrase when ``of``/``to`` follows ("a dog next to", "left of").
RELATION_NOUNS = frozenset("next close left right front top bottom side".split())
#: ``-ing`` words read as nouns inside a phrase (the lexicon also lists them as verb forms).
ING_NOUNS = frozenset(
    """painting building drawing ceiling clothing frosting icing pudding earring bedding railing
    wedding filling topping stuffing dumpling sibling seedling duckling awning carving engraving
    etching sling string ring king wing swing spring cutting sewing washing swimming frying
    rocking living waiting fishing walking baking rolling sleeping shopping running""".split()
)
#: Subject pronouns: a verb form after one is a verb ("he stands").
SUBJECT_PRONOUNS = frozenset("he she it they we i you".split())
#: Articles and possessives: after a phrase's first word, one starts a new phrase.
ARTICLES = frozenset("a an the his her its their some my our your".split())
#: The open reading's filler around a relation phrase.
OPEN_FILLER = frozenset(
    "which that who is are was were be being been has have had just directly right up".split()
)
#: Verbs (lemmas) of posture and placement: they say where a thing is, so a relation phrase
#: after one of them is a position ("a cat *sitting* on top of a car", "a vase *placed* to the
#: left of a clock"). Any other verb before a relation phrase states an action ("a cat
#: *jumping* over a dog", "a fox *running* under a bridge"), which no position rule describes:
#: both readers then read no relation, and the open reading marks the action (issue 30).
PLACEMENT_VERBS = frozenset(
    """be sit stand lie lay rest hang place put set locate position park perch lean stack pile
    mount situate stay float hover kneel crouch squat hide nestle tuck balance display arrange
    keep store attach fix glue pin install wait sleep grow lurk loom sprawl curl huddle line
    gather seat settle remain appear plant prop pose lodge sandwich surround flank border
    frame center centre paint draw print write carve engrave""".split()
)
#: Words between a verb and the object phrase it acts on ("climbing *up* a tree", "about to
#: release a balloon"): particles and prepositions of motion.
VERB_PARTICLES = frozenset(
    """up down away out off over around along across through back into onto about past toward
    towards to with at on in from under into after by for""".split()
)

#: plural → singular of every class name and synonym (``vocab.plural``).
SINGULAR_OF = {plural(w): w for w in NAMES if plural(w) != w}
