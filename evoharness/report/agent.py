"""The agent's trajectory on a report card (issue 32): the ``tools/agent`` record of a
request's trace (``evoharness.runtime.steps.agent``) read into what a reader needs: the
program the agent answered and each turn's tool, argument, observation and failures.

The trace is a stored JSON document (an execution's ``trace``, a Render's ``trace_json``),
so it is read defensively: a record that is not a mapping, a turn of an unknown shape or a
value of the wrong type is shown as far as it goes, never raised. Long arguments and
observations are cut to ``MAX_TEXT`` characters (the full record stays in the trace).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field

#: Longest argument or observation shown in a turn's row (characters; the rest is elided).
MAX_TEXT: Final = 400


class AgentTurnView(BaseModel):
    """One turn: ``kind`` (``tool_call``, ``final`` or ``backend_error``), the ``tool`` called
    (empty for an answer), its ``argument`` and ``observation`` as compact JSON text (for a
    final answer, ``argument`` is the answer), and ``failures`` as ``"kind: detail"``."""

    model_config = ConfigDict(extra="forbid")

    turn: int = 0
    kind: str = ""
    tool: str = ""
    argument: str = ""
    observation: str = ""
    failures: list[str] = Field(default_factory=list)


class AgentTrajectory(BaseModel):
    """A request's agent run: the prompt it read (``input``) and the one it handed on
    (``output``), the valid program (``program``: None when there was none, and the
    request's prompt was used unchanged), the ``turns``, the run's ``failures`` and
    ``notes``, the ``backend`` and ``search`` provider, and its ``cost`` in cost units."""

    model_config = ConfigDict(extra="forbid")

    input: str = ""
    output: str = ""
    program: dict[str, Any] | None = None
    turns: list[AgentTurnView] = Field(default_factory=list)
    failures: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    backend: str = ""
    search: str = ""
    cost: float | None = None


def _text(value: Any) -> str:
    if value is None:
        return ""
    s = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return s if len(s) <= MAX_TEXT else s[: MAX_TEXT - 1] + "…"


def _failures(value: Any) -> list[str]:
    if not isinstance(value, list):
        return []
    out = []
    for f in value:
        if isinstance(f, Mapping):
            out.append(f"{f.get('kind', '?')}: {f.get('detail', '')}".rstrip(": "))
        else:
            out.append(_text(f))
    return out


def _turn(rec: Any, i: int) -> AgentTurnView:
    if not isinstance(rec, Mapping):
        return AgentTurnView(turn=i, kind="unreadable", argument=_text(rec))
    kind = str(rec.get("type", ""))
    turn = rec.get("turn")
    return AgentTurnView(
        turn=turn if isinstance(turn, int) else i,
        kind=kind,
        tool=_text(rec.get("tool")) if kind == "tool_call" else "",
        argument=_text(rec.get("arguments") if kind == "tool_call" else rec.get("answer")),
        observation=_text(rec.get("observation")),
        failures=_failures(rec.get("failures")),
    )


def agent_trajectory(trace: Sequence[Any] | None) -> AgentTrajectory | None:
    """The first ``tools/agent`` record of ``trace`` that ran the agent (a repair's cached
    copy repeats it), as an ``AgentTrajectory``; None when the trace has none."""
    for rec in trace or ():
        if not isinstance(rec, Mapping):
            continue
        if rec.get("responsibility") != "tools" or rec.get("step") != "agent":
            continue
        if rec.get("cached"):  # a repair reusing the first run: no trajectory of its own
            continue
        steps = rec.get("trajectory")
        program = rec.get("program")
        cost = rec.get("cost")
        notes = rec.get("notes")
        return AgentTrajectory(
            input=_text(rec.get("input")),
            output=_text(rec.get("output")),
            program=dict(program) if isinstance(program, Mapping) else None,
            turns=[_turn(s, i) for i, s in enumerate(steps, 1)] if isinstance(steps, list) else [],
            failures=_failures(rec.get("failures")),
            notes=[_text(n) for n in notes] if isinstance(notes, list) else [],
            backend=_text(rec.get("backend")),
            search=_text(rec.get("search")),
            cost=float(cost) if isinstance(cost, int | float) else None,
        )
    return None


__all__ = ["MAX_TEXT", "AgentTrajectory", "AgentTurnView", "agent_trajectory"]
