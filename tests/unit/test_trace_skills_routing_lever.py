"""TRACE proposes and accepts the Skills routing lever (issue 32): the harness has an agent
with ``search`` that runs only where a skill routes the request to it (``route: skills``),
and its one routing skill fires on "in the colour of" only. Prompts that say "the same
colour as a flamingo" or "coloured like grass" are routed by nothing, so the generator draws
the thing named; the localizer reads the referring wording from the prompt text and, since
the agent is there and only the routing misses, chooses Skills; the proposer adds a routing
skill whose regex triggers are the lookup phrasings found; one whole in-process round
(``trace.round_driver.run_round`` over the embedded world) accepts it, and the held-out
referring prompts fail less often.

The task builder, cluster builder and the world are the agent lever's
(``tests/unit/test_trace_agent_lever.py``, ``tests/unit/_sim_round.py``).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from evoharness.agent.planner import find_lookups
from evoharness.harness.io import load_dir
from evoharness.harness.patch import apply_patch
from evoharness.harness.schema import AgentTool, Harness
from evoharness.runtime.extract import RuleExtractor
from evoharness.runtime.runtime import HarnessCompileError, HarnessRuntime, check_harness
from evoharness.runtime.steps.agent import agent_route
from evoharness.sim import SimGenerator
from evoharness.tasks.models import Task
from evoharness.trace.counterfactual_judge import CounterfactualConfig
from evoharness.trace.patch_templates.skills import (
    LOOKUP_PHRASINGS,
    ROUTE_SKILL,
    _skills_route_agent,
)
from evoharness.trace.rule_proposer import ROUTING_BONUS, localize, propose
from tests.unit._sim_round import SimWorld
from tests.unit.test_trace_agent_lever import (
    PLAIN,
    accepted_and_heldout_falls,
    cluster,
    one_candidate_round,
    task,
)

#: (prompt whose colour phrasing the harness's routing skill does not know, what it means):
#: the first twelve are the target split, the rest held out.
UNROUTED = [
    ("a cup the same colour as a flamingo", "a pink cup"),
    ("a bench coloured like grass", "a green bench"),
    ("an umbrella the same colour as a school bus", "a yellow umbrella"),
    ("a chair coloured like a crow", "a black chair"),
    ("a bowl the same colour as a blueberry", "a blue bowl"),
    ("a clock coloured like an eggplant", "a purple clock"),
    ("a bottle the same colour as chocolate", "a brown bottle"),
    ("a backpack coloured like a lemon", "a yellow backpack"),
    ("a book the same colour as a frog", "a green book"),
    ("a kite coloured like a sapphire", "a blue kite"),
    ("a hat the same colour as snow", "a white hat"),
    ("a suitcase coloured like a carrot", "an orange suitcase"),
    # held out
    ("a teapot the same colour as a violet", "a purple teapot"),
    ("a sofa coloured like a fire truck", "a red sofa"),
    ("a bag the same colour as a polar bear", "a white bag"),
    ("a ball coloured like a lime", "a green ball"),
    ("a cake the same colour as a canary", "a yellow cake"),
    ("a chair coloured like a pig", "a pink chair"),
    ("a vase the same colour as a ruby", "a red vase"),
    ("a boat coloured like a sunflower", "a yellow boat"),
]
N_TARGET = 12
#: the harness's routing skill: colour lookups worded "in the colour of" only
COLOUR_ROUTE = r"(?i)\bin\s+the\s+colou?r\s+of\b"

_EX = RuleExtractor()


def routed_harness() -> Harness:
    """``harnesses/baseline`` plus an embedded ``search``, an agent with ``route: skills``
    and one skill routing "in the colour of" prompts to it."""
    doc: dict[str, Any] = load_dir("harnesses/baseline").model_dump(mode="json")
    doc["tools"]["tools"] += [
        {"kind": "search", "name": "facts", "provider": "embedded", "top_k": 3},
        {"kind": "agent", "name": "agent", "backend": "rule", "route": "skills"},
    ]
    doc["skills"]["skills"].append(
        {
            "name": "colour-lookup",
            "description": 'Runs the agent on "in the colour of" prompts.',
            "triggers": [{"kind": "regex", "value": COLOUR_ROUTE}],
            "effects": [{"kind": "use_tool", "value": "agent"}],
            "priority": 5,
            "body": "Colours named by reference need a lookup.",
        }
    )
    return Harness.model_validate(doc)


def splits() -> dict[str, list[Task]]:
    ks = [task(f"k/{i}", p, m, "knowledge") for i, (p, m) in enumerate(UNROUTED)]
    pres = [task(f"plain/{i}", p, p, "plain") for i, p in enumerate(PLAIN)]
    pres.append(task("plain/routed", "a cup in the colour of a flamingo", "a pink cup", "plain"))
    return {"target": ks[:N_TARGET], "heldout": ks[N_TARGET:], "preservation": pres}


def _agent_records(h: Harness, prompt: str) -> list[dict[str, Any]]:
    rt = HarnessRuntime(h, SimGenerator())
    return [r for r in rt.compile(prompt, 0).trace if r["step"] == "agent"]


def test_routed_agent_runs_only_where_a_skill_routes_it() -> None:
    h = routed_harness()
    [on] = _agent_records(h, "a cup in the colour of a flamingo")
    assert on["ran"] and on["routed_by"] == "colour-lookup" and on["output"] == "a pink cup"
    [off] = _agent_records(h, "a cup the same colour as a flamingo")
    assert off["ran"] is False and off["routed_by"] is None
    assert off["output"] == "a cup the same colour as a flamingo"
    # route "always" (the default) runs on every request and records no routing
    doc = h.model_dump(mode="json")
    doc["tools"]["tools"][-1]["route"] = "always"
    [always] = _agent_records(Harness.model_validate(doc), "a cup the same colour as a flamingo")
    assert always["ran"] and "routed_by" not in always and always["output"] == "a pink cup"
    # a routed agent that no skill names could never run: the compile checks refuse it
    doc = h.model_dump(mode="json")
    doc["skills"]["skills"] = [s for s in doc["skills"]["skills"] if s["name"] != "colour-lookup"]
    with pytest.raises(HarnessCompileError, match="route"):
        check_harness(Harness.model_validate(doc))


def test_phrasings_cover_what_the_planner_finds() -> None:
    """Each lookup ``find_lookups`` reads in these prompts matches its kind's phrasing."""
    prompts = [p for p, _ in UNROUTED] + [
        "a cup in the colour of a flamingo",
        "as many apples as a spider has legs",
        "a dog with the object used with a tennis ball",
    ]
    for p in prompts:
        for lk in find_lookups(p):
            span = p[lk.start : lk.end]
            assert any(
                k == lk.kind and re.search(rx, span, re.IGNORECASE) for k, _, rx in LOOKUP_PHRASINGS
            ), (p, lk)


