"""The open reading of prompts (``evoharness.runtime.reading``): objects of any noun, counts,
colours, other attributes, relations, negations — the grammar in the module docstring."""

from __future__ import annotations

import importlib.util

import pytest

from tests.conftest import require


@pytest.fixture(autouse=True)
def _needs_lemminflect() -> None:
    require(importlib.util.find_spec("lemminflect") is not None, "lemminflect is not installed")


def _read(prompt: str) -> tuple[list[tuple[object, ...]], list[tuple[str, str, str]], list[str]]:
    from evoharness.runtime.reading import read_open

    r = read_open(prompt)
    objs = [(o.noun, o.cls, o.count, o.colors, o.attributes) for o in r.objects]
    rels = [(r.objects[x.subject].noun, x.relation, r.objects[x.other].noun) for x in r.relations]
    return objs, rels, [o.noun for o in r.negations]


@pytest.mark.parametrize(
    ("prompt", "objects", "relations", "negations"),
    [
        (
            "The smooth brown leather jacket hung on the sleek black hanger.",
            [
                ("jacket", None, 1, ("brown",), ("smooth", "leather")),
                ("hanger", None, 1, ("black",), ("sleek",)),
            ],
            [("jacket", "on", "hanger")],
            [],
        ),
        (
            "three small yellow boxes on a large blue box",
            [("box", "box", 3, ("yellow",), ("small",)), ("box", "box", 1, ("blue",), ("large",))],
            [("box", "on", "box")],
            [],
        ),
        (
            "a photograph of sand with a bucket, lots of scattered shells but no sandpipers",
            [
                ("sand", None, 1, (), ()),
                ("bucket", "bucket", 1, (), ()),
                ("shell", "shell", None, (), ("scattered",)),  # kept, to be marked (issue 30)
            ],
            [],
            ["sandpiper"],
        ),
        (
            "a phone hidden by a cat",
            [("phone", "cell phone", 1, (), ()), ("cat", "cat", 1, (), ())],
            [("phone", "behind", "cat")],
            [],
        ),
        (
            "a pair of brown suede shoes next to a hot dog",
            [("shoe", "shoe", 2, ("brown",), ("suede",)), ("hot dog", "hot dog", 1, (), ())],
            [("shoe", "next to", "hot dog")],
            [],
        ),
        (
            "an abstract painting of three triangles in blue, red and white",
            [("triangle", None, 3, ("blue", "red", "white"), ())],
            [],
            [],
        ),
        (
            "a bottle of beer next to an ashtray",
            [
                ("bottle", "bottle", 1, (), ()),
                ("beer", "beer", 1, (), ()),
                ("ashtray", None, 1, (), ()),
            ],
            [("bottle", "next to", "ashtray")],
            [],
        ),
        (
            "Greek statue of a man comforting a cat. The cat has a big head.",
            [
                ("greek statue", None, 1, (), ()),  # a noun compound, kept whole
                ("man", "person", 1, (), ()),
                ("cat", "cat", 1, (), ()),
                ("head", None, 1, (), ("big",)),
            ],
            [],
            [],
        ),
        (
            "a bowl with a dinosaur on it",
            [("bowl", "bowl", 1, (), ()), ("dinosaur", "dinosaur", 1, (), ())],
            [("dinosaur", "on", "bowl")],
            [],
        ),
        # number partitives need a plural; a plurale tantum stays one thing
        (
            "a pair of glasses under two pairs of shoes",
            [("glasses", "glasses", 1, (), ()), ("shoe", "shoe", 4, (), ())],
            [("glasses", "below", "shoe")],
            [],
        ),
        ("a shoe rack without any pairs of shoes", [("shoe rack", None, 1, (), ())], [], ["shoe"]),
        (
            "A couple is watching two young couples",
            [("person", "person", 2, (), ()), ("person", "person", 4, (), ())],
            [],
            [],
        ),
        (
            "wooden chopsticks",
            [("chopstick", "chopsticks", None, (), ("wooden",))],  # a plural class name
            [],
            [],
        ),
        (
            "black fur bats a red ball",  # a verb after its subject's phrase, not bats
            [("fur", None, 1, ("black",), ()), ("ball", "sports ball", 1, ("red",), ())],
            [],
            [],
        ),
        (
            "a farmer with pigs. All of the pigs are sleeping.",  # "the pigs" refers back
            [("farmer", None, 1, (), ()), ("pig", "pig", None, (), ())],
            [],
            [],
        ),
    ],
)
def test_reading(
    prompt: str,
    objects: list[tuple[object, ...]],
    relations: list[tuple[str, str, str]],
    negations: list[str],
) -> None:
    assert _read(prompt) == (objects, relations, negations)


def test_reading_never_raises_on_odd_strings() -> None:
    from evoharness.runtime.explanation import explain

    for s in [
        "",
        "   ",
        "300",
        "'",
        '"',
        "a a a",
        "of of of",
        "\u2019s",
        "no",
        "x" * 500,
        "red, blue",
        "a pair of",  # a partitive at the end (an IndexError before)
        "a photo of a group of",
    ]:
        out = explain(s)
        assert out["nothing_checkable"] is True


@pytest.mark.timeout(120)  # a guard only: before the fix this phrase took minutes
def test_one_long_phrase_is_read_whole() -> None:
    """A 20,000-word run of nouns is one compound phrase whose head is the last word (the
    grammar), read in linear time (``bench/extract_bench.py`` has no timing; this is a guard)."""
    from evoharness.runtime.explanation import explain
    from evoharness.runtime.reading import read_open

    r = read_open("dog " * 20_000)
    assert len(r.objects) == 1 and r.relations == [] and r.negations == []
    o = r.objects[0]
    assert (o.cls, o.count) == ("dog", 1) and o.noun.split() == ["dog"] * 20_000
    out = explain("the cat " * 20_000)  # repeated definite mentions: one cat, many aliases
    assert out["nothing_checkable"] is False


def test_explain_checks_the_new_relations_and_marks_support() -> None:
    """``next to`` between two classes is a position constraint (``tasks.models.RELATIONS``),
    not an uncertain mark; support ``on`` stays uncertain with its reason."""
    from evoharness.runtime.explanation import explain

    out = explain("a dog next to a cat")
    assert [(c["type"], c.get("relation")) for c in out["constraints"]][-1] == (
        "position",
        "next to",
    )
    assert not [u for u in out["uncertain"] if u["kind"] == "relation"]
    out = explain("a cat on a table")
    rel = [u for u in out["uncertain"] if u["kind"] == "relation"]
    assert [(u["relation"], "not one the verifier checks" in u["reason"]) for u in rel] == [
        ("on", True)
    ]
    assert not [c for c in out["constraints"] if c["type"] == "position"]


def test_nested_partitives_never_recurse_without_bound() -> None:
    """ "a group of a group of …" read a partitive by recursion per level (a RecursionError at
    a few thousand levels); past ``_MAX_PARTITIVE_DEPTH`` levels a partitive is a noun."""
    from evoharness.runtime.open_phrase import MAX_PARTITIVE_DEPTH as _MAX_PARTITIVE_DEPTH
    from evoharness.runtime.reading import read_open

    r = read_open("a group of " * 3000 + "dogs")
    assert [o.noun for o in r.objects][-1] == "dog"
    r = read_open("a group of " * (_MAX_PARTITIVE_DEPTH - 1) + "dogs")
    assert [(o.noun, o.count) for o in r.objects] == [("dog", None)]
