"""Experience bundles: best-vs-worst summaries, protocol failures, Standard: bullets, slots
with capacity and cosine ranking (pure; no embedding model)."""

from __future__ import annotations

import numpy as np
import pytest

from evoharness.evidence import Evidence, EvidenceStatus
from evoharness.memory import (
    GUIDANCE_LISTS,
    STANDARD_PREFIX,
    admit,
    bundle_actions,
    guidance_text,
    rank,
    summarise,
)
from evoharness.program import GenerationParams, ImageRef, LayoutItem, Program
from evoharness.tasks.models import Constraint, Task
from evoharness.trace.models import Execution

TASK = Task(
    task_id="geneval/counting/7",
    prompt="a photo of three dogs",
    task_family="counting",
    constraints=[
        Constraint(constraint_id="c0", type="object", subject="dog"),
        Constraint(constraint_id="c1", type="count", subject="dog", min_count=3, max_count=3),
    ],
)


def _ex(seed: int, statuses: tuple[str, str], program: Program | None = None, **kw) -> Execution:  # type: ignore[no-untyped-def]
    prog = program or Program(prompt=TASK.prompt, seed=seed)
    return Execution(
        task_id=TASK.task_id,
        seed=seed,
        harness_id="h" * 64,
        execution_key=f"{seed:064d}",
        program=prog,
        image=kw.pop("image", ImageRef(key=f"img/{seed}.png")),
        evidence=[
            Evidence(constraint_id=f"c{i}", status=s, confidence=0.9, observed=2 if i else None)
            for i, s in enumerate(statuses)
        ],
        **kw,
    )


def _reward(ex: Execution) -> float:
    return sum(e.status is EvidenceStatus.passed for e in ex.evidence) / len(ex.evidence)


def test_no_bundle_when_gap_within_margin() -> None:
    exs = [_ex(0, ("pass", "fail")), _ex(1, ("pass", "fail"))]
    assert summarise(TASK, exs, [_reward(e) for e in exs], margin=0.0) is None
    exs = [_ex(0, ("pass", "pass")), _ex(1, ("pass", "fail"))]
    assert summarise(TASK, exs, [1.0, 0.5], margin=0.5) is None
    assert summarise(TASK, exs, [1.0, 0.5], margin=0.49) is not None


def test_seed_only_difference_gives_observed_guard_and_standard_bullets() -> None:
    exs = [_ex(0, ("pass", "fail")), _ex(1, ("pass", "pass")), _ex(2, ("pass", "fail"))]
    b = summarise(TASK, exs, [_reward(e) for e in exs], margin=0.1, created_round=3)
    assert b is not None
    g = b.decision_guidance
    assert b.reward_gap == pytest.approx(0.5) and b.created_round == 3
    assert b.retrieval_key == {"trigger": "count", "source_prompt_summary": "a photo of three dogs"}
    assert set(GUIDANCE_LISTS) <= set(g)
    assert g["decision_focus"].startswith("Get right: count 'dog' = 3")
    assert g["failure_guards"][0].startswith("Guard count 'dog' = 3: failed in the worst")
    assert "observed 2" in g["failure_guards"][0]
    # same program on every seed: nothing else was observed, so every other bullet is Standard
    for name in GUIDANCE_LISTS:
        if name != "failure_guards":
            assert g[name] and all(x.startswith(STANDARD_PREFIX) for x in g[name]), name
    assert bundle_actions(b) == {}
    assert "[failure_guards] Guard count" in guidance_text(b)


def test_program_differences_are_observed_bullets_and_effects() -> None:
    worst_p = Program(prompt="a photo of three dogs", seed=1)
    best_p = Program(
        prompt="a photo of three dogs, each clearly separated",
        negative_prompt="blurry, extra dog",
        params=GenerationParams(guidance_scale=9.0),
        seed=2,
        layout=[LayoutItem(label="dog", box=(0.0, 0.0, 0.3, 0.3)) for _ in range(3)],
    )
    exs = [_ex(1, ("pass", "fail"), worst_p), _ex(2, ("pass", "pass"), best_p)]
    exs[1] = exs[1].model_copy(update={"trace": [{"kind": "skill", "name": "counting"}]})
    b = summarise(TASK, exs, [0.5, 1.0], margin=0.1)
    assert b is not None
    g = b.decision_guidance
    assert not g["recommended_tool_plan"][0].startswith(STANDARD_PREFIX)
    assert "3 boxes" in g["recommended_tool_plan"][0]
    assert any("blurry, extra dog" in x for x in g["prompt_program_guidance"])
    assert any("guidance_scale = 9.0" in x for x in g["prompt_program_guidance"])
    assert g["skill_routing_guidance"] == [
        "Activate skill 'counting': it fired in the best execution, not in the worst."
    ]
    assert bundle_actions(b) == {
        "use_tools": ["layout_planner"],
        "negative_terms": ["blurry", "extra dog"],
        "params": {"guidance_scale": 9.0},
        "append_text": [", each clearly separated"],
    }


