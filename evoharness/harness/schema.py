"""The harness document: five responsibilities around a frozen generator.

A harness is a versioned JSON document (``SCHEMA_VERSION``) with one section per
responsibility. Each model forbids unknown fields, so a patch that invents a field (for
example a ``generator`` key: the generator is frozen outside the harness) breaks the schema
and is rejected.

Responsibilities (docs/architecture.md):

- **Policy**: prompt compilation: template, rewrites, negative-prompt rules, generation
  parameters (inside ``evoharness.program.PARAM_BOUNDS``) and which prompt reader to use.
- **Tools**: declared tools with config: layout planner, reference retrieval, knowledge
  lookup, and the agent with its ``search`` and ``query_knowledge`` tools. Never the generator.
- **Skills**: named Markdown documents with trigger rules and declared effects on compilation.
- **Middleware**: ordered stages: skill routing, verify-and-repair (with a repair budget),
  best-of-N selection (N lives here).
- **Memory**: experience bundles and prompt guidelines, and how they are retrieved.
"""

from __future__ import annotations

import enum
import json
import re
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from evoharness.program import GenerationParams

SCHEMA_VERSION: Final = 1

_NAME = re.compile(r"^[a-z0-9][a-z0-9_\-]{0,63}$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Responsibility(enum.StrEnum):
    """The five responsibilities of a harness; ``no_patch`` is not one (see attribution)."""

    policy = "policy"
    tools = "tools"
    skills = "skills"
    middleware = "middleware"
    memory = "memory"


# --------------------------------------------------------------------------------- Policy

RewriteKind = Literal[
    "move_negations",  # "no X"/"without X" removed from the prompt, X added to negative_prompt
    "bind_attributes",  # one clause per coloured object ("a red car. a blue dog.")
    "compress",  # drop filler words so the prompt fits max_prompt_tokens
    "spell_counts",  # numerals → words and plural agreement ("2 dog" → "two dogs")
    "enumerate_instances",  # "three cats" → "a cat, a second cat and a third cat"
    "quote_text",  # make sure rendered text is in double quotes
]


class Rewrite(_Strict):
    """One prompt rewrite, applied in list order when ``enabled``."""

    kind: RewriteKind
    enabled: bool = True


class Policy(_Strict):
    """Prompt compilation.

    ``template`` is a Python format string; the only allowed field is ``{prompt}``.
    ``negative_prompt`` is always sent; ``negative_terms`` are appended to it, comma-separated.
    ``max_prompt_tokens`` is the token budget the ``compress`` rewrite targets (CLIP's text
    encoder context is 77 tokens, Radford et al. 2021).
    """

    template: str = "{prompt}"
    rewrites: list[Rewrite] = Field(default_factory=list)
    negative_prompt: str = ""
    negative_terms: list[str] = Field(default_factory=list)
    params: GenerationParams = Field(default_factory=GenerationParams)
    max_prompt_tokens: int = Field(default=77, ge=8, le=512)
    extractor: Literal["rule", "llm"] = "rule"


# ---------------------------------------------------------------------------------- Tools


class _Tool(_Strict):
    name: str
    enabled: bool = True

    @field_validator("name")
    @classmethod
    def _valid_name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError(f"tool name {v!r} must match {_NAME.pattern}")
        return v


class LayoutPlannerTool(_Tool):
    """Turns extracted objects, counts, colours and relations into layout boxes.

    ``planner``: ``deterministic`` (grid planner) or ``llm``. The planner runs when the prompt
    shows any of ``when`` (extracted prompt features) and at least ``min_objects`` objects.
    ``margin`` is the free border as a fraction of the image side.
    """

    kind: Literal["layout_planner"] = "layout_planner"
    planner: Literal["deterministic", "llm"] = "deterministic"
    when: list[str] = Field(default_factory=lambda: ["count", "position", "color"])
    min_objects: int = Field(default=1, ge=1)
    margin: float = Field(default=0.05, ge=0.0, le=0.3)


class ReferenceRetrievalTool(_Tool):
    """Retrieves reference images for the prompt from ``source`` (an S3 prefix or index)."""

    kind: Literal["reference_retrieval"] = "reference_retrieval"
    source: str = ""
    top_k: int = Field(default=1, ge=1, le=8)


class KnowledgeLookupTool(_Tool):
    """Looks up background knowledge for the prompt (e.g. what an unusual word depicts)."""

    kind: Literal["knowledge_lookup"] = "knowledge_lookup"
    source: str = ""


class SearchTool(_Tool):
    """Text evidence for the agent (``evoharness.agent.search``): ``provider`` ``embedded``
    (the offline knowledge base, the default) or ``http`` (the search API the deployment
    configures: endpoint and key live in the runtime's settings, never in the harness);
    ``top_k`` hits per call. Offered to the agent only; it never runs on its own."""

    kind: Literal["search"] = "search"
    provider: Literal["embedded", "http"] = "embedded"
    top_k: int = Field(default=3, ge=1, le=10)


class ImageSearchTool(_Tool):
    """Lets the agent search the deployment's reference library by text
    (``evoharness.agent.library``); ``top_k`` candidates per call. Offered to the agent only,
    and only when the runtime was given a library."""

    kind: Literal["image_search"] = "image_search"
    top_k: int = Field(default=4, ge=1, le=16)


class QueryKnowledgeTool(_Tool):
    """Lets the agent read one of the harness's skill documents by name."""

    kind: Literal["query_knowledge"] = "query_knowledge"


class AgentTool(_Tool):
    """A bounded ReAct-style agent that runs before the policy reads the prompt
    (``evoharness.agent``): it calls the harness's enabled ``search``, ``image_search`` and
    ``query_knowledge`` tools and answers a prompt-reference program whose ``gen_prompt`` replaces the prompt.
    ``backend``: ``rule`` (the embedded planner) or ``llm`` (the runtime's chat backend;
    falls back to ``rule``, traced, when none is configured). ``max_turns``: tool turns plus
    the final answer (11 in GenEvolve); ``max_cost``: cost units (one embedded search = 1);
    ``max_references``: references per render (2 in GenEvolve). ``route``: ``always`` (the
    agent runs on every request) or ``skills`` (it runs only on a request where an active
    skill's ``use_tool`` effect names it, the skills routed on the request's own prompt
    before the agent runs; ``evoharness.runtime.steps.agent.agent_route``)."""

    kind: Literal["agent"] = "agent"
    backend: Literal["rule", "llm"] = "rule"
    max_turns: int = Field(default=11, ge=1, le=32)
    max_cost: float = Field(default=20.0, gt=0, le=1000)
    max_references: int = Field(default=2, ge=0, le=4)
    route: Literal["always", "skills"] = "always"


Tool = Annotated[
    LayoutPlannerTool
    | ReferenceRetrievalTool
    | KnowledgeLookupTool
    | SearchTool
    | ImageSearchTool
    | QueryKnowledgeTool
    | AgentTool,
    Field(discriminator="kind"),
]


class Tools(_Strict):
    """Declared tools. Names are unique; at most one ``agent``."""

    tools: list[Tool] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique(self) -> Tools:
        # the error's ``ctx["at"]`` is the offending tool's path in this model, which
        # ``evoharness.harness.io`` adds to the location (so a harness directory's error
        # names the tool's line in tools.yaml, not the ``tools:`` key's)
        names = [t.name for t in self.tools]
        for i, n in enumerate(names):
            if n in names[:i]:
                raise PydanticCustomError(
                    "duplicate_tool",
                    "duplicate tool name '{name}' (also tools.tools.{first})",
                    {"name": n, "first": names.index(n), "at": ("tools", i)},
                )
        agents = [i for i, t in enumerate(self.tools) if t.kind == "agent"]
        if len(agents) > 1:
            raise PydanticCustomError(
                "agent_twice",
                "at most one tool of kind 'agent' may be declared; '{name}' is a second "
                "one (the first: tools.tools.{first})",
                {"name": names[agents[1]], "first": agents[0], "at": ("tools", agents[1])},
            )
        return self


# --------------------------------------------------------------------------------- Skills


class Trigger(_Strict):
    """When a skill fires. ``feature``: an extracted prompt feature (``count``, ``color``,
    ``position``, ``text``, ``negation``, ``long_prompt``, ``multi_object``); ``keyword``: a word
    in the prompt (case-insensitive, whole word); ``regex``: a Python regex searched in it."""

    kind: Literal["feature", "keyword", "regex"]
    value: str = Field(min_length=1)

    @model_validator(mode="after")
    def _regex_compiles(self) -> Trigger:
        if self.kind == "regex":
            try:
                re.compile(self.value)
            except re.error as exc:
                raise ValueError(f"trigger regex {self.value!r} does not compile: {exc}") from exc
        return self


EffectKind = Literal[
    "rewrite",  # value: a RewriteKind applied while the skill is active
    "negative_terms",  # value: comma-separated terms added to the negative prompt
    "append_text",  # value: text appended to the compiled prompt
    "set_params",  # params: {steps?, guidance_scale?} (kept inside bounds)
    "use_tool",  # value: the name of a declared tool to run while the skill is active
]


class Effect(_Strict):
    """A declared, inspectable change a skill makes to compilation."""

    kind: EffectKind
    value: str | None = None
    params: dict[str, float | int | str] = Field(default_factory=dict)


class Skill(_Strict):
    """A named Markdown document with trigger rules and declared effects.

    On disk: ``skills/<name>.md`` with YAML front matter (``description``, ``triggers``,
    ``effects``, ``priority``) and ``body`` as the Markdown text.
    """

    name: str
    description: str = ""
    triggers: list[Trigger] = Field(default_factory=list)
    effects: list[Effect] = Field(default_factory=list)
    priority: int = 0
    body: str = ""

    @field_validator("name")
    @classmethod
    def _valid_name(cls, v: str) -> str:
        if not _NAME.match(v):
            raise ValueError(f"skill name {v!r} must match {_NAME.pattern}")
        return v

    @field_validator("body")
    @classmethod
    def _normalize_body(cls, v: str) -> str:
        # Markdown files are read with universal newlines and front matter strips the ends,
        # so the canonical body has LF newlines and no surrounding whitespace.
        return v.replace("\r\n", "\n").replace("\r", "\n").strip()


class Skills(_Strict):
    """The harness's skills. Names are unique."""

    skills: list[Skill] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique(self) -> Skills:
        names = [s.name for s in self.skills]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"duplicate skill names: {sorted(dup)}")
        return self


