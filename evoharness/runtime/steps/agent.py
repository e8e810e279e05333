"""The agent step (Tools, before the policy reads the prompt; issue 32).

When the harness declares an enabled ``agent`` tool, the agent loop
(``evoharness.agent.loop.run_agent``) runs on the request's prompt with the harness's
enabled ``search`` tool (the provider its ``provider`` names: ``embedded`` by default, the
shipped offline knowledge base when the runtime was given none; ``http`` only when the
deployment configured one, else the search tool is not offered and that is traced) and
``query_knowledge`` tool (the harness's skill documents) and ``image_search`` tool (the
runtime's reference library; not offered, traced, without one: images it shows get ids after
the request's). A valid program's ``gen_prompt``
replaces the prompt for every later step, so "a car in the colour of a London bus" reaches
the policy as "a red car"; its ``reference_images`` (transient ids ``IMG_001`` … of the
request's references, in order, and of the images ``image_search`` showed) replace the request's references when it names any. Without
a valid program the request's prompt and references are used unchanged. Either way one trace
record ``tools/agent`` holds the whole trajectory (every call, observation and answer), the
recorded failures, the turns, the cost and the program.

An agent with ``route: skills`` runs only on a request that an active skill routes to it
(``agent_route``): the policy reads the request's own prompt (its extractor; the features
``policy.prompt_features`` derives), the skills are routed on that prompt and those features
(``skills.route``, ``max_active`` included), and the agent runs when an active skill has a
``use_tool`` effect naming it. The ``tools/agent`` record says which skill routed it
(``routed_by``), or, with ``ran: false``, that none did; the prompt is then used unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from evoharness.agent.library import ReferenceLibrary
from evoharness.agent.loop import AgentBackend, AgentResult, AgentTask, Toolbox, run_agent
from evoharness.agent.planner import RulePlanner
from evoharness.agent.search import EmbeddedKnowledgeBase, SearchProvider
from evoharness.harness.schema import (
    AgentTool,
    Harness,
    ImageSearchTool,
    QueryKnowledgeTool,
    SearchTool,
)
from evoharness.ports import PolicyExtractor
from evoharness.program import ImageRef
from evoharness.runtime.extract import RuleExtractor, prompt_features
from evoharness.runtime.steps import Rec
from evoharness.runtime.steps import policy as policy_step
from evoharness.runtime.steps import skills as skills_step


@lru_cache(maxsize=1)
def default_knowledge_base() -> EmbeddedKnowledgeBase:
    """The shipped knowledge base ranked with TF-IDF (built once per process): the
    ``embedded`` provider of a runtime given none (the CLI's ``run``, benchmarks, tests). The
    runtime service and the evolution worker give theirs, built from one setting
    (``runtime.search`` / ``worker.search``, docs/agent-tools.md)."""
    return EmbeddedKnowledgeBase()


def agent_tool(harness: Harness) -> AgentTool | None:
    """The harness's enabled agent tool, or None."""
    return next((t for t in harness.tools.tools if isinstance(t, AgentTool) and t.enabled), None)


def _no_rec(*_args: Any, **_kwargs: Any) -> None:
    """A trace sink that keeps nothing (routing before the agent is traced in its record)."""


def agent_route(
    harness: Harness,
    prompt: str,
    rule_extractor: RuleExtractor,
    llm_extractor: PolicyExtractor | None = None,
) -> str | None:
    """The name of the first active skill (highest priority first) whose ``use_tool`` effect
    names the harness's enabled agent, routed on ``prompt`` as the compile routes it: the
    policy's extractor reads ``prompt`` (``policy.extract``; the rule extractor unless the
    policy names ``llm`` and one is given), ``extract.prompt_features`` gives the features,
    ``skills.route`` the active skills. None when no active skill names the agent, or the
    harness has no enabled agent. Records nothing (the caller traces the decision)."""
    tool = agent_tool(harness)
    if tool is None:
        return None
    constraints, _ = policy_step.extract(harness.policy, prompt, rule_extractor, llm_extractor)
    features = prompt_features(prompt, constraints)
    for skill in skills_step.route(harness, prompt, features, _no_rec):
        if any(e.kind == "use_tool" and e.value == tool.name for e in skill.effects):
            return skill.name
    return None


def image_ids(references: Sequence[ImageRef]) -> dict[str, ImageRef]:
    """Transient ids ``IMG_001`` … for the request's references, in order."""
    return {f"IMG_{i:03d}": r for i, r in enumerate(references, start=1)}


def run_agent_step(
    harness: Harness,
    prompt: str,
    references: Sequence[ImageRef] | None,
    rec: Rec,
    *,
    search_providers: Mapping[str, SearchProvider] | None = None,
    llm_backend: AgentBackend | None = None,
    library: ReferenceLibrary | None = None,
    routed_by: str | None = None,
) -> tuple[str, list[ImageRef] | None, AgentResult | None]:
    """Run the harness's agent on ``prompt`` (see the module docstring). Returns ``(prompt,
    references, result)``: the prompt and references the later steps use, and the loop's
    result (None when the harness has no enabled agent). ``routed_by``: the skill that
    routed the request to a ``route: skills`` agent, recorded as ``routed_by`` in its
    record (the caller decides the routing, ``agent_route``; not recorded for ``always``)."""
    tool = agent_tool(harness)
    if tool is None:
        return prompt, list(references) if references else None, None
    notes: list[str] = []
    backend: AgentBackend
    if tool.backend == "llm" and llm_backend is not None:
        backend = llm_backend
    else:
        backend = RulePlanner()
        if tool.backend == "llm":
            notes.append(
                "backend llm requested but no LLM agent backend configured: the rule planner "
                "runs instead"
            )
    search: SearchProvider | None = None
    top_k = 3
    st = next((t for t in harness.tools.tools if isinstance(t, SearchTool) and t.enabled), None)
    if st is not None:
        providers = dict(search_providers or {})
        if st.provider == "embedded" and "embedded" not in providers:
            providers["embedded"] = default_knowledge_base()
        search = providers.get(st.provider)
        top_k = st.top_k
        if search is None:
            notes.append(f"search provider {st.provider!r} is not configured: search not offered")
    qk = any(isinstance(t, QueryKnowledgeTool) and t.enabled for t in harness.tools.tools)
    skills = harness.skills.skills
    it = next(
        (t for t in harness.tools.tools if isinstance(t, ImageSearchTool) and t.enabled), None
    )
    if it is not None and library is None:
        notes.append("no reference library configured: image_search not offered")
    ids = image_ids(references or [])
    box = Toolbox(
        search,
        search_top_k=top_k,
        skills=skills if qk else None,
        library=library if it is not None else None,
        library_top_k=it.top_k if it is not None else 4,
        first_id=len(ids) + 1,
    )
    task = AgentTask(
        prompt=prompt,
        tools=box.specs,
        skills={s.name: s.description for s in skills},
        images={i: (r.key.rsplit("/", 1)[-1] or r.key) for i, r in ids.items()},
        max_references=tool.max_references,
    )
    result = run_agent(task, backend, box, max_turns=tool.max_turns, max_cost=tool.max_cost)
    out_prompt, out_refs = prompt, list(references) if references else None
    program: dict[str, Any] | None = None
    if result.program is not None:
        out_prompt = result.program.gen_prompt
        if result.program.reference_images:
            known = {k.upper(): v for k, v in {**ids, **box.found}.items()}
            out_refs = [known[r.img_id.upper()] for r in result.program.reference_images]
        elif ids:
            notes.append(
                f"the program carries none of the request's {len(ids)} reference(s): they "
                "pass through unchanged (the program's rationale says why)"
            )
        program = result.program.model_dump(mode="json")
    else:
        notes.append("no valid program: the request's prompt and references are used")
    rec(
        "tools",
        "agent",
        tool=tool.name,
        backend=backend.name,
        search=getattr(search, "name", None),
        ran=True,
        input=prompt,
        output=out_prompt,
        program=program,
        trajectory=result.trajectory,
        failures=[f.as_record() for f in result.failures],
        turns=result.turns,
        cost=round(result.cost, 6),
        usage=result.usage,
        notes=notes,
        **({"routed_by": routed_by} if tool.route == "skills" else {}),
    )
    return out_prompt, out_refs, result


__all__ = ["agent_route", "agent_tool", "default_knowledge_base", "image_ids", "run_agent_step"]
