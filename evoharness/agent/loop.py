"""A bounded ReAct-style agent loop (Yao et al. 2023, "ReAct"): each turn the backend makes
one tool call or gives a final answer; the loop runs the tool and shows the observation back.

Bounds: ``max_turns`` (GenEvolve's 11 tool turns by default, ``AgentTool.max_turns``) and
``max_cost``, in cost units: each backend turn reports its own cost (an LLM's tokens,
priced by the adapter; the rule planner costs 0) and each tool call costs what its provider
says (the embedded search 1 unit, ``query_knowledge`` 0). A call that would exceed
``max_cost`` is not made. Nothing the backend answers can crash the loop: an unknown tool,
bad arguments, a tool or backend exception, an invalid final answer
(``evoharness.agent.program.validate_final``) and an exhausted budget each become a recorded
``ProgramFailure`` in the trajectory. After an invalid final answer the loop goes on (the
backend sees the failures) while turns remain. This module does no I/O; tools and backends
are given.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from evoharness.agent.library import ReferenceLibrary
from evoharness.agent.program import (
    FailureKind,
    ProgramFailure,
    PromptReferenceProgram,
    validate_final,
)
from evoharness.agent.search import SearchProvider
from evoharness.harness.schema import Skill
from evoharness.program import ImageRef

#: Longest text kept of a raw answer in the trajectory.
MAX_RECORDED_CHARS = 2000


@dataclass(frozen=True)
class ToolCall:
    """One tool call: the tool's ``name``, its ``arguments`` (a dict, or the raw text an LLM
    sent when it was not a JSON object) and the backend's ``call_id`` (LLM tool calling)."""

    name: str
    arguments: Any
    call_id: str = ""


@dataclass(frozen=True)
class FinalAnswer:
    """A final answer: the program as JSON text or as a decoded object (untrusted)."""

    content: Any


@dataclass(frozen=True)
class AgentTurn:
    """What a backend did in one turn and what that turn cost (cost units)."""

    action: ToolCall | FinalAnswer
    cost: float = 0.0
    usage: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the agent sees it: ``name``, ``description`` and a JSON schema of its
    ``parameters`` (the OpenAI tool-calling shape)."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class AgentTask:
    """What the agent works on: the user's ``prompt``, the ``tools`` it may call, the
    harness's ``skills`` (name → description), the ``images`` it may reference (transient id
    → description) and ``max_references`` per render."""

    prompt: str
    tools: tuple[ToolSpec, ...]
    skills: Mapping[str, str]
    images: Mapping[str, str]
    max_references: int


@runtime_checkable
class AgentBackend(Protocol):
    """Decides the next turn from the task and the trajectory so far (the records
    ``run_agent`` wrote: ``{"type": "tool_call", "tool", "arguments", "observation",
    "call_id"}`` and ``{"type": "final", "answer", "failures"}``). May raise; the loop
    records it as ``backend_error``."""

    name: str

    def next_turn(self, task: AgentTask, trajectory: Sequence[Mapping[str, Any]]) -> AgentTurn: ...


