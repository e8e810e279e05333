"""TRACE proposes and accepts the reference lever (issue 32): prompts that name two objects
by a material or pattern ("a wooden chair and a metallic car") fail their textures on the
baseline harness (the words bind to the wrong object or are lost); the localizer reads the
material words from the prompt text and chooses Tools; the proposer gives an agent
``image_search`` over the deployment's reference library (the embedded one, built into a
local store); the agent retrieves a reference image of each textured object and binds it in
the program ("the wooden chair from image 1"); one whole in-process round
(``trace.round_driver.run_round`` over the embedded world) accepts it, and the held-out
textured prompts fail less often.

Each task's constraints are what the fixed rule extractor reads from its own prompt. The
world, round ports and acceptance check are the other lever tests'
(``tests/unit/_sim_round.py``, ``tests/unit/test_trace_agent_lever.py``).
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from evoharness.agent.planner import find_textured
from evoharness.harness.io import load_dir
from evoharness.harness.patch import apply_patch
from evoharness.harness.schema import Harness
from evoharness.local_store import LocalArtifactStore
from evoharness.sim.reference_library import CLASSES, DEFAULT_TEXTURES
from evoharness.tasks.models import Task
from evoharness.trace.models import FailureCluster
from evoharness.trace.patch_templates.tools import AGENT_MAX_REFERENCES, _tools_image_search
from evoharness.trace.rule_proposer import localize, propose
from evoharness.vocab import article
from tests.unit._sim_round import SimWorld
from tests.unit.test_trace_agent_lever import (
    PLAIN,
    accepted_and_heldout_falls,
    one_candidate_round,
    task,
)
from tests.unit.test_trace_agent_lever import cluster as agent_cluster

N_TARGET = 12
N_HELDOUT = 8


def textured_prompts() -> list[str]:
    """Two objects of the embedded library's classes, each in one of its textures (the two
    textures differ), e.g. "a wooden chair and a metallic car"; deterministic."""
    pairs = itertools.combinations(CLASSES, 2)
    textures = itertools.cycle(itertools.permutations(DEFAULT_TEXTURES, 2))
    out = []
    for (a, b), (ta, tb) in zip(pairs, textures, strict=False):
        out.append(f"{article(ta)} {ta} {a} and {article(tb)} {tb} {b}")
        if len(out) == N_TARGET + N_HELDOUT:
            break
    return out


def splits() -> dict[str, list[Task]]:
    ps = textured_prompts()
    ts = [task(f"tex/{i}", p, p, "texture") for i, p in enumerate(ps)]
    pres = [task(f"plain/{i}", p, p, "plain") for i, p in enumerate(PLAIN)]
    return {"target": ts[:N_TARGET], "heldout": ts[N_TARGET:], "preservation": pres}


def cluster(*prompts: str, symptom: str = "texture_wrong") -> FailureCluster:
    return agent_cluster(*prompts, symptom=symptom, hint="tools", constraint_type="attribute")


def _tools(h: Harness) -> dict[str, Any]:
    return {t.kind: t for t in h.tools.tools}


def test_reference_lever_only_for_textured_prompts() -> None:
    base = load_dir("harnesses/baseline")
    tex = cluster("a wooden chair and a metallic car", "a striped cat and a spotted dog")
    [att] = localize([tex], base)
    assert att.chosen == "tools", att.reasons
    assert any("material or pattern" in r for r in att.reasons), att.reasons
    first = propose(tex, att, base, 1)[0]
    child = apply_patch(base, first)
    tools = _tools(child)
    assert tools["image_search"].enabled and tools["agent"].enabled, child.tools
    assert tools["agent"].max_references == AGENT_MAX_REFERENCES
    assert "material or pattern" in first.rationale
    # the lever reads the prompt's words only: plain attribute failures do not get it
    plain = cluster("a round cup and a square clock", symptom="attribute_wrong")
    [att_plain] = localize([plain], base)
    assert not any("material or pattern" in r for r in att_plain.reasons)
    assert _tools_image_search(base, plain) == []
    # pulled: nothing more; disabled or short of references: re-enabled and tuned
    assert _tools_image_search(child, tex) == []
    doc = child.model_dump(mode="json")
    for t in doc["tools"]["tools"]:
        if t["kind"] == "image_search":
            t["enabled"] = False
        if t["kind"] == "agent":
            t["max_references"] = 0
    [again] = _tools_image_search(Harness.model_validate(doc), tex)
    fixed = _tools(apply_patch(Harness.model_validate(doc), again))
    assert fixed["image_search"].enabled and fixed["agent"].max_references == 2


def test_textured_prompts_are_what_the_planner_reads() -> None:
    ps = textured_prompts()
    assert len(ps) == N_TARGET + N_HELDOUT and len(set(ps)) == len(ps)
    assert all(len(find_textured(p)) == 2 for p in ps), ps


@pytest.mark.slow  # a whole round in the embedded world; `make test-all` runs it
def test_round_accepts_image_search_and_heldout_fails_less(tmp_path: Path) -> None:
    world = SimWorld(library_store=LocalArtifactStore(tmp_path / "store"))
    res = one_candidate_round(world, load_dir("harnesses/baseline"), splits())
    accepted_and_heldout_falls(res, "tools (image_search)")
    assert res.child is not None
    tools = _tools(res.child)
    assert tools["image_search"].enabled and tools["agent"].enabled, res.child.tools
