"""What the rule extractor reads from a prompt: its object, text and relation mentions.

``evoharness.runtime.rule_parse.parse_prompt`` fills a ``PromptParse``;
``evoharness.runtime.extract.constraints_from_parse`` turns it into constraints, and
``evoharness.runtime.rewrite`` and the layout read its character spans. Plain data, no parsing.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field


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
