"""The rule proposer's patch templates, one module per responsibility (as ``runtime/steps/``
has one compile step per responsibility): ``policy``, ``tools``, ``skills``, ``middleware``,
``memory``; ``_common`` holds what they share and ``table`` maps a failure symptom to the
templates of every responsibility. A template is a function (harness, cluster) → patches; it
returns no patch when its lever is already pulled. ``evoharness.trace.rule_proposer`` keeps
the localizer and drives the templates (``propose``).
"""

from __future__ import annotations

from evoharness.trace.patch_templates._common import (
    GOOD_GUIDANCE,
    GOOD_STEPS,
    LAYOUT_COMBINED,
    Template,
)
from evoharness.trace.patch_templates.table import FEATURE, templates_for

__all__ = ["FEATURE", "GOOD_GUIDANCE", "GOOD_STEPS", "LAYOUT_COMBINED", "Template", "templates_for"]