# ----------------------------------------------------------------------------- Middleware


class SkillRoutingStage(_Strict):
    """Activates skills whose triggers match, at most ``max_active`` by priority."""

    kind: Literal["skill_routing"] = "skill_routing"
    max_active: int = Field(default=3, ge=1, le=16)


class VerifyAndRepairStage(_Strict):
    """Verify the image; on failure re-compile with the failing evidence and a new seed
    (``seed + seed_offset * attempt``), at most ``repair_budget`` times."""

    kind: Literal["verify_and_repair"] = "verify_and_repair"
    repair_budget: int = Field(default=1, ge=0, le=8)
    seed_offset: int = Field(default=1000, ge=1)


class BestOfNStage(_Strict):
    """Generate ``n`` candidates (seeds ``seed + i*seed_offset``) and keep the one with the
    highest verifier score."""

    kind: Literal["best_of_n"] = "best_of_n"
    n: int = Field(default=2, ge=1, le=16)
    seed_offset: int = Field(default=7919, ge=1)


Stage = Annotated[
    SkillRoutingStage | VerifyAndRepairStage | BestOfNStage, Field(discriminator="kind")
]


class Middleware(_Strict):
    """Ordered middleware stages; each kind appears at most once."""

    stages: list[Stage] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_kinds(self) -> Middleware:
        kinds = [s.kind for s in self.stages]
        dup = {k for k in kinds if kinds.count(k) > 1}
        if dup:
            raise ValueError(f"middleware stage kinds appear more than once: {sorted(dup)}")
        return self


