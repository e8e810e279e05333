"""Tool templates: a layout planner (one box per object; GLIGEN, Li et al. 2023; LayoutGPT,
Feng et al. 2023) for the failing feature's prompts, or for the combined features.
"""

from __future__ import annotations

from typing import Any

from evoharness.harness.patch import Patch
from evoharness.harness.schema import Harness
from evoharness.trace.models import FailureCluster
from evoharness.trace.patch_templates._common import (
    _LAYOUT,
    LAYOUT_COMBINED,
    Template,
    _add,
    _layout_tool,
    _patch,
    _replace,
)


def _tools_layout(feature: str, combined: bool = False) -> Template:
    """A layout planner for ``feature`` prompts only, or (``combined``) for ``feature`` and
    ``LAYOUT_COMBINED`` together; with a planner declared, it is enabled and widened."""

    def make(h: Harness, c: FailureCluster) -> list[Patch]:
        feats = sorted({*LAYOUT_COMBINED, feature}) if combined else [feature]
        why = (
            f"a spatial layout (one box per object) conditions where and how many objects are "
            f"drawn; planned for {', '.join(feats)} prompts"
        )
        effect = f"{', '.join(feats)} constraints met more often; other prompts unchanged"
        found = _layout_tool(h)
        if found is None:
            tool = {
                "kind": _LAYOUT,
                "name": "layout",
                "planner": "deterministic",
                "when": feats,
                "min_objects": 1,
            }
            return [_patch("tools", [_add("/tools/tools/-", tool)], why, effect)]
        i, t = found
        ops: list[dict[str, Any]] = []
        if not t.enabled:
            ops.append(_replace(f"/tools/tools/{i}/enabled", True))
        ops += [_add(f"/tools/tools/{i}/when/-", f) for f in feats if f not in t.when]
        if t.min_objects > 1:
            ops.append(_replace(f"/tools/tools/{i}/min_objects", 1))
        return [_patch("tools", ops, why, effect)] if ops else []

    return make


def _layout_levers(feature: str) -> list[Template]:
    """The per-feature layout lever and, as a separate candidate, the combination."""
    return [_tools_layout(feature), _tools_layout(feature, combined=True)]
