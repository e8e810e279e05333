"""The one small server module every evoharness gRPC service uses.

``build_server(settings, services)`` returns a started ``RunningServer`` with:

- interceptors: bearer-token auth (optional), Prometheus metrics (``GRPC_REQUESTS``,
  ``GRPC_LATENCY`` from ``services.common.metrics``), deadline propagation, and status
  mapping: handlers raise plain exceptions and clients get a status code and a message that
  names the field, never a stack trace (see ``STATUS_MAP``);
- the standard gRPC health service (``grpc.health.v1.Health``) and server reflection;
- request limits (``services.common.limits``: prompt size, references, layout items,
  metadata, concurrent RPCs) from ``settings.limits``;
- max message sizes, optional TLS (and mTLS), a Prometheus HTTP endpoint on its own port;
- graceful stop: health flips to NOT_SERVING, in-flight RPCs get ``grace_seconds``.

Handlers read the caller's deadline with ``remaining_seconds()`` / ``check_deadline()`` and
pass it on to downstream calls (S3, other services), so an expired request stops early.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import signal
import ssl
import threading
import time
from collections.abc import Callable, Sequence
from concurrent import futures
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from pydantic import ValidationError

from services.common import limits, metrics
from services.common.errors import (
    FailedPrecondition,
    InvalidField,
    NotFound,
    ResourceExhausted,
    Unavailable,
)
from services.common.settings import ServerSettings

log = logging.getLogger("evoharness.server")

#: Exception type -> gRPC status code; the first matching entry (in order) wins.
STATUS_MAP: list[tuple[type[BaseException], grpc.StatusCode]] = [
    (InvalidField, grpc.StatusCode.INVALID_ARGUMENT),
    (ValidationError, grpc.StatusCode.INVALID_ARGUMENT),
    (NotFound, grpc.StatusCode.NOT_FOUND),
    (KeyError, grpc.StatusCode.NOT_FOUND),
    (FileNotFoundError, grpc.StatusCode.NOT_FOUND),
    (TimeoutError, grpc.StatusCode.DEADLINE_EXCEEDED),
    (ResourceExhausted, grpc.StatusCode.RESOURCE_EXHAUSTED),
    (FailedPrecondition, grpc.StatusCode.FAILED_PRECONDITION),
    (PermissionError, grpc.StatusCode.PERMISSION_DENIED),
    (Unavailable, grpc.StatusCode.UNAVAILABLE),
    (ConnectionError, grpc.StatusCode.UNAVAILABLE),
    (NotImplementedError, grpc.StatusCode.UNIMPLEMENTED),
    (ValueError, grpc.StatusCode.INVALID_ARGUMENT),
    (TypeError, grpc.StatusCode.INVALID_ARGUMENT),
]

#: Methods reachable without a bearer token (health checks and reflection).
PUBLIC_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")

_DEADLINE: ContextVar[float | None] = ContextVar("evoharness_deadline", default=None)


class DeadlineExceeded(TimeoutError):
    """The caller's deadline passed while the handler was working (DEADLINE_EXCEEDED)."""


#: A ``time_remaining()`` beyond this many seconds (about 31.7 years) means "no deadline":
#: gRPC Python reports an absent deadline as ~9.2e18 s, which no downstream call accepts.
NO_DEADLINE_SECONDS = 1e9


def effective_timeout(remaining: float | None, cap: float) -> float | None:
    """The deadline (seconds from now) a handler works under, from the client's
    ``context.time_remaining()`` and the server-side cap ``cap`` (0 = none).

    An absent deadline (``None``) or a huge one (> ``NO_DEADLINE_SECONDS``: what gRPC reports
    for a call without a deadline) counts as none; a deadline further away than ``cap`` is
    shortened to ``cap``. Returns None only when there is neither a deadline nor a cap.
    """
    if remaining is not None and remaining > NO_DEADLINE_SECONDS:
        remaining = None
    if cap > 0 and (remaining is None or remaining > cap):
        return cap
    return remaining


def remaining_seconds(default: float | None = None) -> float | None:
    """Seconds left before the current RPC's deadline (``default`` when it has none or
    outside an RPC). Pass this as ``timeout=`` to downstream calls (deadline propagation)."""
    dl = _DEADLINE.get()
    if dl is None:
        return default
    return dl - time.monotonic()


