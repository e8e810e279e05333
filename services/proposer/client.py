"""``ProposerClient``: the three proposer roles over a remote ProposerService.

Implements ``evoharness.trace.roles.ProposerBackend`` (``extract``/``localize``/``propose``
return ``RoleResult`` with validated items, failures and usage) and
``evoharness.ports.PolicyExtractor`` through ``evoharness.trace.roles.ExtractorPort``; plus
``localize_attributions``/``propose_patches`` in the shapes the TRACE round's ports use
(``evoharness.trace.round``), and ``validate_patches`` for externally produced answers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import grpc

from evoharness.harness.io import canonical_bytes
from evoharness.harness.patch import Patch
from evoharness.harness.schema import Harness
from evoharness.search.feedback import ProposerInput
from evoharness.tasks.models import Constraint
from evoharness.trace.answers import FailedProposal
from evoharness.trace.models import Attribution, FailureCluster
from evoharness.trace.roles import LlmUsage, RoleResult
from services.common.channel import error_from_rpc, open_channel
from services.protos import convert
from services.protos.evoharness.v1 import proposer_pb2, proposer_pb2_grpc


def _usage(u: proposer_pb2.LlmUsage) -> LlmUsage:
    return LlmUsage(
        calls=u.calls,
        prompt_tokens=u.prompt_tokens,
        completion_tokens=u.completion_tokens,
        cost_usd=u.cost_usd,
        model=u.model,
    )


def _failures(rs: Sequence[proposer_pb2.RejectedProposal]) -> list[FailedProposal]:
    return [
        FailedProposal(
            role=r.role or "proposer",
            reason=r.reason,
            detail=r.detail,
            index=None if r.index < 0 else r.index,
            excerpt=r.raw[:200],
        )
        for r in rs
    ]


class ProposerClient:
    """Client of ``ProposerService``.

    Args: ``address`` host:port; ``token``/``tls_ca_file`` for the channel; ``timeout``
    per-call deadline in seconds (LLM calls can be slow); ``channel`` an existing channel.
    Errors: ``InvalidField`` (``.field``), ``TimeoutError``, ``Unavailable``,
    ``PermissionError`` (``services.common.channel.error_from_rpc``).
    """

    name = "remote"

    def __init__(
        self,
        address: str = "",
        *,
        token: str | None = None,
        tls_ca_file: str | None = None,
        timeout: float = 300.0,
        channel: grpc.Channel | None = None,
    ) -> None:
        self.address = address
        self.timeout = timeout
        self._own = channel is None
        self._channel = channel or open_channel(address, token=token, tls_ca_file=tls_ca_file)
        self._stub = proposer_pb2_grpc.ProposerServiceStub(self._channel)

    def close(self) -> None:
        """Close the channel when this client opened it."""
        if self._own:
            self._channel.close()

    def __enter__(self) -> ProposerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, req: Any) -> Any:
        try:
            return getattr(self._stub, method)(req, timeout=self.timeout)
        except grpc.RpcError as err:
            raise error_from_rpc(err, f"proposer service {self.address}") from None

    # ------------------------------------------------------------------ ProposerBackend

    def extract(self, prompt: str) -> RoleResult[Constraint]:
        """The policy extractor."""
        r = self._call("ExtractPolicy", proposer_pb2.ExtractPolicyRequest(prompt=prompt))
        return RoleResult(
            items=convert.constraints_from_proto(r.constraints),
            failures=_failures(r.rejected),
            usage=_usage(r.usage),
        )

    def localize(
        self,
        clusters: Sequence[FailureCluster],
        harness: Harness,
        context: dict[str, Any] | None = None,
    ) -> RoleResult[Attribution]:
        """The harness localizer."""
        r = self._call(
            "Localize",
            proposer_pb2.LocalizeRequest(
                harness_json=canonical_bytes(harness).decode(),
                clusters_json=json.dumps([c.model_dump(mode="json") for c in clusters]),
                context_json=json.dumps(context) if context else "",
            ),
        )
        return RoleResult(
            items=[Attribution.model_validate(a) for a in json.loads(r.attributions_json or "[]")],
            failures=_failures(r.rejected),
            usage=_usage(r.usage),
        )

    def propose(
        self,
        cluster: FailureCluster,
        attribution: Attribution | None,
        harness: Harness,
        n: int,
        responsibility: str | None = None,
        context: dict[str, Any] | None = None,
    ) -> RoleResult[Patch]:
        """The patch proposer (``attribution`` None: the service localizes first)."""
        r = self._call(
            "ProposePatches",
            proposer_pb2.ProposePatchesRequest(
                harness_json=canonical_bytes(harness).decode(),
                responsibility=responsibility or "",
                cluster_json=json.dumps(cluster.model_dump(mode="json")),
                attribution_json=json.dumps(attribution.model_dump(mode="json"))
                if attribution
                else "",
                n=n,
                context_json=json.dumps(context) if context else "",
            ),
        )
        return RoleResult(
            items=[Patch.model_validate_json(p) for p in r.patches_json],
            failures=_failures(r.rejected),
            usage=_usage(r.usage),
        )

    def propose_search(self, view: ProposerInput, n: int) -> RoleResult[Patch]:
        """The search proposer (``evoharness.search.llm.AskFn``): up to ``n`` validated
        whole-harness patches of ``view.parent`` from the feedback in ``view``; the answers
        the service's validator refused in ``failures``."""
        r = self._call(
            "ProposeSearch",
            proposer_pb2.ProposeSearchRequest(input_json=view.model_dump_json(), n=n),
        )
        return RoleResult(
            items=[Patch.model_validate_json(p) for p in r.patches_json],
            failures=_failures(r.rejected),
            usage=_usage(r.usage),
        )

    def validate_patches(
        self, harness: Harness, answer: str, responsibility: str | None = None
    ) -> RoleResult[Patch]:
        """Run an untrusted answer through the service's validator."""
        r = self._call(
            "ValidatePatches",
            proposer_pb2.ValidatePatchesRequest(
                harness_json=canonical_bytes(harness).decode(),
                responsibility=responsibility or "",
                answer=answer,
            ),
        )
        return RoleResult(
            items=[Patch.model_validate_json(p) for p in r.patches_json],
            failures=_failures(r.rejected),
            usage=_usage(r.usage),
        )

    # ---------------------------------------------------------- TRACE round port shapes

    def localize_attributions(
        self, clusters: Sequence[FailureCluster], harness: Harness
    ) -> list[Attribution]:
        """``LocalizeFn`` of ``evoharness.trace.round``."""
        return self.localize(clusters, harness).items

    def propose_patches(
        self, cluster: FailureCluster, attribution: Attribution, harness: Harness, n: int
    ) -> list[dict[str, Any]]:
        """``ProposeFn`` of ``evoharness.trace.round`` (validated patches as dicts)."""
        return [
            p.model_dump(mode="json") for p in self.propose(cluster, attribution, harness, n).items
        ]
