"""What every patch template shares: the JSON-patch op builders, the harness lookups
(the layout tool, a middleware stage), the generation parameters the templates tune, and the
prompt reading (what the failing prompts negate or ask for, read by the fixed rule extractor
from the prompt text, never from the constraint labels).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from evoharness.agent.planner import find_lookups, find_textured
from evoharness.harness.patch import Patch
from evoharness.harness.schema import Harness, Responsibility
from evoharness.runtime.extract import RuleExtractor
from evoharness.runtime.steps.agent import agent_route, agent_tool
from evoharness.tasks.models import ConstraintType
from evoharness.trace.models import FailureCluster

#: Tuned generation parameters: guidance 7.5 is Stable Diffusion's default (Rombach et al.
#: 2022), where prompt adherence is high before over-saturation sets in at large scales;
#: 40 steps is well above the few-step regime where samples stay noisy.
GOOD_GUIDANCE: Final = 7.5
GOOD_STEPS: Final = 40

_LAYOUT = "layout_planner"
Template = Callable[[Harness, FailureCluster], list[Patch]]
_EXTRACTOR = RuleExtractor()
#: The features a combined layout lever switches on together.
LAYOUT_COMBINED: Final = ("color", "count", "position")


def _add(path: str, value: Any) -> dict[str, Any]:
    return {"op": "add", "path": path, "value": value}


def _replace(path: str, value: Any) -> dict[str, Any]:
    return {"op": "replace", "path": path, "value": value}


def _patch(resp: str, ops: list[dict[str, Any]], why: str, effect: str) -> Patch:
    return Patch(
        responsibility=Responsibility(resp), ops=ops, rationale=why, expected_effect=effect
    )


def _layout_tool(h: Harness) -> tuple[int, Any] | None:
    for i, t in enumerate(h.tools.tools):
        if t.kind == _LAYOUT:
            return i, t
    return None


def _stage(h: Harness, kind: str) -> tuple[int, Any] | None:
    for i, s in enumerate(h.middleware.stages):
        if s.kind == kind:
            return i, s
    return None


def _norm_effect(e: dict[str, Any]) -> tuple[str, Any, tuple[tuple[str, Any], ...]]:
    return (e.get("kind", ""), e.get("value"), tuple(sorted((e.get("params") or {}).items())))


def _with_layout(h: Harness) -> list[dict[str, Any]]:
    found = _layout_tool(h)
    return [{"kind": "use_tool", "value": found[1].name}] if found else []


def _rewrite_effect(kind: str) -> dict[str, Any]:
    return {"kind": "rewrite", "value": kind}


def _in_prompts(c: FailureCluster, *types: ConstraintType) -> list[str]:
    """Subjects of the constraints of ``types`` that the fixed rule extractor reads from the
    text of the cluster's failing prompts (``c.examples[*]["prompt"]``; never the constraint
    labels), each once, in first-seen order: ``ConstraintType.negative`` gives the objects
    the prompts negate, ``object`` and ``count`` those they ask for."""
    out: list[str] = []
    for ex in c.examples:
        prompt = ex.get("prompt")
        if not isinstance(prompt, str):
            continue
        for con in _EXTRACTOR.extract(prompt):
            if con.type in types and con.subject and con.subject not in out:
                out.append(con.subject)
    return out


def _drop_each(
    resp: str, path: str, picked: list[tuple[int, str, str]], feature: str, risk: str
) -> list[Patch]:
    """One patch per ``(index, what, without)`` of ``picked``, in order: remove
    ``<path>/<index>`` from the harness, because ``what`` fires on the failing ``feature``
    prompts and they still fail (``risk`` says what keeping it may cost); the expected effect
    is ``feature`` prompts compiled without ``without``. Narrowing by removal: the gate
    decides whether the harness is better without."""
    return [
        _patch(
            resp,
            [{"op": "remove", "path": f"{path}/{i}"}],
            f"{what} fires on the failing {feature} prompts and they still fail; {risk}",
            f"{feature} prompts compiled without {without}",
        )
        for i, what, without in picked
    ]


def _example_prompts(c: FailureCluster, reads: Callable[[str], list[Any]]) -> list[str]:
    """The cluster's failing prompts (``c.examples[*]["prompt"]``) in which ``reads`` finds
    something, each once, in first-seen order."""
    out: list[str] = []
    for ex in c.examples:
        prompt = ex.get("prompt")
        if isinstance(prompt, str) and prompt not in out and reads(prompt):
            out.append(prompt)
    return out


def referring_prompts(c: FailureCluster) -> list[str]:
    """The cluster's failing prompts (``c.examples[*]["prompt"]``) that only *refer* to an
    attribute of a well-known thing ("a cup in the colour of a flamingo", "as many apples as
    a spider has legs", "the object used with a tennis ball"), read from the prompt text by
    the agent's rule planner (``evoharness.agent.planner.find_lookups``), each once, in
    first-seen order. A text encoder draws what such a prompt names (the flamingo), not what
    it means (pink); looking the attribute up before generation is the GenEvolve agent's
    remedy. Reads prompt text only, never the constraint labels."""
    return _example_prompts(c, find_lookups)


def textured_prompts(c: FailureCluster) -> list[str]:
    """The cluster's failing prompts (``c.examples[*]["prompt"]``) that name an object by a
    material or pattern ("a wooden chair", "a striped cat"; read by the agent's rule planner,
    ``evoharness.agent.planner.find_textured``), each once, in first-seen order. Text
    encoders bind such words to their object poorly (T2I-CompBench's texture category); a
    reference image of the object in that material is the agent's ``image_search`` remedy.
    Reads prompt text only, never the constraint labels."""
    return _example_prompts(c, find_textured)


_AGENT_EXTRACTOR: Final = RuleExtractor()


def agent_runs_on(h: Harness, prompt: str) -> bool:
    """Whether the harness's enabled agent runs on ``prompt``: routed ``always``, or
    ``skills`` with an active skill naming it (``runtime.steps.agent.agent_route``, with the
    rule extractor). False without an enabled agent."""
    tool = agent_tool(h)
    if tool is None:
        return False
    return tool.route == "always" or agent_route(h, prompt, _AGENT_EXTRACTOR) is not None
