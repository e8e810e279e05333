"""``make evolve``'s own stack stops when the job dies, even by SIGKILL (issue 27 item 14):
the job starts the whole local stack (``evoharness evolve main``, no stack running), is
SIGKILLed once every component is up, and every component's PID from the stack's state file
is then awaited to be gone (bounded wait). No handler runs on SIGKILL: the kernel kills each
server (``PR_SET_PDEATHSIG``, ``services.common.process.children_die_with_parent``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from services.common.process import pid_alive
from tests.conftest import ROOT, SHARED, require

pytestmark = pytest.mark.e2e


def test_a_killed_main_job_leaves_no_stack(tmp_path: Path) -> None:
    require((SHARED / "data" / "geneval").is_dir(), "shared GenEval data is missing")
    state_file = tmp_path / "runs" / "stack" / "state.json"
    log = tmp_path / "job.log"
    argv = [sys.executable, "-m", "evoharness_app", "evolve", "main", "--sizes", "4,2,2"]
    argv += ["--rounds", "1", "--seeds", "1", "--synthetic", "0"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "EVOHARNESS_SHARED": str(SHARED)}
    with log.open("wb") as out:
        job = subprocess.Popen(
            argv,
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    pids: dict[str, int] = {}
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and job.poll() is None:
            try:
                comps = json.loads(state_file.read_text())["components"]
            except (OSError, ValueError, KeyError):
                comps = {}
            if "worker" in comps:  # the last component: the whole stack is up
                pids = {name: c["pid"] for name, c in comps.items()}
                break
            time.sleep(0.2)
        assert pids, f"the stack did not come up:\n{log.read_text()[-3000:]}"
        os.kill(job.pid, signal.SIGKILL)
        job.wait(timeout=30)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(pid_alive(p) for p in pids.values()):
            time.sleep(0.1)
        alive = {n: p for n, p in pids.items() if pid_alive(p)}
        assert not alive, f"alive after the job was killed: {alive}"
    finally:
        if job.poll() is None:
            job.kill()
        for pid in pids.values():  # each component leads its own process group
            if pid_alive(pid):
                os.killpg(pid, signal.SIGKILL)
        job.wait(timeout=30)
