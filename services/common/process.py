"""Start, health-check and stop local server processes by PID.

Used by the test fixtures and the local stack (``evoharness up``). Every process gets a free
port from the OS, is awaited on a health check (never a fixed sleep), runs in its own process
group, and is stopped by PID (SIGTERM, then SIGKILL after a grace period).

**Dying with the parent.** A process that must not outlive the one that started it (a test
session's servers, ``make evolve``'s own stack) is started with ``die_with_parent`` — or inside
``children_die_with_parent()``, which makes it the default for every ``ManagedProcess`` the
calling thread's context starts. On Linux the child then asks the kernel for SIGKILL when its
parent dies (``prctl(PR_SET_PDEATHSIG)``, prctl(2), set by util-linux ``setpriv`` before it
execs the program), so even a SIGKILLed parent leaves no orphan. The kernel ties this to the *thread* that forked, so it is applied only to processes
started from the main thread (a worker thread that exits would kill them); elsewhere, and on
other systems, the parent must stop them (``stop_pid``, ``stop_descendants``). ``evoharness
up`` starts a background stack that outlives the command, so it does not use it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path

#: Whether a ``ManagedProcess`` with ``die_with_parent=None`` dies with its parent
#: (``children_die_with_parent``).
_DIE_WITH_PARENT: ContextVar[bool] = ContextVar("evoharness_die_with_parent", default=False)


@contextlib.contextmanager
def children_die_with_parent(on: bool = True) -> Iterator[None]:
    """Within the block, every ``ManagedProcess`` started without an explicit
    ``die_with_parent`` dies with this process (``on``) or outlives it (``not on``)."""
    token = _DIE_WITH_PARENT.set(on)
    try:
        yield
    finally:
        _DIE_WITH_PARENT.reset(token)


def _pdeathsig_prefix() -> list[str]:
    """The argv prefix that makes the child get SIGKILL when this process dies: util-linux
    ``setpriv --pdeathsig KILL --`` (the setting survives its ``execve`` into the real
    program); empty where the kernel cannot do it (not Linux), must not (not the main thread,
    see the module docstring) or ``setpriv`` is missing.

    Not a ``preexec_fn``: that forces ``fork()`` in a process that already runs gRPC and
    Temporal threads, whose fork handlers can block the parent for good (seen twice on
    2026-12-06: a stack start and a test fixture hung in ``_fork_exec`` on a futex before the
    child existed). Without one, CPython spawns with ``vfork()``, which runs no fork handlers."""
    if not sys.platform.startswith("linux"):
        return []
    if threading.current_thread() is not threading.main_thread():
        return []
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that the OS reports free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


#: What a server's log says when another process bound its port first (``EADDRINUSE``'s text).
ADDRESS_IN_USE = "Address already in use"


def start_on_free_ports(
    start: Callable[..., ManagedProcess], ports: int = 2, tries: int = 3
) -> tuple[ManagedProcess, tuple[int, ...]]:
    """``start(*ports)`` on ``ports`` ports that the OS reports free, and the ports it got.

    ``free_port`` can only say a port is free *now*: it reserves nothing, and on a busy machine
    another process can bind it before the server does (seen on 2026-12-06: a stack's
    verification service exited with "cannot bind the metrics endpoint ... Address already in
    use"). When ``start`` raises ``ProcessStartError`` and the server's log says
    ``ADDRESS_IN_USE``, fresh ports are picked and ``start`` is called again, up to ``tries``
    times in all; any other failure, or the last one, is raised. ``start`` must leave no
    process running when it raises (``ManagedProcess.wait_healthy`` does not stop a process
    that exited; one that timed out it stops)."""
    for attempt in range(1, tries + 1):
        picked = tuple(free_port() for _ in range(ports))
        try:
            return start(*picked), picked
        except ProcessStartError as exc:
            if attempt == tries or ADDRESS_IN_USE not in str(exc):
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def tcp_ready(host: str, port: int, timeout: float = 0.5) -> bool:
    """True when a TCP connection to ``host:port`` succeeds."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


class ProcessStartError(RuntimeError):
    """A managed process exited or did not become healthy in time; the message includes the
    tail of its log."""


@dataclass
class ManagedProcess:
    """A child process in its own process group, with its output in ``log_path``.

    ``die_with_parent``: the child is SIGKILLed by the kernel when this process dies (Linux,
    started from the main thread; see the module docstring); None: as set by
    ``children_die_with_parent`` (default: it outlives this process)."""

    name: str
    argv: Sequence[str]
    log_path: Path
    env: dict[str, str] | None = None
    cwd: str | None = None
    die_with_parent: bool | None = None
    proc: subprocess.Popen[bytes] | None = field(default=None, init=False)

    @property
    def pid(self) -> int | None:
        """The child's PID, or None before ``start``."""
        return self.proc.pid if self.proc else None

    def start(self) -> ManagedProcess:
        """Spawn the process (stdout and stderr appended to ``log_path``)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        if self.env:
            env.update(self.env)
        bind = _DIE_WITH_PARENT.get() if self.die_with_parent is None else self.die_with_parent
        prefix = _pdeathsig_prefix() if bind else []
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [*prefix, *self.argv],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=self.cwd,
                start_new_session=True,
            )
        if prefix:  # setpriv sets PDEATHSIG, then execs the program: wait for that exec (≤ 2 s)
            exe = Path(f"/proc/{self.proc.pid}/exe")
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline and self.proc.poll() is None:
                with contextlib.suppress(OSError):
                    if exe.resolve().name != "setpriv":
                        break
                time.sleep(0.002)
        return self

    def log_tail(self, n: int = 40) -> str:
        """The last ``n`` lines of the log."""
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def wait_healthy(
        self, check: Callable[[], bool], timeout: float = 60.0, interval: float = 0.05
    ) -> ManagedProcess:
        """Poll ``check`` until it returns True. Raises ``ProcessStartError`` (with the log
        tail) when the process exits first or ``timeout`` seconds pass."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise ProcessStartError(
                    f"{self.name} exited with code {self.proc.returncode} before it was healthy;"
                    f" log {self.log_path}:\n{self.log_tail()}"
                )
            try:
                if check():
                    return self
            except Exception:  # noqa: BLE001 - a failing probe just means "not yet"
                pass
            time.sleep(interval)
            interval = min(interval * 1.5, 0.5)
        self.stop()
        raise ProcessStartError(
            f"{self.name} was not healthy after {timeout:.0f}s; log {self.log_path}:\n"
            f"{self.log_tail()}"
        )

    def alive(self) -> bool:
        """True while the process runs."""
        return self.proc is not None and self.proc.poll() is None

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the process group, wait up to ``grace`` s, then SIGKILL it."""
        if self.proc is None:
            return
        stop_pid(self.proc.pid, grace)
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:  # pragma: no cover
            pass

    def kill(self) -> None:
        """SIGKILL the process group at once (for crash tests)."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()


