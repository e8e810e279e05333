"""A ``kserve.Model`` predictor that wraps any ``Generator`` and serves it with
``kserve.ModelServer`` over the Open Inference Protocol v2.

Tensor contract: see ``services.generation.backends.oip_client`` and ``deploy/OIP_CONTRACT.md``
(input ``program`` BYTES [1], canonical JSON, optional ``layout`` BYTES [1] JSON and
``references`` BYTES [n] images; outputs ``image`` BYTES [1] PNG, ``generator_id`` BYTES [1],
``generator_seconds`` FP64 [1], ``capabilities`` BYTES [1] JSON). Clients should use gRPC (``OIPGenerator``): outputs are sent as raw binary tensors
(``use_binary_outputs``), so REST clients get them binary too only when they ask for it.

Run it (the Helm chart does; ``--backend`` picks the wrapped generator, built from the
generation service's backend table and settings)::

    python -m services.generation.backends.kserve_predictor --backend sim \
        --model_name evoharness-generator --http_port 8080 --grpc_port 8081 [--host 127.0.0.1] \
        [--config configs/generation.yaml]

``kserve.ModelServer`` binds REST to ``0.0.0.0`` and gRPC to ``[::]`` with no option to change
it (kserve 0.21); ``HostModelServer`` adds ``host`` for both (tests bind loopback).

Metrics (``services.common.metrics``, label ``backend="kserve"``) are exported on the
ModelServer's REST ``/metrics`` (kserve serves the default prometheus registry there).
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from concurrent import futures
from typing import Any

import kserve
import numpy as np
from grpc import aio
from grpc_interceptor.exceptions import Internal
from kserve.errors import InvalidInput
from kserve.model_server import ModelServer
from kserve.model_server import parser as kserve_parser
from kserve.protocol.grpc import grpc_predict_v2_pb2_grpc
from kserve.protocol.grpc.interceptors import ExceptionToStatusInterceptor, LoggingInterceptor
from kserve.protocol.grpc.server import GRPCServer
from kserve.protocol.grpc.servicer import InferenceServicer
from kserve.protocol.infer_type import InferOutput, InferRequest, InferResponse

from evoharness.ports import Generator
from evoharness.program import Program
from services.common.metrics import (
    GENERATION_ERRORS,
    GENERATION_LATENCY,
    GENERATION_REQUESTS,
    GENERATOR_SECONDS,
    IMAGES_GENERATED,
)
from services.generation.backends.oip_client import (
    CAPABILITIES_OUTPUT,
    GENERATOR_ID_OUTPUT,
    IMAGE_OUTPUT,
    LAYOUT_INPUT,
    MAX_MESSAGE_BYTES,
    PROGRAM_INPUT,
    REFERENCES_INPUT,
    SECONDS_OUTPUT,
    check_conditioning,
    generate_with,
    import_generator,
    parse_program,
    served_capabilities,
)

BACKEND_LABEL = "kserve"
DEFAULT_MODEL_NAME = "evoharness-generator"


#: Backends the predictor must not wrap: they are clients of a predictor like this one.
CLIENT_BACKENDS = ("kserve", "triton")


def load_generator(spec: str, config: str | None = None) -> Generator:
    """Build the generator to serve from ``spec``.

    A name in the generation service's table (``services.generation.backends.BACKENDS``:
    ``sim``, ``diffusers``, ``openai-images``) is built exactly as the service builds it, from
    ``GenerationSettings`` (the YAML ``config`` or ``$EVOHARNESS_CONFIG``, then
    ``EVOHARNESS_*`` environment variables) with ``backend=spec``; so the generator id is fixed
    by the deployment's config. ``"package.module:attr"`` not in the table: ``attr`` is a
    ``Generator`` instance, or a class/factory called without arguments.

    Raises ``ValueError`` for ``kserve``/``triton`` (a predictor cannot wrap a client of
    itself) and unknown names, ``TypeError`` when the result is not a ``Generator``.
    """
    from services.generation.backends import BACKENDS, build_backend

    if spec in CLIENT_BACKENDS:
        raise ValueError(f"--backend {spec!r} is an OIP client; wrap a generator backend instead")
    if spec in BACKENDS:
        from services.common.settings import load_settings
        from services.generation.settings import GenerationSettings

        return build_backend(load_settings(GenerationSettings, config, backend=spec))
    if ":" not in spec:
        raise ValueError(
            f"--backend {spec!r}: use one of {sorted(set(BACKENDS) - set(CLIENT_BACKENDS))} "
            "or package.module:Factory"
        )
    return import_generator(spec)


class GeneratorPredictor(kserve.Model):
    """OIP v2 predictor around one ``Generator``.

    Generation runs in a worker thread (the event loop keeps answering health checks) under a
    lock, one program at a time: generators such as a diffusers pipeline are not thread-safe.
    An inference that does not request the ``image`` output is an identity request and is
    answered (``generator_id``, ``capabilities``) without generating. The optional ``layout``
    and ``references`` inputs are checked against the program and the reference images are
    passed to the generator (``oip_client.generate_with``).

    Errors: a malformed ``program`` raises ``kserve.errors.InvalidInput`` (gRPC
    INVALID_ARGUMENT, HTTP 400) naming the field; a generator failure raises gRPC INTERNAL
    with the exception type and message.
    """

    def __init__(self, name: str, generator: Generator, backend_label: str = BACKEND_LABEL):
        super().__init__(name)
        self.generator = generator
        self.backend_label = backend_label
        self._lock = threading.Lock()
        self.load()

    def load(self) -> bool:
        """Mark the model ready (the generator is built before the predictor)."""
        self.ready = True
        return self.ready

    def get_input_types(self) -> list[dict[str, Any]]:
        """Model metadata: ``program``, and the optional ``layout`` and ``references``."""
        return [
            {"name": PROGRAM_INPUT, "datatype": "BYTES", "shape": [1]},
            {"name": LAYOUT_INPUT, "datatype": "BYTES", "shape": [1]},
            {"name": REFERENCES_INPUT, "datatype": "BYTES", "shape": [-1]},
        ]

    def get_output_types(self) -> list[dict[str, Any]]:
        """Model metadata: ``image``, ``generator_id``, ``generator_seconds``,
        ``capabilities``."""
        return [
            {"name": IMAGE_OUTPUT, "datatype": "BYTES", "shape": [1]},
            {"name": GENERATOR_ID_OUTPUT, "datatype": "BYTES", "shape": [1]},
            {"name": SECONDS_OUTPUT, "datatype": "FP64", "shape": [1]},
            {"name": CAPABILITIES_OUTPUT, "datatype": "BYTES", "shape": [1]},
        ]

    async def predict(
        self,
        payload: InferRequest,
        headers: dict[str, str] | None = None,
        response_headers: dict[str, str] | None = None,
    ) -> InferResponse:
        """Generate one image for the request's ``program``; see the class docstring."""
        t0 = time.perf_counter()
        code = "OK"
        try:
            return await self._predict(payload)
        except InvalidInput:
            code = "INVALID_ARGUMENT"
            raise
        except Exception:
            code = "INTERNAL"
            raise
        finally:
            GENERATION_REQUESTS.labels(self.backend_label, code).inc()
            GENERATION_LATENCY.labels(self.backend_label).observe(time.perf_counter() - t0)
            if code != "OK":
                GENERATION_ERRORS.labels(self.backend_label, code).inc()

    async def _predict(self, payload: InferRequest) -> InferResponse:
        if not isinstance(payload, InferRequest):
            raise InvalidInput("expected an Open Inference Protocol v2 request")
        requested = [o.name for o in (payload.request_outputs or [])]
        gen_id = self.generator.generator_id.encode("utf-8")
        if requested and IMAGE_OUTPUT not in requested:
            outputs = [
                _bytes_output(GENERATOR_ID_OUTPUT, gen_id),
                _bytes_output(CAPABILITIES_OUTPUT, served_capabilities(self.generator)),
            ]
            return self._response(payload, outputs, requested)
        raw = _program_element(payload)
        try:
            program = parse_program(raw)
            layout = _optional_elements(payload, LAYOUT_INPUT)
            references = _optional_elements(payload, REFERENCES_INPUT)
            images = check_conditioning(program, layout[0] if layout else None, references)
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
        try:
            image = await asyncio.to_thread(self._generate, program, images)
        except Exception as exc:
            raise Internal(f"generator failed: {type(exc).__name__}: {exc}") from exc
        IMAGES_GENERATED.labels(self.backend_label).inc()
        GENERATOR_SECONDS.labels(self.backend_label).inc(image.seconds)
        seconds = InferOutput(name=SECONDS_OUTPUT, shape=[1], datatype="FP64")
        seconds.set_data_from_numpy(np.array([image.seconds], dtype=np.float64))
        outputs = [
            _bytes_output(IMAGE_OUTPUT, image.png),
            _bytes_output(GENERATOR_ID_OUTPUT, image.generator_id.encode("utf-8")),
            seconds,
        ]
        return self._response(payload, outputs, requested)

    def _generate(self, program: Program, images: list[bytes] | None = None) -> Any:
        with self._lock:
            t0 = time.perf_counter()
            image = generate_with(self.generator, program, images)
            if not image.seconds:  # a generator that does not time itself
                image = _replace_seconds(image, time.perf_counter() - t0)
            return image

    def _response(
        self, payload: InferRequest, outputs: list[InferOutput], requested: list[str]
    ) -> InferResponse:
        if requested:
            outputs = [o for o in outputs if o.name in requested]
        return InferResponse(
            response_id=payload.id or "",
            model_name=self.name,
            infer_outputs=outputs,
            use_binary_outputs=True,
        )


