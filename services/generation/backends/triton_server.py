"""Serve any ``Generator`` from a real Triton Inference Server (``nvidia-pytriton``).

pytriton ships the ``tritonserver`` binary and its Python backend; this script binds one
Python model that runs the generator and speaks the tensor contract of
``services.generation.backends.oip_client`` (input ``program`` BYTES [1]; outputs ``image``
BYTES [1] PNG, ``generator_id`` BYTES [1], ``generator_seconds`` FP64 [1]).

nvidia-pytriton pins numpy < 2, so it runs from its own virtual environment (``make
triton-venv`` creates ``.venv-triton``)::

    .venv-triton/bin/python services/generation/backends/triton_server.py --backend sim \
        --host 127.0.0.1 --http-port 8000 --grpc-port 8001 [--metrics-port 9102]

Only ``evoharness`` core (pydantic, numpy, Pillow, rfc8785), ``oip_client`` (whose tritonclient
import is lazy), ``prometheus_client`` and pytriton are imported here. Errors: Triton's Python backend reports every model exception as INTERNAL,
so the message starts with the intended gRPC status name (``"INVALID_ARGUMENT: program..."``);
``OIPGenerator`` maps it back. Metrics from ``services.common.metrics`` carry
``backend="triton"`` and are served on ``--metrics-port`` (Triton's own metrics are on
``--triton-metrics-port``).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import signal
import sys
import sysconfig
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

if __package__ in (None, ""):  # run by path: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from evoharness.ports import Generator  # noqa: E402
from evoharness.program import Program  # noqa: E402
from services.generation.backends.oip_client import (  # noqa: E402
    CAPABILITIES_OUTPUT,
    GENERATOR_ID_OUTPUT,
    IMAGE_OUTPUT,
    LAYOUT_INPUT,
    PROGRAM_INPUT,
    REFERENCES_INPUT,
    SECONDS_OUTPUT,
    check_conditioning,
    generate_with,
    import_generator,
    parse_program,
    served_capabilities,
)

log = logging.getLogger("evoharness.triton")

BACKEND_LABEL = "triton"
DEFAULT_MODEL_NAME = "evoharness-generator"


class RequestError(ValueError):
    """A request the model rejects; ``str()`` starts with a gRPC status name."""


def load_generator(spec: str, config: str | None = None) -> Generator:
    """Build the generator to serve.

    ``"sim"``: ``evoharness.sim.SimGenerator()`` (default ``SimParams``; numpy, Pillow only).
    Another name in the generation service's table (``diffusers``, ``openai-images``): built as
    the service builds it, from ``GenerationSettings`` (YAML ``config`` or
    ``$EVOHARNESS_CONFIG``, then ``EVOHARNESS_*`` env); that needs pydantic-settings, PyYAML
    and the backend's own packages in this environment. ``"package.module:attr"``: see
    ``oip_client.import_generator``. Raises ``ValueError`` for ``kserve``/``triton`` (clients,
    not generators) and unknown names.
    """
    if spec == "sim":
        from evoharness.sim import SimGenerator

        return SimGenerator()  # type: ignore[no-any-return]
    if spec in ("kserve", "triton"):
        raise ValueError(f"--backend {spec!r} is an OIP client; wrap a generator backend instead")
    if ":" in spec:
        return import_generator(spec)
    from services.generation.backends import BACKENDS, build_backend

    if spec not in BACKENDS:
        raise ValueError(
            f"--backend {spec!r}: use 'sim', a backend in {sorted(BACKENDS)} "
            "or 'package.module:Factory'"
        )
    try:
        from services.common.settings import load_settings
        from services.generation.settings import GenerationSettings
    except ImportError as exc:
        raise ValueError(
            f"--backend {spec!r} needs the generation settings ({exc.name} is not installed in "
            f"{sys.prefix})"
        ) from exc
    return build_backend(load_settings(GenerationSettings, config, backend=spec))


def parse_request_program(raw: Any) -> Program:
    """``oip_client.parse_program`` with errors as ``RequestError("INVALID_ARGUMENT: ...")``."""
    try:
        return parse_program(raw)
    except ValueError as exc:
        raise RequestError(f"INVALID_ARGUMENT: {exc}") from None


class GeneratorModel:
    """The pytriton inference callable: one request -> one image, serialized by a lock.

    A request whose requested outputs exclude ``image`` is an identity request: it gets
    ``generator_id`` and ``capabilities`` and nothing is generated. The optional ``layout`` and
    ``references`` inputs are checked against the program and the images passed on
    (``oip_client.check_conditioning`` / ``generate_with``).
    """

    def __init__(self, generator: Generator, backend_label: str = BACKEND_LABEL) -> None:
        self.generator = generator
        self.backend_label = backend_label
        self._lock = threading.Lock()
        from services.common import metrics

        self._metrics = metrics

    def __call__(self, requests: list[Any]) -> list[dict[str, np.ndarray]]:
        """pytriton ``infer_func`` (no batching): a list of requests -> a list of outputs."""
        return [self._one(r) for r in requests]

    def _one(self, request: Any) -> dict[str, np.ndarray]:
        m = self._metrics
        t0 = time.perf_counter()
        code = "OK"
        try:
            return self._infer(request)
        except RequestError as exc:
            code = str(exc).split(":", 1)[0]
            raise
        except Exception as exc:
            code = "INTERNAL"
            raise RuntimeError(f"INTERNAL: generator failed: {type(exc).__name__}: {exc}") from exc
        finally:
            m.GENERATION_REQUESTS.labels(self.backend_label, code).inc()
            m.GENERATION_LATENCY.labels(self.backend_label).observe(time.perf_counter() - t0)
            if code != "OK":
                m.GENERATION_ERRORS.labels(self.backend_label, code).inc()

    def _infer(self, request: Any) -> dict[str, np.ndarray]:
        requested = list(getattr(request, "requested_output_names", None) or [])
        if requested and IMAGE_OUTPUT not in requested:
            gen_id = self.generator.generator_id.encode("utf-8")
            caps = served_capabilities(self.generator)
            return {
                GENERATOR_ID_OUTPUT: np.array([gen_id], dtype=np.object_),
                CAPABILITIES_OUTPUT: np.array([caps], dtype=np.object_),
            }
        if PROGRAM_INPUT not in request.data:
            raise RequestError(f"INVALID_ARGUMENT: input {PROGRAM_INPUT!r} is missing")
        arr = request[PROGRAM_INPUT]
        if arr.size != 1:
            raise RequestError(
                f"INVALID_ARGUMENT: input {PROGRAM_INPUT!r} must have one element, "
                f"got shape {list(arr.shape)}"
            )
        program = parse_request_program(arr.reshape(-1)[0])
        data = request.data
        layout = data[LAYOUT_INPUT].reshape(-1) if LAYOUT_INPUT in data else None
        refs = list(data[REFERENCES_INPUT].reshape(-1)) if REFERENCES_INPUT in data else None
        try:
            images = check_conditioning(
                program, layout[0] if layout is not None and layout.size else None, refs
            )
        except ValueError as exc:
            raise RequestError(f"INVALID_ARGUMENT: {exc}") from None
        with self._lock:
            t0 = time.perf_counter()
            image = generate_with(self.generator, program, images)
            if not image.seconds:
                image = dataclasses.replace(image, seconds=time.perf_counter() - t0)
        self._metrics.IMAGES_GENERATED.labels(self.backend_label).inc()
        self._metrics.GENERATOR_SECONDS.labels(self.backend_label).inc(image.seconds)
        return {
            IMAGE_OUTPUT: np.array([image.png], dtype=np.object_),
            GENERATOR_ID_OUTPUT: np.array([image.generator_id.encode("utf-8")], dtype=np.object_),
            SECONDS_OUTPUT: np.array([image.seconds], dtype=np.float64),
        }


def python_backend_env() -> None:
    """Put the interpreter's lib folder first on ``LD_LIBRARY_PATH`` so the Python backend
    stub that tritonserver starts finds this interpreter's ``libpython3.X.so`` (pyenv and
    similar builds are not on the loader's default path)."""
    libdir = sysconfig.get_config_var("LIBDIR")
    if not libdir:
        return
    current = os.environ.get("LD_LIBRARY_PATH", "")
    if libdir not in current.split(os.pathsep):
        os.environ["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (libdir, current) if p)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def serve(
    generator: Generator,
    *,
    model_name: str = DEFAULT_MODEL_NAME,
    host: str = "0.0.0.0",
    http_port: int = 8000,
    grpc_port: int = 8001,
    triton_metrics_port: int = 8002,
    log_verbose: int = 0,
) -> None:
    """Start tritonserver with the generator bound as ``model_name``; blocks until SIGINT or
    SIGTERM. Ports are TCP ports on ``host``; Triton's metrics bind to ``host`` as well."""
    from pytriton.model_config import ModelConfig, Tensor
    from pytriton.triton import Triton, TritonConfig

    python_backend_env()
    # SIGTERM (Kubernetes, ManagedProcess.stop) -> the same clean shutdown as Ctrl-C: pytriton
    # stops tritonserver and frees its shared memory
    signal.signal(signal.SIGTERM, _interrupt)
    config = TritonConfig(
        http_address=host,
        http_port=http_port,
        grpc_address=host,
        grpc_port=grpc_port,
        metrics_address=host,
        metrics_port=triton_metrics_port,
        log_verbose=log_verbose,
    )
    with Triton(config=config) as triton:
        triton.bind(
            model_name=model_name,
            infer_func=GeneratorModel(generator),
            inputs=[
                Tensor(name=PROGRAM_INPUT, dtype=bytes, shape=(1,)),
                Tensor(name=LAYOUT_INPUT, dtype=bytes, shape=(1,), optional=True),
                Tensor(name=REFERENCES_INPUT, dtype=bytes, shape=(-1,), optional=True),
            ],
            outputs=[
                Tensor(name=IMAGE_OUTPUT, dtype=bytes, shape=(1,)),
                Tensor(name=GENERATOR_ID_OUTPUT, dtype=bytes, shape=(1,)),
                Tensor(name=SECONDS_OUTPUT, dtype=np.float64, shape=(1,)),
                Tensor(name=CAPABILITIES_OUTPUT, dtype=bytes, shape=(1,)),
            ],
            config=ModelConfig(batching=False),
            strict=False,
        )
        triton.serve()


