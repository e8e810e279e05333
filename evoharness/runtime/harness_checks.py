"""Static compile checks on a harness, beyond its schema: ``check_harness`` and
``HarnessCompileError``, run when a ``HarnessRuntime`` is built and by the proposal checks."""

from __future__ import annotations

import string
from typing import get_args

from evoharness.harness.schema import AgentTool, Harness, RewriteKind
from evoharness.program import GenerationParams

#: Rewrite kinds a policy, skill, memory bundle or repair may name.
REWRITE_KINDS: tuple[str, ...] = get_args(RewriteKind)
#: Generation parameters a skill, memory bundle or policy may set.
PARAM_FIELDS = tuple(GenerationParams.model_fields)


class HarnessCompileError(ValueError):
    """A harness that cannot compile. ``responsibility`` and ``field`` (a dotted path in the
    harness document, spelt as pydantic's validation errors spell it: ``tools.tools.1.route``)
    name the problem; the message starts with ``responsibility: field:`` and names the skill or
    tool (``evoharness.harness.io.locate_field`` finds the field's file and line)."""

    def __init__(self, responsibility: str, field_path: str, message: str) -> None:
        self.responsibility = responsibility
        self.field = field_path
        super().__init__(f"{responsibility}: {field_path}: {message}")


def check_harness(harness: Harness) -> None:
    """Static compile checks beyond the schema. Raises ``HarnessCompileError`` for: a template
    with a field other than ``{prompt}`` (or without ``{prompt}``, or with unbalanced braces), a
    skill effect with a missing/invalid value (``rewrite`` not a rewrite kind, ``use_tool``
    naming an undeclared tool, ``set_params`` with an unknown or non-numeric parameter), and
    an enabled agent with ``route: skills`` that no skill's ``use_tool`` effect names (it
    could never run)."""
    tpl = harness.policy.template
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(tpl) if f is not None]
    except ValueError as exc:
        raise HarnessCompileError("policy", "policy.template", f"invalid template: {exc}") from None
    unknown = sorted({f for f in fields if f != "prompt"})
    if unknown:
        raise HarnessCompileError(
            "policy",
            "policy.template",
            f"unknown template field(s) {unknown}; only {{prompt}} is allowed",
        )
    if "prompt" not in fields:
        raise HarnessCompileError("policy", "policy.template", "the template must contain {prompt}")
    tools = {t.name for t in harness.tools.tools}
    for si, skill in enumerate(harness.skills.skills):
        for ei, eff in enumerate(skill.effects):
            where = f"skills.skills.{si}.effects.{ei}"
            who = f"skill {skill.name!r}"
            if eff.kind in ("rewrite", "negative_terms", "append_text", "use_tool") and not (
                eff.value and eff.value.strip()
            ):
                raise HarnessCompileError(
                    "skills", f"{where}.value", f"{who}: {eff.kind} needs a value"
                )
            if eff.kind == "rewrite" and eff.value not in REWRITE_KINDS:
                raise HarnessCompileError(
                    "skills",
                    f"{where}.value",
                    f"{who}: unknown rewrite {eff.value!r}; known: {list(REWRITE_KINDS)}",
                )
            if eff.kind == "use_tool" and eff.value not in tools:
                raise HarnessCompileError(
                    "skills",
                    f"{where}.value",
                    f"{who} uses tool {eff.value!r}, which is not declared in tools "
                    f"(declared: {sorted(tools)})",
                )
            if eff.kind == "set_params":
                for k, v in eff.params.items():
                    if k not in PARAM_FIELDS:
                        raise HarnessCompileError(
                            "skills",
                            f"{where}.params.{k}",
                            f"{who}: unknown parameter; known: {list(PARAM_FIELDS)}",
                        )
                    if isinstance(v, str) or isinstance(v, bool):
                        raise HarnessCompileError(
                            "skills", f"{where}.params.{k}", f"{who}: must be a number, got {v!r}"
                        )
    for ti, tool in enumerate(harness.tools.tools):
        if isinstance(tool, AgentTool) and tool.enabled and tool.route == "skills":
            named = any(
                e.kind == "use_tool" and e.value == tool.name
                for s in harness.skills.skills
                for e in s.effects
            )
            if not named:
                raise HarnessCompileError(
                    "tools",
                    f"tools.tools.{ti}.route",
                    f"agent {tool.name!r} is routed by skills but no skill's use_tool names "
                    "it: it would never run",
                )


#: Tools only an agent calls (offered to it; they never run on their own).
AGENT_ONLY_TOOLS = ("search", "image_search", "query_knowledge")


def harness_warnings(harness: Harness) -> list[tuple[str, str]]:
    """What compiles but does nothing: ``(field path, message)`` per enabled tool that only
    an agent calls (``AGENT_ONLY_TOOLS``) in a harness with no enabled agent. Never raises."""
    if any(isinstance(t, AgentTool) and t.enabled for t in harness.tools.tools):
        return []
    return [
        (
            f"tools.tools.{ti}",
            f"tool {tool.name!r} ({tool.kind}) is offered only to an agent and the harness has "
            "no enabled agent: it never runs",
        )
        for ti, tool in enumerate(harness.tools.tools)
        if tool.kind in AGENT_ONLY_TOOLS and tool.enabled
    ]


__all__ = [
    "AGENT_ONLY_TOOLS",
    "PARAM_FIELDS",
    "REWRITE_KINDS",
    "HarnessCompileError",
    "check_harness",
    "harness_warnings",
]
