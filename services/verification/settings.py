"""Settings of the verification service (``configs/verification*.yaml`` + ``EVOHARNESS_*``
environment variables; the VLM's API key only from the environment)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from services.common.settings import ServiceSettings
from services.verification.backends.composite import CompositeSettings
from services.verification.backends.ocr import OcrSettings
from services.verification.backends.owlv2 import Owlv2Settings
from services.verification.backends.vlm import VlmSettings
from services.verification.judge import JudgeSettings


class VerificationSettings(ServiceSettings):
    """Verification service settings.

    ``backend``: ``sim`` | ``sim-detector`` | ``ocr`` | ``owlv2`` | ``vlm`` | ``composite``.
    ``verifier_id``: reported in every response (default: the backend's ``verifier_id`` when
    it has one, e.g. ``sim-detector@<params digest>``, else ``<backend>``). ``extract_when_empty``: a request with
    a prompt and no constraints is verified against the constraints the rule-based policy
    extractor reads from the prompt (prompts without metadata, e.g. PartiPrompts).
    ``max_image_bytes``: larger images are refused (RESOURCE_EXHAUSTED). ``sim``: keyword
    options for ``SimInspector``. ``sim_detector``: ``params`` (``DetectorParams`` fields) and
    ``SimInspector`` options for ``SimDetector``. ``judge``: the ``Judge`` RPC's backend
    (``inspector``: this service's verifier's verdicts mapped onto the KScore rubric;
    ``kscore``: a VLM judge on ``judge.vlm`` or else ``vlm``; ``JudgeSettings``).
    """

    backend: Literal["sim", "sim-detector", "ocr", "owlv2", "vlm", "composite"] = "sim"
    verifier_id: str = ""
    extract_when_empty: bool = True
    max_image_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    sim: dict[str, Any] = Field(default_factory=dict)
    sim_detector: dict[str, Any] = Field(default_factory=dict)
    ocr: OcrSettings = Field(default_factory=OcrSettings)
    owlv2: Owlv2Settings = Field(default_factory=Owlv2Settings)
    vlm: VlmSettings = Field(default_factory=VlmSettings)
    composite: CompositeSettings = Field(default_factory=CompositeSettings)
    judge: JudgeSettings = Field(default_factory=JudgeSettings)
