"""The shared English lexicon: one relation matcher and one vocabulary for both prompt readers."""

from __future__ import annotations

import pytest

from evoharness.runtime import grammar, lexicon
from evoharness.runtime.extract import RuleExtractor
from evoharness.runtime.reading import read_open
from evoharness.tasks.models import RELATIONS, ConstraintType


def _filler(words: list[str], i: int, rel: str | None) -> bool:
    return words[i] in {"is", "the"}


def test_relation_of_matches_longest_phrase_and_rejects_two_relations() -> None:
    table = lexicon.RELATION_PHRASES
    assert grammar.relation_of("is to the left of".split(), table, _filler) == "left of"
    assert grammar.relation_of("is on top of".split(), table, _filler) == "above"
    assert grammar.relation_of("is on".split(), table, _filler) == "on"
    # support is no position rule: the position view does not read it
    assert grammar.relation_of("is on".split(), lexicon.POSITION_PHRASES, _filler) is None
    assert grammar.relation_of("left of the right of".split(), table, _filler) is None
    assert grammar.relation_of("is eating".split(), table, _filler) is None
    refuse_by = lambda words, i: words[i] != "by"  # noqa: E731
    assert grammar.relation_of(["by"], table, _filler, refuse_by) is None


def test_position_phrases_are_the_verifiers_relations() -> None:
    assert set(lexicon.POSITION_PHRASES.values()) <= set(RELATIONS)
    assert {"on", "in"} <= set(lexicon.RELATION_PHRASES.values()) - set(RELATIONS)


@pytest.mark.parametrize(
    ("words", "expected"),
    [("pair", 2), ("pairs", 2), ("dozen", 12), ("herd", None), ("cat", None), (None, None)],
)
def test_number_partitive(words: str | None, expected: int | None) -> None:
    assert lexicon.number_partitive(words) == expected


@pytest.mark.parametrize(
    "prompt",
    [
        "a photo of a dog right of a teddy bear",
        "a cat to the left of a dog",
        "a bench on the left side of a car",
        "a cat on top of a car",
        "a cup at the bottom of a refrigerator",
        "a horse by the side of a car",
        "a dog in front of a bicycle",
        "a bird hidden by a tree",
    ],
)
def test_both_readers_read_the_same_position_relation(prompt: str) -> None:
    """The rule extractor's position constraint and the open reading's relation agree: both
    match the one relation table of ``lexicon``."""
    (pos,) = [c for c in RuleExtractor().extract(prompt) if c.type is ConstraintType.position]
    (rel,) = read_open(prompt).relations
    assert pos.relation == rel.relation
