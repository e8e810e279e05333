"""Verbs and unknown attribute words in the open reading and the policy extractor (issue 30):
every word the extractor cannot represent ends in an ``uncertain`` mark; no verb becomes a
position (``runtime.actions``, ``grammar.placement_verb``) or an object noun."""

from __future__ import annotations

import importlib.util

import pytest

from tests.conftest import require


@pytest.fixture(autouse=True)
def _needs_lemminflect() -> None:
    require(importlib.util.find_spec("lemminflect") is not None, "lemminflect is not installed")


def _marks(prompt: str) -> tuple[list[tuple[object, ...]], list[tuple[object, ...]]]:
    from evoharness.runtime.explanation import explain

    out = explain(prompt)
    cons = [
        (c["type"], c["subject"], c.get("relation"), c.get("value")) for c in out["constraints"]
    ]
    return cons, out["uncertain"]


@pytest.mark.parametrize(
    ("prompt", "verb", "subject", "obj"),
    [
        ("a turtle playing with a penguin", "play", "turtle", "penguin"),
        ("a dog chasing a cat across a lawn", "chase", "dog", "cat"),
        ("a squirrel climbing up a tree", "climb", "squirrel", "tree"),
        ("a fox running under a bridge", "run", "fox", "bridge"),
        ("a hand about to release a blue balloon", "release", "hand", "balloon"),
        ("two kids mix paint in a plastic bowl", "mix", "kid", "paint"),
        (
            "The glass jar and metallic lid hold the rubber bands on the desk.",
            "hold",
            "lid",
            "band",
        ),
    ],
)
def test_a_verb_is_an_uncertain_action(prompt: str, verb: str, subject: str, obj: str) -> None:
    cons, unc = _marks(prompt)
    acts = [(u["verb"], u.get("subject"), u.get("object")) for u in unc if u["kind"] == "action"]
    assert acts == [(verb, subject, obj)]
    nouns = {c[1] for c in cons} | {u.get("noun") for u in unc if u["kind"] == "object"}
    assert not {verb, "release", "mix", "hold", "kids mix paint"} & nouns  # no verb as a noun


@pytest.mark.parametrize(
    "prompt",
    [
        "a cat jumping over a dog",
        "a brown horse jumping over a white fence",
        "a bird flying over a boat",
        "a dog and a cat fighting over a bone",
    ],
)
def test_no_verb_becomes_a_position(prompt: str) -> None:
    from evoharness.runtime.extract import RuleExtractor
    from evoharness.runtime.reading import read_open

    assert not [c for c in RuleExtractor().extract(prompt) if c.type.value == "position"]
    assert read_open(prompt).relations == []
    _, unc = _marks(prompt)
    assert [u["kind"] for u in unc if u["kind"] == "action"] == ["action"]


@pytest.mark.parametrize(
    ("prompt", "relation"),
    [
        ("a black cat sitting on top of a gray car", "above"),
        ("a vase placed to the left of a clock", "left of"),
        ("a kitten sleeping under a chair", "below"),
        ("a bicycle standing next to a bench", "next to"),
    ],
)
def test_a_placement_verb_keeps_its_position(prompt: str, relation: str) -> None:
    cons, unc = _marks(prompt)
    assert [c[2] for c in cons if c[0] == "position"] == [relation]
    assert not [u for u in unc if u["kind"] == "action"]


@pytest.mark.parametrize(
    ("prompt", "noun", "word"),
    [
        ("six sparkling sheep", "sheep", "sparkling"),
        ("a rusty bicycle next to a car", "bicycle", "rusty"),
        ("two frosted cakes", "cake", "frosted"),
    ],
)
def test_an_unknown_attribute_is_marked(prompt: str, noun: str, word: str) -> None:
    cons, unc = _marks(prompt)
    marked = [(u["noun"], u["value"]) for u in unc if u["kind"] == "attribute"]
    assert (noun, word) in marked
    assert not [c for c in cons if c[0] == "attribute"]  # the verifier does not check it


def test_known_phrases_are_unchanged() -> None:
    """Words that look like verbs stay in their phrase: "running shoes" (a modifier, marked),
    "an oil painting of a cat", "a dog next to a box"; an intensifier is no attribute."""
    from evoharness.runtime.reading import read_open

    r = read_open("two running shoes and a dog")
    assert [(o.noun, o.attributes) for o in r.objects] == [("shoe", ("running",)), ("dog", ())]
    assert r.actions == []
    r = read_open("an oil painting of a cat")
    assert r.actions == []
    r = read_open("a very large dog next to a box")
    assert [(o.noun, o.attributes) for o in r.objects] == [("dog", ("large",)), ("box", ())]
    assert r.actions == [] and len(r.relations) == 1