def _replace_seconds(image: Any, seconds: float) -> Any:
    from dataclasses import replace

    return replace(image, seconds=seconds)


def _program_element(payload: InferRequest) -> bytes | str:
    names = [i.name for i in payload.inputs]
    for inp in payload.inputs:
        if inp.name != PROGRAM_INPUT:
            continue
        if inp.datatype != "BYTES":
            raise InvalidInput(f"input {PROGRAM_INPUT!r} must be BYTES, got {inp.datatype}")
        try:
            arr = inp.as_numpy()
        except Exception as exc:  # noqa: BLE001 - malformed tensor contents
            raise InvalidInput(f"input {PROGRAM_INPUT!r}: unreadable tensor ({exc})") from None
        if arr.size != 1:
            raise InvalidInput(
                f"input {PROGRAM_INPUT!r} must have exactly one element (shape [1]), "
                f"got shape {list(arr.shape)}"
            )
        return arr.reshape(-1)[0]
    raise InvalidInput(f"input {PROGRAM_INPUT!r} is missing (got {names})")


def _optional_elements(payload: InferRequest, name: str) -> list[Any] | None:
    """The elements of the optional BYTES input ``name`` (None when absent); ``ValueError``
    naming it when it is not BYTES or unreadable."""
    for inp in payload.inputs:
        if inp.name != name:
            continue
        if inp.datatype != "BYTES":
            raise ValueError(f"input {name!r} must be BYTES, got {inp.datatype}")
        try:
            return list(inp.as_numpy().reshape(-1))
        except Exception as exc:  # noqa: BLE001 - malformed tensor contents
            raise ValueError(f"input {name!r}: unreadable tensor ({exc})") from None
    return None


