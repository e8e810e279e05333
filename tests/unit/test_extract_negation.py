"""Negation scope and quoted titles in the policy extractor (``evoharness extract``): the rule
extractor's constraints and ``explanation.explain``'s uncertain marks for "not on a sofa",
"neither … nor", "never", "without chairs or tables", "not two cats", "no green apples",
and "not black" (issues found by a new-user trial, 2026-12-03)."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from evoharness.runtime.extract import RuleExtractor
from tests.conftest import require


@pytest.fixture(autouse=True)
def _needs_lemminflect() -> None:
    require(importlib.util.find_spec("lemminflect") is not None, "lemminflect is not installed")


def _ids(prompt: str) -> list[str]:
    return [c.constraint_id for c in RuleExtractor().extract(prompt)]


def _uncertain(prompt: str) -> list[dict[str, Any]]:
    from evoharness.runtime.explanation import explain

    return list(explain(prompt)["uncertain"])


def _never_required_and_negated(prompt: str) -> None:
    cs = RuleExtractor().extract(prompt)
    required = {c.subject for c in cs if c.type.value in ("object", "count")}
    negated = {c.subject for c in cs if c.type.value == "negative"}
    assert not required & negated, (prompt, required & negated)


def test_a_negated_relation_requires_nothing_and_is_marked_uncertain() -> None:
    for prompt in ("a dog that is not on a sofa", "a dog not next to a cat"):
        ids = _ids(prompt)
        assert ids == ["object:dog"], ids
    marks = _uncertain("a dog that is not on a sofa")
    assert len(marks) == 1
    (m,) = marks
    assert (m["kind"], m["class"], m["negated"]) == ("negation", "couch", "not on a sofa")
    assert "relation" in m["reason"]


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        ("neither a dog nor a cat", ["negative:dog", "negative:cat"]),
        ("a dog but never a cat", ["object:dog", "negative:cat"]),
        ("a room without any chairs or tables", ["negative:chair", "negative:dining table"]),
        ("no cats nor dogs", ["negative:cat", "negative:dog"]),
        # a comma list shares the negation only when "or"/"nor" continues it
        (
            "a room without chairs, tables or lamps and a dog",
            ["object:dog", "negative:chair", "negative:dining table"],
        ),
        ("a street with no car, a dog and a cat", ["object:dog", "object:cat", "negative:car"]),
        # "and" does not share it
        ("a man without a hat and a dog", ["object:person", "object:dog", "negative:hat"]),
    ],
)
def test_negators_and_coordinated_negation(prompt: str, expected: list[str]) -> None:
    assert _ids(prompt) == expected
    # the open reading agrees: no negated class is left as "not extracted" (an unknown noun,
    # "lamps", is marked for its vocabulary only)
    marks = [u for u in _uncertain(prompt) if u["kind"] == "negation"]
    assert all(m["class"] is None and "vocabulary" in m["reason"] for m in marks), marks


@pytest.mark.parametrize(
    ("prompt", "ids", "negated"),
    [
        ("a cat, not two cats", ["object:cat"], "not two cats"),
        ("a red apple and no green apples", ["object:apple", "color:apple"], "no green apples"),
        ("no green apples", [], "no green apples"),
    ],
)
def test_a_negated_count_or_qualified_object_is_no_negative(
    prompt: str, ids: list[str], negated: str
) -> None:
    """A negative constraint forbids every object of its class: "not two cats" and "no green
    apples" cannot be stated by one, so they go to uncertain with a reason."""
    assert _ids(prompt) == ids
    _never_required_and_negated(prompt)
    marks = [u for u in _uncertain(prompt) if u["kind"] == "negation"]
    assert [m["negated"] for m in marks] == [negated]
    assert "no constraint type" in marks[0]["reason"]


def test_a_class_both_asked_for_and_negated_is_never_both() -> None:
    prompt = "a dog and no dog"
    _never_required_and_negated(prompt)
    assert _ids(prompt) == ["object:dog"]
    (m,) = [u for u in _uncertain(prompt) if u["kind"] == "negation"]
    assert "contradict" in m["reason"]


def test_a_denied_colour_is_uncertain_and_never_required() -> None:
    prompt = "a cat that is not black"
    assert _ids(prompt) == ["object:cat"]
    marks = _uncertain(prompt)
    assert [(m["kind"], m["class"], m["value"], m["negated"]) for m in marks] == [
        ("colour", "cat", "black", "not black")
    ]
    assert marks[0]["reason"]
