"""The agent loop: the rule planner's lookups, the budgets, and every malformed final answer
becoming a recorded trajectory failure (a hypothesis property test), never an exception."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evoharness.agent.loop import (
    AgentTask,
    AgentTurn,
    FinalAnswer,
    Toolbox,
    ToolCall,
    run_agent,
)
from evoharness.agent.planner import RulePlanner, find_lookups
from evoharness.agent.program import FINAL_ANSWER_LIMITS, validate_final
from evoharness.agent.search import EmbeddedKnowledgeBase
from evoharness.harness.schema import Skill

KB = EmbeddedKnowledgeBase()
SKILLS = [Skill(name="counting", description="counts", body="Spell counts out.")]
IMAGES = {"IMG_001": "a dog", "IMG_002": "a cat", "IMG_003": "a hat"}


def _task(prompt: str, box: Toolbox, max_refs: int = 2) -> AgentTask:
    return AgentTask(prompt, box.specs, {s.name: s.description for s in SKILLS}, IMAGES, max_refs)


class Scripted:
    """A backend that plays back given turns (then repeats the last one)."""

    name = "scripted"

    def __init__(self, *turns: AgentTurn | Exception) -> None:
        self.turns = list(turns)
        self.seen: list[int] = []

    def next_turn(self, task: AgentTask, trajectory: Sequence[Mapping[str, Any]]) -> AgentTurn:
        self.seen.append(len(trajectory))
        t = self.turns[min(len(self.seen) - 1, len(self.turns) - 1)]
        if isinstance(t, Exception):
            raise t
        return t


@pytest.mark.parametrize(
    ("prompt", "want"),
    [
        ("a car in the colour of a London bus", "a red car"),
        ("a photo of a car in the color of a school bus", "a photo of a yellow car"),
        ("a bench the same colour as grass next to a dog", "a green bench next to a dog"),
        ("an umbrella in the colour of a flamingo", "a pink umbrella"),
        ("as many apples as a spider has legs", "eight apples"),
        ("a photo of as many cups as there are wheels on a tricycle", "a photo of three cups"),
        (
            "a tennis ball and the object used with a tennis ball",
            "a tennis ball and a tennis racket",
        ),
    ],
)
def test_rule_planner_looks_up_and_rewrites(prompt: str, want: str) -> None:
    box = Toolbox(KB, skills=SKILLS)
    r = run_agent(_task(prompt, box), RulePlanner(), box)
    assert r.program is not None and r.failures == []
    assert r.program.gen_prompt == want
    calls = [t for t in r.trajectory if t["type"] == "tool_call"]
    assert [c["tool"] for c in calls] == ["search"] and calls[0]["observation"]
    assert r.trajectory[-1]["type"] == "final" and r.turns == 2 and r.cost == 1.0


def test_rule_planner_keeps_what_it_cannot_look_up() -> None:
    box = Toolbox(KB)
    r = run_agent(_task("a cat in the colour of a zorblax", box), RulePlanner(), box)
    assert r.program is not None and r.program.gen_prompt == "a cat in the colour of a zorblax"
    assert "no usable hit" in r.program.rationale
    r = run_agent(_task("a red car", box), RulePlanner(), box)
    assert r.program is not None and r.program.gen_prompt == "a red car" and r.turns == 1
    no_search = Toolbox(None)
    r = run_agent(_task("a car in the colour of a London bus", no_search), RulePlanner(), no_search)
    assert r.program is not None and "no search tool" in r.program.rationale


def test_lookups_do_not_overlap_and_keep_prompt_order() -> None:
    lks = find_lookups("a cup in the colour of grass and as many forks as a dog has legs")
    assert [lk.kind for lk in lks] == ["colour", "count"]
    assert lks[0].end <= lks[1].start


def test_turn_and_cost_budgets_are_recorded_failures() -> None:
    box = Toolbox(KB)
    forever = Scripted(AgentTurn(ToolCall("search", {"query": "grass"})))
    r = run_agent(_task("x", box), forever, box, max_turns=11, max_cost=100)
    assert r.program is None and r.turns == 11
    assert [f.kind for f in r.failures] == ["turn_budget"]
    assert sum(1 for t in r.trajectory if t["type"] == "tool_call") == 11
    r = run_agent(_task("x", box), forever, box, max_turns=11, max_cost=3)
    assert r.program is None and r.failures[-1].kind == "cost_budget" and r.cost == 3.0
    pricey = Scripted(AgentTurn(FinalAnswer("{}"), cost=5.0))
    r = run_agent(_task("x", box), pricey, box, max_cost=4)
    assert r.failures[-1].kind == "cost_budget"
    with pytest.raises(ValueError, match="max_turns"):
        run_agent(_task("x", box), forever, box, max_turns=0)


def test_an_invalid_answer_is_shown_back_and_a_later_valid_one_wins() -> None:
    box = Toolbox(KB)
    good = {"gen_prompt": "a red car", "reference_images": [], "selected_skills": []}
    backend = Scripted(
        AgentTurn(FinalAnswer("not json")),
        AgentTurn(ToolCall("nope", {})),
        AgentTurn(FinalAnswer(json.dumps(good))),
    )
    r = run_agent(_task("x", box), backend, box)
    assert r.program is not None and r.program.gen_prompt == "a red car"
    assert [f.kind for f in r.failures] == ["unparseable", "unknown_tool"]
    assert r.trajectory[0]["failures"][0]["kind"] == "unparseable"
    assert backend.seen == [0, 1, 2]


def test_backend_exceptions_are_recorded() -> None:
    box = Toolbox(KB)
    r = run_agent(_task("x", box), Scripted(RuntimeError("boom")), box)
    assert r.program is None and r.failures[0].kind == "backend_error"
    assert "boom" in r.failures[0].detail


# ------------------------------------------------------------------------ property test

VALID = {
    "gen_prompt": "the dog from image 1 wearing the hat from image 2",
    "reference_images": [
        {"img_id": "IMG_001", "role": "subject"},
        {"img_id": "IMG_003", "role": "object"},
    ],
    "selected_skills": ["counting"],
    "rationale": "r",
}


def test_the_valid_program_is_valid() -> None:
    program, failures = validate_final(
        json.dumps(VALID), skills={"counting"}, image_ids=IMAGES, max_references=2
    )
    assert failures == [] and program is not None


@pytest.mark.parametrize("tag", ["", "json", "JSON"])
def test_a_fenced_final_answer_is_read(tag: str) -> None:
    box = Toolbox(KB, skills=SKILLS)
    fenced = f"```{tag}\n{json.dumps(VALID, indent=2)}\n```"
    r = run_agent(_task("p", box), Scripted(AgentTurn(FinalAnswer(fenced))), box)
    assert r.failures == [] and r.program is not None
    assert r.program.gen_prompt == VALID["gen_prompt"]
    assert [i.img_id for i in r.program.reference_images] == ["IMG_001", "IMG_003"]


@pytest.mark.parametrize("where", ["raw", "string", "nesting"])
def test_an_oversized_final_answer_is_a_recorded_failure(where: str) -> None:
    v = json.loads(json.dumps(VALID))
    if where == "raw":  # valid JSON, padded past the raw character limit
        answer: Any = json.dumps(v) + " " * FINAL_ANSWER_LIMITS.max_raw_chars
    elif where == "string":  # one string over the limit (rationale has no length cap)
        v["rationale"] = "r" * (FINAL_ANSWER_LIMITS.max_string + 1)
        answer = v
    else:  # a skill name nested one list deeper than allowed
        deep: Any = "counting"
        for _ in range(FINAL_ANSWER_LIMITS.max_depth):
            deep = [deep]
        v["selected_skills"] = deep
        answer = json.dumps(v)
    box = Toolbox(KB, skills=SKILLS)
    r = run_agent(_task("p", box), Scripted(AgentTurn(FinalAnswer(answer))), box, max_turns=2)
    assert r.program is None
    assert [f.kind for f in r.failures] == ["too_large", "too_large", "turn_budget"]
    finals = [t for t in r.trajectory if t["type"] == "final"]
    assert finals[0]["failures"][0]["kind"] == "too_large"
    json.dumps(r.trajectory)


def _defect(kind: str, draw: Any) -> Any:
    """A malformed answer of one kind of defect, built from the valid program."""
    v = json.loads(json.dumps(VALID))
    if kind == "unparseable":
        return draw(
            st.one_of(
                st.text(max_size=40).filter(lambda s: not _is_json_object(s)),
                st.just(json.dumps(VALID)[:-1]),
                st.lists(st.integers(), max_size=3).map(json.dumps),
            )
        )
    if kind == "too_large":
        where = draw(st.sampled_from(["raw", "string", "nesting"]))
        if where == "raw":
            return json.dumps(v) + " " * FINAL_ANSWER_LIMITS.max_raw_chars
        if where == "string":
            v["rationale"] = "r" * (FINAL_ANSWER_LIMITS.max_string + draw(st.integers(1, 9)))
        else:
            deep: Any = "counting"
            for _ in range(FINAL_ANSWER_LIMITS.max_depth + draw(st.integers(0, 3))):
                deep = [deep]
            v["selected_skills"] = deep
    elif kind == "invalid_program":
        field = draw(
            st.sampled_from(["drop_prompt", "empty_prompt", "blank_prompt", "extra", "refs_type"])
        )
        if field == "drop_prompt":
            del v["gen_prompt"]
        elif field == "empty_prompt":
            v["gen_prompt"] = ""
        elif field == "blank_prompt":
            v["gen_prompt"] = draw(st.sampled_from([" ", "\n\t", "   "]))
        elif field == "extra":
            v[draw(st.sampled_from(["urls", "seed", "image"]))] = 1
        else:
            v["reference_images"] = draw(st.sampled_from(["IMG_001", [1], [{"img_id": "IMG_001"}]]))
    elif kind == "unknown_skill":
        v["selected_skills"] = [
            draw(st.text(min_size=1, max_size=10).filter(lambda s: s != "counting"))
        ]
    elif kind == "too_many_references":
        n = draw(st.integers(min_value=3, max_value=6))
        v["reference_images"] = [{"img_id": f"IMG_00{1 + i % 3}", "role": "r"} for i in range(n)]
        v["gen_prompt"] = " ".join(f"image {i + 1}" for i in range(n))
    elif kind == "unknown_reference":
        v["reference_images"][1]["img_id"] = draw(
            st.sampled_from(["IMG_009", "IMG_1234", "dog.png"])
        )
    elif kind == "raw_id_in_prompt":
        v["gen_prompt"] += draw(st.sampled_from([" like IMG_001", " (img_002)", " IMG_0042"]))
    elif kind == "url_in_prompt":
        v["gen_prompt"] += draw(
            st.sampled_from([" see https://x.org/a.png", " s3://bucket/k", " www.example.com"])
        )
    elif kind == "unmentioned_reference":
        v["gen_prompt"] = draw(st.sampled_from(["a dog wearing a hat", "the dog from image 1"]))
    return v if draw(st.booleans()) else json.dumps(v)


def _is_json_object(s: str) -> bool:
    try:
        return isinstance(json.loads(s), dict)
    except ValueError:
        return False


KINDS = [
    "unparseable",
    "too_large",
    "invalid_program",
    "unknown_skill",
    "too_many_references",
    "unknown_reference",
    "raw_id_in_prompt",
    "url_in_prompt",
    "unmentioned_reference",
]


@settings(max_examples=120, deadline=None)
@given(data=st.data(), kind=st.sampled_from(KINDS))
def test_malformed_final_answers_are_recorded_failures(data: st.DataObject, kind: str) -> None:
    answer = _defect(kind, data.draw)
    box = Toolbox(KB, skills=SKILLS)
    r = run_agent(_task("p", box), Scripted(AgentTurn(FinalAnswer(answer))), box, max_turns=2)
    assert r.program is None
    kinds = {f.kind for f in r.failures}
    assert kind in kinds, (kind, answer, r.failures)
    assert "turn_budget" in kinds
    finals = [t for t in r.trajectory if t["type"] == "final"]
    assert len(finals) == 2 and all(f["failures"] for f in finals)
    json.dumps(r.trajectory)  # the trajectory is JSON for the Render trace


@settings(max_examples=80, deadline=None)
@given(
    answer=st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=12), c, max_size=4),
        max_leaves=12,
    ),
    tool=st.text(max_size=12),
    args=st.one_of(
        st.text(max_size=20), st.dictionaries(st.text(max_size=5), st.integers(), max_size=2)
    ),
)
def test_arbitrary_turns_never_raise(answer: Any, tool: str, args: Any) -> None:
    box = Toolbox(KB, skills=SKILLS)
    backend = Scripted(AgentTurn(ToolCall(tool, args)), AgentTurn(FinalAnswer(answer)))
    r = run_agent(_task("p", box), backend, box, max_turns=3)
    assert r.turns <= 3 and (r.program is not None or r.failures)
    json.dumps(r.trajectory)


PIECES = [
    *"abcdegilmnorstuy ,.'",
    " in the colour of ",
    " as many ",
    " as a ",
    " has ",
    " the object used with ",
    " there are ",
    " on a ",
    " bus",
    " legs",
    " spider",
]


@settings(max_examples=150, deadline=None)
@given(prompt=st.lists(st.sampled_from(PIECES), min_size=1, max_size=20).map("".join))
def test_rule_planner_never_fails_on_any_prompt(prompt: str) -> None:
    box = Toolbox(KB)
    r = run_agent(_task(prompt, box), RulePlanner(), box)
    assert r.program is not None or not prompt.strip(), r.failures
    lks = find_lookups(prompt)
    assert all(a.end <= b.start for a, b in zip(lks, lks[1:], strict=False))


# ------------------------------------------------------------------ request references
def test_rule_planner_carries_the_mentioned_request_references() -> None:
    box = Toolbox(KB)
    prompt = "the red cup from image 1, the cat in image 2 and image 3's car on a table"
    r = run_agent(_task(prompt, box, max_refs=4), RulePlanner(), box)
    assert r.program is not None and r.failures == []
    assert r.program.gen_prompt == prompt
    assert [(x.img_id, x.role) for x in r.program.reference_images] == [
        ("IMG_001", "subject"),
        ("IMG_002", "subject"),
        ("IMG_003", "subject"),
    ]
    # an unmentioned one is left out and the others renumbered to the program's order
    r = run_agent(
        _task("the cup from image 1 and the car from image 3", box, 4), RulePlanner(), box
    )
    assert r.program is not None and r.failures == []
    assert r.program.gen_prompt == "the cup from image 1 and the car from image 2"
    assert [x.img_id for x in r.program.reference_images] == ["IMG_001", "IMG_003"]
    assert "image 2 is never mentioned" in r.program.rationale
    # more than max_references: none carried, the request's pass through
    r = run_agent(_task(prompt, box, max_refs=2), RulePlanner(), box)
    assert r.program is not None and r.failures == [] and r.program.reference_images == []
    assert "pass through" in r.program.rationale


def test_rule_planner_says_when_a_mentioned_image_does_not_exist() -> None:
    """A prompt that mentions an image the request does not carry gets a note naming it;
    with no existing image mentioned the note says how many the request has (a new-user
    trial: it said "no request reference is mentioned" for "the cup from image 7")."""
    box = Toolbox(KB)
    n = len(IMAGES)
    r = run_agent(
        _task("the cup from image 7 next to the cat from image 1", box, 4), RulePlanner(), box
    )
    assert r.program is not None
    assert f"image 7 mentioned, but the request has {n} reference(s)" in r.program.rationale
    assert [x.img_id for x in r.program.reference_images] == ["IMG_001"]
    r = run_agent(_task("the cup from image 7", box, 4), RulePlanner(), box)
    assert r.program is not None and r.program.reference_images == []
    assert "image 7 mentioned" in r.program.rationale
    assert f"none of the request's {n} reference(s) is mentioned" in r.program.rationale