def test_skills_lever_only_for_unrouted_referring_prompts() -> None:
    h = routed_harness()
    unrouted = cluster("a cup the same colour as a flamingo", "a bench coloured like grass")
    [att] = localize([unrouted], h)
    assert att.chosen == "skills", (att.scores, att.reasons)
    assert any("no skill routes them" in r for r in att.reasons)
    [p] = propose(unrouted, att, h, 1)
    child = apply_patch(h, p)
    [skill] = [s for s in child.skills.skills if s.name == ROUTE_SKILL]
    assert [e.value for e in skill.effects if e.kind == "use_tool"] == ["agent"]
    for prompt in ("a cup the same colour as a flamingo", "a bench coloured like grass"):
        assert agent_route(child, prompt, _EX) == ROUTE_SKILL
    assert agent_route(child, "a red cup", _EX) is None
    # pulled: nothing more to route; a count lookup widens the skill with its phrasing
    assert _skills_route_agent(child, unrouted) == []
    legs = cluster("as many apples as a spider has legs", symptom="count_wrong")
    [wider] = _skills_route_agent(child, legs)
    assert agent_route(apply_patch(child, wider), "as many pears as a spider has legs", _EX)
    # prompts the routing skill already gets, and plain prompts: no routing lever
    assert _skills_route_agent(h, cluster("a cup in the colour of a flamingo")) == []
    plain = cluster("a red cup", "a green bench")
    assert _skills_route_agent(h, plain) == []
    [att_plain] = localize([plain], h)
    assert not any("no skill routes" in r for r in att_plain.reasons)
    # no agent, or one routed "always": the Tools bonus, not the Skills one
    base = load_dir("harnesses/baseline")
    [att_base] = localize([unrouted], base)
    assert att_base.chosen == "tools" and _skills_route_agent(base, unrouted) == []
    assert ROUTING_BONUS > 0


def _round(**cfg: Any) -> Any:
    return one_candidate_round(SimWorld(), routed_harness(), splits(), **cfg)


@pytest.mark.slow  # a whole round in the embedded world; `make test-all` runs it
def test_round_accepts_the_routing_skill_and_heldout_fails_less() -> None:
    """Attribution by the localizer alone (``w_localizer`` 1, no counterfactual probe): the
    round proposes the routing skill, the gate accepts it."""
    res = _round(w_localizer=1.0, counterfactual=CounterfactualConfig(enabled=False))
    cand = accepted_and_heldout_falls(res, "skills")
    assert cand.patch.responsibility == "skills"
    assert ROUTE_SKILL in {s.name for s in res.child.skills.skills}
    assert res.child.tools == routed_harness().tools  # the lever is the routing alone


@pytest.mark.slow
def test_default_round_routes_the_unrouted_prompts_too() -> None:
    """With the default attribution the counterfactual probe finds the agent's ``route`` as
    the cause (resetting it to ``always``, 11 of 12 failing verdicts pass) and that Tools
    patch is accepted: on the embedded world an agent on every request costs no generator
    call, so both patches route the referring prompts and lower the held-out failure rate."""
    res = _round()
    accepted_and_heldout_falls(res, "skills")
    child = res.child
    [agent] = [t for t in child.tools.tools if isinstance(t, AgentTool)]
    assert agent.enabled
    assert agent.route == "always" or all(
        agent_route(child, p, _EX) is not None for p, _ in UNROUTED
    )
