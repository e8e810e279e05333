"""The agent's trajectory on the run report's image cards (issue 32): traces made by the
real runtime (``HarnessRuntime`` over the embedded simulator) with the agent enabled, read by
``report.agent.agent_trajectory`` and rendered by ``render_report``; the card shows the
program and each turn's tool, argument, observation and failure."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from evoharness.agent.loop import AgentTask, AgentTurn, FinalAnswer, ToolCall
from evoharness.harness.io import load_dir
from evoharness.harness.schema import Harness
from evoharness.report import agent_trajectory, render_report
from evoharness.runtime.extract import RuleExtractor
from evoharness.runtime.runtime import HarnessRuntime
from evoharness.runtime.tool_backends import ToolBackends
from evoharness.sim import SimGenerator, SimInspector
from evoharness.tasks.models import Task
from tests.report.sample import make_run


def agent_harness(backend: str, max_references: int = 2) -> Harness:
    doc = load_dir("harnesses/baseline").model_dump(mode="json")
    doc["tools"]["tools"] += [
        {"name": "facts", "kind": "search", "provider": "embedded"},
        {"name": "agent", "kind": "agent", "backend": backend, "max_references": max_references},
    ]
    return Harness.model_validate(doc)


class Scripted:
    """An agent backend that answers a fixed list of turns (an untrusted LLM's stand-in)."""

    name = "scripted"

    def __init__(self, turns: list[AgentTurn]) -> None:
        self.turns = list(turns)

    def next_turn(self, task: AgentTask, trajectory: Sequence[Mapping[str, Any]]) -> AgentTurn:
        return self.turns[len(trajectory)]


def trace_of(
    prompt: str, backend: str, agent_backend: Any = None, references: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    cons = RuleExtractor().extract(prompt)
    task = Task(
        task_id="t",
        prompt=prompt,
        task_family="knowledge",
        constraints=cons,
        references=references or {},
    )
    rt = HarnessRuntime(
        agent_harness(backend, max_references=len(references or {}) or 2),
        SimGenerator(),
        SimInspector(),
        tools=ToolBackends(agent_backend=agent_backend),
    )
    return list(rt.run_task(task, 0).trace)


class Cards(HTMLParser):
    """Text of each ``div.pair`` card, and of its ``details.agent`` blocks."""

    def __init__(self) -> None:
        super().__init__()
        self.cards: list[dict[str, Any]] = []
        self.depth = 0
        self.in_agent = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "div" and a.get("class") == "pair":
            self.cards.append({"text": "", "agents": []})
            self.depth = 1
        elif tag == "div" and self.depth:
            self.depth += 1
        if tag == "details" and self.depth and a.get("class") == "agent":
            self.cards[-1]["agents"].append({"harness": a.get("data-harness"), "text": ""})
            self.in_agent = 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "div" and self.depth:
            self.depth -= 1
        if tag == "details":
            self.in_agent = 0

    def handle_data(self, data: str) -> None:
        if self.depth:
            self.cards[-1]["text"] += data
            if self.in_agent:
                self.cards[-1]["agents"][-1]["text"] += data


def test_rule_agent_trace_is_read() -> None:
    a = agent_trajectory(trace_of("a cup in the colour of a flamingo", "rule"))
    assert a is not None
    assert a.input == "a cup in the colour of a flamingo" and a.output == "a pink cup"
    assert a.program is not None and a.program["gen_prompt"] == "a pink cup"
    search = [t for t in a.turns if t.kind == "tool_call"]
    assert search and search[0].tool == "search"
    assert "flamingo" in search[0].argument and "pink" in search[0].observation
    assert a.turns[-1].kind == "final" and not a.failures
    # a harness without an agent has no trajectory to show
    assert agent_trajectory([{"responsibility": "policy", "step": "extract"}]) is None
    assert agent_trajectory([{"responsibility": "tools", "step": "agent", "cached": True}]) is None


def test_report_card_shows_program_turns_and_failures(tmp_path: Path) -> None:
    good = agent_trajectory(trace_of("a bench in the colour of grass", "rule"))
    valid = {"gen_prompt": "a green bench", "reference_images": [], "selected_skills": []}
    script = Scripted(
        [
            AgentTurn(FinalAnswer("<b>not json</b>")),
            AgentTurn(ToolCall("weather", {"city": "London"})),
            AgentTurn(ToolCall("search", {"query": "colour of grass"})),
            AgentTurn(FinalAnswer(json.dumps({**valid, "rationale": "grass is green"}))),
        ]
    )
    bad = agent_trajectory(trace_of("a bench in the colour of grass", "llm", script))
    assert good is not None and bad is not None
    assert [f.split(":")[0] for f in bad.failures] == ["unparseable", "unknown_tool"]
    run = make_run(tmp_path, n_pairs=3)
    run.image_pairs[0] = run.image_pairs[0].model_copy(update={"agent_after": good})
    run.image_pairs[1] = run.image_pairs[1].model_copy(
        update={"agent_before": good, "agent_after": bad}
    )
    html = render_report(run, tmp_path / "out").read_text()
    parser = Cards()
    parser.feed(html)
    c0, c1, c2 = parser.cards
    assert c2["agents"] == []  # no agent record, no trajectory block
    [g] = c0["agents"]
    assert g["harness"] == "after"
    assert "a pink cup" not in g["text"] and "a green bench" in g["text"]  # the program
    assert "search" in g["text"] and "colour of grass" in g["text"]  # tool and argument
    assert "green" in g["text"].split("colour of grass", 1)[1]  # the observation
    assert [x["harness"] for x in c1["agents"]] == ["before", "after"]
    b = c1["agents"][1]["text"]
    assert "unparseable" in b and "unknown_tool" in b and "weather" in b
    assert "grass is green" in b  # the rationale of the valid program
    # the untrusted answer is shown as text, never as markup
    assert "<b>not json</b>" not in html and "&lt;b&gt;not json&lt;/b&gt;" in html


def test_evaluation_cards_carry_each_harness_trajectory(tmp_path: Path) -> None:
    """``Evaluation.image_pair`` (the cards ``make evolve`` puts in its report) reads the
    trajectory from each harness's execution: none for the baseline, the agent's for the
    final harness."""
    from evoharness.program import ImageRef
    from evoharness_app.evaluation import Evaluation, Outcome
    from tests.report.sample import draw_png
    from tests.unit._sim_world import execute

    prompt = "a cup in the colour of a flamingo"
    task = Task(
        task_id="k/0",
        prompt=prompt,
        task_family="knowledge",
        constraints=[
            c.model_copy(update={"constraint_id": f"c{j}"})
            for j, c in enumerate(RuleExtractor().extract("a pink cup"))
        ],
    )
    png = draw_png(tmp_path / "x.png", (200, 200, 200), 1).read_bytes()
    execs = {
        role: execute(h, task, 0).model_copy(update={"image": ImageRef(key=f"{role}.png")})
        for role, h in (
            ("before", load_dir("harnesses/baseline")),
            ("after", agent_harness("rule")),
        )
    }
    ev = Evaluation(
        splits={"heldout": [task]},
        before={"heldout": {("k/0", 0): execs["before"]}},
        after={"heldout": {("k/0", 0): execs["after"]}},
        scores={},
    )
    o = Outcome("heldout", "k/0", 0, before_pass=False, after_pass=True)
    store = {"before.png": png, "after.png": png}
    pair = ev.image_pair(o, "improved", store, tmp_path)
    assert pair.agent_before is None
    assert pair.agent_after is not None and pair.agent_after.output == "a pink cup"


def test_three_reference_trajectory_on_the_card(tmp_path: Path) -> None:
    """A three-reference request (the embedded reference library's images): the rule
    planner's program carries the three references as subjects, and the card lists them."""
    from evoharness.sim import reference_library as rl
    from evoharness.tasks.builders.multiref import prompt_for

    entries = [
        rl.LibraryEntry("cup", "red"),
        rl.LibraryEntry("cat", "yellow", "striped"),
        rl.LibraryEntry("car", "blue"),
    ]
    refs = {}
    for i, e in enumerate(entries, start=1):
        path = tmp_path / f"ref{i}.png"
        path.write_bytes(rl.render(e))
        refs[f"image_{i}"] = {"key": str(path)}
    prompt = prompt_for(entries)
    a = agent_trajectory(trace_of(prompt, "rule", references=refs))
    assert a is not None and a.program is not None and not a.failures
    got = [(r["img_id"], r["role"]) for r in a.program["reference_images"]]
    assert got == [("IMG_001", "subject"), ("IMG_002", "subject"), ("IMG_003", "subject")]
    run = make_run(tmp_path, n_pairs=1)
    run.image_pairs[0] = run.image_pairs[0].model_copy(update={"agent_after": a})
    parser = Cards()
    parser.feed(render_report(run, tmp_path / "out").read_text())
    [card] = parser.cards[0]["agents"]
    for i in (1, 2, 3):
        assert f"IMG_00{i} (subject)" in card["text"]
        assert f"image {i}" in card["text"]  # gen_prompt mentions each reference