def check_deadline(what: str = "request") -> None:
    """Raise ``DeadlineExceeded`` when the current RPC's deadline has passed. Call it before
    side effects (e.g. before writing to S3) so that an abandoned request writes nothing."""
    left = remaining_seconds()
    if left is not None and left <= 0:
        raise DeadlineExceeded(f"{what}: deadline exceeded ({-left * 1000:.0f} ms ago)")


def status_for(exc: BaseException) -> grpc.StatusCode:
    """The gRPC status code for exception ``exc`` (``STATUS_MAP``; INTERNAL otherwise)."""
    for typ, code in STATUS_MAP:
        if isinstance(exc, typ):
            return code
    return grpc.StatusCode.INTERNAL


def client_message(exc: BaseException, code: grpc.StatusCode) -> str:
    """The message a client sees for ``exc``: for validation errors ``<field>: <reason>``;
    for INTERNAL only the exception type (details go to the server log)."""
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err.get("loc", ()))
        msg = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        return f"{loc}: {msg}" if loc else msg
    if code is grpc.StatusCode.INTERNAL:
        return f"internal error ({type(exc).__name__}); see the server log"
    if isinstance(exc, KeyError) and not isinstance(exc, NotFound) and exc.args:
        text = str(exc)
        return text if not (text.startswith("'") and text.endswith("'")) else text[1:-1]
    return str(exc) or type(exc).__name__


def _split_method(full: str) -> tuple[str, str]:
    parts = full.strip("/").split("/")
    return (parts[0], parts[1]) if len(parts) == 2 else (full, "")


