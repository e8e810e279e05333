"""Memory templates: a stored guideline for the failing feature's prompts, and the removal of
other guidelines that fire on them while they still fail.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from evoharness.harness.patch import Patch
from evoharness.harness.schema import Harness
from evoharness.trace.models import FailureCluster
from evoharness.trace.patch_templates._common import (
    Template,
    _add,
    _drop_each,
    _patch,
    _replace,
)

_GUIDELINES: Final[dict[str, str]] = {
    "count": "Spell every count as a word and give each counted object its own box.",
    "negation": "Never name an excluded object in the positive prompt; list it in the negative prompt.",
    "color": "Give each coloured object its own clause so colours do not leak between objects.",
    "text": "Put text to render in double quotes and keep it short.",
    "long_prompt": "Keep the prompt under 77 tokens; drop filler words before object names.",
    "position": "Place related objects with explicit boxes rather than words.",
    "multi_object": "Name every object early in the prompt, each once.",
}


def _memory_guideline(feature: str) -> Callable[[Harness, FailureCluster], list[Patch]]:
    def make(h: Harness, c: FailureCluster) -> list[Patch]:
        text = _GUIDELINES.get(feature, "Check every constraint of the prompt before finishing.")
        if any(g.trigger == feature and g.text == text for g in h.memory.guidelines):
            return []
        ops: list[dict[str, Any]] = [
            _add("/memory/guidelines/-", {"trigger": feature, "text": text})
        ]
        if not h.memory.enabled:
            ops.append(_replace("/memory/enabled", True))
        return [
            _patch(
                "memory",
                ops,
                f"a stored guideline for {feature} prompts",
                f"{feature} prompts get the guideline",
            )
        ]

    return make


def _memory_drop_guideline(feature: str) -> Template:
    """Remove guidelines that fire on ``feature`` prompts (other than this proposer's own):
    the failures persist with them, the gate decides whether the harness is better without."""

    def make(h: Harness, c: FailureCluster) -> list[Patch]:
        ours = _GUIDELINES.get(feature)
        picked = [
            (i, f"the stored guideline {g.text!r}", "the guideline")
            for i, g in enumerate(h.memory.guidelines)
            if g.trigger == feature and g.text != ours
        ]
        return _drop_each(
            "memory",
            "/memory/guidelines",
            picked,
            feature,
            "a misleading guideline is worse than none",
        )

    return make
