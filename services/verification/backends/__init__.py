"""Verifier backends: ``sim`` (exact), ``sim-detector`` (errs like a detector + VLM), ``ocr``,
``owlv2``, ``vlm`` and the ``composite`` router.

``build_backend(settings, store)`` builds the configured backend (every member wrapped in
``Instrumented`` for latency and verdict metrics).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from services.verification.backends.base import Instrumented, VerifierBackend

if TYPE_CHECKING:
    from services.verification.settings import VerificationSettings

BACKENDS = ("sim", "sim-detector", "ocr", "owlv2", "vlm", "composite")


def build_member(name: str, settings: VerificationSettings, store: Any = None) -> VerifierBackend:
    """One non-composite backend by name. Raises ``ValueError`` for an unknown name."""
    if name == "sim":
        from services.verification.backends.sim import SimBackend

        return SimBackend(**settings.sim)
    if name == "sim-detector":
        from services.verification.backends.sim_detector import SimDetectorBackend

        return SimDetectorBackend(**settings.sim_detector)
    if name == "ocr":
        from services.verification.backends.ocr import OcrBackend

        return OcrBackend(settings.ocr)
    if name == "owlv2":
        from services.verification.backends.owlv2 import Owlv2Backend

        return Owlv2Backend(settings.owlv2, store)
    if name == "vlm":
        from services.verification.backends.vlm import VlmBackend

        return VlmBackend(settings.vlm)
    raise ValueError(f"unknown verifier backend {name!r}; choose one of {BACKENDS}")


def build_backend(settings: VerificationSettings, store: Any = None) -> VerifierBackend:
    """The backend ``settings.backend`` names, instrumented. ``store``: the artifact store
    (for S3-hosted OWLv2 weights)."""
    if settings.backend == "composite":
        from services.verification.backends.composite import CompositeBackend

        members = {
            n: Instrumented(build_member(n, settings, store))
            for n in sorted(settings.composite.backend_names())
        }
        return Instrumented(CompositeBackend(settings.composite, members))
    return Instrumented(build_member(settings.backend, settings, store))


__all__ = ["BACKENDS", "Instrumented", "VerifierBackend", "build_backend", "build_member"]
