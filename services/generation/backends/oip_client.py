"""Open Inference Protocol v2 client backend: generate through a KServe ModelServer or Triton.

``OIPGenerator`` implements ``evoharness.ports.Generator`` over ``tritonclient.grpc`` (the
KServe/Triton v2 gRPC protocol, ``inference.GRPCInferenceService``). Every server that speaks
the tensor contract below can serve it: ``kserve_predictor`` (a ``kserve.Model`` wrapping any
generator) and ``triton_server`` (a pytriton Python model wrapping any generator).

The tensor contract (one program per request, no batching; documented for deployers in
``deploy/OIP_CONTRACT.md``)::

    input   program            BYTES  [1]  canonical JSON (RFC 8785) of an evoharness Program
    input   layout             BYTES  [1]  optional; JSON list of {label, box [x0,y0,x1,y1]
                                           fractions of the image, color?, text?,
                                           attributes?}; sent when
                                           the program has a layout (equal to program.layout)
    input   references         BYTES  [n]  optional; the program's reference images, encoded
                                           image bytes (PNG/JPEG) in program order
    output  image              BYTES  [1]  PNG bytes
    output  generator_id       BYTES  [1]  UTF-8; the served generator's identity
    output  generator_seconds  FP64   [1]  generator wall time of this request, seconds
    output  capabilities       BYTES  [1]  JSON of evoharness GeneratorCapabilities (identity
                                           requests; what the served model honours)

``layout`` and ``references`` are named inputs so a model server that is not evoharness code
(an InstanceDiffusion or MIGC predictor, say) reads them without parsing the program, and the
server never needs the artifact store: the client reads the references (sha256-checked) and
sends their bytes. A server refuses a ``layout`` that differs from the program's, and a
``references`` count that differs from the program's (INVALID_ARGUMENT).

Tensors travel as raw binary (``raw_input_contents`` / ``raw_output_contents``), so a PNG is
never turned into JSON. The generator id comes from the server (its deployment config), never
from the caller: ``OIPGenerator.generator_id`` asks the server once with an *identity request*,
an inference that requests only the ``generator_id`` output; servers answer it without
generating (OIP v2 lets a client name the outputs it wants).

``tritonclient`` is imported lazily: its protobuf module registers the ``inference.*`` messages
in the default descriptor pool, as kserve's does, so one process cannot import both; the
KServe predictor imports this module for the contract constants only.

Errors are raised as ``OIPError`` subclasses carrying the gRPC status name in ``code``; their
bases make the shared server (``services.common.server.STATUS_MAP``) answer the right status:
``OIPInvalidArgument`` is a ``ValueError`` (INVALID_ARGUMENT), ``OIPUnavailable`` and
``OIPNotFound`` are ``services.common.errors.Unavailable`` (UNAVAILABLE), ``OIPDeadlineExceeded``
is a ``TimeoutError`` (DEADLINE_EXCEEDED), anything else is INTERNAL. Servers whose Python
runtime cannot set a status (pytriton turns every model exception into INTERNAL) prefix the
message with the intended status name, ``"INVALID_ARGUMENT: ..."``; the client honours it.
"""

from __future__ import annotations

import importlib
import io
import json
import logging
import re
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image
from pydantic import ValidationError

from evoharness.canonical import canonical_json
from evoharness.capabilities import GeneratorCapabilities
from evoharness.ports import GeneratedImage, Generator
from evoharness.program import ImageRef, Program
from services.common.errors import FailedPrecondition, Unavailable

if TYPE_CHECKING:
    from services.generation.settings import OIPSettings

log = logging.getLogger(__name__)

#: Tensor names and datatypes of the contract (see the module docstring).
PROGRAM_INPUT = "program"
LAYOUT_INPUT = "layout"
REFERENCES_INPUT = "references"
IMAGE_OUTPUT = "image"
GENERATOR_ID_OUTPUT = "generator_id"
SECONDS_OUTPUT = "generator_seconds"
CAPABILITIES_OUTPUT = "capabilities"
OUTPUT_NAMES = (IMAGE_OUTPUT, GENERATOR_ID_OUTPUT, SECONDS_OUTPUT)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: Default max gRPC message size both ways (bytes); a 2048x2048 RGBA PNG stays well below.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
#: gRPC status names a server may put in front of an error message (see module docstring).
_STATUS_PREFIXES = (
    "INVALID_ARGUMENT",
    "NOT_FOUND",
    "UNAVAILABLE",
    "DEADLINE_EXCEEDED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "INTERNAL",
)


