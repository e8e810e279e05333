"""``evoharness.v1.ProposerService``: the policy extractor, harness localizer and patch
proposer, backed by the embedded rule-based backend or an OpenAI-compatible chat model.

Harness documents, clusters, attributions and patches travel as JSON (the evoharness models
own the schema). Every answer a backend gives has passed ``evoharness.trace.answers``;
failed proposals come back in ``rejected`` with their reason code and are never applied.
``ValidatePatches`` runs an externally produced answer through the same validator.

Run: ``evoharness serve proposer --config configs/proposer.yaml`` (the LLM key only from
``EVOHARNESS_LLM_API_KEY`` or ``EVOHARNESS_OPENAI__API_KEY``).
Metrics: ``evoharness_llm_calls{role,backend,outcome}``, ``evoharness_llm_tokens{role,kind}``,
``evoharness_llm_cost_usd{role}``, ``evoharness_proposal_failures{reason}``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import grpc
from pydantic import Field, TypeAdapter, ValidationError

from evoharness.canonical import canonical_json
from evoharness.harness.io import HarnessError, loads
from evoharness.harness.schema import Harness, Responsibility
from evoharness.search.feedback import ProposerInput
from evoharness.search.llm import SearchBackend
from evoharness.trace.answers import FailedProposal, PatchProposal, parse_patch_answer
from evoharness.trace.models import Attribution, FailureCluster
from evoharness.trace.roles import LlmUsage, ProposerBackend, RuleBackend
from services.common.errors import FailedPrecondition, InvalidField
from services.common.metrics import PROPOSAL_FAILURES
from services.common.server import (
    RunningServer,
    ServiceRegistration,
    build_server,
    check_deadline,
    serve_until_signal,
)
from services.common.settings import ServiceSettings
from services.proposer.backends.openai_chat import ChatClient, ChatSettings, OpenAIChatBackend
from services.proposer.prices import PriceTable
from services.protos import convert
from services.protos.evoharness.v1 import proposer_pb2, proposer_pb2_grpc

SERVICE_NAME = "evoharness.v1.ProposerService"
MAX_JSON_CHARS = 4_000_000


class ProposerSettings(ServiceSettings):
    """Proposer service settings. ``backend``: ``rule`` or ``openai`` (then ``openai`` is the
    chat endpoint). ``prices_path``: the price table (``configs/prices.yaml``; missing file →
    built-in default prices). ``max_candidates``: cap on ``n`` per request. The ``s3`` section
    is unused."""

    backend: Literal["rule", "openai"] = "rule"
    openai: ChatSettings = Field(default_factory=ChatSettings)
    prices_path: str = "configs/prices.yaml"
    max_candidates: int = Field(default=16, ge=1, le=64)


Settings = ProposerSettings


def build_backend(settings: ProposerSettings) -> ProposerBackend:
    """The configured backend. Raises ``ValueError`` (no API key, bad price table)."""
    if settings.backend == "rule":
        return RuleBackend()
    p = Path(settings.prices_path)
    prices = PriceTable.load(p) if p.is_file() else PriceTable()
    return OpenAIChatBackend(ChatClient(settings.openai, prices))


def _json(text: str, field: str) -> Any:
    if len(text) > MAX_JSON_CHARS:
        raise InvalidField(field, f"{len(text)} characters, over {MAX_JSON_CHARS}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidField(field, f"is not JSON: {exc}") from None


def _model(adapter: TypeAdapter[Any], text: str, field: str) -> Any:
    value = _json(text, field)
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        raise InvalidField(f"{field}{'.' + loc if loc else ''}", str(err["msg"])) from None


def _harness(text: str) -> Harness:
    if not text:
        raise InvalidField("harness_json", "is empty")
    try:
        return loads(text, "harness_json")
    except HarnessError as exc:
        raise InvalidField("harness_json", str(exc).removeprefix("harness_json: ")) from None


def _usage(u: LlmUsage, backend: str) -> proposer_pb2.LlmUsage:
    return proposer_pb2.LlmUsage(
        calls=u.calls,
        prompt_tokens=u.prompt_tokens,
        completion_tokens=u.completion_tokens,
        cost_usd=u.cost_usd,
        model=u.model,
        backend=backend,
    )


def _rejected(fs: list[FailedProposal]) -> list[proposer_pb2.RejectedProposal]:
    return [
        proposer_pb2.RejectedProposal(
            reason=f.reason,
            raw=f.excerpt,
            detail=f.detail[:2000],
            index=-1 if f.index is None else f.index,
            role=f.role,
        )
        for f in fs
    ]


_CLUSTERS = TypeAdapter(list[FailureCluster])
_CLUSTER = TypeAdapter(FailureCluster)
_ATTRIBUTION = TypeAdapter(Attribution)
_SEARCH_INPUT = TypeAdapter(ProposerInput)


class ProposerServicer(proposer_pb2_grpc.ProposerServiceServicer):
    """Serves one ``ProposerBackend``."""

    def __init__(self, settings: ProposerSettings, backend: ProposerBackend) -> None:
        self.settings = settings
        self.backend = backend

    def ExtractPolicy(
        self, request: proposer_pb2.ExtractPolicyRequest, context: grpc.ServicerContext
    ) -> proposer_pb2.ExtractPolicyResponse:
        if not request.prompt.strip():
            raise InvalidField("prompt", "is empty")
        res = self.backend.extract(request.prompt)
        return proposer_pb2.ExtractPolicyResponse(
            constraints=[convert.constraint_to_proto(c) for c in res.items],
            usage=_usage(res.usage, self.backend.name),
            rejected=_rejected(res.failures),
        )

    def Localize(
        self, request: proposer_pb2.LocalizeRequest, context: grpc.ServicerContext
    ) -> proposer_pb2.LocalizeResponse:
        harness = _harness(request.harness_json)
        clusters = _model(_CLUSTERS, request.clusters_json or "[]", "clusters_json")
        ctx = _json(request.context_json, "context_json") if request.context_json else None
        check_deadline("localize")
        res = self.backend.localize(clusters, harness, ctx)
        return proposer_pb2.LocalizeResponse(
            attributions_json=json.dumps([a.model_dump(mode="json") for a in res.items]),
            usage=_usage(res.usage, self.backend.name),
            rejected=_rejected(res.failures),
        )

    def ProposePatches(
        self, request: proposer_pb2.ProposePatchesRequest, context: grpc.ServicerContext
    ) -> proposer_pb2.ProposePatchesResponse:
        harness = _harness(request.harness_json)
        if not request.cluster_json:
            raise InvalidField("cluster_json", "is empty")
        cluster = _model(_CLUSTER, request.cluster_json, "cluster_json")
        resp = request.responsibility or None
        if resp is not None and resp not in {r.value for r in Responsibility}:
            raise InvalidField(
                "responsibility", f"{resp!r} is not one of {[r.value for r in Responsibility]}"
            )
        if not 1 <= request.n <= self.settings.max_candidates:
            raise InvalidField("n", f"{request.n} is outside 1..{self.settings.max_candidates}")
        ctx = _json(request.context_json, "context_json") if request.context_json else None
        usage = LlmUsage()
        rejected: list[FailedProposal] = []
        if request.attribution_json:
            attribution = _model(_ATTRIBUTION, request.attribution_json, "attribution_json")
        else:
            loc = self.backend.localize([cluster], harness, ctx)
            usage = usage.add(loc.usage)
            rejected += loc.failures
            if not loc.items:
                return proposer_pb2.ProposePatchesResponse(
                    rejected=_rejected(rejected), usage=_usage(usage, self.backend.name)
                )
            attribution = loc.items[0]
        check_deadline("propose")
        res = self.backend.propose(cluster, attribution, harness, request.n, resp, ctx)
        usage = usage.add(res.usage)
        return proposer_pb2.ProposePatchesResponse(
            patches_json=[canonical_json(p.model_dump(mode="json")).decode() for p in res.items],
            rejected=_rejected(rejected + res.failures),
            usage=_usage(usage, self.backend.name),
        )

    def ProposeSearch(
        self, request: proposer_pb2.ProposeSearchRequest, context: grpc.ServicerContext
    ) -> proposer_pb2.ProposePatchesResponse:
        """The search proposer (``evoharness.search.llm``): ``input_json`` is a
        ``ProposerInput``; only a backend that serves the search role
        (``SearchBackend``: the ``openai`` backend) answers, else ``FAILED_PRECONDITION``."""
        if not request.input_json:
            raise InvalidField("input_json", "is empty")
        view = _model(_SEARCH_INPUT, request.input_json, "input_json")
        if not 1 <= request.n <= self.settings.max_candidates:
            raise InvalidField("n", f"{request.n} is outside 1..{self.settings.max_candidates}")
        if not isinstance(self.backend, SearchBackend):
            raise FailedPrecondition(
                f"the {self.backend.name} proposer backend has no search proposer (use the "
                "openai backend, or the run's embedded mutation proposer: proposer rule)"
            )
        check_deadline("propose_search")
        res = self.backend.propose_search(view, request.n)
        return proposer_pb2.ProposePatchesResponse(
            patches_json=[canonical_json(p.model_dump(mode="json")).decode() for p in res.items],
            rejected=_rejected(res.failures),
            usage=_usage(res.usage, self.backend.name),
        )

    def ValidatePatches(
        self, request: proposer_pb2.ValidatePatchesRequest, context: grpc.ServicerContext
    ) -> proposer_pb2.ProposePatchesResponse:
        harness = _harness(request.harness_json)
        resp = request.responsibility or None
        if resp is not None and resp not in {r.value for r in Responsibility}:
            raise InvalidField(
                "responsibility", f"{resp!r} is not one of {[r.value for r in Responsibility]}"
            )
        results = parse_patch_answer(request.answer, harness, resp)
        ok = [r for r in results if isinstance(r, PatchProposal)]
        bad = [r for r in results if isinstance(r, FailedProposal)]
        for f in bad:
            PROPOSAL_FAILURES.labels(f.reason).inc()
        return proposer_pb2.ProposePatchesResponse(
            patches_json=[canonical_json(p.patch.model_dump(mode="json")).decode() for p in ok],
            rejected=_rejected(bad),
            usage=_usage(LlmUsage(), "validator"),
        )


def build(settings: ProposerSettings, backend: ProposerBackend | None = None) -> RunningServer:
    """Start the proposer service in this process; ``backend`` overrides the configured one."""
    servicer = ProposerServicer(settings, backend or build_backend(settings))
    return build_server(
        settings.server,
        [
            ServiceRegistration(
                servicer, proposer_pb2_grpc.add_ProposerServiceServicer_to_server, SERVICE_NAME
            )
        ],
    )


def serve(settings: ProposerSettings) -> None:
    """Run the proposer service until SIGTERM/SIGINT (``evoharness serve proposer``)."""
    serve_until_signal(build(settings))
