"""The agent's LLM backend: one OpenAI-compatible chat call with tool calling per turn.

``ChatAgentBackend`` is an ``evoharness.agent.loop.AgentBackend``. It builds its client
through the proposer's ``ChatClient`` (the same endpoint, key and timeout settings,
``ChatSettings``) and asks ``chat.completions`` with the toolbox's tools in the OpenAI
function-tool shape and ``tool_choice: auto``. ``agent_messages`` assembles the conversation
from the task and the trajectory so far:

1. a system message: the rules of the program (fields, at most ``max_references``
   references, reference *i* named "image i", no ids or URLs in ``gen_prompt``, one tool call
   or the final JSON object per turn);
2. a user message: the prompt, the harness's skills (name: description) and the images the
   agent may reference (id: description);
3. per tool call: the assistant's ``tool_calls`` entry and a ``tool`` message with the
   observation (JSON); per rejected final answer: the assistant's text and a user message
   naming the failures.

The answer is untrusted: the first tool call of a reply is the turn's action (its arguments
passed on as the raw text the model sent; the loop parses them); without tool calls, the
reply's text is the final answer, validated by the loop. Transport failures raise
``ChatError`` (the loop records a ``backend_error``). Cost per turn: ``(prompt + completion
tokens) / 1000 × cost_per_1k_tokens`` cost units.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import openai

from evoharness.agent.loop import AgentTask, AgentTurn, FinalAnswer, ToolCall
from services.proposer.backends.openai_chat import ChatClient, ChatError, ChatSettings, chat_error

SYSTEM = """You plan the input of a text-to-image generator. Each turn, either call exactly \
one tool, or give the final answer: one JSON object and nothing else, with the fields
  "gen_prompt": the text the generator gets (plain words: no image ids, no URLs),
  "reference_images": a list of {{"img_id", "role"}} (at most {max_refs}; reference i must be \
mentioned in gen_prompt as "image i"),
  "selected_skills": names of the skill documents you relied on,
  "rationale": why.
Look up what the prompt only refers to (a colour, a count, an object) and write it out \
plainly in gen_prompt."""


def tool_definitions(task: AgentTask) -> list[dict[str, Any]]:
    """The task's tools in the OpenAI function-tool shape."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in task.tools
    ]


def agent_messages(
    task: AgentTask, trajectory: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The conversation for the next turn (see the module docstring)."""
    skills = "\n".join(f"- {n}: {d}" for n, d in task.skills.items()) or "(none)"
    images = "\n".join(f"- {i}: {d}" for i, d in task.images.items()) or "(none)"
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM.format(max_refs=task.max_references)},
        {
            "role": "user",
            "content": f"Prompt: {task.prompt}\n\nSkill documents:\n{skills}\n\n"
            f"Images you may reference:\n{images}",
        },
    ]
    for i, rec in enumerate(trajectory):
        if rec.get("type") == "tool_call":
            call_id = str(rec.get("call_id") or f"call_{i}")
            args = rec.get("arguments")
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {
                                "name": str(rec.get("tool")),
                                "arguments": args if isinstance(args, str) else json.dumps(args),
                            },
                        }
                    ],
                }
            )
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call_id,
                    "content": json.dumps(rec.get("observation"), default=str)[:4000],
                }
            )
        elif rec.get("type") == "final":
            answer = rec.get("answer")
            messages.append(
                {
                    "role": "assistant",
                    "content": (answer if isinstance(answer, str) else json.dumps(answer))[:4000],
                }
            )
            reasons = "; ".join(
                f"{f.get('kind')}: {str(f.get('detail'))[:300]}" for f in rec.get("failures", [])
            )
            messages.append(
                {
                    "role": "user",
                    "content": f"Your answer was rejected: {reasons}. Call a tool or answer "
                    "again with one JSON object.",
                }
            )
    return messages


class ChatAgentBackend:
    """``AgentBackend`` over an OpenAI-compatible chat endpoint with tool calling.
    ``client``: an ``openai.OpenAI`` to use (tests); by default ``ChatClient`` builds one from
    ``settings`` (raises ``ValueError`` without an API key)."""

    name = "llm"

    def __init__(
        self,
        settings: ChatSettings,
        *,
        cost_per_1k_tokens: float = 1.0,
        client: openai.OpenAI | None = None,
    ) -> None:
        self.settings = settings
        self.cost_per_1k_tokens = cost_per_1k_tokens
        self.client = ChatClient(settings, backend="agent", client=client).client

    def next_turn(self, task: AgentTask, trajectory: Sequence[Mapping[str, Any]]) -> AgentTurn:
        """One chat call; its first tool call or its text. Raises ``ChatError``."""
        kwargs: dict[str, Any] = {
            "model": self.settings.model,
            "messages": agent_messages(task, trajectory),
            "temperature": self.settings.temperature,
            "max_tokens": self.settings.max_tokens,
        }
        tools = tool_definitions(task)
        if tools:
            kwargs["tools"] = tools
            kwargs["tool_choice"] = "auto"
        if self.settings.seed is not None:
            kwargs["seed"] = self.settings.seed
        try:
            resp = self.client.chat.completions.create(**kwargs)
        except (openai.OpenAIError, ValueError) as exc:
            raise chat_error(exc, self.settings) from exc
        choices = getattr(resp, "choices", None) or []
        if not choices:
            raise ChatError("server_error", "response has no choices", True)
        msg = choices[0].message
        usage = getattr(resp, "usage", None)
        pt = int(getattr(usage, "prompt_tokens", 0) or 0)
        ct = int(getattr(usage, "completion_tokens", 0) or 0)
        cost = (pt + ct) / 1000.0 * self.cost_per_1k_tokens
        used = {"prompt_tokens": pt, "completion_tokens": ct, "llm_calls": 1}
        calls = getattr(msg, "tool_calls", None) or []
        if calls:
            fn = calls[0].function
            action: ToolCall | FinalAnswer = ToolCall(
                str(getattr(fn, "name", "")), getattr(fn, "arguments", "") or "", calls[0].id or ""
            )
        else:
            action = FinalAnswer(getattr(msg, "content", None) or "")
        return AgentTurn(action, cost=cost, usage=used)


__all__ = ["ChatAgentBackend", "agent_messages", "tool_definitions"]
