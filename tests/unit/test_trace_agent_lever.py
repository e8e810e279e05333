"""TRACE proposes and accepts the agent lever for prompts that only refer to what they need
(issue 32): a cluster of prompts such as "a cup in the colour of a flamingo" fails its
colour on the baseline harness (the simulator draws what the prompt names); the localizer
reads the referring wording from the prompt text and chooses Tools; the proposer enables an
agent with ``search``; one whole in-process round (``trace.round_driver.run_round`` over the
embedded world) accepts it, and the held-out referring prompts fail less often.

Each task's constraints are what the fixed rule extractor reads from its *resolved* wording
("a pink cup"), so the benchmark states what the prompt means, never the thing it refers to.
"""

from __future__ import annotations

from typing import Any

import pytest

from evoharness.harness.io import load_dir
from evoharness.harness.patch import apply_patch
from evoharness.harness.schema import Harness
from evoharness.runtime.extract import RuleExtractor
from evoharness.tasks.models import Task
from evoharness.trace.models import CandidateStatus, DecisionKind, FailureCluster
from evoharness.trace.patch_templates import templates_for
from evoharness.trace.round import RoundConfig
from evoharness.trace.round_driver import run_round
from evoharness.trace.rule_proposer import localize, propose
from tests.unit._sim_round import SimWorld

#: (prompt that refers to a well-known thing, what it means): the first twelve are the
#: target split, the rest held out.
KNOWLEDGE = [
    ("a cup in the colour of a flamingo", "a pink cup"),
    ("a bench in the colour of grass", "a green bench"),
    ("an umbrella in the colour of a school bus", "a yellow umbrella"),
    ("a chair in the colour of a crow", "a black chair"),
    ("a bowl in the colour of a blueberry", "a blue bowl"),
    ("a clock in the colour of an eggplant", "a purple clock"),
    ("a bottle in the colour of chocolate", "a brown bottle"),
    ("a backpack in the colour of a lemon", "a yellow backpack"),
    ("a book in the colour of a frog", "a green book"),
    ("a kite in the colour of a sapphire", "a blue kite"),
    ("a hat in the colour of snow", "a white hat"),
    ("a suitcase in the colour of a carrot", "an orange suitcase"),
    # held out
    ("a teapot in the colour of a violet", "a purple teapot"),
    ("a sofa in the colour of a fire truck", "a red sofa"),
    ("a bag in the colour of a polar bear", "a white bag"),
    ("a ball in the colour of a lime", "a green ball"),
    ("a cake in the colour of a canary", "a yellow cake"),
    ("a chair in the colour of a pig", "a pink chair"),
    ("a vase in the colour of a ruby", "a red vase"),
    ("a boat in the colour of a sunflower", "a yellow boat"),
]
N_TARGET = 12
#: prompts that refer to nothing: the agent must leave them as they are
PLAIN = ["a photo of a dog", "a red cup", "two apples", "a blue car", "a photo of a cat"]

_EX = RuleExtractor()


def task(tid: str, prompt: str, meaning: str, family: str) -> Task:
    """A task for ``prompt`` whose constraints the rule extractor reads from ``meaning``."""
    cons = [
        c.model_copy(update={"constraint_id": f"c{j}"}) for j, c in enumerate(_EX.extract(meaning))
    ]
    assert cons, meaning
    return Task(task_id=tid, prompt=prompt, task_family=family, constraints=cons)


def splits() -> dict[str, list[Task]]:
    ks = [task(f"k/{i}", p, m, "knowledge") for i, (p, m) in enumerate(KNOWLEDGE)]
    pres = [task(f"plain/{i}", p, p, "plain") for i, p in enumerate(PLAIN)]
    return {"target": ks[:N_TARGET], "heldout": ks[N_TARGET:], "preservation": pres}


def cluster(
    *prompts: str,
    symptom: str = "color_wrong",
    hint: str = "policy",
    constraint_type: str = "color",
) -> FailureCluster:
    """A failure cluster of ``prompts`` (each failing on every seed) as the round builds
    one: ``<hint>/<constraint_type>/<symptom>``."""
    return FailureCluster(
        cluster_id=f"{hint}/{constraint_type}/{symptom}",
        responsibility_hint=hint,
        constraint_type=constraint_type,
        symptom=symptom,
        members=[(f"t{i}", "c1") for i in range(len(prompts))],
        n_failures=4 * len(prompts),
        failure_rate=1.0,
        examples=[{"task_id": f"t{i}", "prompt": p} for i, p in enumerate(prompts)],
    )


