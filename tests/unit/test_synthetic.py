"""Synthetic task families: seeded, exact constraints, every family and phrasing present."""

from __future__ import annotations

import pytest

from evoharness.sim.reader import count_tokens, read_prompt
from evoharness.tasks.synthetic import FAMILIES, build_synthetic


def test_seeded_and_covering() -> None:
    a, b = build_synthetic(3, 180), build_synthetic(3, 180)
    assert [t.model_dump() for t in a] == [t.model_dump() for t in b]
    assert (
        build_synthetic(4, 60)[0].prompt != a[0].prompt
        or a[1].prompt != build_synthetic(4, 60)[1].prompt
    )
    assert {t.task_family for t in a} == set(FAMILIES)
    assert a[5].task_id == "synthetic/seed3/5"
    types = {c.type.value for t in a for c in t.constraints}
    assert {"text", "negative", "object", "color", "count", "position"} <= types
    assert any('"' in t.prompt for t in a)
    assert any(" no " in t.prompt for t in a) and any("without" in t.prompt for t in a)
    assert all(count_tokens(t.prompt) > 77 for t in a if t.task_family == "synthetic_long")
    counts = [c.min_count for t in a for c in t.constraints if c.type.value == "count"]
    assert max(counts) <= 8 and min(counts) >= 2


def test_constraints_match_what_the_reader_reads() -> None:
    for t in build_synthetic(1, 60):
        r = read_prompt(t.prompt, max_tokens=10_000)
        named = {o.cls for o in r.objects}
        for c in t.constraints:
            if c.type.value in ("object", "color", "count", "negative"):
                assert c.subject in named, (t.prompt, c)
        if t.task_family == "synthetic_binding":
            assert len({o.clause for o in r.objects}) == 1


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="seed"):
        build_synthetic(-1, 3)
    with pytest.raises(ValueError, match="count"):
        build_synthetic(0, -3)
