"""Client side of the shared server conventions: ``open_channel`` builds a gRPC channel with
the same max message sizes, optional TLS (server CA, optional client cert for mTLS) and an
optional bearer token sent as ``authorization: Bearer <token>`` metadata on every call."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024


class _BearerToken(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    def __init__(self, token: str) -> None:
        self._md = ("authorization", f"Bearer {token}")

    def _details(self, d: grpc.ClientCallDetails) -> grpc.ClientCallDetails:
        md = [*(d.metadata or ()), self._md]
        return _Details(d.method, d.timeout, md, d.credentials, d.wait_for_ready, d.compression)

    def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: grpc.ClientCallDetails, request: Any
    ) -> Any:
        return continuation(self._details(details), request)

    def intercept_unary_stream(
        self, continuation: Callable[..., Any], details: grpc.ClientCallDetails, request: Any
    ) -> Any:
        return continuation(self._details(details), request)


class _Details(grpc.ClientCallDetails):
    def __init__(self, method, timeout, metadata, credentials, wait_for_ready, compression):  # type: ignore[no-untyped-def]
        self.method = method
        self.timeout = timeout
        self.metadata = metadata
        self.credentials = credentials
        self.wait_for_ready = wait_for_ready
        self.compression = compression


def open_channel(
    address: str,
    *,
    tls_ca_file: str | Path | None = None,
    tls_client_cert_file: str | Path | None = None,
    tls_client_key_file: str | Path | None = None,
    tls_server_name: str | None = None,
    token: str | None = None,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> grpc.Channel:
    """A channel to ``address``: ``host:port``, or any gRPC target naming several replicas
    (``ipv4:127.0.0.1:5001,127.0.0.1:5002``; ``dns:///svc.ns:50051`` for a Kubernetes
    headless service). Calls are spread over every address the target resolves to
    (``round_robin``; gRPC's default ``pick_first`` would pin one long-lived HTTP/2
    connection to one replica). TLS when ``tls_ca_file`` is given (the CA that signed the
    server certificate; ``tls_server_name`` overrides the name checked). ``token``: bearer
    token added to every call. Close it with ``channel.close()``."""
    options: list[tuple[str, Any]] = [
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.lb_policy_name", "round_robin"),
    ]
    if tls_ca_file:
        if tls_server_name:
            options.append(("grpc.ssl_target_name_override", tls_server_name))
        creds = grpc.ssl_channel_credentials(
            root_certificates=Path(tls_ca_file).read_bytes(),
            private_key=Path(tls_client_key_file).read_bytes() if tls_client_key_file else None,
            certificate_chain=Path(tls_client_cert_file).read_bytes()
            if tls_client_cert_file
            else None,
        )
        channel = grpc.secure_channel(address, creds, options=options)
    else:
        channel = grpc.insecure_channel(address, options=options)
    if token:
        channel = grpc.intercept_channel(channel, _BearerToken(token))
    return channel


class RpcFailure(RuntimeError):
    """A gRPC call failed with a status no more specific exception covers; ``code`` is the
    status name (e.g. ``INTERNAL``)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


def error_from_rpc(err: grpc.RpcError, what: str = "") -> Exception:
    """The Python exception for a failed call, mirroring the server's ``STATUS_MAP``:
    INVALID_ARGUMENT -> ``InvalidField`` (``.field`` parsed from ``<field>: <reason>``),
    NOT_FOUND -> ``NotFound``, DEADLINE_EXCEEDED -> ``TimeoutError``, UNAVAILABLE ->
    ``Unavailable``, RESOURCE_EXHAUSTED -> ``ResourceExhausted``, UNAUTHENTICATED /
    PERMISSION_DENIED -> ``PermissionError``, FAILED_PRECONDITION -> ``FailedPrecondition``,
    anything else -> ``RpcFailure``. ``what`` prefixes the message (e.g. the address)."""
    from services.common.errors import (
        FailedPrecondition,
        InvalidField,
        NotFound,
        ResourceExhausted,
        Unavailable,
    )

    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    details = (err.details() if hasattr(err, "details") else str(err)) or ""
    msg = f"{what}: {details}" if what else details
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        field, _, reason = details.partition(": ")
        return InvalidField(field, reason) if reason else InvalidField("request", details)
    mapping: dict[Any, type[Exception]] = {
        grpc.StatusCode.NOT_FOUND: NotFound,
        grpc.StatusCode.DEADLINE_EXCEEDED: TimeoutError,
        grpc.StatusCode.UNAVAILABLE: Unavailable,
        grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
        grpc.StatusCode.UNAUTHENTICATED: PermissionError,
        grpc.StatusCode.PERMISSION_DENIED: PermissionError,
        grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    }
    if code in mapping:
        return mapping[code](msg)
    return RpcFailure(getattr(code, "name", str(code)), msg)
