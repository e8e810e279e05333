"""``OpenAIImagesGenerator``: an OpenAI-compatible images API as a ``Generator``
(``POST {base_url}/images/generations`` through the official ``openai`` client).

The program's prompt and size go in the standard fields; with ``send_extra`` the seed,
negative prompt, steps and guidance scale go as extra body fields (OpenAI-compatible image
servers commonly accept them; OpenAI's API has no seed, so its images are not reproducible
per program — the content-addressed store still makes each execution key generate once).
The API key comes from the environment only. Errors map to the service's status codes:
bad request -> INVALID_ARGUMENT, auth -> PERMISSION_DENIED, connection/5xx/rate limit ->
UNAVAILABLE, timeout -> DEADLINE_EXCEEDED.

Capabilities: no layout; reference images only where the endpoint takes image inputs
(``image_inputs`` > 0: the program's references, read from the artifact store, go to
``POST {base_url}/images/edits`` as ``image[]`` in program order); negative prompt and seed
only with ``send_extra`` (OpenAI's own API honours neither).
"""

from __future__ import annotations

import base64
import io
import os
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from pydantic import SecretStr

from evoharness.capabilities import GeneratorCapabilities
from evoharness.ports import GeneratedImage
from evoharness.program import ImageRef, Program
from services.common.errors import InvalidField, Unavailable

if TYPE_CHECKING:
    from services.generation.settings import OpenAIImagesSettings

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: Prompt budget in tokens: OpenAI's images API takes prompts up to 4000 characters
#: (dall-e-3; API reference, "Create image"), about 1000 tokens of English.
MAX_PROMPT_TOKENS = 1000


def to_png(data: bytes) -> tuple[bytes, int, int]:
    """(PNG bytes, width, height) of an image in any format Pillow reads."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        w, h = im.size
        if data.startswith(PNG_SIGNATURE):
            return data, w, h
        buf = io.BytesIO()
        im.save(buf, format="PNG")
        return buf.getvalue(), w, h


def _image_file(stem: str, data: bytes) -> tuple[str, bytes, str]:
    """A multipart file ``(name, bytes, MIME type)`` for an encoded image (type from Pillow)."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as im:
        fmt = (im.format or "PNG").upper()
    return f"{stem}.{fmt.lower()}", data, Image.MIME.get(fmt, "image/png")


class OpenAIImagesGenerator:
    """Generator over an OpenAI-compatible images endpoint.

    Args: ``settings`` (``OpenAIImagesSettings``): ``base_url`` (e.g.
    ``https://api.openai.com/v1``), ``model``, ``api_key`` (read from the settings only;
    ``from_settings`` falls back to ``OPENAI_API_KEY``), ``timeout`` seconds per call,
    ``max_retries`` (the client's own retries on 429/5xx), ``quality`` (sent when
    non-empty), ``response_format``, ``send_extra`` (see module doc), ``image_inputs``
    (reference images the endpoint takes; 0 = none); and ``fetch`` (reads a reference image,
    ``S3ArtifactStore.get_ref``).
    Raises ``ValueError`` naming ``openai.api_key`` when no key is configured.
    """

    def __init__(
        self, settings: OpenAIImagesSettings, fetch: Callable[[ImageRef], bytes] | None = None
    ) -> None:
        import openai

        s = settings
        base_url, model, api_key = s.base_url, s.model, s.api_key.get_secret_value()
        timeout, max_retries, quality = s.timeout, s.max_retries, s.quality
        response_format, send_extra, image_inputs = s.response_format, s.send_extra, s.image_inputs

        if not api_key:
            raise ValueError(
                "openai.api_key is not set; export EVOHARNESS_OPENAI__API_KEY (or OPENAI_API_KEY)"
            )
        self._openai = openai
        self.client = openai.OpenAI(
            base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries
        )
        self.model = model
        self.quality = quality
        self.response_format = response_format
        self.send_extra = send_extra
        self.timeout = timeout
        self._id = f"openai-images/{model}@{urlparse(base_url).netloc or base_url}"
        self.fetch = fetch
        self.capabilities = GeneratorCapabilities(
            layout="none",
            max_references=image_inputs if fetch is not None else 0,
            negative_prompt=send_extra,
            max_prompt_tokens=MAX_PROMPT_TOKENS,
            seedable=send_extra,
        )

    @classmethod
    def from_settings(
        cls, s: OpenAIImagesSettings, fetch: Callable[[ImageRef], bytes] | None = None
    ) -> OpenAIImagesGenerator:
        """Build from the ``openai`` settings section (key: that section, else
        ``OPENAI_API_KEY``); ``fetch`` reads reference images."""
        key = s.api_key.get_secret_value() or os.environ.get("OPENAI_API_KEY", "")
        return cls(
            s.model_copy(update={"api_key": SecretStr(key)}),
            fetch=fetch,
        )

    @property
    def generator_id(self) -> str:
        """``openai-images/<model>@<host>``."""
        return self._id

    def generate(self, program: Program) -> GeneratedImage:
        """One image for ``program``. Raises ``InvalidField`` (the API refused the request),
        ``PermissionError`` (key refused), ``Unavailable`` (connection, 5xx, rate limit),
        ``TimeoutError``."""
        from services.common.server import remaining_seconds

        p = program.params
        kwargs: dict[str, Any] = {
            "model": self.model,
            "prompt": program.prompt,
            "n": 1,
            "size": f"{p.width}x{p.height}",
        }
        if self.response_format:
            kwargs["response_format"] = self.response_format
        if self.quality:
            kwargs["quality"] = self.quality
        if self.send_extra:
            kwargs["extra_body"] = {
                "seed": program.seed,
                "negative_prompt": program.negative_prompt,
                "num_inference_steps": p.steps,
                "guidance_scale": p.guidance_scale,
            }
        left = remaining_seconds()
        timeout = self.timeout if left is None else max(0.001, min(self.timeout, left))
        oa = self._openai
        t0 = time.perf_counter()
        try:
            if program.references:
                if self.fetch is None or len(program.references) > self.capabilities.max_references:
                    raise InvalidField(
                        "program.references",
                        f"{len(program.references)} images; this endpoint takes "
                        f"{self.capabilities.max_references}",
                    )
                kwargs["image"] = [
                    _image_file(f"reference-{i}", self.fetch(ref))
                    for i, ref in enumerate(program.references)
                ]
                resp = self.client.images.edit(**kwargs, timeout=timeout)
            else:
                resp = self.client.images.generate(**kwargs, timeout=timeout)
        except oa.APITimeoutError as exc:
            raise TimeoutError(f"openai-images: no answer within {timeout:.1f}s") from exc
        except oa.AuthenticationError as exc:
            raise PermissionError(f"openai-images: API key refused ({exc.status_code})") from exc
        except oa.BadRequestError as exc:
            raise InvalidField(
                "program", f"openai-images refused the request: {exc.message}"
            ) from exc
        except (oa.APIConnectionError, oa.RateLimitError, oa.InternalServerError) as exc:
            raise Unavailable(f"openai-images: {type(exc).__name__}: {exc}") from exc
        seconds = time.perf_counter() - t0
        if not resp.data:
            raise Unavailable("openai-images: the response has no image")
        item = resp.data[0]
        if item.b64_json:
            raw = base64.b64decode(item.b64_json)
        elif item.url:
            import httpx

            r = httpx.get(item.url, timeout=timeout)
            r.raise_for_status()
            raw = r.content
        else:
            raise Unavailable("openai-images: the response has neither b64_json nor url")
        png, w, h = to_png(raw)
        return GeneratedImage(png=png, generator_id=self._id, seconds=seconds, width=w, height=h)
