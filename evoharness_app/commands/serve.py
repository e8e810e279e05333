"""``evoharness serve <service>``: run one gRPC service in the foreground.

Each service module (``SERVICES`` below) exposes ``Settings`` (a
``services.common.settings.ServiceSettings`` subclass) and ``serve(settings)``, which blocks
until SIGTERM/SIGINT and then stops gracefully. Add a service with one line in ``SERVICES``.
The import of ``services`` happens inside the command, so the rest of the CLI starts without
the gRPC stack.
"""

from __future__ import annotations

import importlib
import logging
import os
from pathlib import Path
from typing import Any

import typer

#: service name -> module exposing ``Settings`` and ``serve(settings)``.
SERVICES: dict[str, str] = {
    "generation": "services.generation.server",
    "verification": "services.verification.server",
    "proposer": "services.proposer.server",
    "registry": "services.registry.server",
    "runtime": "services.runtime.server",
}


def load_service_settings(
    service: str,
    config: Path | None = None,
    port: int | None = None,
    metrics_port: int | None = None,
) -> tuple[Any, Any]:
    """(module, settings) for ``service``: YAML ``config``, then ``EVOHARNESS_*`` env, then
    ``port``/``metrics_port``. Raises ``evoharness_app.cli.InputError`` for an unknown service
    or bad settings (the message names the file and field)."""
    from pydantic import ValidationError

    from evoharness_app.cli import InputError

    if service not in SERVICES:
        raise InputError(f"unknown service {service!r}; choose one of {sorted(SERVICES)}")
    module = importlib.import_module(SERVICES[service])
    from services.common.main import load_service_settings as load_with_ports

    try:
        settings = load_with_ports(module.Settings, config, port, metrics_port)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        env = "EVOHARNESS_" + "__".join(str(p).upper() for p in err["loc"])
        source = env if env in os.environ else (config or "settings")
        raise InputError(f"{source}: {loc}: {err['msg']}") from None
    except ValueError as exc:
        raise InputError(str(exc)) from exc
    return module, settings


def register(app: typer.Typer) -> None:
    """Register ``serve`` on the CLI."""

    @app.command("serve")
    def serve(
        service: str = typer.Argument(..., help=f"one of: {', '.join(sorted(SERVICES))}"),
        config: Path | None = typer.Option(
            None, "--config", "-c", help="YAML settings file (default $EVOHARNESS_CONFIG)"
        ),
        port: int | None = typer.Option(
            None, "--port", min=0, max=65535, help="gRPC port (0 = any free one)"
        ),
        metrics_port: int | None = typer.Option(
            None,
            "--metrics-port",
            min=-1,
            max=65535,
            help="Prometheus port (0 = any free one, -1 = off)",
        ),
        log_level: str = typer.Option("INFO", "--log-level", help="Python logging level"),
    ) -> None:
        """Run a gRPC service (health, reflection, metrics) until SIGTERM or Ctrl-C."""
        from evoharness_app.cli import InputError

        if not isinstance(logging.getLevelName(log_level.upper()), int):
            raise typer.BadParameter(
                f"{log_level!r} is not a logging level (DEBUG, INFO, WARNING, ERROR, CRITICAL)",
                param_hint="--log-level",
            )
        logging.basicConfig(
            level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
        module, settings = load_service_settings(service, config, port, metrics_port)
        from services.common.server import PortBindError

        try:
            module.serve(settings)
        except (ValueError, ConnectionError, PermissionError, PortBindError) as exc:
            raise InputError(f"{service}: {exc}") from exc
