"""``VerificationClient``: ``evoharness.ports.Verifier`` over a remote VerificationService."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc
import numpy as np

from evoharness.evidence import Evidence
from evoharness.ports import GeneratedImage
from evoharness.program import ImageRef
from evoharness.tasks.models import Constraint
from services.common.channel import error_from_rpc, open_channel
from services.protos import convert
from services.protos.evoharness.v1 import verification_pb2, verification_pb2_grpc


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
    Errors: ``InvalidField`` (``.field`` names it), ``NotFound``, ``TimeoutError``,
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

    def verify(
        self, png: bytes, constraints: Sequence[Constraint], prompt: str = ""
    ) -> list[Evidence]:
        """``Verifier.verify``: uploads ``png`` (content-addressed, idempotent) when a store
        is configured, else sends it inline."""
        if self.store is not None:
            ref = self.store.put_content(
                png, prefix=self.upload_prefix, suffix=".png", content_type="image/png"
            )
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
