"""``evoharness.v1.VerificationService``: checks an image against constraints, from pixels only.

Verify(image | png, constraints, prompt):
1. reads the image: ``image`` (an S3 reference, sha256-checked; NOT_FOUND naming the field
   when absent) or inline ``png``; RESOURCE_EXHAUSTED over ``max_image_bytes``;
2. validates the constraints (INVALID_ARGUMENT naming ``constraints.<i>.<field>``); with none
   and a prompt, and ``extract_when_empty``, reads them from the prompt with the rule-based
   policy extractor (prompts without metadata);
3. runs the configured backend (``sim`` | ``sim-detector`` | ``ocr`` | ``owlv2`` | ``vlm`` | ``composite``) and
   returns one evidence per constraint, in order, plus the constraints judged.

Judge(image | png, prompt, constraints): the KScore-style rubric of one image
(``evoharness.kscore``; weights 0.1/0.4/0.4/0.1 from GenEvolve's KScore) by the judge backend
``judge.backend`` names (``services.verification.judge``):
1. ``prompt`` is required (INVALID_ARGUMENT naming ``prompt`` when empty); the image is read
   as for Verify and must decode as an image of at least 8x8 px (INVALID_ARGUMENT naming
   ``png`` or ``image``); the constraints are validated as for Verify and used as they are;
   without any they are read from the prompt (always: the rubric is the prompt's), its
   lookups ("a car in the colour of a London bus") first resolved with the embedded
   knowledge base as the embedded agent resolves them, an unresolved lookup's span left out
   (``judge.prompt_constraints``; ``notes`` says which);
2. ``inspector`` maps this service's verdicts onto faithfulness, visual correctness and
   text accuracy (aesthetics not measured); ``kscore`` asks a VLM for all four;
3. returns each level (unset = not measured, never 0), the weighted ``score`` (unset when
   nothing was measured), ``judged`` = false with the failures when no valid answer came,
   the constraints used and the notes of step 1.

Run: ``evoharness serve verification --config configs/verification.yaml``.
Metrics: ``evoharness_verifier_latency_seconds{backend}``, ``evoharness_verdicts{backend,status}``
(per backend, composite members included), ``evoharness_judge_latency_seconds{backend}``,
``evoharness_judgements{backend,outcome}``, ``evoharness_judge_levels{backend,dimension,level}``
and the shared gRPC metrics.
"""

from __future__ import annotations

import dataclasses
import io
import time
from typing import Any

import grpc

from evoharness.evidence import Evidence
from evoharness.kscore import WEIGHTS
from evoharness.ports import Cost
from evoharness.tasks.models import Constraint
from services.common.errors import InvalidField, ResourceExhausted
from services.common.server import (
    RunningServer,
    ServiceRegistration,
    build_server,
    check_deadline,
    serve_until_signal,
)
from services.protos import convert
from services.protos.evoharness.v1 import verification_pb2, verification_pb2_grpc
from services.verification.backends import build_backend
from services.verification.backends.base import VerifierBackend
from services.verification.judge import (
    InstrumentedJudge,
    JudgeResult,
    build_judge,
    prompt_constraints,
)
from services.verification.settings import VerificationSettings

Settings = VerificationSettings
SERVICE_NAME = "evoharness.v1.VerificationService"


class VerificationServicer(verification_pb2_grpc.VerificationServiceServicer):
    """Serves one ``VerifierBackend``. ``store``: the artifact store image refs point into
    (None: only inline PNGs are accepted)."""

    def __init__(
        self,
        settings: VerificationSettings,
        backend: VerifierBackend,
        store: Any = None,
        judge: InstrumentedJudge | None = None,
    ) -> None:
        self.settings = settings
        self.backend = backend
        self.store = store
        inner = getattr(backend, "inner", backend)  # Instrumented wraps the backend
        self.verifier_id = settings.verifier_id or str(
            getattr(inner, "verifier_id", settings.backend)
        )
        self.judge = judge or build_judge(settings, backend, self.verifier_id)
        self._extractor: Any = None

    def _image(
        self, request: verification_pb2.VerifyRequest | verification_pb2.JudgeRequest
    ) -> bytes:
        cap = self.settings.max_image_bytes
        if request.png:
            if len(request.png) > cap:
                raise ResourceExhausted(
                    f"png: {len(request.png)} bytes, over max_image_bytes={cap}"
                )
            return bytes(request.png)
        if not request.HasField("image") or not request.image.key:
            raise InvalidField("image", "is missing (send an S3 image reference or inline png)")
        ref = convert.image_ref_from_proto(request.image)
        if self.store is None:
            raise InvalidField("image", "this deployment has no artifact store; send png inline")
        if ref.bucket and ref.bucket != self.store.bucket:
            raise InvalidField(
                "image.bucket", f"{ref.bucket!r} is not the artifact bucket {self.store.bucket!r}"
            )
        info = self.store.stat(ref.key)  # ArtifactNotFound -> NOT_FOUND
        if info.size > cap:
            raise ResourceExhausted(
                f"image: s3://{self.store.bucket}/{ref.key} has {info.size} bytes, over max_image_bytes={cap}"
            )
        return bytes(self.store.get_ref(ref))

    def _constraints(
        self,
        request: verification_pb2.VerifyRequest | verification_pb2.JudgeRequest,
        extract: bool,
    ) -> list[Constraint]:
        cs = convert.constraints_from_proto(request.constraints)
        ids = [c.constraint_id for c in cs]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise InvalidField("constraints", f"duplicate constraint_id {dup}")
        if not cs and request.prompt.strip() and extract:
            cs = list(self._rule_extractor().extract(request.prompt))
        return cs

    def _rule_extractor(self) -> Any:
        if self._extractor is None:
            from evoharness.runtime.extract import RuleExtractor

            self._extractor = RuleExtractor()
        return self._extractor

    def Verify(
        self, request: verification_pb2.VerifyRequest, context: grpc.ServicerContext
    ) -> verification_pb2.VerifyResponse:
        t0 = time.perf_counter()
        constraints = self._constraints(request, self.settings.extract_when_empty)
        png = self._image(request)
        check_deadline("verify")
        evidence: list[Evidence] = (
            self.backend.verify(png, constraints, request.prompt) if constraints else []
        )
        return verification_pb2.VerifyResponse(
            evidence=[convert.evidence_to_proto(e) for e in evidence],
            verifier_id=self.verifier_id,
            seconds=time.perf_counter() - t0,
            cost=convert.cost_to_proto(Cost(verifier_calls=1)),
            constraints=[convert.constraint_to_proto(c) for c in constraints],
        )

    def Judge(
        self, request: verification_pb2.JudgeRequest, context: grpc.ServicerContext
    ) -> verification_pb2.JudgeResponse:
        t0 = time.perf_counter()
        if not request.prompt.strip():
            raise InvalidField("prompt", "is empty (the rubric judges an image against its prompt)")
        constraints = self._constraints(request, extract=False)
        notes: list[str] = []
        if not constraints:
            constraints, notes = prompt_constraints(request.prompt, self._rule_extractor())
        png = self._image(request)
        _check_image(png, "png" if request.png else "image")
        check_deadline("judge")
        result = self.judge.judge(png, request.prompt, constraints)
        result = dataclasses.replace(result, notes=[*notes, *result.notes])
        return judge_response(result, self.judge.name, self.judge.judge_id, t0)


