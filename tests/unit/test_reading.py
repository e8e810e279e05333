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
                ("shell", "shell", None, (), ()),
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
    from evoharness.runtime.reading import explain

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
    ]:
        out = explain(s)
        assert out["nothing_checkable"] is True