class Toolbox:
    """The agent's tools. ``search``: the provider of the ``search`` tool (None: not
    offered); ``search_top_k``: hits per search; ``skills``: the skill documents
    ``query_knowledge`` returns (None: not offered); ``library``: the reference library of
    ``image_search`` (None: not offered), ``library_top_k`` images per call, numbered
    ``IMG_<first_id>`` on (after the request's own references). ``found``: transient id →
    image ref of every image ``image_search`` showed."""

    def __init__(
        self,
        search: SearchProvider | None = None,
        *,
        search_top_k: int = 3,
        skills: Sequence[Skill] | None = None,
        library: ReferenceLibrary | None = None,
        library_top_k: int = 4,
        first_id: int = 1,
    ) -> None:
        self.search = search
        self.search_top_k = search_top_k
        self.skills = {s.name: s for s in skills} if skills is not None else None
        self.library = library
        self.library_top_k = library_top_k
        self.found: dict[str, ImageRef] = {}
        self._next_id = first_id
        self._handlers: dict[str, Callable[[dict[str, Any]], tuple[Any, float]]] = {}
        specs = []
        if search is not None:
            self._handlers["search"] = self._search
            specs.append(
                ToolSpec(
                    "search",
                    "Search text evidence (facts: colours of well-known things, typical "
                    "counts, which object is used with which). Returns the best hits.",
                    {
                        "type": "object",
                        "properties": {"query": {"type": "string", "minLength": 1}},
                        "required": ["query"],
                        "additionalProperties": False,
                    },
                )
            )
        if self.skills is not None:
            self._handlers["query_knowledge"] = self._query_knowledge
            specs.append(
                ToolSpec(
                    "query_knowledge",
                    "Return one of the harness's skill documents (generation know-how) by name.",
                    {
                        "type": "object",
                        "properties": {"name": {"type": "string", "minLength": 1}},
                        "required": ["name"],
                        "additionalProperties": False,
                    },
                )
            )
        if library is not None:
            self._handlers["image_search"] = self._image_search
            specs.append(
                ToolSpec(
                    "image_search",
                    "Search the reference-image library by text. Returns candidate images "
                    "with transient ids (IMG_…) and captions; reference one in the program "
                    "by its id and call it 'image i' in gen_prompt.",
                    {
                        "type": "object",
                        "properties": {"query": {"type": "string", "minLength": 1}},
                        "required": ["query"],
                        "additionalProperties": False,
                    },
                )
            )
        self.specs = tuple(specs)

    def _image_search(self, args: dict[str, Any]) -> tuple[Any, float]:
        assert self.library is not None
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ValueError("image_search needs a non-empty string 'query'")
        out = []
        for img in self.library.search(query, self.library_top_k):
            known = next((i for i, r in self.found.items() if r == img.ref), None)
            if known is None:
                known = f"IMG_{self._next_id:03d}"
                self._next_id += 1
                self.found[known] = img.ref
            out.append({"img_id": known, "caption": img.caption, "score": round(img.score, 4)})
        return out, float(self.library.cost_per_call)

    def _search(self, args: dict[str, Any]) -> tuple[Any, float]:
        assert self.search is not None
        query = args.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ValueError("search needs a non-empty string 'query'")
        hits = self.search.search(query, self.search_top_k)
        return [h.as_observation() for h in hits], float(self.search.cost_per_call)

    def _query_knowledge(self, args: dict[str, Any]) -> tuple[Any, float]:
        assert self.skills is not None
        name = args.get("name")
        if not isinstance(name, str) or not name.strip():
            raise ValueError("query_knowledge needs a non-empty string 'name'")
        skill = self.skills.get(name.strip())
        if skill is None:
            raise LookupError(
                f"no skill document named {name!r}; the harness has {sorted(self.skills)}"
            )
        return {"name": skill.name, "description": skill.description, "body": skill.body}, 0.0

    def cost_of(self, name: str) -> float:
        """What one call of tool ``name`` costs (0 for an unknown tool)."""
        if name == "search" and self.search is not None:
            return float(self.search.cost_per_call)
        if name == "image_search" and self.library is not None:
            return float(self.library.cost_per_call)
        return 0.0

    def call(self, name: str, arguments: Any) -> tuple[Any, float, ProgramFailure | None]:
        """Run one call. Returns ``(observation, cost, failure)``; a failure's observation is
        ``{"error": …}`` (an unknown tool, arguments that are not a JSON object, a tool that
        raised). Never raises."""
        handler = self._handlers.get(name)
        if handler is None:
            msg = f"unknown tool {name!r}; available: {sorted(self._handlers)}"
            return {"error": msg}, 0.0, ProgramFailure("unknown_tool", msg)
        args = arguments
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except ValueError as exc:
                msg = f"{name}: arguments are not JSON: {exc}"
                return {"error": msg}, 0.0, ProgramFailure("bad_tool_arguments", msg)
        if not isinstance(args, dict):
            msg = f"{name}: arguments must be a JSON object, got {type(args).__name__}"
            return {"error": msg}, 0.0, ProgramFailure("bad_tool_arguments", msg)
        try:
            obs, cost = handler(args)
        except LookupError as exc:
            msg = str(exc.args[0]) if exc.args else str(exc)
            return {"error": msg}, 0.0, ProgramFailure("unknown_skill", msg)
        except Exception as exc:  # noqa: BLE001 - a tool's failure is an observation
            msg = f"{name} failed: {type(exc).__name__}: {exc}"
            kind: FailureKind = (
                "bad_tool_arguments" if isinstance(exc, ValueError) else "tool_error"
            )
            return {"error": msg}, 0.0, ProgramFailure(kind, msg)
        return obs, cost, None