def pid_alive(pid: int) -> bool:
    """True while process ``pid`` runs: it exists and is not a zombie. A process that exited
    but was not reaped yet (``Z`` in ``/proc/<pid>/stat``) still answers ``kill(pid, 0)``;
    when it is not our child (``evoharness down`` stopping what ``up`` started) only init can
    reap it, which may take seconds, so it counts as stopped."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - another user's process
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]  # after "(comm)", which may hold spaces
    except (OSError, IndexError):  # no procfs (macOS) or gone meanwhile
        return True
    return state not in ("Z", "X")


def stop_pid(pid: int, grace: float = 10.0) -> None:
    """Stop the process group led by ``pid``: SIGTERM, wait ``grace`` s, SIGKILL. The wait
    ends as soon as ``pid`` exited (``pid_alive``)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except ProcessLookupError:
            return
        except PermissionError:  # pragma: no cover - not our group
            os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if not pid_alive(pid):
                try:  # our child: reaped once all its threads have exited
                    if os.waitpid(pid, os.WNOHANG)[0]:
                        return
                except ChildProcessError:  # not ours: it exited, init reaps it
                    return
            time.sleep(0.05)


def descendant_pids(root: int | None = None) -> list[int]:
    """PIDs of every process below ``root`` (default: this process), children first, read
    from the parent PIDs in ``/proc/<pid>/stat`` ([] without procfs)."""
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):  # gone meanwhile
            continue
        children.setdefault(ppid, []).append(int(entry))
    found: list[int] = []
    todo = [root]
    while todo:
        for pid in children.get(todo.pop(0), []):
            found.append(pid)
            todo.append(pid)
    return found


def stop_descendants(grace: float = 5.0) -> list[int]:
    """Stop every process below this one (servers a test session or a job started, and what
    they started): SIGTERM to each and to the process group it leads, up to ``grace`` s for
    all to exit together, then SIGKILL to what is left. Returns the PIDs it signalled. For a
    SIGTERM handler: it neither waits on ``Popen`` objects nor takes their locks."""
    pids = descendant_pids()

    def signal_all(sig: signal.Signals) -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if os.getpgid(pid) == pid:
                    os.killpg(pid, sig)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def all_gone() -> bool:
        for pid in pids:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)  # reap our own children
        return not any(pid_alive(p) for p in pids)

    signal_all(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and not all_gone():
        time.sleep(0.05)
    if not all_gone():
        signal_all(signal.SIGKILL)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and not all_gone():
            time.sleep(0.05)
    return pids
