"""A killed test session leaves no server behind (issue 27 item 14: eleven generation
servers were found running with no parent after one run of ``tests/services`` was killed by a
time limit). A small pytest session (``orphan_victim.py``) starts real servers through the
session fixtures; it is sent SIGTERM (a CI time limit: ``tests/conftest.py`` stops what the
session started, then tears down) or SIGKILL (no handler runs: the kernel kills every server
started with ``die_with_parent``, ``services.common.process``). Every process that was below
the session is then awaited, by PID, to be gone within a bounded wait."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from services.common.process import descendant_pids, pid_alive

ROOT = Path(__file__).resolve().parents[2]
VICTIM = Path(__file__).with_name("orphan_victim.py")


def _wait(cond, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout:.0f} s: {what}")


@pytest.mark.parametrize(
    ("sig", "time_skipping"),
    [(signal.SIGTERM, True), (signal.SIGKILL, False)],
    ids=["sigterm", "sigkill"],
)
def test_a_killed_session_leaves_no_server(
    sig: signal.Signals, time_skipping: bool, tmp_path: Path
) -> None:
    ready = tmp_path / "ready.json"
    log = tmp_path / "victim.log"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "VICTIM_READY": str(ready),
        "VICTIM_TIME_SKIPPING": "1" if time_skipping else "0",
    }
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(VICTIM)]
    with log.open("wb") as out:
        victim = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    below: list[int] = []
    try:
        _wait(
            lambda: ready.exists() or victim.poll() is not None,
            240,
            "the victim session started its servers",
        )
        assert ready.exists(), f"the victim session exited early:\n{log.read_text()[-3000:]}"
        servers = json.loads(ready.read_text())
        below = descendant_pids(victim.pid)
        assert set(servers.values()) <= set(below), (servers, below)
        assert len(below) >= 3, below  # S3, generation, Temporal (and their children)
        os.kill(victim.pid, sig)
        victim.wait(timeout=120)
        _wait(
            lambda: not [p for p in below if pid_alive(p)],
            60,
            f"every server below the killed session exited; alive: "
            f"{[p for p in below if pid_alive(p)]}",
        )
        if sig == signal.SIGTERM:
            text = log.read_text()
            assert "Traceback" not in text.split("KeyboardInterrupt")[0], text[-3000:]
    finally:  # leave nothing behind even when the assertion failed
        for pid in [victim.pid, *below]:
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
        victim.wait(timeout=30)
