"""The harness runtime: compile a prompt through the five responsibilities and run the
middleware (see ``evoharness.runtime.runtime``). Pure: reaches generators, verifiers,
extractors, memory and tool backends only through ports."""

from evoharness.runtime.bundle_memory import BundleMemory
from evoharness.runtime.extract import RuleExtractor, parse_prompt, prompt_features, token_count
from evoharness.runtime.layout import TEXT_LABEL, plan_layout
from evoharness.runtime.rewrite import apply_rewrite
from evoharness.runtime.runtime import (
    REPAIR_ACTIONS,
    Compiled,
    HarnessCompileError,
    HarnessRuntime,
    RepairContext,
    RuntimeResult,
    check_harness,
    score_evidence,
)
from evoharness.runtime.tool_backends import (
    KnowledgeLookup,
    LayoutPlanner,
    ReferenceRetriever,
    ToolBackends,
)

__all__ = [
    "REPAIR_ACTIONS",
    "TEXT_LABEL",
    "BundleMemory",
    "Compiled",
    "HarnessCompileError",
    "HarnessRuntime",
    "KnowledgeLookup",
    "LayoutPlanner",
    "ReferenceRetriever",
    "ToolBackends",
    "RepairContext",
    "RuleExtractor",
    "RuntimeResult",
    "apply_rewrite",
    "check_harness",
    "parse_prompt",
    "plan_layout",
    "prompt_features",
    "score_evidence",
    "token_count",
]
