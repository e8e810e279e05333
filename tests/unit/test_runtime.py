"""Harness runtime, one test group per responsibility (compile side and middleware logic).

The generator here is a recording stub (the compile side never needs pixels); the runtime
against the real simulator lives in ``test_runtime_sim.py``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evoharness.evidence import Evidence, EvidenceStatus
from evoharness.harness.schema import (
    BestOfNStage,
    Effect,
    ExperienceBundle,
    Guideline,
    Harness,
    LayoutPlannerTool,
    Memory,
    Middleware,
    Policy,
    ReferenceRetrievalTool,
    Rewrite,
    Skill,
    SkillRoutingStage,
    Skills,
    Tools,
    Trigger,
    VerifyAndRepairStage,
)
from evoharness.ports import GeneratedImage, MemoryHit
from evoharness.program import GenerationParams, ImageRef, LayoutItem, Program
from evoharness.runtime import (
    HarnessCompileError,
    HarnessRuntime,
    RuleExtractor,
    ToolBackends,
    token_count,
)
from evoharness.tasks.builders import build_geneval
from evoharness.tasks.models import Constraint


class RecordingGenerator:
    """Returns a fixed PNG-like payload per program and records every program."""

    generator_id = "stub/recording"

    def __init__(self) -> None:
        self.programs: list[Program] = []

    def generate(self, program: Program) -> GeneratedImage:
        self.programs.append(program)
        return GeneratedImage(png=program.canonical(), generator_id=self.generator_id, seconds=0.5)


class ScriptedVerifier:
    """Fails the constraint ids listed per call number (call k uses script[k], else passes)."""

    def __init__(self, script: list[set[str]]) -> None:
        self.script = script
        self.calls = 0

    def verify(self, png: bytes, constraints: Sequence[Constraint], prompt: str = ""):
        fails = self.script[self.calls] if self.calls < len(self.script) else set()
        self.calls += 1
        return [
            Evidence(
                constraint_id=c.constraint_id,
                status=EvidenceStatus.failed if c.constraint_id in fails else EvidenceStatus.passed,
                confidence=1.0,
            )
            for c in constraints
        ]


def _rt(h: Harness, **kw) -> HarnessRuntime:
    return HarnessRuntime(h, RecordingGenerator(), **kw)


# ----------------------------------------------------------------------------- Policy


def test_baseline_passes_prompt_through(repo_root):
    from evoharness.harness import load_dir

    h = load_dir(repo_root / "harnesses" / "baseline")
    c = _rt(h).compile("a photo of two dogs and no cats", 7)
    assert c.program.prompt == "a photo of two dogs and no cats"
    assert c.program.negative_prompt == ""
    assert c.program.seed == 7
    assert c.program.layout is None
    assert c.program.params == GenerationParams()
    assert c.features == {"count", "negation"}


def test_move_negations_fills_negative_prompt():
    h = Harness(policy=Policy(rewrites=[Rewrite(kind="move_negations")], negative_prompt="blurry"))
    c = _rt(h).compile("a kitchen with a bowl and no cats", 0)
    assert "cat" not in c.program.prompt
    assert c.program.prompt == "a kitchen with a bowl"
    assert c.program.negative_prompt == "blurry, cat"
    step = next(t for t in c.trace if t["step"] == "rewrite")
    assert step["kind"] == "move_negations" and step["negative_terms"] == ["cat"]


def test_bind_attributes_and_spell_counts_and_template():
    h = Harness(
        policy=Policy(
            template="a high quality photo: {prompt}",
            rewrites=[Rewrite(kind="bind_attributes"), Rewrite(kind="spell_counts")],
        )
    )
    c = _rt(h).compile("a photo of a purple wine glass and 3 black apple", 0)
    assert (
        c.program.prompt
        == "a high quality photo: a photo of a purple wine glass. three black apples"
    )
    # the constraints read are the prompt's, not the rewritten text's
    assert {x.constraint_id for x in c.constraints_read} == {
        "object:wine glass",
        "color:wine glass",
        "count:apple",
        "color:apple",
    }


def test_compress_fits_the_token_budget_and_keeps_objects():
    prompt = (
        "a very beautiful highly detailed photo of a sunny meadow with flowers and trees, " * 5
        + "and a red car and three cats"
    )
    assert token_count(prompt) > 77
    h = Harness(policy=Policy(rewrites=[Rewrite(kind="compress")]))
    c = _rt(h).compile(prompt, 0)
    assert token_count(c.program.prompt) <= 77
    kept = RuleExtractor().extract(c.program.prompt)
    assert {x.constraint_id for x in kept} >= {"object:car", "color:car", "count:cat"}


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        ("three cats", "a cat, a second cat and a third cat"),
        ("two owls", "an owl and a second owl"),
        (
            "eight apples",
            "an apple, a second apple, a third apple, a fourth apple, a fifth apple, "
            "a sixth apple, a seventh apple and an eighth apple",
        ),
    ],
)
def test_enumerate_instances_writes_each_instance_with_its_article(prompt, expected):
    from evoharness.runtime.rewrite import enumerate_instances

    assert enumerate_instances(prompt).text == expected


def test_disabled_rewrite_is_skipped():
    h = Harness(policy=Policy(rewrites=[Rewrite(kind="spell_counts", enabled=False)]))
    assert _rt(h).compile("3 dogs", 0).program.prompt == "3 dogs"


def test_llm_extractor_used_when_configured_else_rule_fallback():
    class Fixed:
        def extract(self, prompt: str) -> list[Constraint]:
            return [Constraint(constraint_id="x", type="object", subject="zebra")]

    h = Harness(policy=Policy(extractor="llm"))
    c = _rt(h, extractor=Fixed()).compile("a dog", 0)
    assert [x.subject for x in c.constraints_read] == ["zebra"]
    c2 = _rt(h).compile("a dog", 0)
    assert [x.subject for x in c2.constraints_read] == ["dog"]
    assert c2.trace[0]["extractor"].startswith("rule (fallback")


# ------------------------------------------------------------------------------ Tools


def _layout_harness(**kw) -> Harness:
    return Harness(tools=Tools(tools=[LayoutPlannerTool(name="layout", **kw)]))


def test_layout_planner_boxes_counts_colours_and_relations():
    c = _rt(_layout_harness()).compile("a photo of a red dog right of two blue cups", 0)
    lay = c.program.layout
    assert lay is not None
    dogs = [i for i in lay if i.label == "dog"]
    cups = [i for i in lay if i.label == "cup"]
    assert len(dogs) == 1 and len(cups) == 2
    assert dogs[0].color == "red" and {i.color for i in cups} == {"blue"}
    assert min(i.box[0] for i in dogs) > max(i.box[2] for i in cups)  # dog right of cups
    tool = next(t for t in c.trace if t["step"] == "layout_planner")
    assert tool["planner"] == "deterministic" and "position" in tool["reason"]


def test_layout_vertical_relation_and_text_band():
    c = _rt(_layout_harness(when=["position", "text"])).compile(
        'a couch below a cup. a sign saying "OPEN"', 0
    )
    by = {i.label: i for i in c.program.layout or []}
    assert by["cup"].box[3] < by["couch"].box[1]
    assert by["sign"].text == "OPEN" and by["sign"].box[1] > by["couch"].box[3]


def test_layout_planner_not_run_without_matching_feature():
    c = _rt(_layout_harness(when=["position"])).compile("a photo of two dogs", 0)
    assert c.program.layout is None


def test_llm_planner_port_and_fallback():
    class Planner:
        def plan(self, prompt, constraints, margin):
            return [LayoutItem(label="dog", box=(0.1, 0.1, 0.2, 0.2))]

    h = _layout_harness(planner="llm")
    c = _rt(h, tools=ToolBackends(layout_planner=Planner())).compile("two dogs", 0)
    assert [i.box for i in c.program.layout or []] == [(0.1, 0.1, 0.2, 0.2)]
    c2 = _rt(h).compile("two dogs", 0)
    assert len(c2.program.layout or []) == 2
    assert "fallback" in next(t for t in c2.trace if t["step"] == "layout_planner")["planner"]


def test_reference_retrieval_hook_and_request_references():
    class Retriever:
        def retrieve(self, prompt, constraints, source, top_k):
            return [ImageRef(key=f"{source}/{i}") for i in range(5)]

    h = Harness(tools=Tools(tools=[ReferenceRetrievalTool(name="refs", source="s3://x", top_k=2)]))
    mine = ImageRef(key="request/1")
    c = _rt(h, tools=ToolBackends(reference_retriever=Retriever())).compile("a dog", 0, [mine])
    assert [r.key for r in c.program.references or []] == ["request/1", "s3://x/0", "s3://x/1"]
    c2 = _rt(h).compile("a dog", 0)
    assert c2.program.references is None
    assert next(t for t in c2.trace if t["step"] == "reference_retrieval")["ran"] is False


# ----------------------------------------------------------------------------- Skills


def _skill(name, triggers, effects, priority=0) -> Skill:
    return Skill(
        name=name,
        triggers=[Trigger(kind=k, value=v) for k, v in triggers],
        effects=[Effect(**e) for e in effects],
        priority=priority,
        body=f"# {name}",
    )


def test_skills_route_by_triggers_and_apply_effects():
    h = Harness(
        tools=Tools(tools=[LayoutPlannerTool(name="layout", when=[])]),
        skills=Skills(
            skills=[
                _skill(
                    "counting",
                    [("feature", "count")],
                    [
                        {"kind": "rewrite", "value": "spell_counts"},
                        {"kind": "use_tool", "value": "layout"},
                        {"kind": "set_params", "params": {"guidance_scale": 7.5, "steps": 400}},
                    ],
                ),
                _skill(
                    "night", [("keyword", "night")], [{"kind": "append_text", "value": "dark sky"}]
                ),
                _skill(
                    "birds",
                    [("regex", r"\bbirds?\b")],
                    [{"kind": "negative_terms", "value": "cage, bars"}],
                ),
                _skill("never", [("feature", "text")], [{"kind": "append_text", "value": "NOPE"}]),
            ]
        ),
    )
    c = _rt(h).compile("3 dogs at night near birds", 0)
    assert c.active_skills == ["birds", "counting", "night"]
    assert c.program.prompt == "three dogs at night near birds. dark sky"
    assert c.program.negative_prompt == "cage, bars"
    assert c.program.params.guidance_scale == 7.5
    assert c.program.params.steps == 150  # clamped into PARAM_BOUNDS
    assert [i.label for i in c.program.layout or []].count("dog") == 3
    routes = {t["skill"]: t["reasons"] for t in c.trace if t["step"] == "route"}
    assert routes == {
        "birds": [r"regex:\bbirds?\b"],
        "counting": ["feature:count"],
        "night": ["keyword:night"],
    }
    params = next(t for t in c.trace if t["step"] == "params")
    assert params["clamped"] == [
        {"param": "steps", "requested": 400, "applied": 150, "source": "skill:counting"}
    ]


def test_skill_routing_max_active_by_priority():
    skills = [
        _skill(
            f"s{i}", [("keyword", "dog")], [{"kind": "append_text", "value": f"t{i}"}], priority=i
        )
        for i in range(4)
    ]
    h = Harness(
        skills=Skills(skills=skills),
        middleware=Middleware(stages=[SkillRoutingStage(max_active=2)]),
    )
    c = _rt(h).compile("a dog", 0)
    assert c.active_skills == ["s3", "s2"]
    dropped = [t["skill"] for t in c.trace if t["step"] == "route" and not t["fired"]]
    assert dropped == ["s1", "s0"]


# ----------------------------------------------------------------------------- Memory


def test_memory_guidelines_and_bundles_through_port():
    bundle = ExperienceBundle(
        bundle_id="b1",
        retrieval_key={"trigger": "count", "source_prompt_summary": "a photo of four dogs"},
        decision_guidance={
            "rewrites": ["spell_counts"],
            "negative_terms": ["extra dog"],
            "params": {"guidance_scale": 7.0},
            "use_tools": ["layout_planner"],
            "do": ["ignored"],
        },
    )
    h = Harness(
        tools=Tools(tools=[LayoutPlannerTool(name="layout", when=[])]),
        memory=Memory(
            enabled=True,
            min_similarity=0.5,
            guidelines=[Guideline(trigger="count", text="each one clearly separated")],
            bundles=[bundle],
        ),
    )
    c = _rt(h).compile("a photo of 4 dogs", 0)
    assert c.program.prompt == "a photo of four dogs. each one clearly separated"
    assert c.program.negative_prompt == "extra dog"
    assert c.program.params.guidance_scale == 7.0
    assert [i.label for i in c.program.layout or []] == ["dog"] * 4  # use_tools by tool kind
    ret = next(t for t in c.trace if t["step"] == "retrieve")
    assert ret["bundle_id"] == "b1" and ret["ignored_keys"] == ["do"]
    # unrelated prompt: nothing retrieved
    c2 = _rt(h).compile("a red bus", 0)
    assert c2.program.prompt == "a red bus"

    class Port:
        def retrieve(self, prompt, top_k, min_similarity):
            return [
                MemoryHit(
                    bundle={"bundle_id": "p", "decision_guidance": {"append_text": "x"}},
                    similarity=0.9,
                )
            ]

    c3 = _rt(h, memory=Port()).compile("a red bus", 0)
    assert c3.program.prompt == "a red bus. x"
    assert (
        not _rt(Harness(memory=Memory(enabled=False, bundles=[bundle])))
        .compile("a photo of 4 dogs", 0)
        .program.prompt.endswith("separated")
    )


# -------------------------------------------------------------------- compile errors


def test_compile_errors_name_responsibility_and_field():
    with pytest.raises(
        HarnessCompileError, match=r"^policy: policy.template: unknown template field"
    ):
        _rt(Harness(policy=Policy(template="{prompt} in {style}")))
    with pytest.raises(HarnessCompileError, match=r"must contain \{prompt\}"):
        _rt(Harness(policy=Policy(template="a cat")))
    h = Harness(
        skills=Skills(
            skills=[_skill("k", [("feature", "count")], [{"kind": "use_tool", "value": "layout"}])]
        )
    )
    with pytest.raises(HarnessCompileError) as ei:
        _rt(h)
    assert ei.value.responsibility == "skills"
    assert ei.value.field == "skills.skills.0.effects.0.value"
    assert "'layout', which is not declared in tools" in str(ei.value)
    h2 = Harness(skills=Skills(skills=[_skill("k", [], [{"kind": "rewrite", "value": "shout"}])]))
    with pytest.raises(HarnessCompileError, match="unknown rewrite 'shout'"):
        _rt(h2)
    h3 = Harness(
        skills=Skills(skills=[_skill("k", [], [{"kind": "set_params", "params": {"eta": 1}}])])
    )
    with pytest.raises(HarnessCompileError, match=r"params.eta: skill .k.: unknown parameter"):
        _rt(h3)


# ------------------------------------------------------------ determinism & honesty


def _full_harness() -> Harness:
    return Harness(
        policy=Policy(
            rewrites=[
                Rewrite(kind=k)
                for k in ("move_negations", "bind_attributes", "spell_counts", "compress")
            ],
            negative_terms=["blurry"],
        ),
        tools=Tools(tools=[LayoutPlannerTool(name="layout")]),
        skills=Skills(
            skills=[
                _skill("t", [("feature", "text")], [{"kind": "rewrite", "value": "quote_text"}])
            ]
        ),
        memory=Memory(
            enabled=True, guidelines=[Guideline(trigger="position", text="clear spacing")]
        ),
    )


def test_compile_is_deterministic():
    p = "a red dog left of 2 blue cats, no birds, a sign saying hi"
    a = _rt(_full_harness()).compile(p, 3)
    b = _rt(_full_harness()).compile(p, 3)
    assert a.program == b.program
    assert json.dumps(a.trace, sort_keys=True) == json.dumps(b.trace, sort_keys=True)


def test_deleting_task_constraints_leaves_every_program_unchanged(shared_dir):
    tasks = build_geneval(shared_dir / "data" / "geneval" / "evaluation_metadata.jsonl")
    rt = _rt(_full_harness())
    stripped = [t.model_copy(update={"constraints": []}) for t in tasks]
    assert all(t.constraints for t in tasks) and not any(t.constraints for t in stripped)
    for t, s in zip(tasks, stripped, strict=True):
        a, b = rt.compile_task(t, 0), rt.compile_task(s, 0)
        assert a.program.canonical() == b.program.canonical(), t.task_id
        assert a.trace == b.trace


# ------------------------------------------------------------------------ Middleware


def _vr_harness(budget=2, n=None) -> Harness:
    stages = [VerifyAndRepairStage(repair_budget=budget, seed_offset=100)]
    if n:
        stages.insert(0, BestOfNStage(n=n, seed_offset=10))
    return Harness(
        tools=Tools(tools=[LayoutPlannerTool(name="layout", when=["position"])]),
        middleware=Middleware(stages=stages),
    )


def test_repair_within_budget_with_new_seed_and_layout():
    gen = RecordingGenerator()
    ver = ScriptedVerifier([{"count:dog"}, {"count:dog"}, {"count:dog"}, set()])
    res = HarnessRuntime(_vr_harness(budget=2), gen, ver).run("two dogs", 5)
    assert [p.seed for p in res.programs] == [5, 105, 205]  # initial + budget 2
    assert res.programs[0].layout is None and res.programs[1].layout is not None
    assert res.programs[1].prompt == "two dogs"
    assert res.cost.generator_calls == 3 and res.cost.verifier_calls == 3
    assert res.cost.generator_seconds == pytest.approx(1.5)
    assert res.score == 0.0 and res.selected == 0
    rep = [t for t in res.trace if t["step"] == "repair.compile"]
    assert [r["attempt"] for r in rep] == [1, 2]
    assert rep[0]["failing"][0]["constraint_id"] == "count:dog" and rep[0]["tools"] == ["layout"]


def _colour_harness(when: list[str]) -> Harness:
    return Harness(
        policy=Policy(rewrites=[Rewrite(kind="bind_attributes")]),
        tools=Tools(tools=[LayoutPlannerTool(name="layout", when=when)]),
        middleware=Middleware(stages=[VerifyAndRepairStage(repair_budget=2, seed_offset=100)]),
    )


@pytest.mark.parametrize("when", [["color", "multi_object"], ["position"]])
def test_a_colour_repair_binds_in_the_prompt_when_no_layout_is_needed(when):
    """Issue 30: a failing colour of a prompt with no count, position or text is repaired in
    the prompt, never by forcing (or keeping) the layout, whose boxes may bind it worse; the
    trace says who asked for no layout."""
    ver = ScriptedVerifier([{"color:backpack"}, {"color:backpack"}, set()])
    res = HarnessRuntime(_colour_harness(when), RecordingGenerator(), ver).run(
        "a green backpack and a pig", 0
    )
    assert (res.programs[0].layout is not None) == ("color" in when)
    assert [p.layout for p in res.programs[1:]] == [None, None]
    rep = [t for t in res.trace if t["step"] == "repair.compile"]
    assert [r["tools"] for r in rep] == [[], []]
    assert [r["rewrites"] for r in rep] == [["bind_attributes"], ["bind_attributes"]]
    skipped = [t for t in res.trace if t["step"] == "layout_planner" and t.get("ran") is False]
    assert [t["reason"] for t in skipped] == [
        "no layout requested by repair:1:binding",
        "no layout requested by repair:2:binding",
    ]


def test_a_colour_repair_keeps_the_layout_a_position_needs():
    ver = ScriptedVerifier([{"color:dog"}, set()])
    res = HarnessRuntime(_colour_harness(["position"]), RecordingGenerator(), ver).run(
        "a red dog to the left of a cat", 0
    )
    assert res.programs[0].layout is not None and res.programs[1].layout is not None
    rep = next(t for t in res.trace if t["step"] == "repair.compile")
    assert rep["tools"] == ["layout"]


def test_repair_stops_early_when_everything_passes():
    ver = ScriptedVerifier([{"object:dog"}, set()])
    res = HarnessRuntime(_vr_harness(budget=5), RecordingGenerator(), ver).run("a dog", 0)
    assert len(res.programs) == 2 and res.selected == 1 and res.score == 1.0
    assert all(e.passed for e in res.evidence)


def test_best_of_n_picks_the_highest_score_then_repairs():
    ver = ScriptedVerifier(
        [{"object:dog", "object:cat"}, {"object:cat"}, {"object:dog", "object:cat"}, set()]
    )
    res = HarnessRuntime(_vr_harness(budget=1, n=3), RecordingGenerator(), ver).run(
        "a dog and a cat", 1
    )
    assert [p.seed for p in res.programs] == [1, 11, 21, 101]
    assert res.selected == 3
    sel = next(t for t in res.trace if t["step"] == "select")
    assert sel["scores"] == [0.0, 0.5, 0.0, 1.0]
    rep = next(t for t in res.trace if t["step"] == "repair.compile")
    assert [f["constraint_id"] for f in rep["failing"]] == ["object:cat"]  # from the best


def test_no_verifier_skips_middleware():
    gen = RecordingGenerator()
    res = HarnessRuntime(_vr_harness(budget=3, n=4), gen).run("a dog", 0)
    assert len(gen.programs) == 1 and res.evidence == [] and res.score is None
    assert any(t["step"] == "skip" for t in res.trace)


def test_run_is_deterministic():
    def go():
        ver = ScriptedVerifier([{"object:dog"}])
        return HarnessRuntime(_vr_harness(), RecordingGenerator(), ver).run(
            "a dog left of a cat", 2
        )

    a, b = go(), go()
    assert a.programs == b.programs
    assert json.dumps(a.trace, sort_keys=True) == json.dumps(b.trace, sort_keys=True)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            "a two 7 red blue dog cats no without left right of above below and , . ; "
            'saying " sign wine glass persons photo with very'.split()
        ),
        min_size=1,
        max_size=60,
    )
)
def test_compile_never_breaks_on_odd_prompts(words):
    """Fuzz: every rewrite, skill and the layout planner together still give a valid program."""
    prompt = " ".join(words)
    c = _rt(_full_harness()).compile(prompt, 0)
    assert c.program.prompt.strip()
    assert token_count(c.program.prompt) <= 77 or "long_prompt" in c.features
