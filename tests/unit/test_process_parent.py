"""``ManagedProcess`` and its parent (``services.common.process``): inside
``children_die_with_parent`` a server is SIGKILLed by the kernel when the process that started
it dies, even by SIGKILL (``make evolve``'s own stack, a test session's servers); outside it a
server outlives its parent (the background stack ``evoharness up`` leaves running)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from services.common.process import pid_alive

ROOT = Path(__file__).resolve().parents[2]
PARENT = """
import sys, time
from pathlib import Path
from services.common.process import ManagedProcess, children_die_with_parent
with children_die_with_parent(sys.argv[1] == "1"):
    p = ManagedProcess("sleeper", ["sleep", "300"], Path(sys.argv[2])).start()
print(p.pid, flush=True)
time.sleep(300)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
@pytest.mark.parametrize("bind", [True, False], ids=["dies-with-parent", "outlives-parent"])
def test_child_and_a_sigkilled_parent(bind: bool, tmp_path: Path) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT, "1" if bind else "0", str(tmp_path / "s.log")],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    try:
        assert pid_alive(child)
        parent.kill()
        parent.wait(timeout=30)  # the kernel signals the child as the parent exits
        deadline = time.monotonic() + 10
        while bind and pid_alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pid_alive(child) is not bind
    finally:
        if pid_alive(child):
            os.killpg(child, signal.SIGKILL)
