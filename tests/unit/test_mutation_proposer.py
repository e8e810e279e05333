"""The mutation proposer (issue 31): every edit it draws is a patch that parses, stays inside
its responsibility's contract, applies, passes the harness schema and the runtime's static
check, for every shipped harness (property test); the same seed gives the same edits."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evoharness.harness.io import harness_id, load_dir
from evoharness.harness.patch import apply_patch, check_contract
from evoharness.harness.schema import Harness
from evoharness.runtime import check_harness
from evoharness.search.mutation import MutationProposer
from evoharness.trace.checks import parse_patch
from evoharness.trace.schema_levers import mutation_levers

ROOT = Path(__file__).resolve().parents[2]
#: Every harness the repository ships: the two of ``harnesses/`` and the fault suite's bases.
SHIPPED = sorted(
    [p for p in (ROOT / "harnesses").iterdir() if (p / "harness.yaml").is_file()]
    + [p for p in (ROOT / "bench/faults/bases").iterdir() if (p / "harness.yaml").is_file()]
)
HARNESSES = {p.name: load_dir(p) for p in SHIPPED}


def _valid_child(parent: Harness, raw: dict) -> Harness:
    patch = parse_patch(raw)
    check_contract(patch)
    child = apply_patch(parent, patch)
    check_harness(child)
    return child


def test_every_shipped_harness_is_covered() -> None:
    assert {"baseline", "reference", "prompt-only", "skilled"} <= set(HARNESSES)


@settings(max_examples=10, deadline=None)
@given(
    name=st.sampled_from(sorted(HARNESSES)),
    seed=st.integers(0, 2**31),
    draw=st.integers(0, 50),
    max_edits=st.integers(1, 3),
    walk=st.integers(0, 1),
)
def test_every_edit_is_valid_against_the_schema(
    name: str, seed: int, draw: int, max_edits: int, walk: int
) -> None:
    """Also on harnesses the search reaches: ``walk`` accepted edits in a row first."""
    prop = MutationProposer(seed=seed, max_edits=max_edits)
    harness = HARNESSES[name]
    for step in range(walk + 1):
        patches = prop.propose(harness, 4, draw=draw + step)
        assert patches, f"{name}: no edit offered"
        children = [_valid_child(harness, p.model_dump(mode="json")) for p in patches]
        ids = {harness_id(c) for c in children}
        assert len(ids) == len(children) and harness_id(harness) not in ids
        harness = children[0]


@pytest.mark.parametrize("name", sorted(HARNESSES))
def test_the_same_seed_gives_the_same_edits(name: str) -> None:
    h = HARNESSES[name]
    a = MutationProposer(seed=7, max_edits=2).propose(h, 4, draw=3)
    b = MutationProposer(seed=7, max_edits=2).propose(h, 4, draw=3)
    assert [p.model_dump() for p in a] == [p.model_dump() for p in b]
    others = [MutationProposer(seed=s).propose(h, 4, draw=3) for s in range(8, 11)]
    assert any([p.model_dump() for p in o] != [p.model_dump() for p in a] for o in others)


def test_the_edit_kinds_of_the_issue_are_all_offered() -> None:
    """toggle, restore a default, numeric step, add and remove a list item, widen and narrow
    a trigger: each kind is among the levers of the shipped harnesses."""
    kinds = {lv.kind for h in HARNESSES.values() for lv in mutation_levers(h)}
    assert {"toggle", "reset", "step", "add", "remove", "widen"} <= kinds
    # a skill without triggers fires on every prompt: the proposer can narrow it
    skill = {"name": "s", "effects": [{"kind": "rewrite", "value": "spell_counts"}]}
    h = Harness.model_validate({**Harness().to_document(), "skills": {"skills": [skill]}})
    assert "narrow" in {lv.kind for lv in mutation_levers(h)}


def test_steps_stay_within_declared_bounds() -> None:
    h = Harness.model_validate(
        {**Harness().to_document(), "middleware": {"stages": [{"kind": "best_of_n", "n": 16}]}}
    )
    ns = [
        op["value"]
        for lv in mutation_levers(h)
        for op in lv.patch.ops
        if op["path"] == "/middleware/stages/0/n"
    ]
    assert ns and all(1 <= n <= 16 for n in ns) and 15 in ns


def test_negative_n_is_refused() -> None:
    with pytest.raises(ValueError, match="n must be >= 0"):
        MutationProposer().propose(Harness(), -1)
    with pytest.raises(ValueError, match="max_edits"):
        MutationProposer(max_edits=0)
