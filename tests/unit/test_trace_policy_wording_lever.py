"""TRACE proposes and accepts the program's wording lever (issue 32): the harness's agent
(on every request) already resolves "as many apples as a spider has legs" into "eight
apples", and such prompts still fail their count on the embedded world. With the agent's
levers pulled, the localizer gives Policy the referring evidence and the proposer enables
``enumerate_instances`` ("an apple, a second apple, …"); one whole in-process round accepts
it and the held-out count lookups fail less often.

Task and cluster builders and the world are the agent lever's
(``tests/unit/test_trace_agent_lever.py``, ``tests/unit/_sim_round.py``).
"""

from __future__ import annotations

from typing import Any

import pytest

from evoharness.harness.io import load_dir
from evoharness.harness.patch import apply_patch
from evoharness.harness.schema import Harness
from evoharness.tasks.models import Task
from evoharness.trace.patch_templates.policy import _policy_agent_counts
from evoharness.trace.rule_proposer import localize, propose
from tests.unit._sim_round import SimWorld
from tests.unit.test_trace_agent_lever import (
    PLAIN,
    accepted_and_heldout_falls,
    cluster,
    one_candidate_round,
    task,
)

#: (count lookup, what it means): the first twelve are the target split, the rest held out.
COUNTS = [
    ("as many apples as a spider has legs", "eight apples"),
    ("as many cups as a dog has legs", "four cups"),
    ("as many balls as a tricycle has wheels", "three balls"),
    ("as many books as a guitar has strings", "six books"),
    ("as many candles as a starfish has arms", "five candles"),
    ("as many pears as an ant has legs", "six pears"),
    ("as many bottles as a car has wheels", "four bottles"),
    ("as many cookies as a hexagon has sides", "six cookies"),
    ("as many oranges as a stool has legs", "three oranges"),
    ("as many vases as a violin has strings", "four vases"),
    ("as many eggs as an octopus has arms", "eight eggs"),
    ("as many mugs as a pentagon has sides", "five mugs"),
    # held out
    ("as many lemons as an insect has legs", "six lemons"),
    ("as many hats as a horse has legs", "four hats"),
    ("as many bowls as a triangle has sides", "three bowls"),
    ("as many kites as a square has sides", "four kites"),
    ("as many bags as an octagon has sides", "eight bags"),
    ("as many clocks as a cat has legs", "four clocks"),
    ("as many shoes as a bicycle has wheels", "two shoes"),
    ("as many spoons as a squid has arms", "ten spoons"),
]
N_TARGET = 12


def agent_harness(route: str = "always") -> Harness:
    """``harnesses/baseline`` plus an embedded ``search`` and a rule agent."""
    doc: dict[str, Any] = load_dir("harnesses/baseline").model_dump(mode="json")
    doc["tools"]["tools"] += [
        {"kind": "search", "name": "facts", "provider": "embedded", "top_k": 3},
        {"kind": "agent", "name": "agent", "backend": "rule", "route": route},
    ]
    if route == "skills":
        doc["skills"]["skills"].append(
            {
                "name": "colour-lookup",
                "triggers": [{"kind": "regex", "value": r"(?i)\bin the colou?r of\b"}],
                "effects": [{"kind": "use_tool", "value": "agent"}],
            }
        )
    return Harness.model_validate(doc)


def splits() -> dict[str, list[Task]]:
    ks = [task(f"n/{i}", p, m, "knowledge") for i, (p, m) in enumerate(COUNTS)]
    pres = [task(f"plain/{i}", p, p, "plain") for i, p in enumerate(PLAIN)]
    return {"target": ks[:N_TARGET], "heldout": ks[N_TARGET:], "preservation": pres}


def _enumerates(h: Harness) -> bool:
    return any(r.kind == "enumerate_instances" and r.enabled for r in h.policy.rewrites)


def test_wording_lever_only_where_the_agent_resolves_a_count() -> None:
    h = agent_harness()
    legs = cluster(COUNTS[0][0], COUNTS[1][0], symptom="count_wrong")
    [att] = localize([legs], h)
    assert att.chosen == "policy", (att.scores, att.reasons)
    assert any("agent already resolves" in r for r in att.reasons)
    [p] = propose(legs, att, h, 1)
    child = apply_patch(h, p)
    assert _enumerates(child)
    assert _policy_agent_counts(child, legs) == []  # pulled
    # no agent: the Tools agent lever, not this one
    base = load_dir("harnesses/baseline")
    assert _policy_agent_counts(base, legs) == []
    [att_base] = localize([legs], base)
    assert att_base.chosen != "policy" or not any("already resolves" in r for r in att_base.reasons)
    # an agent routed by skills that does not run on counts: the routing lever comes first
    routed = agent_harness("skills")
    assert _policy_agent_counts(routed, legs) == []
    [att_routed] = localize([legs], routed)
    assert att_routed.chosen == "skills", att_routed.reasons
    # colour lookups and plain counts: no wording lever
    assert _policy_agent_counts(h, cluster("a cup in the colour of a flamingo")) == []
    assert _policy_agent_counts(h, cluster("eight apples", symptom="count_wrong")) == []


@pytest.mark.slow  # a whole round in the embedded world; `make test-all` runs it
def test_round_accepts_the_wording_and_heldout_fails_less() -> None:
    """The default attribution: localizer and evidence combined lean to Tools, the
    counterfactual probe with the wording lever moves it to Policy."""
    res = one_candidate_round(SimWorld(), agent_harness(), splits())
    cand = accepted_and_heldout_falls(res, "policy")
    assert res.child is not None
    assert cand.patch.responsibility == "policy" and _enumerates(res.child)
