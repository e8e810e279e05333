"""The agent's LLM backend against the scripted chat-completions server
(tests/fixtures/fake_openai.py): tool calls, observations sent back, a rejected final
answer shown back, and the message assembly."""

from __future__ import annotations

import json

import pytest

from evoharness.agent.loop import AgentTask, Toolbox, run_agent
from evoharness.agent.search import EmbeddedKnowledgeBase
from evoharness.harness.schema import Skill
from services.proposer.backends.agent_chat import ChatAgentBackend, agent_messages
from services.proposer.backends.openai_chat import ChatSettings

SKILLS = [Skill(name="colour-binding", description="bind colours", body="One colour per noun.")]


def _call(name: str, args: dict[str, object], call_id: str) -> dict[str, object]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


@pytest.fixture
def backend(fake_openai, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("EVOHARNESS_LLM_API_KEY", "sk-agent")
    settings = ChatSettings(
        model="agent-model", base_url=fake_openai.base_url, temperature=0.0, seed=7, timeout_s=5
    )
    return ChatAgentBackend(settings, cost_per_1k_tokens=0.5)


def test_llm_agent_searches_reads_a_skill_and_answers(fake_openai, backend) -> None:  # type: ignore[no-untyped-def]
    final = {
        "gen_prompt": "a red car",
        "reference_images": [],
        "selected_skills": ["colour-binding"],
        "rationale": "a London bus is red",
    }
    fake_openai.script(
        {
            "content": None,
            "tool_calls": [_call("search", {"query": "colour of a London bus"}, "c1")],
            "prompt_tokens": 300,
            "completion_tokens": 20,
        },
        {
            "content": None,
            "tool_calls": [_call("query_knowledge", {"name": "colour-binding"}, "c2")],
        },
        {"content": "a red car, I think"},
        {"content": json.dumps(final), "prompt_tokens": 500, "completion_tokens": 40},
    )
    box = Toolbox(EmbeddedKnowledgeBase(), skills=SKILLS)
    task = AgentTask(
        "a car in the colour of a London bus", box.specs, {"colour-binding": "bind colours"}, {}, 2
    )
    r = run_agent(task, backend, box)
    assert r.program is not None and r.program.gen_prompt == "a red car"
    assert [f.kind for f in r.failures] == ["unparseable"]
    assert [t["type"] for t in r.trajectory] == ["tool_call", "tool_call", "final", "final"]
    assert "London bus is red" in r.trajectory[0]["observation"][0]["text"]
    assert r.trajectory[1]["observation"]["body"] == "One colour per noun."
    reqs = [q["body"] for q in fake_openai.requests()]
    assert len(reqs) == 4
    assert {t["function"]["name"] for t in reqs[0]["tools"]} == {"search", "query_knowledge"}
    assert reqs[0]["tool_choice"] == "auto" and reqs[0]["seed"] == 7
    assert reqs[0]["model"] == "agent-model"
    # the second request carries the first call and its observation
    m = reqs[1]["messages"]
    assert m[2]["tool_calls"][0]["id"] == "c1" and m[3]["role"] == "tool"
    assert m[3]["tool_call_id"] == "c1" and "London bus is red" in m[3]["content"]
    # the fourth request shows the rejected answer back
    last = reqs[3]["messages"]
    assert last[-2] == {"role": "assistant", "content": "a red car, I think"}
    assert "rejected" in last[-1]["content"] and "unparseable" in last[-1]["content"]
    assert r.usage["llm_calls"] == 4 and r.usage["prompt_tokens"] == 300 + 10 + 10 + 500
    # tokens priced at 0.5 per 1000, plus the one embedded search (1 unit)
    assert r.cost == pytest.approx((320 + 15 + 15 + 540) / 1000 * 0.5 + 1.0)


def test_llm_transport_failure_is_a_backend_error(fake_openai, backend) -> None:  # type: ignore[no-untyped-def]
    fake_openai.script({"status": 400, "message": "bad"})
    box = Toolbox(None)
    r = run_agent(AgentTask("p", box.specs, {}, {}, 2), backend, box)
    assert r.program is None and [f.kind for f in r.failures] == ["backend_error"]


def test_message_assembly_names_rules_skills_and_images() -> None:
    box = Toolbox(None, skills=SKILLS)
    task = AgentTask(
        "a dog in a hat", box.specs, {"colour-binding": "bind colours"}, {"IMG_001": "a dog"}, 2
    )
    msgs = agent_messages(task, [])
    assert msgs[0]["role"] == "system" and "at most 2" in msgs[0]["content"]
    assert "image i" in msgs[0]["content"]
    assert "Prompt: a dog in a hat" in msgs[1]["content"]
    assert "- colour-binding: bind colours" in msgs[1]["content"]
    assert "- IMG_001: a dog" in msgs[1]["content"]


def test_a_rejected_request_is_a_bad_request_not_a_connection_failure(fake_openai, backend) -> None:  # type: ignore[no-untyped-def]
    """The agent's chat errors are classified as the proposer's are (``chat_error``): an HTTP
    400 is not retryable; it read "connection", retryable, before."""
    from services.proposer.backends.openai_chat import ChatError

    fake_openai.script({"status": 400, "message": "bad"})
    box = Toolbox(None)
    with pytest.raises(ChatError) as err:
        backend.next_turn(AgentTask("p", box.specs, {}, {}, 2), [])
    assert (err.value.outcome, err.value.retryable) == ("bad_request", False)
