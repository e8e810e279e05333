"""Test configuration shared by every test directory.

Server fixtures live in ``tests/fixtures/*.py`` and are registered below; each server is
started once per session on a free port, awaited on its health check, and stopped by PID.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

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
]


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
