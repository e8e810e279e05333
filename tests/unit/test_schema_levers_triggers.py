"""Feature-trigger levers of the schema (issue 29 (b)): a skill that fires on every prompt is
narrowed to one feature, a skill with triggers widened by one, and the failing features'
levers come first."""

from __future__ import annotations

from evoharness.harness.patch import apply_patch
from evoharness.harness.schema import Effect, Harness, Skill, Skills, Trigger
from evoharness.trace.schema_levers import FEATURE_OF_CONSTRAINT, features_of, levers, propose


def _harness() -> Harness:
    everywhere = Skill(
        name="busy",
        effects=[Effect(kind="append_text", value="highly detailed, crowded scene")],
    )
    counting = Skill(
        name="counting",
        triggers=[Trigger(kind="feature", value="count")],
        effects=[Effect(kind="append_text", value="exactly as many as named")],
    )
    return Harness(skills=Skills(skills=[everywhere, counting]))


def test_a_skill_without_triggers_is_narrowed_to_one_feature() -> None:
    h = _harness()
    narrow = [lv for lv in levers(h, "skills") if lv.kind == "narrow"]
    assert {lv.feature for lv in narrow} == {
        "count",
        "position",
        "color",
        "text",
        "negation",
        "multi_object",
    }
    assert all(lv.path == "/skills/skills/0/triggers" for lv in narrow)
    count = next(lv for lv in narrow if lv.feature == "count")
    child = apply_patch(h, count.patch)
    assert child.skills.skills[0].triggers == [Trigger(kind="feature", value="count")]
    assert "fires on every prompt" in count.label


def test_a_skill_with_triggers_is_widened_by_the_features_it_lacks() -> None:
    widen = [lv for lv in levers(_harness(), "skills") if lv.path == "/skills/skills/1/triggers"]
    assert {lv.kind for lv in widen} == {"widen"}
    assert "count" not in {lv.feature for lv in widen}  # it has that one
    assert len(widen) == 5


def test_failing_features_order_the_feature_levers() -> None:
    h = _harness()
    plain = levers(h, "skills")
    ranked = levers(h, "skills", features=["text"])
    assert sorted(lv.label for lv in plain) == sorted(lv.label for lv in ranked)
    n_comp = sum(lv.component for lv in ranked)
    # right after the components: the failing feature's trigger levers (narrow, then widen)
    first = ranked[n_comp : n_comp + 2]
    assert [(lv.kind, lv.feature) for lv in first] == [("narrow", "text"), ("widen", "text")]
    # another feature's trigger levers come after every lever without a feature
    last_plain = max(i for i, lv in enumerate(ranked) if lv.feature is None)
    other = [i for i, lv in enumerate(ranked) if lv.feature not in (None, "text")]
    assert min(other) > last_plain
    # the proposer follows the same order
    got = propose(h, "skills", n_comp + 1, features=["text"])
    assert got[-1] == first[0].patch


def test_features_of_maps_failing_constraint_types_once() -> None:
    assert features_of(["count", "negative", "count", "vqa", "attribute"]) == [
        "count",
        "negation",
        "color",
    ]
    assert set(FEATURE_OF_CONSTRAINT.values()) <= {
        "count",
        "position",
        "color",
        "text",
        "negation",
        "multi_object",
    }
