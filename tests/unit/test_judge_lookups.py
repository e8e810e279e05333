"""The ``Judge`` RPC's constraints of a prompt given none (``services.verification.judge.
prompt_constraints``): a referring prompt's lookups are resolved with the embedded knowledge
base as the agent's rule planner resolves them before the rule extractor reads it, and a
lookup with no answer has its span left out (never judged as a wanted object), with a note."""

from __future__ import annotations

from evoharness.agent.search import SearchHit
from evoharness.runtime.extract import RuleExtractor
from services.verification.judge import prompt_constraints


def _read(cs) -> set[tuple[str, str, object]]:
    return {(c.type.value, c.subject, c.value) for c in cs}


def test_a_colour_lookup_is_resolved_before_extraction() -> None:
    prompt = "a car in the colour of a London bus"
    assert ("object", "bus", None) in _read(RuleExtractor().extract(prompt))  # the bug
    cs, notes = prompt_constraints(prompt, RuleExtractor())
    got = _read(cs)
    assert ("color", "car", "red") in got and ("object", "car", None) in got
    assert not any(c.subject == "bus" or c.value == "bus" for c in cs)
    assert notes == [f"colour of 'a London bus': {prompt!r} read as 'a red car'"]


class _Nothing:
    """A search provider that knows nothing."""

    name = "empty"
    cost_per_call = 1.0

    def search(self, query: str, top_k: int) -> list[SearchHit]:
        return []


class _Broken(_Nothing):
    name = "broken"

    def search(self, query: str, top_k: int) -> list[SearchHit]:
        raise RuntimeError("search backend down")


def test_an_unresolved_lookup_drops_its_span_with_a_note() -> None:
    prompt = "a car in the colour of a London bus next to a dog"
    for provider, why in (
        (_Nothing(), "no usable hit in empty"),
        (_Broken(), "search backend down"),
    ):
        cs, notes = prompt_constraints(prompt, RuleExtractor(), provider)
        assert _read(cs) == {("object", "dog", None)}  # neither the bus nor the car's colour
        (note,) = notes
        assert note.startswith("colour of 'a London bus': ") and why in note
        assert note.endswith("'a car in the colour of a London bus' left out of the constraints")
    # the shipped knowledge base has no Martian rover either
    cs, notes = prompt_constraints(
        "a car in the colour of a Martian rover on a table", RuleExtractor()
    )
    assert _read(cs) == {("object", "dining table", None)} and len(notes) == 1


def test_a_prompt_without_lookups_is_read_as_it_is() -> None:
    prompt = "a photo of a blue car left of a yellow bus"
    cs, notes = prompt_constraints(prompt, RuleExtractor(), _Broken())  # never searched
    assert cs == RuleExtractor().extract(prompt) and notes == []
