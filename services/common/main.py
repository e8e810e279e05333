"""``python -m services.<name>.server``: a service's own entry point, without the CLI.

The ``evoharness serve <name>`` command (``evoharness_app.commands.serve``) is the usual way to
start a service; a server module's ``__main__`` uses ``service_main`` instead, so services never
import the application package (a contract in ``.importlinter``).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from services.common.server import PortBindError
from services.common.settings import ServiceSettings, load_settings

T = TypeVar("T", bound=ServiceSettings)


def load_service_settings(
    settings_cls: type[T],
    config: str | Path | None = None,
    port: int | None = None,
    metrics_port: int | None = None,
) -> T:
    """``settings_cls`` from the YAML ``config`` (or ``$EVOHARNESS_CONFIG``), then
    ``EVOHARNESS_*`` env, then ``port`` / ``metrics_port`` (the ``server`` section) when given.
    Raises what ``load_settings`` raises (``ValueError`` naming the file,
    ``pydantic.ValidationError`` naming the field)."""
    server: dict[str, Any] = {}
    if port is not None:
        server["port"] = port
    if metrics_port is not None:
        server["metrics_port"] = metrics_port
    return load_settings(settings_cls, config, **({"server": server} if server else {}))


def service_main(
    name: str,
    settings_cls: type[Any],
    serve: Callable[[Any], None],
    argv: Sequence[str] | None = None,
) -> int:
    """Parse ``--config``, ``--port``, ``--metrics-port`` and ``--log-level``, load
    ``settings_cls`` (YAML, then ``EVOHARNESS_*`` env, then the ports) and run ``serve`` until
    SIGTERM/SIGINT. Returns the exit code: 0, or 1 after printing one line naming the bad
    setting (``<name>: <field>: <message>``) or the startup error."""
    parser = argparse.ArgumentParser(prog=f"python -m services.{name}.server")
    parser.add_argument("--config", "-c", default=None, help="YAML settings file")
    parser.add_argument("--port", type=int, default=None, help="gRPC port (0 = any free one)")
    parser.add_argument("--metrics-port", type=int, default=None, help="Prometheus port")
    parser.add_argument("--log-level", default="INFO", help="Python logging level")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        settings = load_service_settings(settings_cls, args.config, args.port, args.metrics_port)
        serve(settings)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        print(f"error: {name}: {loc}: {err['msg']}", file=sys.stderr)
        return 1
    except (ValueError, ConnectionError, PermissionError, PortBindError) as exc:
        print(f"error: {name}: {exc}", file=sys.stderr)
        return 1
    return 0
