"""Probe a gRPC service's standard health check from the command line (container HEALTHCHECK).

    python -m services.common.healthcheck [ADDRESS] [--service NAME] [--timeout SECONDS]

``ADDRESS`` is ``host:port``; without it, ``127.0.0.1:$EVOHARNESS_SERVER__PORT`` (default
50051, the generation service's port), which is what the image's ``HEALTHCHECK`` calls.
Calls ``grpc.health.v1.Health/Check`` (``services.stack.grpc_health_ok``) and exits 0 when
the answer is SERVING, 1 otherwise (NOT_SERVING, unknown service, connection refused,
timeout), printing one line that says why to stderr. Kubernetes uses its native ``grpc:``
probes instead (see ``charts/evoharness``); this module is for Docker and ad-hoc checks,
because ``grpc_health_probe`` is not shipped in the image.
"""

from __future__ import annotations

import argparse
import os
import sys

#: Default gRPC port when neither ADDRESS nor ``EVOHARNESS_SERVER__PORT`` is given.
DEFAULT_PORT = 50051


def default_address(env: dict[str, str] | None = None) -> str:
    """``127.0.0.1:<EVOHARNESS_SERVER__PORT or 50051>`` from ``env`` (default os.environ)."""
    env = dict(os.environ if env is None else env)
    port = env.get("EVOHARNESS_SERVER__PORT", "") or str(DEFAULT_PORT)
    return f"127.0.0.1:{port}"


def check(address: str, service: str = "", timeout: float = 2.0) -> tuple[bool, str]:
    """(healthy, reason) for ``address``'s health check of ``service`` ("" = the server).

    Never raises for an unreachable or unhealthy server: the reason names the gRPC status
    (e.g. ``UNAVAILABLE``) or the answered health status."""
    import grpc

    from services.stack import grpc_health_ok

    try:
        ok = grpc_health_ok(address, service, timeout=timeout)
    except grpc.RpcError as exc:
        code = exc.code() if hasattr(exc, "code") else None
        name = code.name if code is not None else type(exc).__name__
        return False, f"{address}: health check failed: {name}"
    if ok:
        return True, f"{address}: SERVING"
    return False, f"{address}: {service or 'server'} is not SERVING"


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the process exit status (0 healthy, 1 not, 2 usage error)."""
    ap = argparse.ArgumentParser(
        prog="python -m services.common.healthcheck",
        description="Exit 0 when a gRPC server's grpc.health.v1 check answers SERVING.",
    )
    ap.add_argument(
        "address",
        nargs="?",
        default=None,
        help=f"host:port (default 127.0.0.1:$EVOHARNESS_SERVER__PORT or {DEFAULT_PORT})",
    )
    ap.add_argument("--service", default="", help="service name to check ('' = whole server)")
    ap.add_argument("--timeout", type=float, default=2.0, help="seconds (default 2)")
    a = ap.parse_args(argv)
    if a.timeout <= 0:
        ap.error(f"--timeout must be positive, got {a.timeout}")
    ok, reason = check(a.address or default_address(), a.service, a.timeout)
    print(reason, file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
