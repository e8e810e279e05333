"""The agent step inside ``HarnessRuntime.compile`` (in process, embedded world): it runs
before the policy reads the prompt, its trajectory is in the trace, it runs once per
request, and what is missing (an LLM backend, an HTTP provider) falls back, traced."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evoharness.agent.loop import AgentTurn, FinalAnswer
from evoharness.harness.io import load_dir
from evoharness.harness.patch import apply_patch
from evoharness.harness.schema import Harness
from evoharness.program import ImageRef
from evoharness.runtime.runtime import HarnessRuntime
from evoharness.runtime.tool_backends import ToolBackends
from evoharness.sim import SimGenerator

PROMPT = "a car in the colour of a London bus"


def _with(h: Harness, *tools: dict[str, Any]) -> Harness:
    ops = [{"op": "add", "path": "/tools/tools/-", "value": t} for t in tools]
    return apply_patch(h, {"responsibility": "tools", "ops": ops})


@pytest.fixture(scope="module")
def base(repo_root: Path) -> Harness:
    return load_dir(repo_root / "harnesses" / "baseline")


def _agent_records(trace: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [t for t in trace if t["step"] == "agent"]


def test_the_policy_reads_the_agents_prompt(base: Harness) -> None:
    h = _with(base, {"name": "s", "kind": "search"}, {"name": "a", "kind": "agent"})
    c = HarnessRuntime(h, SimGenerator()).compile(PROMPT, 1)
    assert c.program.prompt == "a red car"
    assert any(x.type.value == "color" and x.value == "red" for x in c.constraints_read)
    steps = [(t["responsibility"], t["step"]) for t in c.trace]
    assert steps.index(("tools", "agent")) < steps.index(("policy", "extract"))
    (rec,) = _agent_records(c.trace)
    assert rec["search"] == "embedded:tfidf" and rec["turns"] == 2
    assert rec["trajectory"][0]["observation"][0]["source"].startswith("kb:")


def test_without_an_agent_nothing_changes(base: Harness) -> None:
    c = HarnessRuntime(base, SimGenerator()).compile(PROMPT, 1)
    assert c.program.prompt == PROMPT and not _agent_records(c.trace)
    off = _with(
        base, {"name": "s", "kind": "search"}, {"name": "a", "kind": "agent", "enabled": False}
    )
    assert HarnessRuntime(off, SimGenerator()).compile(PROMPT, 1).program.prompt == PROMPT


def test_missing_ports_fall_back_and_say_so(base: Harness) -> None:
    h = _with(
        base,
        {"name": "s", "kind": "search", "provider": "http"},
        {"name": "a", "kind": "agent", "backend": "llm"},
    )
    c = HarnessRuntime(h, SimGenerator()).compile(PROMPT, 1)
    (rec,) = _agent_records(c.trace)
    assert rec["backend"] == "rule" and rec["search"] is None
    assert any("no LLM agent backend" in n for n in rec["notes"])
    assert any("'http' is not configured" in n for n in rec["notes"])
    assert c.program.prompt == PROMPT  # nothing could be looked up


class _Once:
    name = "llm"

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.calls = 0

    def next_turn(self, task: Any, trajectory: Any) -> AgentTurn:
        self.calls += 1
        return AgentTurn(FinalAnswer(self.answer))


def test_the_agent_runs_once_per_request_and_picks_references(base: Harness) -> None:
    h = _with(base, {"name": "a", "kind": "agent", "backend": "llm"})
    refs = [ImageRef(key="refs/dog.png"), ImageRef(key="refs/hat.png")]
    backend = _Once(
        '{"gen_prompt": "the hat from image 1 on a dog", '
        '"reference_images": [{"img_id": "IMG_002", "role": "object"}]}'
    )
    rt = HarnessRuntime(h, SimGenerator(), tools=ToolBackends(agent_backend=backend))
    c1 = rt.compile("a dog in that hat", 1, refs)
    c2 = rt.compile("a dog in that hat", 2, refs)
    assert backend.calls == 1
    assert c1.program.prompt == "the hat from image 1 on a dog"
    assert [r.key for r in c1.program.references or []] == ["refs/hat.png"]
    assert _agent_records(c2.trace)[0]["cached"] is True
    bad = _Once('{"gen_prompt": "see IMG_001"}')
    c3 = HarnessRuntime(h, SimGenerator(), tools=ToolBackends(agent_backend=bad)).compile(
        "a dog", 1, refs
    )
    (rec,) = _agent_records(c3.trace)
    assert c3.program.prompt == "a dog" and rec["program"] is None
    assert {f["kind"] for f in rec["failures"]} == {"raw_id_in_prompt", "turn_budget"}
