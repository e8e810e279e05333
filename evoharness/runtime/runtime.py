"""The harness runtime: a harness at work on one request (prompt, seed, optional references).

``HarnessRuntime.compile`` turns a prompt into a program through the five responsibilities;
``HarnessRuntime.run`` generates, verifies, repairs and selects. Both are pure functions of
(harness, prompt, seed, references, backends): the same inputs give the same programs and
the same trace. The runtime never receives a task's constraints: it reads the prompt with its
policy extractor, and the verifier (when given) checks those *extracted* constraints.

Compilation order (each step appends trace records ``{responsibility, step, ...}``):

1. **Policy / extract**: the rule extractor (``policy.extractor == "rule"``) or the given LLM
   extractor (``"llm"``; falls back to rules, traced, when none is given) reads constraints
   and prompt features (``evoharness.runtime.extract``).
2. **Memory**: when ``memory.enabled``: guidelines whose trigger is a present feature or a
   prompt keyword add their text; bundles are retrieved through the ``MemoryStore`` port
   (the harness's own bundles via ``BundleMemory`` when none is given) and their
   ``decision_guidance`` applied: ``append_text`` (str | list), ``negative_terms`` (str |
   list), ``rewrites`` (list of rewrite kinds), ``params`` (dict), ``use_tools`` (declared tool
   names or tool kinds; see ``evoharness.memory.bundles``). Other keys (the text bullets an
   LLM compiler reads) are traced as ignored.
3. **Skills**: every skill whose triggers match (any trigger; a skill without triggers is
   always on) is a candidate; the ``skill_routing`` stage's ``max_active`` (default 3 when the
   stage is absent) keeps the highest ``priority`` ones (ties by name). Effects: ``rewrite``,
   ``negative_terms``, ``append_text``, ``set_params``, ``use_tool``.
4. **Policy / rewrites** in order: the policy's enabled rewrites, then skill, memory and
   repair rewrites (each kind once); ``compress`` runs last, after the template and appended
   text, because it targets the whole prompt's token budget (``max_prompt_tokens``).
   Negative prompt = ``negative_prompt`` + ``negative_terms`` + moved negations + skill,
   memory and repair terms (comma-separated, each once). Params: policy, then skill, memory
   and repair overrides, clamped into ``PARAM_BOUNDS`` (clamping is traced).
5. **Tools**: a ``layout_planner`` runs when a feature in its ``when`` is present and the
   prompt names at least ``min_objects`` objects, or when a skill or repair asks for it
   (deterministic planner, ``evoharness.runtime.layout``; ``planner: llm`` uses the
   ``LayoutPlanner`` port, falling back to deterministic, traced). ``reference_retrieval`` and
   ``knowledge_lookup`` call their ports when given and are skipped (traced) otherwise.

Middleware (``run``): ``best_of_n`` generates up to n candidates (seeds ``seed + i *
seed_offset``) and keeps the highest verifier score; then ``verify_and_repair`` re-compiles
with the failing evidence (repair actions per failing constraint type, see
``REPAIR_ACTIONS``) and seed ``seed + seed_offset * attempt``, at most ``repair_budget`` times.
Both stop as soon as no checked constraint fails (``uncertain`` verdicts do not trigger
repairs). Score = (passes + 0.5 · uncertain) / constraints; the best candidate wins, the earliest
on ties. Without a verifier, middleware stages are skipped (traced) and one image is made.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, get_args

from evoharness.capabilities import GeneratorCapabilities
from evoharness.evidence import Evidence, EvidenceStatus
from evoharness.harness.schema import (
    BestOfNStage,
    Harness,
    KnowledgeLookupTool,
    LayoutPlannerTool,
    ReferenceRetrievalTool,
    RewriteKind,
    Skill,
    SkillRoutingStage,
    VerifyAndRepairStage,
)
from evoharness.ports import (
    Cost,
    GeneratedImage,
    Generator,
    MemoryStore,
    PolicyExtractor,
    Verifier,
)
from evoharness.program import PARAM_BOUNDS, GenerationParams, ImageRef, Program, execution_key
from evoharness.runtime.extract import RuleExtractor, prompt_features
from evoharness.runtime.layout import plan_layout
from evoharness.runtime.ports import (
    BundleMemory,
    KnowledgeLookup,
    LayoutPlanner,
    ReferenceRetriever,
)
from evoharness.runtime.rewrite import apply_rewrite
from evoharness.tasks.models import Constraint, ConstraintType, Task

REWRITE_KINDS: tuple[str, ...] = get_args(RewriteKind)
_PARAM_FIELDS = tuple(GenerationParams.model_fields)

#: Repair actions per failing constraint type: rewrites to add, whether to force the declared
#: layout planners, and whether the failing subject goes to the negative prompt.
REPAIR_ACTIONS: dict[str, dict[str, Any]] = {
    "negative": {"rewrites": ["move_negations"], "layout": False, "negative": True},
    "count": {"rewrites": ["spell_counts"], "layout": True, "negative": False},
    "position": {"rewrites": [], "layout": True, "negative": False},
    "color": {"rewrites": ["bind_attributes"], "layout": True, "negative": False},
    "text": {"rewrites": ["quote_text"], "layout": True, "negative": False},
    "object": {"rewrites": ["compress"], "layout": True, "negative": False},
}


class HarnessCompileError(ValueError):
    """A harness that cannot compile. ``responsibility`` and ``field`` (a dotted path in the
    harness document) name the problem; the message starts with ``responsibility: field:``."""

    def __init__(self, responsibility: str, field_path: str, message: str) -> None:
        self.responsibility = responsibility
        self.field = field_path
        super().__init__(f"{responsibility}: {field_path}: {message}")


def check_harness(harness: Harness) -> None:
    """Static compile checks beyond the schema. Raises ``HarnessCompileError`` for: a template
    with a field other than ``{prompt}`` (or without ``{prompt}``, or with unbalanced braces), a
    skill effect with a missing/invalid value (``rewrite`` not a rewrite kind, ``use_tool``
    naming an undeclared tool, ``set_params`` with an unknown or non-numeric parameter)."""
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
            where = f"skills.skills[{si}] ({skill.name}).effects[{ei}]"
            if eff.kind in ("rewrite", "negative_terms", "append_text", "use_tool") and not (
                eff.value and eff.value.strip()
            ):
                raise HarnessCompileError("skills", f"{where}.value", f"{eff.kind} needs a value")
            if eff.kind == "rewrite" and eff.value not in REWRITE_KINDS:
                raise HarnessCompileError(
                    "skills",
                    f"{where}.value",
                    f"unknown rewrite {eff.value!r}; known: {list(REWRITE_KINDS)}",
                )
            if eff.kind == "use_tool" and eff.value not in tools:
                raise HarnessCompileError(
                    "skills",
                    f"{where}.value",
                    f"uses tool {eff.value!r}, which is not declared in tools "
                    f"(declared: {sorted(tools)})",
                )
            if eff.kind == "set_params":
                for k, v in eff.params.items():
                    if k not in _PARAM_FIELDS:
                        raise HarnessCompileError(
                            "skills",
                            f"{where}.params.{k}",
                            f"unknown parameter; known: {list(_PARAM_FIELDS)}",
                        )
                    if isinstance(v, str) or isinstance(v, bool):
                        raise HarnessCompileError(
                            "skills", f"{where}.params.{k}", f"must be a number, got {v!r}"
                        )


@dataclass
class RepairContext:
    """What a repair attempt knows: attempt number (1..budget) and the failing evidence of
    the previous candidate (``constraint_id``, ``type``, ``subject``, ``status``, ``note``)."""

    attempt: int
    failing: list[dict[str, Any]]


@dataclass
class Compiled:
    """One compilation: the ``program``, the constraints the policy read from the prompt,
    the prompt ``features``, the active skills and the ``trace`` records."""

    program: Program
    constraints_read: list[Constraint]
    features: set[str]
    trace: list[dict[str, Any]]
    active_skills: list[str] = field(default_factory=list)


@dataclass
class RuntimeResult:
    """The outcome of ``HarnessRuntime.run``.

    ``program``/``image``: the selected candidate; ``programs``/``images``: every generated
    candidate in generation order; ``evidence``: the verifier's verdicts on the selected image
    against ``constraints`` (the extracted ones; empty without a verifier); ``score``: its
    verifier score (None without a verifier); ``trace``: every decision; ``cost``: totals."""

    program: Program
    programs: list[Program]
    image: GeneratedImage
    images: list[GeneratedImage]
    evidence: list[Evidence]
    trace: list[dict[str, Any]]
    cost: Cost
    constraints: list[Constraint] = field(default_factory=list)
    score: float | None = None
    selected: int = 0


def _word_in(word: str, text: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(word.lower())}(?!\w)", text.lower()) is not None


def _as_list(v: Any) -> list[str]:
    if v is None:
        return []
    if isinstance(v, str):
        return [p.strip() for p in v.split(",") if p.strip()] if "," in v else [v.strip()]
    return [str(x).strip() for x in v if str(x).strip()]


def _clamp_param(name: str, value: float) -> float | int:
    lo, hi = PARAM_BOUNDS[name]
    v = min(max(float(value), lo), hi)
    if name in ("width", "height"):
        return int(max(lo, min(hi, round(v / 8) * 8)))
    if name == "steps":
        return int(round(v))
    return v


def task_references(task: Task) -> list[ImageRef]:
    """Image references a task's request carries: every value of ``task.references`` (in key
    order) that is an image ref document (``{key, bucket?, sha256?}``) or a list of them.
    Raises ``ValueError`` naming the task and key for a malformed ref."""
    refs: list[ImageRef] = []
    for k in sorted(task.references):
        v = task.references[k]
        for item in v if isinstance(v, list) else [v]:
            if isinstance(item, dict) and "key" in item:
                try:
                    refs.append(ImageRef.model_validate(item))
                except ValueError as exc:
                    raise ValueError(
                        f"task {task.task_id}: references.{k}: not an image ref: {exc}"
                    ) from None
    return refs


def score_evidence(evidence: Sequence[Evidence]) -> float:
    """Verifier score of one image: (passes + 0.5·uncertain) / n, 1.0 when nothing is checked."""
    if not evidence:
        return 1.0
    s = sum(
        1.0
        if e.status is EvidenceStatus.passed
        else 0.5
        if e.status is EvidenceStatus.uncertain
        else 0.0
        for e in evidence
    )
    return s / len(evidence)


class HarnessRuntime:
    """Runs one harness on requests through ports.

    ``generator``: the frozen generator; ``verifier``: checks the extracted constraints (needed
    by ``best_of_n`` / ``verify_and_repair`` and for ``RuntimeResult.evidence``);
    ``extractor``: the extractor used when ``policy.extractor == "llm"`` (rules otherwise);
    ``memory``: the experience store (``BundleMemory`` over the harness's bundles when None).
    Keyword-only hooks: ``layout_planner`` (LLM planner), ``reference_retriever``,
    ``knowledge``; ``capabilities`` (``GeneratorCapabilities``; default: the generator's own
    ``capabilities`` attribute, else everything honoured): conditioning the deployed generator
    cannot honour is dropped from the program before the call, with a ``capability_drop``
    trace record. Raises ``HarnessCompileError`` when the harness cannot compile."""

    def __init__(
        self,
        harness: Harness,
        generator: Generator,
        verifier: Verifier | None = None,
        extractor: PolicyExtractor | None = None,
        memory: MemoryStore | None = None,
        *,
        layout_planner: LayoutPlanner | None = None,
        reference_retriever: ReferenceRetriever | None = None,
        knowledge: KnowledgeLookup | None = None,
        capabilities: GeneratorCapabilities | None = None,
    ) -> None:
        check_harness(harness)
        self.harness = harness
        self.generator = generator
        self.verifier = verifier
        self.llm_extractor = extractor
        self.rule_extractor = RuleExtractor()
        self.memory = memory
        self.layout_planner = layout_planner
        self.reference_retriever = reference_retriever
        self.knowledge = knowledge
        #: What the deployed generator honours: given, or the generator port's own
        #: ``capabilities`` attribute when it has one; None means "honours everything".
        self.capabilities = capabilities or getattr(generator, "capabilities", None)

    # ------------------------------------------------------------------------ compile

    def compile(
        self,
        prompt: str,
        seed: int,
        references: Sequence[ImageRef] | None = None,
        *,
        repair: RepairContext | None = None,
    ) -> Compiled:
        """Compile ``prompt`` into a program for ``seed`` (>= 0). See the module docstring.

        Raises ``ValueError`` for an empty prompt or a negative seed."""
        if not prompt or not prompt.strip():
            raise ValueError("prompt is empty")
        if seed < 0:
            raise ValueError(f"seed must be >= 0, got {seed}")
        h = self.harness
        pol = h.policy
        trace: list[dict[str, Any]] = []

        def rec(responsibility: str, step: str, **kw: Any) -> None:
            trace.append({"responsibility": responsibility, "step": step, **kw})

        # 1. Policy: read the prompt
        constraints, used = self._extract(prompt)
        features = prompt_features(prompt, constraints)
        rec(
            "policy",
            "extract",
            extractor=used,
            input=prompt,
            constraints=[c.model_dump(mode="json", exclude_none=True) for c in constraints],
            features=sorted(features),
        )

        extra_rewrites: list[tuple[str, str]] = []  # (kind, source)
        extra_negative: list[tuple[str, str]] = []
        append: list[tuple[str, str]] = []
        param_over: list[tuple[str, str, Any]] = []  # (name, source, value)
        force_tools: list[tuple[str, str]] = []

        # 2. Memory
        if h.memory.enabled:
            for gi, g in enumerate(h.memory.guidelines):
                if g.trigger in features or _word_in(g.trigger, prompt):
                    append.append((g.text, f"memory.guidelines[{gi}]"))
                    rec("memory", "guideline", index=gi, trigger=g.trigger, text=g.text)
            store = self.memory or BundleMemory(b.model_dump(mode="json") for b in h.memory.bundles)
            hits = store.retrieve(prompt, h.memory.top_k, h.memory.min_similarity)
            for hit in hits:
                bid = str(hit.bundle.get("bundle_id", ""))
                guidance = hit.bundle.get("decision_guidance") or {}
                applied: dict[str, Any] = {}
                src = f"memory.bundle:{bid}"
                for t in _as_list(guidance.get("append_text")):
                    append.append((t, src))
                    applied.setdefault("append_text", []).append(t)
                for t in _as_list(guidance.get("negative_terms")):
                    extra_negative.append((t, src))
                    applied.setdefault("negative_terms", []).append(t)
                for k in _as_list(guidance.get("rewrites")):
                    if k in REWRITE_KINDS:
                        extra_rewrites.append((k, src))
                        applied.setdefault("rewrites", []).append(k)
                for k, v in sorted((guidance.get("params") or {}).items()):
                    if k in _PARAM_FIELDS and isinstance(v, int | float):
                        param_over.append((k, src, v))
                        applied.setdefault("params", {})[k] = v
                for name in _as_list(guidance.get("use_tools")):
                    # a declared tool's name, or a tool kind (every declared tool of it)
                    names = [t.name for t in h.tools.tools if name in (t.name, t.kind)]
                    force_tools.extend((n, src) for n in names)
                    applied.setdefault("use_tools", []).extend(names)
                known = {"append_text", "negative_terms", "rewrites", "params", "use_tools"}
                rec(
                    "memory",
                    "retrieve",
                    bundle_id=bid,
                    similarity=hit.similarity,
                    applied=applied,
                    ignored_keys=sorted(set(guidance) - known),
                )
            if not hits:
                rec(
                    "memory",
                    "retrieve",
                    bundle_id=None,
                    applied={},
                    note="no bundle similar enough",
                )

        # 3. Skills: route and apply declared effects
        active = self._route(prompt, features, rec)
        for skill in active:
            for ei, eff in enumerate(skill.effects):
                src = f"skill:{skill.name}"
                out: dict[str, Any] = {}
                if eff.kind == "rewrite" and eff.value:
                    extra_rewrites.append((eff.value, src))
                    out = {"rewrite": eff.value}
                elif eff.kind == "negative_terms":
                    terms = _as_list(eff.value)
                    extra_negative.extend((t, src) for t in terms)
                    out = {"negative_terms": terms}
                elif eff.kind == "append_text" and eff.value:
                    append.append((eff.value, src))
                    out = {"append_text": eff.value}
                elif eff.kind == "set_params":
                    for k, v in sorted(eff.params.items()):
                        param_over.append((k, src, v))
                    out = {"params": dict(sorted(eff.params.items()))}
                elif eff.kind == "use_tool" and eff.value:
                    force_tools.append((eff.value, src))
                    out = {"use_tool": eff.value}
                rec("skills", "effect", skill=skill.name, index=ei, kind=eff.kind, output=out)

        # Middleware repair: actions from the failing evidence
        if repair is not None:
            for f in repair.failing:
                act = REPAIR_ACTIONS.get(str(f.get("type")))
                if act is None:
                    continue
                src = f"repair:{repair.attempt}:{f.get('constraint_id')}"
                for k in act["rewrites"]:
                    if k == "compress" and "long_prompt" not in features:
                        continue
                    extra_rewrites.append((k, src))
                if act["negative"] and f.get("subject"):
                    extra_negative.append((str(f["subject"]), src))
                if act["layout"]:
                    for tool_decl in h.tools.tools:
                        if isinstance(tool_decl, LayoutPlannerTool) and tool_decl.enabled:
                            force_tools.append((tool_decl.name, src))
            rec(
                "middleware",
                "repair.compile",
                attempt=repair.attempt,
                failing=repair.failing,
                rewrites=[k for k, s in extra_rewrites if s.startswith("repair:")],
                tools=sorted({n for n, s in force_tools if s.startswith("repair:")}),
            )

        # 4. Policy: rewrites, template, appended text, compression
        kinds: list[tuple[str, str]] = [(r.kind, "policy") for r in pol.rewrites if r.enabled]
        seen_kinds = {k for k, _ in kinds}
        for k, src in extra_rewrites:
            if k not in seen_kinds:
                kinds.append((k, src))
                seen_kinds.add(k)
        text = prompt.strip()
        moved: list[str] = []
        for k, src in kinds:
            if k == "compress":
                continue
            res = apply_rewrite(k, text, max_tokens=pol.max_prompt_tokens)
            rec(
                "policy",
                "rewrite",
                kind=k,
                source=src,
                input=text,
                output=res.text,
                negative_terms=res.negative_terms,
                details=res.details,
            )
            text = res.text if res.text.strip() else text
            moved.extend(res.negative_terms)
        templated = pol.template.format(prompt=text)
        if templated != text:
            rec("policy", "template", template=pol.template, input=text, output=templated)
        text = templated
        for t, src in append:
            new = f"{text.rstrip().rstrip('.')}. {t.strip().lstrip(',;. ')}"
            rec("policy", "append_text", source=src, input=text, output=new)
            text = new
        if "compress" in seen_kinds:
            src = next(s for k, s in kinds if k == "compress")
            res = apply_rewrite("compress", text, max_tokens=pol.max_prompt_tokens)
            rec(
                "policy",
                "rewrite",
                kind="compress",
                source=src,
                input=text,
                output=res.text,
                negative_terms=[],
                details=res.details,
            )
            text = res.text if res.text.strip() else text

        neg_parts: list[str] = []
        if pol.negative_prompt.strip():
            neg_parts.append(pol.negative_prompt.strip())
        for t in [*pol.negative_terms, *moved, *(t for t, _ in extra_negative)]:
            t = t.strip()
            if t and t.lower() not in {p.lower() for p in neg_parts}:
                neg_parts.append(t)
        negative_prompt = ", ".join(neg_parts)
        rec(
            "policy",
            "negative_prompt",
            base=pol.negative_prompt,
            policy_terms=list(pol.negative_terms),
            moved=moved,
            other=[{"term": t, "source": s} for t, s in extra_negative],
            output=negative_prompt,
        )

        params = pol.params.model_dump()
        clamps: list[dict[str, Any]] = []
        for name, src, v in param_over:
            cv = _clamp_param(name, float(v))
            if float(cv) != float(v):
                clamps.append({"param": name, "requested": v, "applied": cv, "source": src})
            params[name] = cv
        gp = GenerationParams.model_validate(params)
        rec(
            "policy",
            "params",
            overrides=[{"param": n, "value": v, "source": s} for n, s, v in param_over],
            clamped=clamps,
            output=gp.model_dump(),
        )

        # 5. Tools
        layout: list[Any] | None = None
        refs: list[ImageRef] = list(references or [])
        forced: dict[str, str] = {}
        for name, src in force_tools:
            forced.setdefault(name, src)
        n_objects = sum(
            1 for c in constraints if c.type in (ConstraintType.object, ConstraintType.count)
        )
        for tool in h.tools.tools:
            if not tool.enabled:
                if tool.name in forced:
                    rec("tools", tool.kind, tool=tool.name, ran=False, reason="tool is disabled")
                continue
            if isinstance(tool, LayoutPlannerTool):
                matched = sorted(set(tool.when) & features)
                has_text = "text" in features
                auto = bool(matched) and (n_objects >= tool.min_objects or has_text)
                if not auto and tool.name not in forced:
                    continue
                reason = f"features {matched}" if auto else f"requested by {forced[tool.name]}"
                items, details, planner = self._plan(tool, prompt, constraints, rec)
                if items:
                    layout = (layout or []) + items
                rec(
                    "tools",
                    "layout_planner",
                    tool=tool.name,
                    planner=planner,
                    reason=reason,
                    input=[c.constraint_id for c in constraints],
                    output=[i.model_dump(mode="json", exclude_none=True) for i in items],
                    details=details,
                )
            elif isinstance(tool, ReferenceRetrievalTool):
                if self.reference_retriever is None:
                    rec(
                        "tools",
                        "reference_retrieval",
                        tool=tool.name,
                        ran=False,
                        reason="no reference retriever configured",
                    )
                    continue
                got = self.reference_retriever.retrieve(
                    prompt, constraints, tool.source, tool.top_k
                )
                got = list(got)[: tool.top_k]
                refs.extend(got)
                rec(
                    "tools",
                    "reference_retrieval",
                    tool=tool.name,
                    ran=True,
                    source=tool.source,
                    output=[r.model_dump(mode="json") for r in got],
                )
            elif isinstance(tool, KnowledgeLookupTool):
                if self.knowledge is None:
                    rec(
                        "tools",
                        "knowledge_lookup",
                        tool=tool.name,
                        ran=False,
                        reason="no knowledge lookup configured",
                    )
                    continue
                note = self.knowledge.lookup(prompt, tool.source)
                if note and note.strip():
                    new = f"{text.rstrip().rstrip('.')}. {note.strip()}"
                    rec(
                        "tools",
                        "knowledge_lookup",
                        tool=tool.name,
                        ran=True,
                        input=text,
                        output=new,
                    )
                    text = new
                else:
                    rec("tools", "knowledge_lookup", tool=tool.name, ran=True, output=None)

        if refs:
            rec(
                "tools",
                "references",
                request=[r.model_dump(mode="json") for r in references or []],
                output=[r.model_dump(mode="json") for r in refs],
            )
        program = Program(
            prompt=text,
            negative_prompt=negative_prompt,
            params=gp,
            seed=seed,
            layout=layout,
            references=refs or None,
        )
        program = self._drop_unsupported(program, rec)
        rec("policy", "program", output=program.model_dump(mode="json", exclude_none=True))
        return Compiled(
            program=program,
            constraints_read=constraints,
            features=features,
            trace=trace,
            active_skills=[s.name for s in active],
        )

    def _drop_unsupported(self, program: Program, rec: Any) -> Program:
        """Remove conditioning ``self.capabilities`` does not honour, recording each drop.

        The generation service refuses such a program (``FAILED_PRECONDITION``); dropping it
        here keeps the request servable and makes the loss visible in the trace."""
        caps = self.capabilities
        if caps is None:
            return program
        honoured, missing = caps.honoured(program)
        if not missing:
            return program
        rec(
            "runtime",
            "capability_drop",
            dropped=[m for m in missing if m != "resolution"],
            unsupported=missing,
        )
        return honoured

    def compile_task(self, task: Task, seed: int) -> Compiled:
        """``compile`` for a task: reads ONLY ``task.prompt`` and ``task.references``, never
        ``task.constraints`` (those go to the verifier)."""
        return self.compile(task.prompt, seed, task_references(task))

    def run_task(self, task: Task, seed: int) -> RuntimeResult:
        """``run`` for a task: reads ONLY ``task.prompt`` and ``task.references``."""
        return self.run(task.prompt, seed, task_references(task))

    def _extract(self, prompt: str) -> tuple[list[Constraint], str]:
        if self.harness.policy.extractor == "llm" and self.llm_extractor is not None:
            return list(self.llm_extractor.extract(prompt)), "llm"
        if self.harness.policy.extractor == "llm":
            return self.rule_extractor.extract(prompt), "rule (fallback: no llm extractor)"
        return self.rule_extractor.extract(prompt), "rule"

    def _route(self, prompt: str, features: set[str], rec: Any) -> list[Skill]:
        stage = next(
            (s for s in self.harness.middleware.stages if isinstance(s, SkillRoutingStage)),
            SkillRoutingStage(),
        )
        candidates: list[tuple[Skill, list[str]]] = []
        for skill in self.harness.skills.skills:
            reasons: list[str] = []
            for t in skill.triggers:
                if t.kind == "feature" and t.value in features:
                    reasons.append(f"feature:{t.value}")
                elif t.kind == "keyword" and _word_in(t.value, prompt):
                    reasons.append(f"keyword:{t.value}")
                elif t.kind == "regex" and re.search(t.value, prompt):
                    reasons.append(f"regex:{t.value}")
            if not skill.triggers:
                reasons.append("always on (no triggers)")
            if reasons:
                candidates.append((skill, reasons))
        candidates.sort(key=lambda c: (-c[0].priority, c[0].name))
        active = candidates[: stage.max_active]
        for i, (skill, reasons) in enumerate(candidates):
            rec(
                "skills",
                "route",
                skill=skill.name,
                fired=i < stage.max_active,
                reasons=reasons,
                priority=skill.priority,
                **({} if i < stage.max_active else {"dropped": f"max_active={stage.max_active}"}),
            )
        return [s for s, _ in active]

    def _plan(
        self, tool: LayoutPlannerTool, prompt: str, constraints: list[Constraint], rec: Any
    ) -> tuple[list[Any], dict[str, Any], str]:
        if tool.planner == "llm":
            if self.layout_planner is not None:
                items = list(self.layout_planner.plan(prompt, constraints, tool.margin))
                return items, {}, "llm"
            items, details = plan_layout(constraints, tool.margin)
            return items, details, "deterministic (fallback: no llm planner)"
        items, details = plan_layout(constraints, tool.margin)
        return items, details, "deterministic"

    # ---------------------------------------------------------------------------- run

    def run(
        self, prompt: str, seed: int, references: Sequence[ImageRef] | None = None
    ) -> RuntimeResult:
        """Compile, generate, verify, repair and select (see the module docstring).

        Raises ``HarnessCompileError``/``ValueError`` from ``compile`` and whatever the
        generator or verifier ports raise."""
        stages = self.harness.middleware.stages
        bo = next((s for s in stages if isinstance(s, BestOfNStage)), None)
        vr = next((s for s in stages if isinstance(s, VerifyAndRepairStage)), None)
        trace: list[dict[str, Any]] = []
        cost = Cost()
        programs: list[Program] = []
        images: list[GeneratedImage] = []
        evidences: list[list[Evidence]] = []
        scores: list[float] = []
        constraints: list[Constraint] = []
        if self.verifier is None and (bo or vr):
            trace.append(
                {
                    "responsibility": "middleware",
                    "step": "skip",
                    "stages": [s.kind for s in stages if not isinstance(s, SkillRoutingStage)],
                    "reason": "no verifier configured",
                }
            )

        def attempt(s: int, reason: str, repair: RepairContext | None) -> list[Evidence]:
            nonlocal constraints, cost
            idx = len(programs)
            trace.append(
                {
                    "responsibility": "middleware",
                    "step": "candidate",
                    "index": idx,
                    "seed": s,
                    "reason": reason,
                }
            )
            comp = self.compile(prompt, s, references, repair=repair)
            trace.extend(comp.trace)
            constraints = comp.constraints_read
            img = self.generator.generate(comp.program)
            cost = cost.add(
                Cost(
                    generator_seconds=0.0 if img.cached else img.seconds,
                    generator_calls=0 if img.cached else 1,
                )
            )
            programs.append(comp.program)
            images.append(img)
            trace.append(
                {
                    "responsibility": "middleware",
                    "step": "generate",
                    "index": idx,
                    "generator_id": img.generator_id,
                    # carried from the cache that computed it; a bare generator has none
                    "execution_key": img.execution_key
                    or execution_key(comp.program, img.generator_id),
                }
            )
            ev: list[Evidence] = []
            if self.verifier is not None:
                ev = list(self.verifier.verify(img.png, comp.constraints_read, prompt))
                cost = cost.add(Cost(verifier_calls=1))
                scores.append(score_evidence(ev))
                trace.append(
                    {
                        "responsibility": "middleware",
                        "step": "verify",
                        "index": idx,
                        "statuses": {e.constraint_id: e.status.value for e in ev},
                        "score": scores[-1],
                    }
                )
            evidences.append(ev)
            return ev

        def done(ev: list[Evidence]) -> bool:
            return all(e.status is not EvidenceStatus.failed for e in ev)

        n = bo.n if (bo is not None and self.verifier is not None) else 1
        ev = attempt(seed, "initial", None)
        for i in range(1, n):
            if done(ev):
                trace.append(
                    {
                        "responsibility": "middleware",
                        "step": "best_of_n.stop",
                        "after": i,
                        "reason": "every checked constraint passes",
                    }
                )
                break
            assert bo is not None
            ev = attempt(seed + i * bo.seed_offset, f"best_of_n {i + 1}/{n}", None)
        best = self._best(scores)
        if vr is not None and self.verifier is not None:
            ev = evidences[best]
            for k in range(1, vr.repair_budget + 1):
                if done(ev):
                    break
                by_id = {c.constraint_id: c for c in constraints}
                failing = [
                    {
                        "constraint_id": e.constraint_id,
                        "type": by_id[e.constraint_id].type.value
                        if e.constraint_id in by_id
                        else None,
                        "subject": by_id[e.constraint_id].subject
                        if e.constraint_id in by_id
                        else None,
                        "status": e.status.value,
                        "note": e.note,
                    }
                    for e in ev
                    if e.status is EvidenceStatus.failed
                ]
                ev = attempt(
                    seed + vr.seed_offset * k,
                    f"repair {k}/{vr.repair_budget}",
                    RepairContext(attempt=k, failing=failing),
                )
            best = self._best(scores)
        if self.verifier is not None:
            trace.append(
                {"responsibility": "middleware", "step": "select", "chosen": best, "scores": scores}
            )
        return RuntimeResult(
            program=programs[best],
            programs=programs,
            image=images[best],
            images=images,
            evidence=evidences[best],
            trace=trace,
            cost=cost,
            constraints=constraints,
            score=scores[best] if scores else None,
            selected=best,
        )

    @staticmethod
    def _best(scores: list[float]) -> int:
        if not scores:
            return 0
        top = max(scores)
        return scores.index(top)


__all__ = [
    "Compiled",
    "HarnessCompileError",
    "HarnessRuntime",
    "REPAIR_ACTIONS",
    "RepairContext",
    "RuntimeResult",
    "check_harness",
    "score_evidence",
    "task_references",
]