def _bytes_output(name: str, value: bytes) -> InferOutput:
    out = InferOutput(name=name, shape=[1], datatype="BYTES")
    out.set_data_from_numpy(np.array([value], dtype=np.object_))
    return out


class HostGRPCServer(GRPCServer):
    """kserve's gRPC server bound to ``host`` instead of ``[::]`` (same servicer, interceptors
    and message-size options as ``kserve.protocol.grpc.server.GRPCServer``)."""

    def __init__(self, host: str, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._host = host

    async def start(self, max_workers: int) -> None:
        """Serve until stopped."""
        servicer = InferenceServicer(self._data_plane, self._model_repository_extension)
        self._server = aio.server(
            futures.ThreadPoolExecutor(max_workers=max_workers),
            interceptors=(LoggingInterceptor(), ExceptionToStatusInterceptor()),
            options=[
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ],
        )
        grpc_predict_v2_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(servicer, self._server)
        self._server.add_insecure_port(f"{self._host}:{self._port}")
        await self._server.start()
        await self._server.wait_for_termination()


class HostModelServer(ModelServer):
    """``kserve.ModelServer`` that binds REST and gRPC to ``host`` (e.g. ``127.0.0.1``).

    REST: the uvicorn config's ``host`` is set before it binds. gRPC: ``HostGRPCServer``
    replaces kserve's server (which hard-codes ``[::]``).
    """

    def __init__(self, host: str = "0.0.0.0", enable_grpc: bool = True, **kwargs: Any) -> None:
        super().__init__(enable_grpc=False, **kwargs)
        self.host = host
        self._want_grpc = enable_grpc

    async def _serve(self) -> None:
        if self._rest_server is not None:
            self._rest_server.config.host = self.host
        if self._want_grpc:
            self._grpc_server = HostGRPCServer(
                self.host,
                self.grpc_port,
                self.dataplane,
                self.model_repository_extension,
                kwargs={},
                grace_period=self.grace_period,
            )
            self.servers.append(self._grpc_server.start(self.max_threads))
        await asyncio.gather(*self.servers)


def main(argv: list[str] | None = None) -> None:
    """Entry point: ``python -m services.generation.backends.kserve_predictor --backend sim``.

    Accepts kserve's own ModelServer flags (``--http_port``, ``--grpc_port``, ...) plus
    ``--backend`` and ``--config`` (see ``load_generator``), ``--model_name`` and ``--host``.
    ``--workers`` other than 1 is refused (exit 2, usage): scale with replicas.
    """
    parser = argparse.ArgumentParser(parents=[kserve_parser], conflict_handler="resolve")
    parser.add_argument("--backend", default="sim", help="'sim' or package.module:Factory")
    parser.add_argument("--model_name", default=DEFAULT_MODEL_NAME, help="served model name")
    parser.add_argument("--host", default="0.0.0.0", help="address to bind REST and gRPC to")
    parser.add_argument("--config", default=None, help="generation YAML (else $EVOHARNESS_CONFIG)")
    args, _ = parser.parse_known_args(argv)
    if args.workers != 1:
        # uvicorn's worker processes receive the model server by pickling, and a loaded
        # generator (a pipeline, its lock) cannot be pickled: kserve fails at start with
        # "cannot pickle '_thread.lock'". Scale with replicas instead.
        parser.error(
            f"--workers {args.workers}: only one worker process per predictor is supported "
            "(a loaded generator cannot be shared with forked uvicorn workers); scale with "
            "replicas instead (InferenceService minReplicas/maxReplicas, or more processes "
            "on other ports)"
        )
    try:
        generator = load_generator(args.backend, args.config)
    except (ValueError, TypeError) as exc:
        raise SystemExit(f"error: {exc}") from None
    predictor = GeneratorPredictor(args.model_name, generator)
    HostModelServer(
        host=args.host,
        http_port=args.http_port,
        grpc_port=args.grpc_port,
        enable_grpc=args.enable_grpc,
    ).start([predictor])


if __name__ == "__main__":
    main()
