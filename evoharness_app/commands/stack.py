"""``evoharness up`` / ``down`` / ``status``: the local stack on loopback (``services.stack``).

``services`` is imported inside the commands, so the rest of the CLI starts without it.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import typer

RUN_DIR_HELP = "folder for logs, PIDs and data of the stack"
#: How long ``status`` waits for Temporal to describe the worker's task queue, in seconds.
WORKER_HEALTH_TIMEOUT_S = 5.0


def register(app: typer.Typer) -> None:
    """Register ``up``, ``down``, ``status`` and ``env``."""

    @app.command("up")
    def up_cmd(
        run_dir: Path = typer.Option(Path("runs/stack"), "--run-dir", help=RUN_DIR_HELP),
        foreground: bool = typer.Option(
            False, "--foreground", help="stay attached; Ctrl-C stops everything"
        ),
        no_auth: bool = typer.Option(
            False,
            "--no-auth",
            help="start the gRPC services without a bearer token (default: a random token, "
            "exported by `evoharness env` as EVOHARNESS_TOKEN)",
        ),
        tls_cert: Path | None = typer.Option(
            None, "--tls-cert", help="PEM certificate (for 127.0.0.1) every gRPC service serves"
        ),
        tls_key: Path | None = typer.Option(None, "--tls-key", help="its PEM private key"),
        tls_ca: Path | None = typer.Option(
            None, "--tls-ca", help="PEM CA that signed it; every caller in the stack trusts it"
        ),
        preservation: Path | None = typer.Option(
            None,
            "--preservation",
            help="task file (JSONL) the post-promotion check runs on after every promotion "
            "(default: 12 synthetic tasks written to RUN_DIR/postpromotion/)",
        ),
        llm: str | None = typer.Option(
            None,
            "--llm",
            help="'local': also start the local model (extra [llm-local]) on loopback and "
            "point the proposer's LLM roles at it",
        ),
    ) -> None:
        """Start Temporal, S3, registry, generation, verification, proposer, runtime and the
        worker on loopback (free ports; logs in RUN_DIR); the generator is the embedded
        simulator unless configs/generation.yaml says otherwise. Every gRPC service requires
        a random bearer token (unless --no-auth); --tls-cert/--tls-key/--tls-ca turn on TLS
        between all of them. After every promotion the registry starts the post-promotion
        check (PostPromotionWorkflow) on the preservation split."""
        from rich.console import Console

        from evoharness_app.cli import InputError
        from services import stack

        console = Console(stderr=True)
        given = [f for f in (tls_cert, tls_key, tls_ca) if f is not None]
        if given and len(given) != 3:
            raise InputError("--tls-cert, --tls-key and --tls-ca go together")
        tls = (
            stack.TlsFiles(str(tls_cert), str(tls_key), str(tls_ca))
            if tls_cert and tls_key and tls_ca
            else None
        )
        try:
            with console.status("starting the local stack…"):
                state = stack.up(
                    run_dir,
                    llm=llm,
                    security=stack.StackSecurity(auth=not no_auth, tls=tls),
                    preservation=preservation,
                    on_started=lambda c: console.print(
                        f"  [green]✓[/] {c.name:<13} {c.address or '-':<22} pid {c.pid}"
                    ),
                )
        except stack.StackError as exc:
            raise InputError(str(exc)) from None
        except stack.ProcessStartError as exc:
            raise InputError(f"the stack did not start: {exc}") from None
        console.print(
            f"stack up; state in {Path(state.run_dir) / stack.STATE_FILE}. "
            "Stop it with `evoharness down`."
        )
        if foreground:
            done = threading.Event()
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: done.set())
            done.wait()
            stopped = stack.down(run_dir)
            console.print(f"stopped: {', '.join(stopped) or 'nothing'}")

    @app.command("down")
    def down_cmd(
        run_dir: Path = typer.Option(Path("runs/stack"), "--run-dir", help=RUN_DIR_HELP),
    ) -> None:
        """Stop everything `evoharness up` started, by PID."""
        from evoharness_app.cli import InputError
        from services import stack

        try:
            stopped = stack.down(run_dir)
        except stack.StackError as exc:
            raise InputError(str(exc)) from None
        typer.echo(f"stopped: {', '.join(stopped)}" if stopped else "no stack was running")

    def _worker_health(temporal_address: str) -> tuple[str, bool]:
        """(one line, healthy) for the stack's worker: who polls its task queue, from
        Temporal's ``DescribeTaskQueue`` (``workflows.pollers``); a Temporal that does not
        answer within ``WORKER_HEALTH_TIMEOUT_S`` is said so, as unhealthy."""
        import asyncio

        from temporalio.client import Client

        from workflows.params import TASK_QUEUE
        from workflows.pollers import describe_pollers

        async def ask() -> str:
            client = await Client.connect(temporal_address)
            return (await describe_pollers(client, TASK_QUEUE)).summary()

        try:
            line = asyncio.run(asyncio.wait_for(ask(), WORKER_HEALTH_TIMEOUT_S))
        except Exception as exc:  # noqa: BLE001 - any failure to ask is reported, not raised
            why = "no answer in time" if isinstance(exc, TimeoutError) else type(exc).__name__
            return f"Temporal at {temporal_address} did not answer ({why})", False
        return line, line.startswith("polling:")

    @app.command("status")
    def status_cmd(
        run_dir: Path = typer.Option(Path("runs/stack"), "--run-dir", help=RUN_DIR_HELP),
    ) -> None:
        """Show the local stack's components, addresses and health.

        The worker's row names its task queue and who polls it, as Temporal sees it
        (DescribeTaskQueue). Exit 0 when every component is alive and the worker's queue is
        polled; 1 when no stack is running (no state file, or none of its components alive:
        said in one line), when some component is dead or when the worker does not poll."""
        from rich.console import Console
        from rich.table import Table

        from evoharness_app.cli import InputError
        from services import stack

        try:
            state = stack.read_state(run_dir)
        except stack.StackError as exc:
            raise InputError(str(exc)) from None
        if state is None:
            typer.echo("no stack is running (start one with `evoharness up`)")
            raise typer.Exit(1)
        rows = stack.describe(state)
        if not any(r["alive"] for r in rows):
            names = ", ".join(r["name"] for r in rows)
            typer.echo(
                f"no stack is running ({names} in {Path(run_dir) / stack.STATE_FILE} have all "
                "stopped; start one with `evoharness up`)"
            )
            raise typer.Exit(1)
        from workflows.params import TASK_QUEUE

        for r in rows:
            r["health"] = ""
            if r["name"] == "worker" and r["alive"]:
                r["health"], r["healthy"] = _worker_health(r["address"])
                r["address"] = f"task queue {TASK_QUEUE} @ {r['address']}"
        dead = not all(r["alive"] and r.get("healthy", True) for r in rows)
        console = Console()
        if not console.is_terminal:  # piped: one tab-separated line per component, nothing cut
            for r in rows:
                alive = "alive" if r["alive"] else "dead"
                cells = [r["name"], str(r["pid"]), alive, r["address"], r["metrics"], r["log"]]
                typer.echo("\t".join([*cells, r["health"]]))
            if dead:
                raise typer.Exit(1)
            return
        table = Table("component", "pid", "alive", "health", "address", "metrics", "log")
        for r in rows:
            table.add_row(
                r["name"],
                str(r["pid"]),
                "yes" if r["alive"] else "NO",
                r["health"],
                r["address"],
                r["metrics"],
                r["log"],
            )
        console.print(table)
        if dead:
            raise typer.Exit(1)

    @app.command("env")
    def env_cmd(
        run_dir: Path = typer.Option(Path("runs/stack"), "--run-dir", help=RUN_DIR_HELP),
    ) -> None:
        """Print shell exports for the running local stack: TEMPORAL_ADDRESS (read by the
        Temporal CLI and `evoharness evolve`), EVOHARNESS_REGISTRY_TARGET (`evoharness
        registry`), EVOHARNESS_RUNTIME_TARGET (Render clients), the S3 settings, the bearer
        token EVOHARNESS_TOKEN and, with TLS, EVOHARNESS_CLIENT__TLS_CA_FILE. Use: eval "$(evoharness env)"; `evoharness status`
        lists every service's address."""
        import shlex

        from evoharness_app.cli import InputError
        from services import stack

        try:
            state = stack.read_state(run_dir)
        except stack.StackError as exc:
            raise InputError(str(exc)) from None
        if state is None or not stack.running_components(state):
            raise InputError("no stack is running (start one with `evoharness up`)")
        # TEMPORAL_ADDRESS: the Temporal CLI and `evoharness evolve`; EVOHARNESS_S3__*: every
        # client's S3 settings; EVOHARNESS_REGISTRY_TARGET: `evoharness registry`.
        exports = {k: v for k, v in state.env.items() if k.startswith("EVOHARNESS_S3__")}
        # the bearer token every service requires and, with TLS, the CA callers trust
        for k in (stack.TOKEN_ENV, stack.CA_ENV):
            if state.env.get(k):
                exports[k] = state.env[k]
        exports["TEMPORAL_ADDRESS"] = state.address("temporal")
        if "registry" in state.components:
            exports["EVOHARNESS_REGISTRY_TARGET"] = state.address("registry")
        if "runtime" in state.components:  # for Render clients (docs/registry.md: "Calling Render")
            exports["EVOHARNESS_RUNTIME_TARGET"] = state.address("runtime")
        for k, v in sorted(exports.items()):
            typer.echo(f"export {k}={shlex.quote(v)}")
