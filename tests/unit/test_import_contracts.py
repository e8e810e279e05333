"""The layering in ``.importlinter`` holds for the tree, and an outward import breaks it.

Each case writes one deliberate outward import into a copy of the tree and shows that exactly
the contract guarding that direction breaks: the core importing services, workflows,
harness_registry or the application; services importing workflows or the application;
workflows importing the application; harness_registry importing anything but the core;
workflows or services importing one of the round's step modules (they use its public API)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("evoharness", "evoharness_app", "services", "workflows", "harness_registry")


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("lint-imports")
    if not exe.exists():
        pytest.skip("import-linter is not installed (dev extra)")
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    return subprocess.run(
        [str(exe), "--config", str(cwd / ".importlinter"), "--no-cache"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _copy_tree(dst: Path) -> None:
    shutil.copy(ROOT / ".importlinter", dst / ".importlinter")
    for pkg in PACKAGES:
        shutil.copytree(
            ROOT / pkg, dst / pkg, ignore=shutil.ignore_patterns("*.png", "__pycache__", "assets")
        )


def test_the_tree_keeps_its_contracts(tmp_path: Path) -> None:
    _copy_tree(tmp_path)
    res = _lint_imports(tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "0 broken" in res.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        ("evoharness/trace/_outward.py", "import workflows.params\n", "domain core"),
        ("evoharness/_outward.py", "import services.stack\n", "domain core"),
        ("evoharness/harness/_outward.py", "import harness_registry.db\n", "domain core"),
        ("evoharness/runtime/_outward.py", "import evoharness_app.cli\n", "domain core"),
        ("services/generation/_outward.py", "import workflows.params\n", "Services import"),
        ("services/registry/_outward.py", "import evoharness_app.cli\n", "Services import"),
        ("workflows/_outward.py", "import evoharness_app.main_job\n", "Workflows do not"),
        ("harness_registry/_outward.py", "import services.storage.s3\n", "harness_registry"),
        ("harness_registry/_outward.py", "import workflows.params\n", "harness_registry"),
        ("harness_registry/_outward.py", "import evoharness_app.cli\n", "harness_registry"),
        ("workflows/_outward.py", "import evoharness.trace.cluster\n", "round only through"),
        ("services/_outward.py", "import evoharness.trace.counterfactual\n", "round only through"),
        ("workflows/_outward.py", "import evoharness.trace.round_driver\n", "round only through"),
    ],
)
def test_an_outward_import_breaks_a_contract(
    tmp_path: Path, module: str, line: str, contract: str
) -> None:
    _copy_tree(tmp_path)
    (tmp_path / module).write_text(line)
    res = _lint_imports(tmp_path)
    assert res.returncode != 0
    assert "1 broken" in res.stdout
    broken = res.stdout.split("Broken contracts", 1)[1]
    assert contract in broken