class _Interceptor(grpc.ServerInterceptor):
    """Auth, metrics, deadline propagation and status mapping for unary and streaming RPCs."""

    def __init__(
        self,
        token: str,
        max_request_seconds: float = 0.0,
        on_refused: dict[str, RefusalHook] | None = None,
    ) -> None:
        self._token = token.encode() if token else b""
        self._cap = max_request_seconds
        self._on_refused = dict(on_refused or {})

    def _authorized(self, details: grpc.HandlerCallDetails) -> bool:
        if not self._token or details.method.startswith(PUBLIC_PREFIXES):
            return True
        for key, value in details.invocation_metadata or ():
            if key == "authorization":
                v = value.encode() if isinstance(value, str) else value
                return hmac.compare_digest(v, b"Bearer " + self._token)
        return False

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        service, method = _split_method(handler_call_details.method)
        authorized = self._authorized(handler_call_details)
        public = handler_call_details.method.startswith(PUBLIC_PREFIXES)
        on_refused = self._on_refused.get(service)

        def wrap(fn: Callable[..., Any], streaming_response: bool) -> Callable[..., Any]:
            def run(request: Any, context: grpc.ServicerContext) -> Any:
                start = time.perf_counter()
                code = grpc.StatusCode.OK
                started = False
                remaining = effective_timeout(context.time_remaining(), self._cap)
                token = _DEADLINE.set(
                    time.monotonic() + remaining if remaining is not None else None
                )
                try:
                    if not authorized:
                        code = grpc.StatusCode.UNAUTHENTICATED
                        context.abort(code, "missing or invalid bearer token (authorization)")
                    if remaining is not None and remaining <= 0:
                        code = grpc.StatusCode.DEADLINE_EXCEEDED
                        context.abort(code, "deadline exceeded before the handler started")
                    started = True
                    result = fn(request, context)
                    if streaming_response:
                        yield from result
                        return
                    return result
                except Exception as exc:
                    ctx_code = context.code() if hasattr(context, "code") else None
                    if ctx_code not in (None, grpc.StatusCode.OK):
                        code = ctx_code  # context.abort() already set the status
                        raise
                    code = status_for(exc)
                    if code is grpc.StatusCode.INTERNAL:
                        log.exception("%s/%s failed", service, method)
                    else:
                        log.info("%s/%s -> %s: %s", service, method, code.name, exc)
                    context.abort(code, client_message(exc, code))
                finally:
                    _DEADLINE.reset(token)
                    if not started and on_refused is not None:
                        on_refused(method, request, code)
                    if not public:
                        metrics.GRPC_REQUESTS.labels(service, method, code.name).inc()
                        metrics.GRPC_LATENCY.labels(service, method).observe(
                            time.perf_counter() - start
                        )

            if streaming_response:
                return run

            def unary(request: Any, context: grpc.ServicerContext) -> Any:
                gen = run(request, context)
                try:
                    next(gen)
                except StopIteration as stop:
                    return stop.value
                raise RuntimeError("unreachable")  # pragma: no cover

            return unary

        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(
                wrap(handler.unary_unary, False),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(
                wrap(handler.unary_stream, True),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler  # client-streaming RPCs: not used by evoharness


#: ``(method, request, code)``: a call to the service refused before its handler ran.
RefusalHook = Callable[[str, Any, grpc.StatusCode], None]


@dataclass
class ServiceRegistration:
    """One gRPC service to serve: ``servicer`` implements it, ``add_to_server`` is the
    generated ``add_<Name>Servicer_to_server``, ``full_name`` the proto service name
    (``evoharness.v1.GenerationService``) used for health and reflection.

    ``on_refused`` (optional) is called with ``(method, request, code)`` for a call the
    shared interceptor refused before the handler ran (a bad token: UNAUTHENTICATED; a
    deadline already passed when a handler thread took it: DEADLINE_EXCEEDED), so that a
    service's own request counters include calls its handler never saw."""

    servicer: Any
    add_to_server: Callable[[Any, grpc.Server], None]
    full_name: str
    on_refused: RefusalHook | None = None


@dataclass
class RunningServer:
    """A started server. ``port``: the bound gRPC port; ``metrics_port``: the Prometheus
    HTTP port (None when disabled). Stop it with ``stop()``; block with ``wait()``."""

    server: grpc.Server
    port: int
    metrics_port: int | None
    health: health.HealthServicer
    service_names: list[str]
    grace_seconds: float
    _metrics_httpd: Any = None
    _stopped: threading.Event = field(default_factory=threading.Event)
    #: called after the gRPC server has stopped (in-flight RPCs done), e.g. to flush a writer
    on_stop: list[Callable[[], None]] = field(default_factory=list)

    def stop(self, grace: float | None = None) -> None:
        """Graceful stop: health NOT_SERVING, refuse new RPCs, let in-flight ones finish
        within ``grace`` seconds (default ``grace_seconds``), stop the metrics endpoint."""
        if self._stopped.is_set():
            return
        self.health.enter_graceful_shutdown()
        self.server.stop(self.grace_seconds if grace is None else grace).wait()
        for fn in self.on_stop:
            fn()
        if self._metrics_httpd is not None:
            self._metrics_httpd.shutdown()
            self._metrics_httpd.server_close()
        self._stopped.set()

    def wait(self) -> None:
        """Block until ``stop()`` has completed."""
        self._stopped.wait()


def _read(path: str | None, what: str) -> bytes:
    if not path:
        raise ValueError(f"server.{what} is not set")
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"server.{what}: file {p} does not exist")
    return p.read_bytes()


def server_credentials(settings: ServerSettings) -> grpc.ServerCredentials | None:
    """TLS credentials when ``tls_cert_file`` and ``tls_key_file`` are set (mTLS when
    ``tls_client_ca_file`` is too), else None. Raises ``ValueError`` naming the setting when
    only one of the pair is set, a file is missing or is not a matching PEM certificate/key."""
    if not settings.tls_cert_file and not settings.tls_key_file:
        return None
    cert = _read(settings.tls_cert_file, "tls_cert_file")
    key = _read(settings.tls_key_file, "tls_key_file")
    ca = (
        _read(settings.tls_client_ca_file, "tls_client_ca_file")
        if settings.tls_client_ca_file
        else None
    )
    # gRPC only reports "cannot add port" for a bad PEM; the ssl module names the problem
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        ctx.load_cert_chain(str(settings.tls_cert_file), str(settings.tls_key_file))
    except ssl.SSLError as exc:
        raise ValueError(
            f"server.tls_cert_file/tls_key_file: not a matching PEM certificate and key "
            f"({exc.reason or exc})"
        ) from None
    if ca is not None:
        try:
            ctx.load_verify_locations(cadata=ca.decode("utf-8", "replace"))
        except (ssl.SSLError, ValueError) as exc:
            raise ValueError(f"server.tls_client_ca_file: not a PEM certificate ({exc})") from None
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=ca, require_client_auth=ca is not None
    )