_PREFIX_RE = re.compile(r"\b(" + "|".join(_STATUS_PREFIXES) + r"): ([^\n]*)")


class OIPError(RuntimeError):
    """A failed OIP call. ``code`` is a gRPC status name (``"INTERNAL"``, ...); ``url`` and
    ``model`` say where it happened."""

    def __init__(self, code: str, message: str, url: str = "", model: str = "") -> None:
        self.code = code
        self.url = url
        self.model = model
        where = f" ({model} at {url})" if url else ""
        super().__init__(f"{code}: {message}{where}")


class OIPInvalidArgument(OIPError, ValueError):
    """The server rejected the request (``INVALID_ARGUMENT``); the message names the field,
    ``field`` holds its dotted path (``program.params``) when the message starts with one."""

    def __init__(self, code: str, message: str, url: str = "", model: str = "") -> None:
        super().__init__(code, message, url, model)
        head = message.split(":", 1)[0]
        self.field = head if head.startswith("program") and " " not in head else ""


class OIPUnavailable(OIPError, Unavailable):
    """The server cannot be reached or is not ready (``UNAVAILABLE``); callers may retry."""


class OIPNotFound(OIPError, Unavailable):
    """The server does not serve the model (``NOT_FOUND``): not loaded yet, or a wrong
    ``model_name`` in the deployment config. A ``services.common.errors.Unavailable``, so the
    generation service answers UNAVAILABLE: the caller's request is not at fault."""


class OIPGeneratorMismatch(OIPError, FailedPrecondition):
    """The server answered with a generator id other than the one the deployment pinned
    (``FAILED_PRECONDITION``): its images must not be stored under the pinned id."""


class OIPDeadlineExceeded(OIPError, TimeoutError):
    """The call did not finish within the timeout (``DEADLINE_EXCEEDED``)."""


class OIPProtocolError(OIPError):
    """The server answered, but not with the tensor contract (missing output, not a PNG)."""


_ERROR_TYPES: dict[str, type[OIPError]] = {
    "INVALID_ARGUMENT": OIPInvalidArgument,
    "UNAVAILABLE": OIPUnavailable,
    "NOT_FOUND": OIPNotFound,
    "DEADLINE_EXCEEDED": OIPDeadlineExceeded,
}


def _status_name(exc: Any) -> str:
    """``"StatusCode.UNAVAILABLE"`` -> ``"UNAVAILABLE"``; ``"INTERNAL"`` when absent."""
    status = exc.status() or ""
    return status.rsplit(".", 1)[-1] or "INTERNAL"


def classify_error(exc: Any, url: str, model: str) -> OIPError:
    """Turn a ``tritonclient.utils.InferenceServerException`` into the matching ``OIPError`` subclass.

    The gRPC status decides; an ``INTERNAL``/``UNKNOWN`` status whose message contains a
    status-name prefix (``"INVALID_ARGUMENT: ..."``, written by ``triton_server``) takes that
    status, and the message is cut to that line (pytriton appends a server-side traceback,
    which is not passed on). Messages saying a model "is not found"/"unknown model" map to NOT_FOUND
    (Triton reports those as UNAVAILABLE or INVALID_ARGUMENT depending on version).
    """
    code = _status_name(exc)
    message = exc.message() or str(exc)
    if code in ("INTERNAL", "UNKNOWN"):
        # pytriton wraps the model's exception (with its traceback): the last status-prefixed
        # line is the exception we raised
        found = _PREFIX_RE.findall(message)
        if found:
            code, message = found[-1]
    lowered = message.lower()
    if "unknown model" in lowered or ("model" in lowered and "not found" in lowered):
        code = "NOT_FOUND"
    return _ERROR_TYPES.get(code, OIPError)(code, message, url, model)


