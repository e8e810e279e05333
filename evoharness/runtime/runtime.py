"""The harness runtime: a harness at work on one request (prompt, seed, optional references).

``HarnessRuntime.compile`` turns a prompt into a program through the five responsibilities;
``HarnessRuntime.run`` generates, verifies, repairs and selects. Both are pure functions of
(harness, prompt, seed, references, backends): the same inputs give the same programs and
the same trace. The runtime never receives a task's constraints: it reads the prompt with its
policy extractor, and the verifier (when given) checks those *extracted* constraints.

Compilation order (each step appends trace records ``{responsibility, step, ...}``):

0. **Tools / agent** (issue 32): when the harness declares an enabled ``agent`` tool, the
   agent loop runs first and its program's ``gen_prompt`` (and references, when it names
   any) replace the request's for every later step (``evoharness.runtime.steps.agent``;
   ``search_providers`` and ``agent_backend`` are its ports). The result is kept per
   (prompt, references) for the runtime's life, so repairs do not re-run it. An agent with
   ``route: skills`` runs only where an active skill, routed on the request's own prompt,
   has a ``use_tool`` effect naming it (``agent_step.agent_route``).
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

Where each part lives: ``HarnessRuntime`` here orchestrates; the compile steps are one module
per responsibility in ``evoharness.runtime.steps`` (``policy``, ``memory``, ``skills``,
``tools``); repair actions and the run loop in ``evoharness.runtime.middleware``; static checks
in ``evoharness.runtime.harness_checks``; the returned records in ``evoharness.runtime.results``.
The names this module exported before the split are still importable from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evoharness.capabilities import GeneratorCapabilities
from evoharness.harness.schema import Harness
from evoharness.ports import (
    Generator,
    MemoryStore,
    PolicyExtractor,
    Verifier,
)
from evoharness.program import ImageRef, Program
from evoharness.runtime import middleware
from evoharness.runtime.extract import RuleExtractor
from evoharness.runtime.harness_checks import (
    PARAM_FIELDS,
    REWRITE_KINDS,
    HarnessCompileError,
    check_harness,
)
from evoharness.runtime.middleware import REPAIR_ACTIONS, repair_requests, score_evidence
from evoharness.runtime.results import Compiled, RepairContext, RuntimeResult
from evoharness.runtime.steps import Requests
from evoharness.runtime.steps import agent as agent_step
from evoharness.runtime.steps import memory as memory_step
from evoharness.runtime.steps import policy as policy_step
from evoharness.runtime.steps import skills as skills_step
from evoharness.runtime.steps import tools as tools_step
from evoharness.runtime.tool_backends import ToolBackends
from evoharness.tasks.models import Task


def task_references(task: Task) -> list[ImageRef]:
    """Image references a task's request carries: every value of ``task.references`` (in
    ``Task.reference_keys`` order: ``image_2`` before ``image_10``), each an image ref
    document (``{key, bucket?, sha256?}``) or a list of them, as ``Task`` validated them."""
    refs: list[ImageRef] = []
    for k in task.reference_keys():
        v = task.references[k]
        refs.extend(ImageRef.model_validate(item) for item in (v if isinstance(v, list) else [v]))
    return refs


class HarnessRuntime:
    """Runs one harness on requests through ports.

    ``generator``: the frozen generator; ``verifier``: checks the extracted constraints (needed
    by ``best_of_n`` / ``verify_and_repair`` and for ``RuntimeResult.evidence``);
    ``extractor``: the extractor used when ``policy.extractor == "llm"`` (rules otherwise);
    ``memory``: the experience store (``BundleMemory`` over the harness's bundles when None).
    Keyword-only: ``tools``, the tools' backends (``ToolBackends``: LLM layout planner,
    reference retriever, knowledge lookup, the agent's search providers, LLM backend and
    reference library; None: none); ``capabilities`` (``GeneratorCapabilities``; default: the generator's own
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
        tools: ToolBackends | None = None,
        capabilities: GeneratorCapabilities | None = None,
    ) -> None:
        check_harness(harness)
        self.harness = harness
        self.generator = generator
        self.verifier = verifier
        self.llm_extractor = extractor
        self.rule_extractor = RuleExtractor()
        self.memory = memory
        self.tools = tools or ToolBackends()
        self._agent_cache: dict[tuple[str, tuple[str, ...]], tuple[str, list[ImageRef] | None]] = {}
        #: prompt → the skill that routes it to a ``route: skills`` agent (None: none).
        self._route_cache: dict[str, str | None] = {}
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
        trace: list[dict[str, Any]] = []

        def rec(responsibility: str, step: str, **kw: Any) -> None:
            trace.append({"responsibility": responsibility, "step": step, **kw})

        # 0. Tools: the agent rewrites the request before anything reads it
        prompt, references = self._run_agent(prompt, references, rec)
        # 1. Policy: read the prompt
        constraints, features = policy_step.read_prompt(
            h.policy, prompt, self.rule_extractor, self.llm_extractor, rec
        )
        # 2. Memory, 3. Skills, and middleware repair: what each asks of policy and tools
        req = Requests()
        memory_step.apply_memory(h, self.memory, prompt, features, req, rec)
        active = skills_step.route(h, prompt, features, rec)
        skills_step.apply_effects(active, req, rec)
        if repair is not None:
            repair_requests(h, repair, features, req, rec)
        # 4. Policy: rewrites, template, appended text, compression; negative prompt; params
        text, moved = policy_step.rewrite_prompt(h.policy, prompt, req, rec)
        negative_prompt = policy_step.negative_prompt(h.policy, moved, req, rec)
        gp = policy_step.generation_params(h.policy, req, rec)
        # 5. Tools
        text, layout, refs = tools_step.run_tools(
            h,
            tools_step.ToolInput(prompt, text, constraints, features, references),
            req,
            rec,
            self.tools,
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
        opened = (
            policy_step.open_constraints(prompt, constraints)
            if h.policy.extractor == "rule"
            else []
        )
        if opened:
            rec(
                "policy",
                "open_objects",
                constraints=[c.model_dump(mode="json", exclude_none=True) for c in opened],
                reason="objects outside the extractor's vocabulary: verified, steer nothing",
            )
        return Compiled(
            constraints_open=opened,
            program=program,
            constraints_read=constraints,
            features=features,
            trace=trace,
            active_skills=[s.name for s in active],
        )

    def _run_agent(
        self, prompt: str, references: Sequence[ImageRef] | None, rec: Any
    ) -> tuple[str, Sequence[ImageRef] | None]:
        """The agent step, once per (prompt, references); later compiles trace a short
        ``tools/agent`` record with ``cached: true``. An agent with ``route: skills`` runs
        only where an active skill routes the request's prompt to it
        (``agent_step.agent_route``, decided once per prompt); otherwise one ``tools/agent``
        record with ``ran: false`` and ``routed_by: null`` and the request unchanged."""
        tool = agent_step.agent_tool(self.harness)
        if tool is None:
            return prompt, references
        routed_by: str | None = None
        if tool.route == "skills":
            if prompt not in self._route_cache:
                self._route_cache[prompt] = agent_step.agent_route(
                    self.harness, prompt, self.rule_extractor, self.llm_extractor
                )
            routed_by = self._route_cache[prompt]
            if routed_by is None:
                rec(
                    "tools",
                    "agent",
                    tool=tool.name,
                    ran=False,
                    routed_by=None,
                    reason="route: skills; no active skill's use_tool names the agent",
                    input=prompt,
                    output=prompt,
                )
                return prompt, references
        key = (prompt, tuple(r.model_dump_json() for r in references or []))
        hit = self._agent_cache.get(key)
        if hit is not None:
            rec("tools", "agent", cached=True, input=prompt, output=hit[0])
            return hit
        out_prompt, out_refs, _ = agent_step.run_agent_step(
            self.harness,
            prompt,
            references,
            rec,
            search_providers=self.tools.search_providers,
            llm_backend=self.tools.agent_backend,
            library=self.tools.reference_library,
            routed_by=routed_by,
        )
        self._agent_cache[key] = (out_prompt, out_refs)
        return out_prompt, out_refs

    def _drop_unsupported(self, program: Program, rec: Any) -> Program:
        """Remove conditioning ``self.capabilities`` does not honour, recording each drop
        (for references, how many were given and kept).

        The generation service refuses such a program (``FAILED_PRECONDITION``); dropping it
        here keeps the request servable and makes the loss visible in the trace."""
        caps = self.capabilities
        if caps is None:
            return program
        honoured, missing = caps.honoured(program)
        if not missing:
            return program
        counts = (
            {
                "references_given": len(program.references or []),
                "references_kept": len(honoured.references or []),
            }
            if "references" in missing
            else {}
        )
        rec(
            "runtime",
            "capability_drop",
            dropped=[m for m in missing if m != "resolution"],
            unsupported=missing,
            **counts,
        )
        return honoured

    def compile_task(self, task: Task, seed: int) -> Compiled:
        """``compile`` for a task: reads ONLY ``task.prompt`` and ``task.references``, never
        ``task.constraints`` (those go to the verifier)."""
        return self.compile(task.prompt, seed, task_references(task))

    def run_task(self, task: Task, seed: int) -> RuntimeResult:
        """``run`` for a task: reads ONLY ``task.prompt`` and ``task.references``."""
        return self.run(task.prompt, seed, task_references(task))

    # ---------------------------------------------------------------------------- run

    def run(
        self, prompt: str, seed: int, references: Sequence[ImageRef] | None = None
    ) -> RuntimeResult:
        """Compile, generate, verify, repair and select (``evoharness.runtime.middleware.run``).

        Raises ``HarnessCompileError``/``ValueError`` from ``compile`` and whatever the
        generator or verifier ports raise."""
        return middleware.run(
            self.harness, self.compile, self.generator, self.verifier, prompt, seed, references
        )


__all__ = [
    "PARAM_FIELDS",
    "REPAIR_ACTIONS",
    "REWRITE_KINDS",
    "Compiled",
    "HarnessCompileError",
    "HarnessRuntime",
    "RepairContext",
    "RuntimeResult",
    "check_harness",
    "score_evidence",
    "task_references",
]