def grpc_options(max_message_bytes: int) -> list[tuple[str, Any]]:
    """Channel/server options setting the max send and receive message sizes."""
    return [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
    ]


class PortBindError(RuntimeError):
    """The gRPC or metrics port cannot be bound (in use, or not allowed)."""


def build_server(
    settings: ServerSettings, services: Sequence[ServiceRegistration]
) -> RunningServer:
    """Create, bind and start a gRPC server for ``services`` with the shared interceptors,
    health, reflection, limits, TLS/auth from ``settings``, and the metrics endpoint.

    Raises ``PortBindError`` (a ``RuntimeError``) when the gRPC or metrics port cannot be
    bound, ``ValueError`` for bad TLS settings.
    """
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=settings.max_workers, thread_name_prefix="grpc"),
        interceptors=[
            _Interceptor(
                settings.auth_token.get_secret_value(),
                settings.max_request_seconds,
                {r.full_name: r.on_refused for r in services if r.on_refused is not None},
            ),
            limits.LimitsInterceptor(settings.limits),  # inner: its errors are status-mapped
        ],
        # gRPC binds with SO_REUSEPORT by default: a second server on a port another one
        # holds would start and share its traffic silently instead of failing as in use
        options=grpc_options(settings.max_message_bytes)
        + limits.grpc_limit_options(settings.limits)
        + [("grpc.so_reuseport", 0)],
        maximum_concurrent_rpcs=settings.limits.max_concurrent_rpcs or None,
    )
    names = []
    for reg in services:
        reg.add_to_server(reg.servicer, server)
        names.append(reg.full_name)
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        [
            *names,
            health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
            reflection.SERVICE_NAME,
        ],
        server,
    )
    address = f"{settings.host}:{settings.port}"
    creds = server_credentials(settings)
    try:
        port = (
            server.add_secure_port(address, creds) if creds else server.add_insecure_port(address)
        )
    except RuntimeError:  # grpcio >= 1.60 raises instead of returning 0
        port = 0
    if port == 0:
        raise PortBindError(f"cannot bind gRPC server to {address} (server.port in use?)")
    httpd = None
    metrics_port: int | None = None
    if settings.metrics_port >= 0:
        from prometheus_client import start_http_server

        try:
            httpd, _thread = start_http_server(settings.metrics_port, addr=settings.metrics_host)
        except OSError as exc:
            server.stop(None)
            raise PortBindError(
                f"cannot bind the metrics endpoint to {settings.metrics_host}:"
                f"{settings.metrics_port} (server.metrics_port): {exc.strerror or exc}"
            ) from None
        metrics_port = int(httpd.server_port)
    server.start()
    health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    for n in names:
        health_servicer.set(n, health_pb2.HealthCheckResponse.SERVING)
    running = RunningServer(
        server=server,
        port=port,
        metrics_port=metrics_port,
        health=health_servicer,
        service_names=names,
        grace_seconds=settings.grace_seconds,
        _metrics_httpd=httpd,
    )
    if settings.ready_file:
        _write_ready(Path(settings.ready_file), running)
    log.info("serving %s on %s:%s (metrics %s)", names, settings.host, port, metrics_port)
    return running


def _write_ready(path: Path, running: RunningServer) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + f".{os.getpid()}.tmp")
    tmp.write_text(
        json.dumps({"pid": os.getpid(), "port": running.port, "metrics_port": running.metrics_port})
    )
    tmp.replace(path)


def serve_until_signal(running: RunningServer) -> None:
    """Block until SIGTERM or SIGINT, then stop gracefully (for ``evoharness serve``)."""
    done = threading.Event()

    def _handler(signum: int, _frame: Any) -> None:
        log.info("signal %s: stopping gracefully", signum)
        done.set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _handler)
    done.wait()
    running.stop()