def parse_program(raw: Any) -> Program:
    """Parse one ``program`` tensor element (canonical JSON, bytes or str) into a ``Program``.

    Servers call this. Raises ``ValueError`` whose message starts with ``program`` and names the
    offending field (``program.params.width: ...``) or the JSON error position.
    """
    try:
        text = raw.decode("utf-8") if isinstance(raw, bytes | bytearray) else str(raw)
        data = json.loads(text)
    except UnicodeDecodeError as exc:
        raise ValueError(f"program: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"program: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    try:
        return Program.model_validate(data)
    except ValidationError as exc:
        parts = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"])
            parts.append(f"program.{loc}: {err['msg']}" if loc else f"program: {err['msg']}")
        raise ValueError("; ".join(parts)) from None


def layout_json(program: Program) -> bytes:
    """The ``layout`` input of ``program``: canonical JSON of its layout items."""
    return canonical_json([item.model_dump(exclude_none=True) for item in program.layout or []])


def check_conditioning(
    program: Program, layout: Any | None, references: Sequence[Any] | None
) -> list[bytes] | None:
    """Servers call this with the request's optional ``layout`` element and ``references``
    elements. Returns the reference images (bytes, program order) or None when none were
    sent. Raises ``ValueError`` (message starting with the input name) when ``layout`` differs
    from ``program.layout`` or the number of images differs from ``program.references``."""
    if layout is not None:
        raw = layout.encode() if isinstance(layout, str) else bytes(layout)
        try:
            sent = json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{LAYOUT_INPUT}: not valid JSON ({exc})") from None
        if canonical_json(sent) != layout_json(program):
            raise ValueError(f"{LAYOUT_INPUT}: differs from program.layout")
    if references is None:
        return None
    images = [r.encode() if isinstance(r, str) else bytes(r) for r in references]
    want = len(program.references or [])
    if len(images) != want:
        raise ValueError(
            f"{REFERENCES_INPUT}: {len(images)} images sent, program.references has {want}"
        )
    return images


def generate_with(
    generator: Generator, program: Program, reference_images: Sequence[bytes] | None
) -> GeneratedImage:
    """``generator.generate(program)``, passing ``reference_images`` to generators whose
    ``generate`` takes them (``DiffusersGenerator``); others read references themselves."""
    if reference_images is not None:
        import inspect

        if "reference_images" in inspect.signature(generator.generate).parameters:
            return generator.generate(program, reference_images=reference_images)  # type: ignore[call-arg]
    return generator.generate(program)


def served_capabilities(generator: Generator) -> bytes:
    """The ``capabilities`` output of a server wrapping ``generator``: JSON of its declared
    ``GeneratorCapabilities`` (``evoharness.capabilities.FULL`` when it declares none)."""
    from evoharness.capabilities import FULL

    caps = getattr(generator, "capabilities", None)
    caps = caps if isinstance(caps, GeneratorCapabilities) else FULL
    return caps.model_dump_json().encode("utf-8")


def import_generator(spec: str) -> Generator:
    """``"package.module:attr"`` -> a ``Generator``: ``attr`` itself when it is an instance,
    else ``attr()`` (a class or factory taking no arguments).

    Raises ``ValueError`` when ``spec`` has no ``:`` or cannot be imported, ``TypeError`` when
    the result is not a ``Generator``.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"backend {spec!r}: expected package.module:attr")
    try:
        obj = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"backend {spec!r}: cannot import ({exc})") from exc
    gen: Any = obj() if isinstance(obj, type) or not isinstance(obj, Generator) else obj
    if not isinstance(gen, Generator):
        raise TypeError(f"backend {spec!r} built {type(gen).__name__}, not a Generator")
    return gen  # type: ignore[no-any-return]


def png_size(png: bytes) -> tuple[int, int]:
    """(width, height) in pixels of a PNG, read from its header. Raises ``ValueError`` when
    ``png`` is not a PNG."""
    if not png.startswith(PNG_SIGNATURE):
        raise ValueError(f"not a PNG (first bytes {png[:8]!r})")
    with Image.open(io.BytesIO(png)) as im:
        return int(im.width), int(im.height)


class OIPGenerator:
    """``Generator`` that calls an OIP v2 server (KServe ModelServer or Triton) over gRPC.

    Args:
        settings: the ``oip`` section (``OIPSettings``), of which:
        url: ``host:port`` of the server's gRPC endpoint (e.g. ``"127.0.0.1:8081"``).
        model_name: the served model's name (the InferenceService / Triton model name).
        timeout: per-call deadline in seconds (float; ``client_timeout`` of tritonclient).
        ssl: use TLS; ``root_certificates`` is a PEM file path for a private CA.
        and, besides the settings:
        protocol: only ``"grpc"`` (images as raw binary tensors); anything else raises
            ``ValueError`` — over REST KServe re-encodes binary tensors as JSON.
        headers: extra gRPC metadata sent with every call (e.g. ``{"authorization": ...}``).
        backend: label for logs and errors (``"kserve"`` or ``"triton"``).
        generator_id: the id the deployment config pins (``GenerationSettings.generator_id``),
            or None to ask the server. When pinned, ``generator_id`` needs no server call (so
            ``isinstance(gen, Generator)``, which evaluates the property on Python 3.11, works
            while the server is down) and every answer must carry that id, else
            ``OIPGeneratorMismatch``.
        capabilities: the capabilities the deployment pins (``GenerationSettings.
            capabilities``, Helm values), or None to ask the server (identity request).
        fetch: reads a reference image (``S3ArtifactStore.get_ref``) to send as the
            ``references`` input; None sends none (the server must read them itself).

    ``generate`` raises ``OIPError`` subclasses (see module docstring). The client is
    thread-safe (one gRPC channel, reused).
    """

    def __init__(
        self,
        settings: OIPSettings,
        *,
        protocol: str = "grpc",
        headers: dict[str, str] | None = None,
        backend: str = "kserve",
        generator_id: str | None = None,
        capabilities: GeneratorCapabilities | None = None,
        fetch: Callable[[ImageRef], bytes] | None = None,
    ) -> None:
        url, model_name, timeout = settings.url, settings.model_name, settings.timeout
        ssl, root_certificates = settings.ssl, settings.root_certificates
        if protocol != "grpc":
            raise ValueError(
                f"protocol={protocol!r} is not supported; use 'grpc' (binary tensors). Over "
                "REST KServe returns BYTES tensors as JSON unless the model sets "
                "use_binary_outputs."
            )
        if not url or ":" not in url:
            raise ValueError(f"url={url!r} must be host:port of the gRPC endpoint")
        if not model_name:
            raise ValueError("model_name is empty")
        if timeout <= 0:
            raise ValueError(f"timeout={timeout} must be > 0 seconds")
        self.url = url
        self.model_name = model_name
        self.timeout = float(timeout)
        self.headers = dict(headers or {})
        self.backend = backend
        import tritonclient.grpc as grpcclient
        from tritonclient.utils import InferenceServerException

        self._grpcclient = grpcclient
        self._server_error = InferenceServerException
        channel_args = [
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ]
        self._client: Any = grpcclient.InferenceServerClient(
            url=url, ssl=ssl, root_certificates=root_certificates, channel_args=channel_args
        )
        self._lock = threading.Lock()
        self._pinned_id = generator_id or None
        self._generator_id: str | None = self._pinned_id
        self._capabilities = capabilities
        self.fetch = fetch

    # -- Generator port ------------------------------------------------------------------

    @property
    def generator_id(self) -> str:
        """The served generator's id: the pinned one, else asked from the server once (an
        identity request) and cached. Raises ``OIPError`` when the server cannot answer."""
        if self._generator_id is None:
            with self._lock:
                if self._generator_id is None:
                    self._generator_id = self._identity()
        return self._generator_id

    @property
    def capabilities(self) -> GeneratorCapabilities:
        """What the served model honours: the pinned capabilities, else the server's
        ``capabilities`` output (asked once). A server that does not answer it declares
        nothing: plain text-to-image (``GeneratorCapabilities()``). Raises ``OIPError``."""
        if self._capabilities is None:
            with self._lock:
                if self._capabilities is None:
                    self._capabilities = self._ask_capabilities()
        return self._capabilities

    def generate(self, program: Program) -> GeneratedImage:
        """Send ``program`` (canonical JSON, plus the ``layout`` and ``references`` inputs)
        and return the server's image.

        ``seconds`` is the server-reported generator time (FP64, seconds), not the round trip.
        ``generator_id`` is the one in the server's answer. Raises ``OIPError`` subclasses.
        """
        result = self._infer(program.canonical(), OUTPUT_NAMES, program)
        png = self._single_bytes(result, IMAGE_OUTPUT)
        gen_id = self._single_bytes(result, GENERATOR_ID_OUTPUT).decode("utf-8")
        seconds_arr = result.as_numpy(SECONDS_OUTPUT)
        if seconds_arr is None or seconds_arr.size != 1:
            raise self._protocol_error(f"output {SECONDS_OUTPUT!r} is missing or not shape [1]")
        try:
            width, height = png_size(png)
        except ValueError as exc:
            raise self._protocol_error(f"output {IMAGE_OUTPUT!r}: {exc}") from None
        if self._pinned_id is not None and gen_id != self._pinned_id:
            raise OIPGeneratorMismatch(
                "FAILED_PRECONDITION",
                f"the server serves generator {gen_id!r} but the deployment pins "
                f"{self._pinned_id!r}",
                self.url,
                self.model_name,
            )
        if self._generator_id is not None and gen_id != self._generator_id:
            log.warning(
                "%s at %s now serves generator %r (was %r); the server was redeployed",
                self.model_name,
                self.url,
                gen_id,
                self._generator_id,
            )
        self._generator_id = gen_id
        return GeneratedImage(
            png=png,
            generator_id=gen_id,
            seconds=float(seconds_arr.reshape(-1)[0]),
            width=width,
            height=height,
        )

    # -- health --------------------------------------------------------------------------

    def ready(self) -> bool:
        """True when the server is live and the model is ready (False on any error)."""
        try:
            return bool(
                self._client.is_server_live(headers=self.headers, client_timeout=self.timeout)
                and self._client.is_model_ready(
                    self.model_name, headers=self.headers, client_timeout=self.timeout
                )
            )
        except self._server_error:
            return False

    def close(self) -> None:
        """Close the gRPC channel."""
        self._client.close()

    # -- internals -----------------------------------------------------------------------

    def _identity(self) -> str:
        result = self._infer(b"{}", (GENERATOR_ID_OUTPUT,))
        return self._single_bytes(result, GENERATOR_ID_OUTPUT).decode("utf-8")

    def _ask_capabilities(self) -> GeneratorCapabilities:
        try:
            result = self._infer(b"{}", (GENERATOR_ID_OUTPUT, CAPABILITIES_OUTPUT))
        except OIPInvalidArgument:
            return GeneratorCapabilities()  # the server does not know the output
        arr = result.as_numpy(CAPABILITIES_OUTPUT)
        if arr is None or arr.size != 1:
            return GeneratorCapabilities()
        raw = self._single_bytes(result, CAPABILITIES_OUTPUT)
        try:
            return GeneratorCapabilities.model_validate_json(raw)
        except ValidationError as exc:
            raise self._protocol_error(f"output {CAPABILITIES_OUTPUT!r}: {exc}") from None

    def _infer(
        self, program_json: bytes, outputs: tuple[str, ...], program: Program | None = None
    ) -> Any:
        g = self._grpcclient
        inp = g.InferInput(PROGRAM_INPUT, [1], "BYTES")
        inp.set_data_from_numpy(np.array([program_json], dtype=np.object_))
        inputs = [inp]
        if program is not None and program.layout is not None:
            lay = g.InferInput(LAYOUT_INPUT, [1], "BYTES")
            lay.set_data_from_numpy(np.array([layout_json(program)], dtype=np.object_))
            inputs.append(lay)
        if program is not None and program.references and self.fetch is not None:
            images = [self.fetch(r) for r in program.references]
            refs = g.InferInput(REFERENCES_INPUT, [len(images)], "BYTES")
            refs.set_data_from_numpy(np.array(images, dtype=np.object_))
            inputs.append(refs)
        requested = [g.InferRequestedOutput(name) for name in outputs]
        try:
            return self._client.infer(
                self.model_name,
                inputs,
                outputs=requested,
                client_timeout=self.timeout,
                headers=self.headers,
            )
        except self._server_error as exc:
            raise classify_error(exc, self.url, self.model_name) from None

    def _single_bytes(self, result: Any, name: str) -> bytes:
        arr = result.as_numpy(name)
        if arr is None or arr.size != 1:
            raise self._protocol_error(f"output {name!r} is missing or not shape [1]")
        value = arr.reshape(-1)[0]
        if isinstance(value, str):
            return value.encode("utf-8")
        return bytes(value)

    def _protocol_error(self, message: str) -> OIPProtocolError:
        return OIPProtocolError("INTERNAL", message, self.url, self.model_name)

    def __repr__(self) -> str:
        return f"OIPGenerator(url={self.url!r}, model_name={self.model_name!r}, backend={self.backend!r})"
