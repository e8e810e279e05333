"""The generation backends, by name. Each entry maps a backend name to a factory
``(GenerationSettings) -> evoharness.ports.Generator``; imports are lazy so a deployment
loads only its own backend's dependencies (torch for diffusers, tritonclient for triton...).

Add a backend: write ``services/generation/backends/<name>.py`` with a class implementing
``Generator`` (``generator_id`` property fixed by config; ``generate(program)`` returning a
``GeneratedImage`` with PNG bytes and generator-seconds; a ``capabilities`` attribute, an
``evoharness.capabilities.GeneratorCapabilities``, saying what it honours), then add one line
to ``BACKENDS``. A deployment may also name ``package.module:factory`` directly in ``backend``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from evoharness.capabilities import FULL, GeneratorCapabilities
from evoharness.ports import Generator
from evoharness.program import ImageRef

if TYPE_CHECKING:
    from services.generation.settings import GenerationSettings
    from services.storage.s3 import S3ArtifactStore

BackendFactory = Callable[["GenerationSettings"], Generator]


def reference_fetch(
    settings: GenerationSettings, store: S3ArtifactStore | None = None
) -> Callable[[ImageRef], bytes]:
    """A reader of reference images (``S3ArtifactStore.get_ref``: sha256-checked) that
    connects to the artifact store of ``settings.s3`` on first use, so a text-only
    deployment never needs it."""
    held: list[S3ArtifactStore] = [store] if store is not None else []

    def fetch(ref: ImageRef) -> bytes:
        if not held:
            from services.storage.s3 import S3ArtifactStore

            held.append(S3ArtifactStore.from_settings(settings.s3))
        return held[0].get_ref(ref)

    return fetch


def _sim(settings: GenerationSettings) -> Generator:
    """The embedded CPU world with the ``sim_profile`` profile (``sim`` settings override its
    ``SimParams`` fields); reference images are read from the artifact store (sha256-checked).
    Raises ``evoharness.sim.profiles.ProfileError`` naming the file and field of a bad profile
    (the service does not start)."""
    from evoharness.sim import SimGenerator
    from evoharness.sim.profiles import params_for
    from services.storage.s3 import S3ArtifactStore

    params = params_for(settings.sim_profile, settings.sim)
    store = S3ArtifactStore.from_settings(settings.s3)
    return SimGenerator(params=params, fetch=store.get_ref)


def _diffusers(settings: GenerationSettings) -> Generator:
    from services.generation.backends.diffusers_backend import DiffusersGenerator

    return DiffusersGenerator.from_settings(settings)


def _openai_images(settings: GenerationSettings) -> Generator:
    from services.generation.backends.openai_images import OpenAIImagesGenerator

    return OpenAIImagesGenerator.from_settings(settings.openai, fetch=reference_fetch(settings))


def _oip(label: str) -> BackendFactory:
    def factory(settings: GenerationSettings) -> Generator:
        from services.generation.backends.oip_client import OIPGenerator

        o = settings.oip
        return OIPGenerator(
            o,
            backend=label,
            generator_id=settings.generator_id or None,
            capabilities=settings.capabilities,
            fetch=reference_fetch(settings),
        )

    return factory


#: backend name -> factory(settings) -> Generator. Extend with one line per backend.
BACKENDS: dict[str, BackendFactory] = {
    "sim": _sim,
    "diffusers": _diffusers,
    "openai-images": _openai_images,
    "kserve": _oip("kserve"),
    "triton": _oip("triton"),
}


def declared_capabilities(
    settings: GenerationSettings, generator: Generator
) -> GeneratorCapabilities:
    """What the deployment honours: ``settings.capabilities`` when the config pins them (the
    Helm values do for KServe/Triton), else the generator's ``capabilities`` attribute, else
    ``evoharness.capabilities.FULL`` (the embedded world before profiles declared any, and
    custom backends that declare nothing)."""
    if settings.capabilities is not None:
        return settings.capabilities
    caps = getattr(generator, "capabilities", None)
    return caps if isinstance(caps, GeneratorCapabilities) else FULL


class UnknownBackend(ValueError):
    """The configured or requested backend is not in ``BACKENDS`` (and not module:attr)."""


def build_backend(settings: GenerationSettings) -> Generator:
    """The ``Generator`` for ``settings.backend``. Raises ``UnknownBackend`` naming the
    known backends, ``TypeError`` when a factory returns something that is not a Generator."""
    name = settings.backend
    if name in BACKENDS:
        gen = BACKENDS[name](settings)
    elif ":" in name:
        module, _, attr = name.partition(":")
        try:
            factory = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise UnknownBackend(f"backend: cannot import {name!r}: {exc}") from exc
        gen = factory(settings)
    else:
        raise UnknownBackend(f"backend: {name!r} is not one of {sorted(BACKENDS)} or module:attr")
    if not isinstance(gen, Generator):
        raise TypeError(f"backend {name!r} built {type(gen).__name__}, not a Generator")
    return gen
