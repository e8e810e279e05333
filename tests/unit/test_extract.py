"""The rule-based policy extractor against the real GenEval metadata and edge cases."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evoharness.ports import PolicyExtractor
from evoharness.runtime.extract import (
    RuleExtractor,
    parse_prompt,
    prompt_features,
    token_count,
)
from evoharness.tasks.builders import build_geneval
from evoharness.tasks.models import Constraint, ConstraintType


def _signature(cs: list[Constraint]) -> Counter[tuple[object, ...]]:
    """What a constraint means, ignoring ids and the redundant count ``value``."""
    out: Counter[tuple[object, ...]] = Counter()
    for c in cs:
        t = c.type.value
        if t == "count":
            out[(t, c.subject, c.min_count, c.max_count)] += 1
        elif t == "position":
            out[(t, c.subject, c.relation, c.value)] += 1
        else:
            out[(t, c.subject, c.value)] += 1
    return out


def test_recovers_geneval_constraints(shared_dir):
    tasks = build_geneval(shared_dir / "data" / "geneval" / "evaluation_metadata.jsonl")
    assert len(tasks) == 553
    ex = RuleExtractor()
    misses = [
        t.prompt for t in tasks if _signature(ex.extract(t.prompt)) != _signature(t.constraints)
    ]
    rate = 1 - len(misses) / len(tasks)
    print(f"GenEval constraint recovery: {len(tasks) - len(misses)}/{len(tasks)} = {rate:.3f}")
    assert rate >= 0.98, misses[:10]


def test_is_a_policy_extractor():
    assert isinstance(RuleExtractor(), PolicyExtractor)


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        ("a photo of four handbags", {("count", "handbag", 4, 4)}),
        ("a photo of 3 dog", {("count", "dog", 3, 3)}),
        ("an apple", {("object", "apple", None)}),
        ("a photo of two persons", {("count", "person", 2, 2)}),
        ("a photo of three knifes", {("count", "knife", 3, 3)}),
        ("some cats", {("count", "cat", 2, None)}),
        ("a photo of an orange", {("object", "orange", None)}),
        (
            "a photo of an orange orange",
            {("object", "orange", None), ("color", "orange", "orange")},
        ),
        ("a photo of a hot dog", {("object", "hot dog", None)}),
        (
            "a photo of a couch below a cup",
            {
                ("object", "couch", None),
                ("object", "cup", None),
                ("position", "couch", "below", "cup"),
            },
        ),
        (
            "a cat to the left of a dog",
            {
                ("object", "cat", None),
                ("object", "dog", None),
                ("position", "cat", "left of", "dog"),
            },
        ),
        ("a kitchen with no cats", {("negative", "cat", None)}),
        ("a park without a dog", {("negative", "dog", None)}),
        ('a sign that reads "OPEN 24H"', {("text", "text", "OPEN 24H")}),
        ("a sign saying hello world, at night", {("text", "text", "hello world")}),
        ("a \u201ccurly\u201d banner", {("text", "text", "curly")}),
    ],
)
def test_reads_phrases(prompt, expected):
    assert set(_signature(RuleExtractor().extract(prompt))) == expected


def test_quoted_words_are_not_objects_and_clauses_stop_relations():
    cs = RuleExtractor().extract('a sign "two dogs". a cat. left of a dog')
    assert {c.type.value for c in cs} == {"text", "object"}
    assert not [c for c in cs if c.type.value == "position"]


def test_ids_are_unique_and_ref_points_at_other_object():
    cs = RuleExtractor().extract("a red car and a blue car, a dog right of a cat")
    ids = [c.constraint_id for c in cs]
    assert len(ids) == len(set(ids))
    pos = next(c for c in cs if c.type.value == "position")
    objs = parse_prompt("a red car and a blue car, a dog right of a cat").objects
    assert objs[pos.ref].cls == "cat"


def test_features():
    p = "a photo of two dogs left of a red cat and no birds, with a sign saying hi"
    cs = RuleExtractor().extract(p)
    assert prompt_features(p, cs) == {
        "count",
        "color",
        "position",
        "text",
        "negation",
        "multi_object",
    }
    long = "a photo of a dog " + "in a sunny green meadow " * 15
    assert token_count(long) > 77
    assert prompt_features(long, RuleExtractor().extract(long)) == {"long_prompt"}
    assert prompt_features("a photo", []) == set()


def test_never_raises_on_odd_strings():
    for s in ["", "   ", '"', '""', "\u0130stanbul cats", "no", "a a a", "1 2 3 dogs", "\n\n;."]:
        RuleExtractor().extract(s)


_WORDS = [
    "a",
    "an",
    "two",
    "3",
    "red",
    "orange",
    "dog",
    "dogs",
    "hot",
    "cat",
    "no",
    "without",
    "left",
    "of",
    "above",
    "and",
    ",",
    ".",
    ";",
    '"',
    "saying",
    "wine",
    "glass",
    "persons",
    "photo",
    "the",
    "with",
    "\n",
    "sign",
    "hello",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_WORDS), max_size=40) | st.text(max_size=120))
def test_extract_and_rewrites_never_raise(words):
    """Fuzz: any prompt reads without error, and every rewrite returns text."""
    from evoharness.runtime.rewrite import REWRITES, apply_rewrite

    prompt = words if isinstance(words, str) else " ".join(words)
    cs = RuleExtractor().extract(prompt)
    assert len({c.constraint_id for c in cs}) == len(cs)
    prompt_features(prompt, cs)
    for kind in REWRITES:
        out = apply_rewrite(kind, prompt, max_tokens=16)
        assert isinstance(out.text, str)


def test_clause_of_matches_the_clause_spans_on_a_long_prompt() -> None:
    """``clause_of`` (binary search) returns the clause whose span holds ``pos``, else the
    last clause, for every position of a many-clause prompt (separators included)."""
    prompt = "a red cat and a blue dog. " * 300 + "two cups; a sign saying 'hi'\nno birds"
    parse = parse_prompt(prompt)
    assert len(parse.clauses) > 300
    for pos in range(-1, len(prompt) + 2):
        want = next(
            (i for i, (s, e) in enumerate(parse.clauses) if s <= pos < e), len(parse.clauses) - 1
        )
        assert parse.clause_of(pos) == want, pos


def test_single_quotes_are_text_and_apostrophes_are_not() -> None:
    """Straight and typographic single quotes delimit text (PartiPrompts writes
    "the words 'KEEP OFF THE GRASS'"); apostrophes inside words do not."""

    def texts(p: str) -> list[object]:
        return [c.value for c in RuleExtractor().extract(p) if c.type is ConstraintType.text]

    assert texts("the words 'KEEP OFF THE GRASS' on a sign") == ["KEEP OFF THE GRASS"]
    assert texts("a store front that has the word \u2018openai\u2019 written on it") == ["openai"]
    assert texts("the dog's bowl and the cat's toy") == []
    assert texts("a train conductor\u2019s hat") == []
    # an apostrophe between two letters does not close a single-quoted title
    cs = RuleExtractor().extract("a book titled 'The Cat's Hat'")
    assert [(c.constraint_id, c.value) for c in cs] == [
        ("object:book", None),
        ("text", "The Cat's Hat"),
    ]


def test_reading_a_book_is_not_text_to_render() -> None:
    """'reading' is a verb in "a woman reading a book"; only 'that reads' introduces text."""
    cs = RuleExtractor().extract("a person reading a book")
    assert [c.type for c in cs] == [ConstraintType.object, ConstraintType.object]
    assert [c.value for c in RuleExtractor().extract("a sign that reads HELLO")] == ["HELLO"]


def test_t2i_compbench_wording_bottom_of_and_orange_as_a_colour() -> None:
    """T2I-CompBench's "on the bottom of" is ``below``; "orange" before a word of its phrase
    is a colour ("orange flowers", "orange juice"), and the fruit before "and"."""
    cs = RuleExtractor().extract("a cat on the bottom of a microwave")
    pos = [c for c in cs if c.type is ConstraintType.position]
    assert [(c.subject, c.relation, c.value) for c in pos] == [("cat", "below", "microwave")]
    cs = RuleExtractor().extract("a vase left of orange flowers")
    assert "orange" not in {c.subject for c in cs}
    assert [(c.type, c.value) for c in cs if c.subject == "flower"] == [
        (ConstraintType.count, None),
        (ConstraintType.color, "orange"),
    ]
    assert [c.subject for c in RuleExtractor().extract("a glass of orange juice")] == []
    assert [c.subject for c in RuleExtractor().extract("an orange and a cat")] == ["orange", "cat"]


def _positions(prompt: str) -> list[tuple[str, str | None, object]]:
    cs = RuleExtractor().extract(prompt)
    return [(c.subject, c.relation, c.value) for c in cs if c.type is ConstraintType.position]


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        ("a dog next to a cat", ("dog", "next to", "cat")),
        ("a dog right next to a cat", ("dog", "next to", "cat")),
        ("a giraffe near a clock", ("giraffe", "near", "clock")),
        ("a dog beside a cat", ("dog", "next to", "cat")),
        ("a dog is close to a cat", ("dog", "near", "cat")),
        ("a cat on side of a couch", ("cat", "next to", "couch")),
        ("a frog behind a balloon", ("frog", "behind", "balloon")),
        ("a phone hidden by a cat", ("cell phone", "behind", "cat")),
        ("a key in front of a chair", ("key", "in front of", "chair")),
        ("a cat on the bottom of a microwave", ("cat", "below", "microwave")),
        ("a cat at the bottom of a microwave", ("cat", "below", "microwave")),
        ("a cat underneath a table", ("cat", "below", "dining table")),
        ("a cat on top of a car", ("cat", "above", "car")),
        ("a cat on the top of a car", ("cat", "above", "car")),
        # verb forms and adverbs are filler; the other phrase's adjectives and partitive too
        ("The white clouds floated above the tall green trees.", ("cloud", "above", "tree")),
        ("a vase sitting to the left of a bunch of flowers", ("vase", "left of", "flower")),
        ("The green plant was next to the white pot.", ("potted plant", "next to", "pot")),
        ("Four cats surrounding a dog", ("cat", "near", "dog")),
    ],
)
def test_reads_proximity_and_depth_relations(prompt: str, expected: tuple[str, str, str]) -> None:
    """T2I-CompBench's spatial and 3D-spatial wording gives position constraints with the
    relations of ``tasks.models.RELATIONS`` (issue 19)."""
    assert _positions(prompt) == [expected]


@pytest.mark.parametrize(
    "prompt",
    [
        "a cat on a table",  # support is no position rule
        "a dog in a car",  # nor is containment
        "a dog painted by a cat",  # "by" after a past participle is the agent
        "a dog and a cat near",  # no second phrase
        "a dog next to something with a cat",  # other words between: not the cat's relation
    ],
)
def test_no_position_without_a_position_phrase(prompt: str) -> None:
    assert _positions(prompt) == []


def _counts(prompt: str) -> dict[str, tuple[int | None, int | None]]:
    cs = RuleExtractor().extract(prompt)
    out: dict[str, tuple[int | None, int | None]] = {}
    for c in cs:
        if c.type is ConstraintType.count:
            out[c.subject] = (c.min_count, c.max_count)
        elif c.type is ConstraintType.object:
            out[c.subject] = (1, 1)
    return out


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        ("a pair of shoes", {"shoe": (2, 2)}),
        ("a pair of brown suede shoes", {"shoe": (2, 2)}),
        ("two pairs of shoes", {"shoe": (4, 4)}),
        ("pairs of shoes", {"shoe": (2, None)}),
        ("a pair of glasses", {"glasses": (1, 1)}),  # one plurale tantum
        ("a couple of dogs", {"dog": (2, 2)}),
        ("A couple is watching a movie", {"person": (2, 2)}),
        ("two young couples", {"person": (4, 4)}),
        ("a herd of elephants", {"elephant": (2, None)}),
        ("a slice of pizza", {"pizza": (1, 1)}),
        ("a few dogs", {"dog": (2, None)}),
        ("several dogs", {"dog": (2, None)}),
        ("a leather shoes", {"shoe": (2, None)}),  # the plural noun wins over a stray "a"
        ("both dogs", {"dog": (2, 2)}),
        ("three small yellow boxes", {"box": (3, 3)}),
        ("two beat-up baseballs", {"baseball": (2, 2)}),
        ("wooden chopsticks", {"chopsticks": (2, None)}),  # a plural name of its class
        ("fifteen dogs", {"dog": (15, 15)}),  # number words past vocab's twelve
        ("a dozen eggs", {"egg": (12, 12)}),
        ("two dozen eggs", {"egg": (24, 24)}),
        ("a dozen of eggs", {"egg": (12, 12)}),
        ("A cat that has black fur bats a ball", {"cat": (1, 1), "sports ball": (1, 1)}),
    ],
)
def test_counts_of_partitives_compounds_and_plurals(
    prompt: str, expected: dict[str, tuple[int | None, int | None]]
) -> None:
    assert _counts(prompt) == expected


def test_negation_reaches_through_a_partitive() -> None:
    cs = RuleExtractor().extract("a shoe rack without any pairs of shoes on it")
    assert [(c.type, c.subject) for c in cs] == [(ConstraintType.negative, "shoe")]


def test_a_definite_repeat_refers_back_and_states_nothing_new() -> None:
    """ "a cat … The cat …" is one cat; its relations are the first phrase's, and ``ref``
    indexes the object/count constraints (what the layout planner reads)."""
    cs = RuleExtractor().extract("a dog and a cat. The cat is left of the dog.")
    assert [(c.type.value, c.subject) for c in cs] == [
        ("object", "dog"),
        ("object", "cat"),
        ("position", "cat"),
    ]
    pos = cs[-1]
    assert (pos.relation, pos.value, pos.ref) == ("left of", "dog", 0)
    cs = RuleExtractor().extract("pigs and a car. The car is near the pigs.")
    pos = [c for c in cs if c.type is ConstraintType.position]
    assert [(c.subject, c.relation, c.value, c.ref) for c in pos] == [("car", "near", "pig", 0)]
    assert len([c for c in cs if c.subject == "pig"]) == 1
    # a new colour, no article or another number: a second object
    assert len(RuleExtractor().extract("a cat. The black cat")) == 3
    assert [c.subject for c in RuleExtractor().extract("the dog and the cat")] == ["dog", "cat"]
    # "the cats" after "a cat" is more cats (another number): one count over both phrases
    assert [(c.type.value, c.min_count, c.max_count) for c in _extract("a cat and the cats")] == [
        ("count", 3, None)
    ]


def _extract(prompt: str) -> list[Constraint]:
    return RuleExtractor().extract(prompt)


def _read(prompt: str) -> list[tuple[str, object, int | None, int | None]]:
    return [(c.constraint_id, c.value, c.min_count, c.max_count) for c in _extract(prompt)]


def test_a_class_named_in_several_counted_phrases_gets_one_count_over_all() -> None:
    """The class's count covers every phrase naming it; a colour/attribute of a counted phrase
    holds for that phrase's count of distinct instances (``min_count``)."""
    assert _read("two red cars and a blue car") == [
        ("count:car", 3, 3, 3),
        ("color:car", "red", 2, None),
        ("color:car#2", "blue", 1, None),
    ]
    assert _read("a cat and two cats") == [("count:cat", 3, 3, 3)]
    assert _read("several cars and a red car") == [
        ("count:car", None, 3, None),  # an open phrase leaves the maximum open
        ("color:car", "red", 1, None),
    ]
    assert _read("two wooden chairs and a metal chair") == [
        ("count:chair", 3, 3, 3),
        ("attribute:chair", "wooden", 2, None),
        ("attribute:chair#2", "metallic", 1, None),
    ]
    assert _read("two red cars") == [("count:car", 2, 2, 2), ("color:car", "red", 2, None)]
    # a definite repeat is the same object(s): not counted again
    assert _read("two cats and a dog. The cats are left of the dog.")[0] == ("count:cat", 2, 2, 2)
    assert _read("a cat. The cat sleeps") == [("object:cat", None, None, None)]
    # all phrases singular: one object constraint each, judged on distinct instances
    assert [c[0] for c in _read("a red car and a blue car")] == [
        "object:car",
        "color:car",
        "object:car#2",
        "color:car#2",
    ]
    # a relation to another class points at the count; within the summed class it is dropped
    cs = _extract("a dog left of two red cars and a blue car")
    pos = [c for c in cs if c.type is ConstraintType.position]
    assert [(c.subject, c.value, c.ref) for c in pos] == [("dog", "car", 1)]
    assert not [c for c in _extract("a car left of two cars") if c.type is ConstraintType.position]