def test_protocol_failures_are_ignored() -> None:
    ok = _ex(0, ("pass", "pass"))
    no_image = _ex(1, ("fail", "fail"), image=None)
    all_uncertain = _ex(2, ("uncertain", "uncertain"))
    errored = _ex(3, ("fail", "fail"), trace=[{"kind": "error", "message": "deadline"}])
    exs = [ok, no_image, all_uncertain, errored]
    assert summarise(TASK, exs, [1.0, 0.0, 0.0, 0.0], margin=0.1) is None
    # with a real content failure present, the comparison is against it only
    real = _ex(4, ("pass", "fail"))
    b = summarise(TASK, [*exs, real], [1.0, 0.0, 0.0, 0.0, 0.5], margin=0.1)
    assert b is not None and b.reward_gap == pytest.approx(0.5)


def test_bad_input_is_named() -> None:
    with pytest.raises(ValueError, match="2 executions but 1 rewards"):
        summarise(TASK, [_ex(0, ("pass", "pass")), _ex(1, ("pass", "fail"))], [1.0])
    other = _ex(0, ("pass", "pass")).model_copy(update={"task_id": "other"})
    with pytest.raises(ValueError, match="other"):
        summarise(TASK, [other], [1.0])


def _bundle(prompt: str, gap: float, rnd: int):  # type: ignore[no-untyped-def]
    t = TASK.model_copy(update={"prompt": prompt})
    exs = [_ex(0, ("pass", "pass")), _ex(1, ("pass", "fail"))]
    b = summarise(t, exs, [1.0, 1.0 - gap], created_round=rnd)
    assert b is not None
    return b


def test_slots_trim_by_gap_then_recency() -> None:
    slots: list = []
    slots = admit(slots, _bundle("p one", 0.5, 1), capacity=3)
    slots = admit(slots, _bundle("p two", 0.2, 1), capacity=3)
    slots = admit(slots, _bundle("p three", 0.5, 2), capacity=3)
    slots = admit(slots, _bundle("p four", 0.2, 3), capacity=3)  # evicts "p two" (same gap, older)
    keys = [b.retrieval_key["source_prompt_summary"] for b in slots]
    assert keys == ["p one", "p three", "p four"]
    slots = admit(slots, _bundle("p five", 0.9, 4), capacity=3)  # evicts "p four" (smallest gap)
    assert [b.retrieval_key["source_prompt_summary"] for b in slots] == [
        "p one",
        "p three",
        "p five",
    ]
    # same source prompt: one slot, the larger gap wins
    slots = admit(slots, _bundle("p one", 0.1, 9), capacity=3)
    assert slots[0].reward_gap == pytest.approx(0.5)
    slots = admit(slots, _bundle("p one", 0.7, 9), capacity=3)
    assert slots[0].reward_gap == pytest.approx(0.7) and len(slots) == 3
    with pytest.raises(ValueError, match="capacity"):
        admit(slots, _bundle("x", 0.1, 0), capacity=0)


def test_rank_cosine() -> None:
    keys = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0], [0.0, 0.0]])
    assert rank(np.array([1.0, 0.0]), keys, 2, 0.0) == [(0, 1.0), (1, pytest.approx(0.6))]
    assert rank(np.array([1.0, 0.0]), keys, 4, 0.5) == [(0, 1.0), (1, pytest.approx(0.6))]
    assert rank(np.array([0.0, 1.0]), keys, 1, 0.99) == [(2, 1.0)]
    assert rank(np.array([1.0, 0.0]), np.zeros((0, 2)), 3, 0.0) == []