@dataclass
class AgentResult:
    """The loop's outcome: the valid ``program`` (None when none was given in budget), the
    ``trajectory`` (every call, observation and answer), the ``failures`` recorded, the
    ``turns`` used and the ``cost`` spent (cost units)."""

    program: PromptReferenceProgram | None
    trajectory: list[dict[str, Any]]
    failures: list[ProgramFailure]
    turns: int
    cost: float
    usage: dict[str, int] = field(default_factory=dict)


def _recordable(value: Any) -> Any:
    if isinstance(value, str | bytes):
        text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
        return text if len(text) <= MAX_RECORDED_CHARS else text[:MAX_RECORDED_CHARS] + "…"
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return _recordable(repr(value))
    return value


def run_agent(
    task: AgentTask,
    backend: AgentBackend,
    toolbox: Toolbox,
    *,
    max_turns: int = 11,
    max_cost: float = 20.0,
) -> AgentResult:
    """Run the loop (see the module docstring). Raises ``ValueError`` for ``max_turns`` < 1
    or ``max_cost`` <= 0; nothing the backend or a tool does raises."""
    if max_turns < 1:
        raise ValueError(f"max_turns must be >= 1, got {max_turns}")
    if max_cost <= 0:
        raise ValueError(f"max_cost must be > 0, got {max_cost}")
    trajectory: list[dict[str, Any]] = []
    failures: list[ProgramFailure] = []
    usage: dict[str, int] = {}
    cost = 0.0

    def fail(f: ProgramFailure, record: dict[str, Any] | None = None) -> None:
        failures.append(f)
        if record is not None:
            record.setdefault("failures", []).append(f.as_record())

    for turn in range(1, max_turns + 1):
        try:
            step = backend.next_turn(task, trajectory)
            if not isinstance(step, AgentTurn):
                raise TypeError(f"backend returned {type(step).__name__}, not AgentTurn")
        except Exception as exc:  # noqa: BLE001 - the backend is untrusted
            rec = {"turn": turn, "type": "backend_error"}
            trajectory.append(rec)
            fail(ProgramFailure("backend_error", f"{type(exc).__name__}: {exc}"), rec)
            return AgentResult(None, trajectory, failures, turn, cost, usage)
        cost += max(0.0, float(step.cost))
        for k, v in step.usage.items():
            usage[k] = usage.get(k, 0) + int(v)
        action = step.action
        if isinstance(action, ToolCall):
            rec = {
                "turn": turn,
                "type": "tool_call",
                "tool": _recordable(action.name),
                "arguments": _recordable(action.arguments),
                "call_id": action.call_id,
            }
            trajectory.append(rec)
            if cost + toolbox.cost_of(action.name) > max_cost:
                rec["observation"] = {"error": "cost budget exhausted"}
                fail(
                    ProgramFailure(
                        "cost_budget", f"cost {cost:g} + this call exceeds max_cost {max_cost:g}"
                    ),
                    rec,
                )
                return AgentResult(None, trajectory, failures, turn, cost, usage)
            obs, tool_cost, failure = toolbox.call(str(action.name), action.arguments)
            cost += tool_cost
            rec["observation"] = obs
            rec["cost"] = tool_cost
            if failure is not None:
                fail(failure, rec)
        elif isinstance(action, FinalAnswer):
            rec = {"turn": turn, "type": "final", "answer": _recordable(action.content)}
            trajectory.append(rec)
            program, found = validate_final(
                action.content,
                skills=task.skills.keys(),
                image_ids=set(task.images) | set(toolbox.found),
                max_references=task.max_references,
            )
            if program is not None:
                rec["program"] = program.model_dump(mode="json")
                return AgentResult(program, trajectory, failures, turn, cost, usage)
            for f in found:
                fail(f, rec)
        else:
            rec = {"turn": turn, "type": "backend_error"}
            trajectory.append(rec)
            fail(ProgramFailure("backend_error", f"unknown action {type(action).__name__}"), rec)
            return AgentResult(None, trajectory, failures, turn, cost, usage)
        if cost > max_cost:
            fail(ProgramFailure("cost_budget", f"cost {cost:g} exceeds max_cost {max_cost:g}"))
            return AgentResult(None, trajectory, failures, turn, cost, usage)
    fail(ProgramFailure("turn_budget", f"no valid final answer in {max_turns} turns"))
    return AgentResult(None, trajectory, failures, max_turns, cost, usage)


__all__ = [
    "AgentBackend",
    "AgentResult",
    "AgentTask",
    "AgentTurn",
    "FinalAnswer",
    "ToolCall",
    "ToolSpec",
    "Toolbox",
    "run_agent",
]