def main(argv: list[str] | None = None) -> None:
    """Command line: see the module docstring."""
    p = argparse.ArgumentParser(description="Serve a generator from Triton (pytriton)")
    p.add_argument(
        "--backend", default="sim", help="sim | diffusers | ... | package.module:Factory"
    )
    p.add_argument("--config", default=None, help="generation YAML (else $EVOHARNESS_CONFIG)")
    p.add_argument("--model-name", default=DEFAULT_MODEL_NAME)
    p.add_argument("--host", default="0.0.0.0", help="address for HTTP, gRPC and metrics")
    p.add_argument("--http-port", type=int, default=8000)
    p.add_argument("--grpc-port", type=int, default=8001)
    p.add_argument("--triton-metrics-port", type=int, default=8002)
    p.add_argument(
        "--metrics-port", type=int, default=0, help="evoharness Prometheus metrics (0: off)"
    )
    p.add_argument("--log-verbose", type=int, default=0)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        generator = load_generator(args.backend, args.config)
    except (ValueError, TypeError) as exc:
        raise SystemExit(f"error: {exc}") from None
    if args.metrics_port:
        from prometheus_client import start_http_server

        start_http_server(args.metrics_port, addr=args.host)
    log.info("serving %s (%s) as %s", args.backend, generator.generator_id, args.model_name)
    serve(
        generator,
        model_name=args.model_name,
        host=args.host,
        http_port=args.http_port,
        grpc_port=args.grpc_port,
        triton_metrics_port=args.triton_metrics_port,
        log_verbose=args.log_verbose,
    )


if __name__ == "__main__":
    main()
