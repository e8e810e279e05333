"""Start, health-check and stop local server processes by PID.

Used by the test fixtures and the local stack (``evoharness up``). Every process gets a free
port from the OS, is awaited on a health check (never a fixed sleep), runs in its own process
group, and is stopped by PID (SIGTERM, then SIGKILL after a grace period).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that the OS reports free on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


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
    """A child process in its own process group, with its output in ``log_path``."""

    name: str
    argv: Sequence[str]
    log_path: Path
    env: dict[str, str] | None = None
    cwd: str | None = None
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
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                list(self.argv),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=self.cwd,
                start_new_session=True,
            )
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
