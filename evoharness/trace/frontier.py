"""The frontier: a beam of the best B harnesses kept between rounds (TRACE step 7,
docs/architecture.md; beam search in the sense of Lowerre 1976, default B = 3).

Entries are ranked by their target pass rate (the quantity the gate improves), ties broken
by the earlier round (the older, already-validated harness stays). The head of the frontier
is the parent of the next round; the others are kept as fall-backs and reported.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class FrontierEntry(BaseModel):
    """One harness on the frontier: its id, document (JSON), target pass rate, the round it
    was accepted in (0 for the starting harness) and its parent's id."""

    model_config = ConfigDict(extra="forbid")

    harness_id: str
    document: dict
    target_pass_rate: float
    round: int = 0
    parent_harness_id: str = ""


class Frontier(BaseModel):
    """The beam. ``beam`` ≥ 1 is B; ``entries`` are sorted best first."""

    model_config = ConfigDict(extra="forbid")

    beam: int = Field(default=2, ge=1)
    entries: list[FrontierEntry] = Field(default_factory=list)

    @property
    def head(self) -> FrontierEntry:
        """The best entry (the next round's parent). Raises ``IndexError`` when empty."""
        if not self.entries:
            raise IndexError("the frontier is empty")
        return self.entries[0]

    def push(self, *new: FrontierEntry) -> Frontier:
        """A new frontier with ``new`` entries added (an entry with an existing harness id
        replaces it), sorted by (target pass rate desc, round asc) and cut to ``beam``."""
        by_id = {e.harness_id: e for e in self.entries}
        for e in new:
            by_id[e.harness_id] = e
        ranked = sorted(by_id.values(), key=lambda e: (-e.target_pass_rate, e.round, e.harness_id))
        return Frontier(beam=self.beam, entries=ranked[: self.beam])
