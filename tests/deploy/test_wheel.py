"""What the image runs, without Docker: build the project's wheel from a copy of the source,
install it (no dependencies, no index) into a fresh virtual environment that sees the main
environment's third-party packages (a ``.pth`` path line, like ``--system-site-packages``,
so nothing is downloaded),
and from outside the repository run every entrypoint's ``--help`` and import every service
module — from the installed wheel, not from the source tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

from evoharness_app.commands.serve import SERVICES

# builds and installs the wheel in a fresh venv: minutes on 2 cores; `make test-all` runs it
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SOURCES = (
    "pyproject.toml",
    "README.md",
    "evoharness",
    "evoharness_app",
    "services",
    "workflows",
    "harness_registry",
)


@pytest.fixture(scope="module")
def wheel_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    """(venv bin dir, clean env) with the freshly built wheel installed."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in SOURCES:
        p = ROOT / name
        if p.is_dir():
            shutil.copytree(p, src / name, ignore=ignore)
        else:
            shutil.copy2(p, src / name)
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp / "dist"), str(src)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    wheels = list((tmp / "dist").glob("evoharness-*.whl"))
    assert len(wheels) == 1
    env_dir = tmp / "venv"
    venv.create(env_dir, with_pip=False)
    bin_dir = env_dir / "bin"
    # The main environment's third-party packages, after the venv's own site-packages: a
    # plain path line (its .pth files, e.g. the editable install's finder, are not run).
    main_site = next(p for p in sys.path if p.endswith("site-packages") and sys.prefix in p)
    own_site = next((env_dir / "lib").glob("python3*/site-packages"))
    # --ignore-installed: through that path pip can see the main environment's editable
    # evoharness of the same version and install nothing ("already satisfied"; seen once in CI)
    (own_site / "zz_main_env.pth").write_text(main_site + "\n")
    out = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(bin_dir / "python"), "install",
         "--no-deps", "--no-index", "--ignore-installed", "-q", str(wheels[0])],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    assert (bin_dir / "evoharness").exists(), f"the wheel was not installed: {out.stdout}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "EVOHARNESS_"))}
    env.update(PATH=f"{bin_dir}:{env.get('PATH', '')}", OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    yield bin_dir, env


def _run(wheel_env: tuple[Path, dict[str, str]], *argv: str) -> subprocess.CompletedProcess[str]:
    bin_dir, env = wheel_env
    cwd = bin_dir.parent  # outside the repository: the source tree is not importable
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=cwd, env=env)


def test_modules_come_from_the_installed_wheel(wheel_env: tuple[Path, dict[str, str]]) -> None:
    bin_dir, _ = wheel_env
    mods = [
        "evoharness",
        "evoharness_app.cli",
        "workflows.worker",
        "services.common.healthcheck",
        *SERVICES.values(),
    ]
    code = "import importlib,sys\nfor m in sys.argv[1:]: print(importlib.import_module(m).__file__)"
    out = _run(wheel_env, str(bin_dir / "python"), "-c", code, *mods)
    assert out.returncode == 0, out.stderr
    files = out.stdout.split()
    assert len(files) == len(mods)
    site = str(bin_dir.parent / "lib")
    for mod, f in zip(mods, files, strict=True):
        assert f.startswith(site), f"{mod} imported from {f}, not from the wheel"
    # package data the services read at run time is in the wheel
    data = _run(
        wheel_env,
        str(bin_dir / "python"),
        "-c",
        "import services.protos, pathlib; p = pathlib.Path(services.protos.__file__).parent;"
        " print(len(list(p.rglob('*_pb2.py'))))",
    )
    assert data.returncode == 0 and int(data.stdout) >= 5, data.stdout + data.stderr


@pytest.mark.parametrize(
    ("argv", "expect"),
    [
        (("evoharness", "--help"), "serve"),
        (("evoharness", "serve", "--help"), "--metrics-port"),
        (("python", "-m", "workflows.worker", "--help"), "--config"),
        (("python", "-m", "services.generation.backends.kserve_predictor", "--help"), "--backend"),
        (("python", "-m", "services.common.healthcheck", "--help"), "SERVING"),
    ],
)
def test_entrypoint_help(
    wheel_env: tuple[Path, dict[str, str]], argv: tuple[str, ...], expect: str
) -> None:
    bin_dir, _ = wheel_env
    exe = str(bin_dir / argv[0])
    out = _run(wheel_env, exe, *argv[1:])
    assert out.returncode == 0, out.stdout + out.stderr
    assert expect in out.stdout


def test_serve_rejects_an_unknown_service(wheel_env: tuple[Path, dict[str, str]]) -> None:
    bin_dir, _ = wheel_env
    out = _run(wheel_env, str(bin_dir / "evoharness"), "serve", "nosuch")
    assert out.returncode == 1 and "unknown service" in out.stdout + out.stderr
