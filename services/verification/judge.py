"""The verification service's judge backends: the KScore-style rubric of one image
(``evoharness.kscore``, issue 32) behind the ``Judge`` RPC.

The rubric: faithfulness, visual correctness, text accuracy and aesthetics, each on
{0, 0.5, 1}, weighted 0.1 / 0.4 / 0.4 / 0.1 (GenEvolve's KScore, ``evoharness.kscore.WEIGHTS``);
text accuracy is left out and the rest renormalised when the prompt needs no text, and a
dimension not measured is left out the same way (never scored as a constant).

Two backends, chosen by ``judge.backend`` in the service's settings (``JudgeSettings``):

- ``inspector`` (default): the service's own verifier backend (the embedded ``sim`` inspector,
  or whichever ``backend`` is configured) judges the constraints, and
  ``evoharness.kscore.kscore_from_evidence`` maps its verdicts onto the first three
  dimensions; aesthetics is not measured. When no verdict is decided the rubric has no
  level and no score, with a ``nothing_measured`` failure saying why.
- ``kscore``: ``KScoreJudge``, a VLM behind the OpenAI-compatible chat client, judges all
  four from the prompt and the PNG; its JSON answer is validated and asked again when
  invalid, and without a valid answer there is no rubric (``kscore`` None) and the failures
  of the last answer are returned.

Whether the prompt needs text is read from the constraints (a ``text`` constraint), which the
service takes from the request as they are or, without any, from the prompt
(``prompt_constraints``): its lookups ("a car in the colour of a London bus") resolved as the
embedded agent resolves them, then the rule-based extractor; ``JudgeResult.notes`` says what
was resolved and what was left out.
Metrics (``services.common.metrics``): ``evoharness_judge_latency_seconds{backend}``,
``evoharness_judgements{backend,outcome}`` (``scored`` | ``unscored`` | ``failed``) and
``evoharness_judge_levels{backend,dimension,level}`` (``0`` | ``0.5`` | ``1`` |
``not_measured``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

from pydantic import BaseModel, ConfigDict

from evoharness.evidence import Evidence
from evoharness.kscore import WEIGHTS, KScore, kscore_from_evidence
from evoharness.tasks.models import Constraint, ConstraintType
from evoharness.trace.answers import FailedProposal
from evoharness.trace.roles import LlmUsage
from services.common.metrics import JUDGE_LATENCY, JUDGE_LEVELS, JUDGEMENTS
from services.verification.backends.base import VerifierBackend
from services.verification.backends.vlm import VlmSettings

if TYPE_CHECKING:
    from evoharness.agent.search import SearchProvider
    from evoharness.ports import PolicyExtractor
    from services.verification.backends.kscore_judge import KScoreJudge
    from services.verification.settings import VerificationSettings

JUDGES = ("inspector", "kscore")


class JudgeSettings(BaseModel):
    """``backend``: ``inspector`` (the service's verifier's verdicts mapped onto the rubric)
    or ``kscore`` (a VLM judge). ``vlm``: the kscore judge's chat endpoint; None: the
    service's ``vlm`` settings (the ``vlm`` verifier backend's endpoint, API key from
    ``chat.api_key_env``)."""

    model_config = ConfigDict(extra="forbid")

    backend: Literal["inspector", "kscore"] = "inspector"
    vlm: VlmSettings | None = None


@dataclass
class JudgeResult:
    """One image's judgement: ``kscore`` None when no valid rubric came (then ``failures``
    says why); ``needs_text``: whether the prompt asks for rendered text; ``constraints``
    used; ``evidence``: the verdicts behind the levels (inspector only); ``usage``: LLM
    calls and tokens (kscore only); ``notes``: how the constraints were read from the
    prompt (``prompt_constraints``; empty when given or when the prompt has no lookup)."""

    kscore: KScore | None
    needs_text: bool
    failures: list[FailedProposal] = field(default_factory=list)
    constraints: list[Constraint] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    usage: LlmUsage | None = None
    notes: list[str] = field(default_factory=list)


class JudgeBackend(Protocol):
    """A judge: ``name`` (metrics label, ``JudgeResponse.judge``), ``judge_id`` (reported)."""

    name: str
    judge_id: str

    def judge(self, png: bytes, prompt: str, constraints: Sequence[Constraint]) -> JudgeResult: ...


def prompt_constraints(
    prompt: str, extractor: PolicyExtractor, search: SearchProvider | None = None
) -> tuple[list[Constraint], list[str]]:
    """The constraints of a ``prompt`` given none, and one note per lookup:
    ``(constraints, notes)``.

    Each lookup of the embedded agent's rule planner (``evoharness.agent.planner``:
    ``find_lookups``, e.g. "a car in the colour of a London bus") is resolved as the planner
    resolves it (its ``search`` tool, ``Toolbox``, over ``search``, by default the embedded
    knowledge base, ``default_knowledge_base()``; its ``answer``) and its span replaced by
    the answer ("a red car"); a lookup without an answer has its whole span removed, so
    nothing from it is judged (the referenced thing is no wanted object, and what it
    qualifies cannot be checked). ``extractor`` then reads the resulting prompt. A prompt
    without lookups is read as it is, with no notes. Raises what ``extractor`` raises (the
    rule extractor: nothing); a failing search is an unresolved lookup."""
    from evoharness.agent.loop import Toolbox
    from evoharness.agent.planner import answer, find_lookups, splice

    lookups = find_lookups(prompt)
    if not lookups:
        return list(extractor.extract(prompt)), []
    if search is None:
        from evoharness.runtime.steps.agent import default_knowledge_base

        search = default_knowledge_base()
    tools = Toolbox(search)
    spans: list[tuple[int, int, str]] = []
    notes: list[str] = []
    for lk in lookups:
        observation, _, failure = tools.call("search", {"query": lk.query})
        got = answer(lk, observation)
        span = prompt[lk.start : lk.end]
        if got is None:
            why = failure.detail if failure else f"no usable hit in {search.name}"
            notes.append(f"{lk.kind} of {lk.thing!r}: {why}; {span!r} left out of the constraints")
        else:
            notes.append(f"{lk.kind} of {lk.thing!r}: {span!r} read as {got!r}")
        spans.append((lk.start, lk.end, got or ""))
    return list(extractor.extract(splice(prompt, spans))), notes


def text_needed(constraints: Sequence[Constraint]) -> bool:
    """Whether the constraints ask for rendered text (a ``text`` constraint)."""
    return any(c.type is ConstraintType.text for c in constraints)


class InspectorJudge:
    """The rubric from a verifier backend's verdicts (``kscore_from_evidence``): first
    three dimensions, aesthetics not measured. ``verifier_id``: reported as ``judge_id``."""

    name = "inspector"

    def __init__(self, backend: VerifierBackend, verifier_id: str) -> None:
        self.backend = backend
        self.judge_id = verifier_id

    def judge(self, png: bytes, prompt: str, constraints: Sequence[Constraint]) -> JudgeResult:
        """Verify ``constraints`` on ``png`` and map the verdicts. Raises what the backend
        raises (``ValueError`` for an undecodable image)."""
        cs = list(constraints)
        evidence = self.backend.verify(png, cs, prompt) if cs else []
        ks = kscore_from_evidence(cs, evidence)
        failures = []
        if not ks.measured:
            detail = (
                "no constraint to judge (none given, none read from the prompt)"
                if not cs
                else "no verdict of an object, count, position, negative, color, attribute "
                "or text constraint was decided"
            )
            failures.append(FailedProposal(role="judge", reason="nothing_measured", detail=detail))
        return JudgeResult(ks, ks.needs_text, failures, cs, evidence)


class VlmJudge:
    """``KScoreJudge`` (a VLM through the chat client) as a judge backend."""

    name = "kscore"

    def __init__(self, inner: KScoreJudge) -> None:
        self.inner = inner
        self.judge_id = f"kscore@{inner.settings.chat.model}"

    def judge(self, png: bytes, prompt: str, constraints: Sequence[Constraint]) -> JudgeResult:
        """One chat judgement; whether text is needed comes from ``constraints``. Never
        raises for a bad or missing answer (``kscore`` None, ``failures`` say why)."""
        need = text_needed(constraints)
        j = self.inner.judge(png, prompt, text_needed=need)
        return JudgeResult(j.kscore, need, list(j.failures), list(constraints), [], j.usage)


def _label(v: float | None) -> str:
    return "not_measured" if v is None else f"{v:g}"


class InstrumentedJudge:
    """Wraps a judge: ``evoharness_judge_latency_seconds{backend}`` per call,
    ``evoharness_judgements{backend,outcome}`` and ``evoharness_judge_levels`` per
    judgement."""

    def __init__(self, inner: JudgeBackend) -> None:
        self.inner = inner
        self.name = inner.name
        self.judge_id = inner.judge_id

    def judge(self, png: bytes, prompt: str, constraints: Sequence[Constraint]) -> JudgeResult:
        """``inner.judge`` with metrics."""
        t0 = time.perf_counter()
        try:
            out = self.inner.judge(png, prompt, constraints)
        finally:
            JUDGE_LATENCY.labels(self.name).observe(time.perf_counter() - t0)
        ks = out.kscore
        if ks is None:
            JUDGEMENTS.labels(self.name, "failed").inc()
            return out
        JUDGEMENTS.labels(self.name, "scored" if ks.overall is not None else "unscored").inc()
        for dim in WEIGHTS:
            JUDGE_LEVELS.labels(self.name, dim, _label(getattr(ks, dim))).inc()
        return out


def build_judge(
    settings: VerificationSettings, backend: VerifierBackend, verifier_id: str
) -> InstrumentedJudge:
    """The judge ``settings.judge.backend`` names, instrumented: ``inspector`` over the
    service's verifier ``backend`` (``verifier_id`` reported), or ``kscore`` built from
    ``settings.judge.vlm`` (else ``settings.vlm``). Raises ``ValueError`` for an unknown
    name."""
    name = settings.judge.backend
    if name == "inspector":
        return InstrumentedJudge(InspectorJudge(backend, verifier_id))
    if name == "kscore":
        from services.verification.backends.kscore_judge import KScoreJudge

        return InstrumentedJudge(VlmJudge(KScoreJudge(settings.judge.vlm or settings.vlm)))
    raise ValueError(f"unknown judge backend {name!r}; choose one of {JUDGES}")


__all__ = [
    "JUDGES",
    "InspectorJudge",
    "InstrumentedJudge",
    "JudgeBackend",
    "JudgeResult",
    "JudgeSettings",
    "VlmJudge",
    "build_judge",
    "prompt_constraints",
    "text_needed",
]