def _kinds(h: Harness) -> dict[str, bool]:
    return {t.kind: t.enabled for t in h.tools.tools}


def test_agent_lever_only_for_referring_prompts() -> None:
    base = load_dir("harnesses/baseline")
    refer = cluster("a cup in the colour of a flamingo", "a bench in the colour of grass")
    [att] = localize([refer], base)
    assert att.chosen == "tools", att.reasons
    assert any("well-known thing" in r for r in att.reasons)
    [p] = propose(refer, att, base, 1)
    child = apply_patch(base, p)
    assert _kinds(child).get("agent") and _kinds(child).get("search"), child.tools
    # a count that refers to a spider's legs is a lookup too, whatever its symptom
    legs = cluster("as many apples as a spider has legs", symptom="count_wrong")
    [agent_lever] = [
        t for t in templates_for("count_wrong")["tools"] if t.__name__ == "_tools_agent"
    ]
    assert agent_lever(base, legs)
    # plain colour failures do not get the agent: rewording and layouts are their levers
    plain = cluster("a red cup", "a green bench")
    [att_plain] = localize([plain], base)
    assert not any("well-known thing" in r for r in att_plain.reasons)
    assert all(
        "agent" not in _kinds(apply_patch(base, q)) for q in propose(plain, att_plain, base, 8)
    )
    # pulled lever: nothing more to add; a disabled agent is re-enabled, a short budget raised
    assert agent_lever(child, refer) == []
    doc = child.model_dump(mode="json")
    for t in doc["tools"]["tools"]:
        if t["kind"] == "agent":
            t.update(enabled=False, max_turns=1)
    off = Harness.model_validate(doc)
    [again] = agent_lever(off, refer)
    fixed = [t for t in apply_patch(off, again).tools.tools if t.kind == "agent"][0]
    assert fixed.enabled and fixed.max_turns >= 2


def one_candidate_round(
    world: SimWorld, harness: Harness, split: dict[str, list[Task]], **cfg: Any
) -> Any:
    """One whole in-process round over ``world``: seeds 0–3, one cluster, one candidate,
    no memory mining; ``cfg`` overrides ``RoundConfig`` fields. Shared by the lever tests."""
    config = RoundConfig(
        seeds=[0, 1, 2, 3],
        max_clusters=1,
        candidates_per_cluster=1,
        concurrency=1,
        mine_memory=False,
        **cfg,
    )
    return run_round(world.ports(), harness, split, config)


def accepted_and_heldout_falls(res: Any, label: str) -> Any:
    """The round's one candidate (returned): accepted, and the held-out failure rate
    (1 - pass rate) falls with no preservation regression; prints the figures the docs
    quote, led by ``label``. Shared by the Tools, Skills and Policy lever tests."""
    cand = res.report.candidates[0]
    assert cand.status is CandidateStatus.accepted, (cand.reject_reason, cand.gate)
    assert res.report.decision.kind is DecisionKind.accepted
    assert res.child is not None
    g = cand.gate
    assert g is not None
    held = g.pass_rates["heldout"]
    assert 1 - held["candidate"] < 1 - held["parent"], held
    assert g.delta_heldout > 0 and g.regression == 0.0, g
    print(
        f"{label}: p={g.p_value:.3g} held-out failure {1 - held['parent']:.3f} -> "
        f"{1 - held['candidate']:.3f} target {g.pass_rates['target']} "
        f"preservation {g.pass_rates['preservation']}"
    )
    return cand


@pytest.mark.slow  # a whole round in the embedded world; `make test-all` runs it
def test_round_accepts_the_agent_and_heldout_fails_less() -> None:
    res = one_candidate_round(SimWorld(), load_dir("harnesses/baseline"), splits())
    accepted_and_heldout_falls(res, "tools")
    assert res.child is not None
    kinds = _kinds(res.child)
    assert kinds.get("agent") and kinds.get("search"), res.child.tools