def _check_image(png: bytes, field: str) -> None:
    """Raise ``InvalidField(field)`` unless ``png`` decodes as an image of at least 8x8 px
    (what the inspector needs; a VLM is not asked about bytes that are no image)."""
    from PIL import Image

    try:
        with Image.open(io.BytesIO(png)) as im:
            im.load()
            w, h = im.size
    except Exception as exc:  # PIL raises OSError, SyntaxError, ValueError, ... for bad bytes
        raise InvalidField(
            field, f"not a decodable image ({len(png)} bytes): {type(exc).__name__}"
        ) from None
    if min(w, h) < 8:
        raise InvalidField(field, f"{w}x{h} px is too small (min 8x8)")


def judge_response(
    result: JudgeResult, judge: str, judge_id: str, t0: float
) -> verification_pb2.JudgeResponse:
    """The ``JudgeResponse`` of ``result``: levels set only where measured, ``score`` only
    when something was; ``t0``: ``time.perf_counter()`` at the request's start."""
    ks = result.kscore
    levels: dict[str, float] = {}
    score: dict[str, float] = {}
    if ks is not None:
        levels = {
            d: v
            for d in WEIGHTS  # the rubric's dimensions, in order (evoharness.kscore)
            if (v := getattr(ks, d)) is not None
        }
        if ks.overall is not None:
            score = {"score": ks.overall}
    u = result.usage
    cost = Cost(
        verifier_calls=1,
        llm_calls=u.calls if u else 0,
        llm_prompt_tokens=u.prompt_tokens if u else 0,
        llm_completion_tokens=u.completion_tokens if u else 0,
        extra={"llm_cost_usd": u.cost_usd} if u and u.cost_usd else {},
    )
    return verification_pb2.JudgeResponse(
        judged=ks is not None,
        **levels,
        **score,
        needs_text=result.needs_text,
        judge=judge,
        judge_id=judge_id,
        failures=[
            verification_pb2.JudgeFailure(
                role=f.role, reason=f.reason, detail=f.detail, excerpt=f.excerpt
            )
            for f in result.failures
        ],
        constraints=[convert.constraint_to_proto(c) for c in result.constraints],
        evidence=[convert.evidence_to_proto(e) for e in result.evidence],
        notes=result.notes,
        seconds=time.perf_counter() - t0,
        cost=convert.cost_to_proto(cost),
    )


def build(settings: VerificationSettings, backend: VerifierBackend | None = None) -> RunningServer:
    """Start the verification service in this process; ``backend`` overrides the configured
    one (in-process tests). The artifact store is opened (bucket ensured) when
    ``s3.access_key`` is set; raises ``StoreUnavailable``/``StoreAuthError`` when it fails."""
    store = None
    if settings.s3.access_key.get_secret_value():
        from services.storage.s3 import S3ArtifactStore

        store = S3ArtifactStore.from_settings(settings.s3)
        store.ensure_bucket()
    be = backend or build_backend(settings, store)
    servicer = VerificationServicer(settings, be, store)
    return build_server(
        settings.server,
        [
            ServiceRegistration(
                servicer,
                verification_pb2_grpc.add_VerificationServiceServicer_to_server,
                SERVICE_NAME,
            )
        ],
    )


def serve(settings: VerificationSettings) -> None:
    """Run the verification service until SIGTERM/SIGINT (``evoharness serve verification``)."""
    serve_until_signal(build(settings))
