"""``start_on_free_ports``: a port the OS called free can be bound by another process before
the server binds it (a stack's service died with "Address already in use" on a busy machine);
the server is started again on fresh ports, and other failures are not retried."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.common import process
from services.common.process import (
    ManagedProcess,
    ProcessStartError,
    start_on_free_ports,
    tcp_ready,
)

#: binds 127.0.0.1:<port> (argv[1]), then writes the ready file argv[2] and serves until
#: stopped; a taken port ends it with Python's own "[Errno 98] Address already in use". (The
#: ready file, not a TCP probe, says it is up: the squatter would answer a probe.)
SERVER = (
    "import pathlib, socket, sys, time\n"
    "s = socket.socket()\n"
    "s.bind(('127.0.0.1', int(sys.argv[1])))\n"
    "s.listen()\n"
    "pathlib.Path(sys.argv[2]).touch()\n"
    "time.sleep(120)\n"
)


def _starter(tmp_path: Path, started: list[int]):  # type: ignore[no-untyped-def]
    def start(port: int) -> ManagedProcess:
        started.append(port)
        ready = tmp_path / f"{port}-{len(started)}.ready"
        argv = [sys.executable, "-c", SERVER, str(port), str(ready)]
        proc = ManagedProcess(f"bind-{port}", argv, tmp_path / f"{port}.log").start()
        return proc.wait_healthy(ready.is_file, timeout=30)

    return start


@pytest.fixture
def taken() -> Iterator[int]:
    """A loopback port another socket is listening on for the test's duration."""
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        yield squatter.getsockname()[1]


def test_a_port_taken_before_the_server_binds_it_is_picked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, taken: int
) -> None:
    picks = iter([taken])
    real = process.free_port
    monkeypatch.setattr(process, "free_port", lambda: next(picks, None) or real())
    started: list[int] = []
    proc, (port,) = start_on_free_ports(_starter(tmp_path, started), ports=1)
    try:
        assert started[0] == taken and port != taken and started == [taken, port]
        assert proc.alive() and tcp_ready("127.0.0.1", port)
    finally:
        proc.stop()


def test_other_failures_and_the_last_try_are_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, taken: int
) -> None:
    monkeypatch.setattr(process, "free_port", lambda: taken)  # every pick is taken
    started: list[int] = []
    with pytest.raises(ProcessStartError, match="Address already in use"):
        start_on_free_ports(_starter(tmp_path, started), ports=1, tries=3)
    assert started == [taken] * 3

    calls: list[int] = []

    def broken(port: int) -> ManagedProcess:
        calls.append(port)
        raise ProcessStartError("generation exited with code 1: unknown backend")

    with pytest.raises(ProcessStartError, match="unknown backend"):
        start_on_free_ports(broken, ports=1)
    assert len(calls) == 1