# --------------------------------------------------------------------------------- Memory


class Guideline(_Strict):
    """A prompt guideline applied when ``trigger`` (an extracted feature or keyword) matches."""

    trigger: str = Field(min_length=1)
    text: str = Field(min_length=1)


class ExperienceBundle(_Strict):
    """A summarised comparison of best vs worst executions of one task (GenEvolve's visual
    experience). ``retrieval_key`` = ``{trigger, source_prompt_summary}``;
    ``decision_guidance`` holds the guidance lists (see the registry issue)."""

    bundle_id: str
    retrieval_key: dict[str, str] = Field(default_factory=dict)
    decision_guidance: dict[str, Any] = Field(default_factory=dict)
    reward_gap: float = 0.0
    created_round: int = 0


class Memory(_Strict):
    """Experience memory. ``enabled`` turns retrieval on; ``top_k`` bundles whose source-prompt
    similarity is at least ``min_similarity`` (cosine, -1..1) are applied; ``capacity`` caps the
    stored bundles."""

    enabled: bool = False
    top_k: int = Field(default=1, ge=1, le=16)
    min_similarity: float = Field(default=0.6, ge=-1.0, le=1.0)
    capacity: int = Field(default=64, ge=1)
    guidelines: list[Guideline] = Field(default_factory=list)
    bundles: list[ExperienceBundle] = Field(default_factory=list)


# -------------------------------------------------------------------------------- Harness


class Harness(_Strict):
    """The whole harness document. ``harness_id`` (see ``evoharness.harness.io``) is the
    sha256 of its canonical JSON."""

    schema_version: Literal[1] = SCHEMA_VERSION
    name: str = "harness"
    description: str = ""
    policy: Policy = Field(default_factory=Policy)
    tools: Tools = Field(default_factory=Tools)
    skills: Skills = Field(default_factory=Skills)
    middleware: Middleware = Field(default_factory=Middleware)
    memory: Memory = Field(default_factory=Memory)

    def to_document(self) -> dict[str, Any]:
        """The JSON document (all defaults included, so the hash pins every value)."""
        return self.model_dump(mode="json")

    @classmethod
    def from_json_document(cls, doc: Any) -> Harness:
        """Validate a JSON-shaped document (from JSON, YAML or a patch result) with pydantic's
        strict JSON rules: a bool is not an integer (``steps: true`` is refused, not 1), a
        string is not a number (``steps: "30"`` is refused), a float with a fraction is not
        an integer. Raises ``pydantic.ValidationError`` naming each field, or ``ValueError``
        for a value JSON cannot hold (a YAML date, a set, NaN)."""
        try:
            text = json.dumps(doc, allow_nan=False, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"not a JSON document: {exc}") from None
        return cls.model_validate_json(text, strict=True)

    def section(self, responsibility: Responsibility | str) -> BaseModel:
        """The model of one responsibility."""
        return getattr(self, Responsibility(responsibility).value)
