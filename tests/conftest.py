"""Test configuration shared by every test directory.

Server fixtures live in ``tests/fixtures/*.py`` and are registered below; each server is
started once per session on a free port, awaited on its health check, and stopped by PID.

No server outlives the session: every ``ManagedProcess`` the session starts dies with it
(``children_die_with_parent``: the kernel SIGKILLs it when pytest dies, even by SIGKILL), and
a SIGTERM (a CI time limit, ``timeout``) stops every process below pytest, then ends the
session as Ctrl-C does, so fixtures tear down and pytest exits.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
from pathlib import Path
from types import FrameType

import pytest

from services.common.process import children_die_with_parent, stop_descendants

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("EVOHARNESS_SHARED", ROOT.parent / "shared")).resolve()
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

pytest_plugins: list[str] = [
    # "tests.fixtures.<name>", one line per fixture module
    "tests.fixtures.s3",
    "tests.fixtures.services",
    "tests.fixtures.fake_openai",
    "tests.fixtures.local_llm",
    "tests.fixtures.oip",
    "tests.fixtures.temporal",
    "tests.fixtures.mlflow",
]


_SESSION = contextlib.ExitStack()
_PREVIOUS_SIGTERM: list[object] = []


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    """Stop every server this session started (and what they started), then interrupt the
    session like Ctrl-C so fixtures tear down; a second SIGTERM ends pytest at once."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    stop_descendants()
    raise KeyboardInterrupt(f"signal {signum}: the session was asked to stop")


def pytest_configure(config: pytest.Config) -> None:
    """Bind the session's servers to it and install the SIGTERM handler."""
    _SESSION.enter_context(children_die_with_parent())
    _PREVIOUS_SIGTERM[:] = [signal.signal(signal.SIGTERM, _on_sigterm)]


def pytest_unconfigure(config: pytest.Config) -> None:
    """Undo ``pytest_configure`` (an in-process pytest run leaves its caller as it was)."""
    if signal.getsignal(signal.SIGTERM) is _on_sigterm and _PREVIOUS_SIGTERM:
        signal.signal(signal.SIGTERM, _PREVIOUS_SIGTERM.pop())  # type: ignore[arg-type]
    _SESSION.close()


def require(condition: bool, reason: str) -> None:
    """Skip the test with ``reason`` when ``condition`` is false — but fail under CI=true,
    where every dependency must be present."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"required under CI=true: {reason}")
    pytest.skip(reason)


def require_binary(name: str) -> str:
    """Path of executable ``name`` on PATH, or skip (fail under CI)."""
    path = shutil.which(name)
    require(path is not None, f"{name} is not installed")
    assert path is not None
    return path


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The read-only ``../shared`` folder with the real prompt data."""
    require(SHARED.is_dir(), f"shared data folder {SHARED} is missing")
    return SHARED


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository root."""
    return ROOT
