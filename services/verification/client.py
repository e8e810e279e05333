"""``VerificationClient``: ``evoharness.ports.Verifier`` over a remote VerificationService,
and its ``Judge`` RPC (the KScore-style rubric of one image) as ``judge``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
import numpy as np

from evoharness.evidence import Evidence
from evoharness.kscore import WEIGHTS, KScore
from evoharness.ports import Cost, GeneratedImage
from evoharness.program import ImageRef
from evoharness.tasks.models import Constraint
from evoharness.trace.answers import FailedProposal
from services.common.channel import error_from_rpc, open_channel
from services.protos import convert
from services.protos.evoharness.v1 import verification_pb2, verification_pb2_grpc


@dataclass
class Judged:
    """A ``Judge`` answer. ``kscore``: the rubric (levels 0/0.5/1, None = not measured), None
    when the judge gave no valid answer (``failures`` say why); ``score``: the service's
    weighted score (``kscore.overall``; None when nothing was measured); ``judge``:
    ``inspector`` | ``kscore``; ``judge_id``: e.g. ``sim`` or ``kscore@<model>``;
    ``constraints``: those used; ``evidence``: the inspector's verdicts behind the levels;
    ``notes``: how the constraints were read from a prompt given none (lookups resolved or
    left out)."""

    kscore: KScore | None
    score: float | None
    needs_text: bool
    judge: str
    judge_id: str
    failures: list[FailedProposal] = field(default_factory=list)
    constraints: list[Constraint] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    cost: Cost = field(default_factory=Cost)
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


def judged_from_proto(resp: verification_pb2.JudgeResponse) -> Judged:
    """A ``JudgeResponse`` read back: unset levels are None. Raises ``ValueError`` for a
    level outside {0, 0.5, 1} or a score that does not match the levels."""

    def level(dim: str) -> float | None:
        return float(getattr(resp, dim)) if resp.HasField(dim) else None

    kscore = None
    if resp.judged:
        kscore = KScore(
            faithfulness=level("faithfulness"),
            visual_correctness=level("visual_correctness"),
            text_accuracy=level("text_accuracy"),
            aesthetics=level("aesthetics"),
            needs_text=resp.needs_text,
        )
    elif any(resp.HasField(d) for d in WEIGHTS) or resp.HasField("score"):
        raise ValueError("judged is false but a level or score is set")
    score = resp.score if resp.HasField("score") else None
    expected = kscore.overall if kscore is not None else None
    if (score is None) != (expected is None) or (
        score is not None and expected is not None and abs(score - expected) > 1e-9
    ):
        raise ValueError(f"score: {score} does not match the levels ({expected})")
    return Judged(
        kscore=kscore,
        score=score,
        needs_text=resp.needs_text,
        judge=resp.judge,
        judge_id=resp.judge_id,
        failures=[
            FailedProposal(role=f.role, reason=f.reason, detail=f.detail, excerpt=f.excerpt)
            for f in resp.failures
        ],
        constraints=convert.constraints_from_proto(resp.constraints),
        evidence=[
            convert.evidence_from_proto(e, f"evidence.{i}") for i, e in enumerate(resp.evidence)
        ],
        cost=convert.cost_from_proto(resp.cost),
        seconds=resp.seconds,
        notes=list(resp.notes),
    )


class VerificationClient:
    """A ``Verifier`` backed by a ``VerificationService``.

    Args:
        address: ``host:port`` of the service.
        store: the artifact store the service reads; images without a ref are uploaded to it
            (content-addressed under ``upload_prefix``) and sent by reference. None: images go
            inline (``png`` field).
        token / tls_ca_file: bearer token and CA for the channel.
        timeout: per-call deadline in seconds (propagated to the service).
        channel: an existing channel (then address/token/TLS are ignored).

    ``verify(png, constraints, prompt)`` implements the port; ``verify_image(image, ...)``
    uses ``image.ref`` when present (no upload); ``verify_ref(ref, ...)`` sends a reference.
    ``judge(png, prompt, constraints)`` / ``judge_ref(ref, ...)``: the KScore-style rubric
    (``Judged``). Errors: ``InvalidField`` (``.field`` names it), ``NotFound``, ``TimeoutError``,
    ``Unavailable``, ``ResourceExhausted``, ``PermissionError`` (``error_from_rpc``).
    """

    def __init__(
        self,
        address: str = "",
        store: Any = None,
        *,
        token: str | None = None,
        tls_ca_file: str | None = None,
        timeout: float = 120.0,
        upload_prefix: str = "verify",
        channel: grpc.Channel | None = None,
    ) -> None:
        self.address = address
        self.store = store
        self.timeout = timeout
        self.upload_prefix = upload_prefix
        self._own = channel is None
        self._channel = channel or open_channel(address, token=token, tls_ca_file=tls_ca_file)
        self._stub = verification_pb2_grpc.VerificationServiceStub(self._channel)
        self.last_response: verification_pb2.VerifyResponse | None = None
        self.last_judge_response: verification_pb2.JudgeResponse | None = None
        self._verifier_id: str | None = None

    def close(self) -> None:
        """Close the channel when this client opened it."""
        if self._own:
            self._channel.close()

    def __enter__(self) -> VerificationClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def verifier_id(self) -> str:
        """The service's ``verifier_id`` (e.g. ``sim-detector@<digest>``): from the last
        response, else asked once with an empty request (an 8×8 inline image, no
        constraints: nothing is judged). Raises as ``verify`` when the service is down."""
        if self._verifier_id is None:
            from evoharness.sim.generator import encode_png

            probe = encode_png(np.zeros((8, 8, 3), np.uint8))
            self._call(verification_pb2.VerifyRequest(png=probe))
        assert self._verifier_id is not None
        return self._verifier_id

    def _call(self, req: verification_pb2.VerifyRequest) -> list[Evidence]:
        try:
            resp = self._stub.Verify(req, timeout=self.timeout)
        except grpc.RpcError as err:
            raise error_from_rpc(err, f"verification service {self.address}") from None
        self.last_response = resp
        self._verifier_id = resp.verifier_id
        return [
            convert.evidence_from_proto(e, f"evidence.{i}") for i, e in enumerate(resp.evidence)
        ]

    def verify_ref(
        self, ref: ImageRef, constraints: Sequence[Constraint], prompt: str = ""
    ) -> list[Evidence]:
        """Verify the stored image ``ref``."""
        return self._call(
            verification_pb2.VerifyRequest(
                image=convert.image_ref_to_proto(ref),
                constraints=[convert.constraint_to_proto(c) for c in constraints],
                prompt=prompt,
            )
        )

    def _upload(self, png: bytes) -> ImageRef | None:
        """``png`` put in the store (content-addressed, idempotent) when one is configured;
        None: send it inline."""
        if self.store is None:
            return None
        ref: ImageRef = self.store.put_content(
            png, prefix=self.upload_prefix, suffix=".png", content_type="image/png"
        )
        return ref

    def verify(
        self, png: bytes, constraints: Sequence[Constraint], prompt: str = ""
    ) -> list[Evidence]:
        """``Verifier.verify``: uploads ``png`` (content-addressed, idempotent) when a store
        is configured, else sends it inline."""
        ref = self._upload(png)
        if ref is not None:
            return self.verify_ref(ref, constraints, prompt)
        return self._call(
            verification_pb2.VerifyRequest(
                png=png,
                constraints=[convert.constraint_to_proto(c) for c in constraints],
                prompt=prompt,
            )
        )

    def verify_image(
        self, image: GeneratedImage, constraints: Sequence[Constraint], prompt: str = ""
    ) -> list[Evidence]:
        """Verify a ``GeneratedImage``: by ``image.ref`` when it has one, else as ``verify``."""
        if image.ref is not None:
            return self.verify_ref(image.ref, constraints, prompt)
        return self.verify(image.png, constraints, prompt)

    def _judge(self, req: verification_pb2.JudgeRequest) -> Judged:
        try:
            resp = self._stub.Judge(req, timeout=self.timeout)
        except grpc.RpcError as err:
            raise error_from_rpc(err, f"verification service {self.address}") from None
        self.last_judge_response = resp
        return judged_from_proto(resp)

    def judge_ref(
        self, ref: ImageRef, prompt: str, constraints: Sequence[Constraint] = ()
    ) -> Judged:
        """The rubric of the stored image ``ref`` for ``prompt`` (``constraints``: the
        task's; empty: the service reads them from the prompt)."""
        return self._judge(
            verification_pb2.JudgeRequest(
                image=convert.image_ref_to_proto(ref),
                constraints=[convert.constraint_to_proto(c) for c in constraints],
                prompt=prompt,
            )
        )

    def judge(self, png: bytes, prompt: str, constraints: Sequence[Constraint] = ()) -> Judged:
        """The rubric of ``png`` for ``prompt``: uploaded (content-addressed) when a store is
        configured, else sent inline. Errors as ``verify`` (``InvalidField`` naming
        ``prompt``, ``png``, ``image`` or ``constraints.<i>.<field>``)."""
        ref = self._upload(png)
        if ref is not None:
            return self.judge_ref(ref, prompt, constraints)
        return self._judge(
            verification_pb2.JudgeRequest(
                png=png,
                constraints=[convert.constraint_to_proto(c) for c in constraints],
                prompt=prompt,
            )
        )
