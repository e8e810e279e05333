"""Open the rendered report in headless Chromium and check that the images are painted.

The before/after PNGs have background colours used nowhere else on the page, so counting
those colours in a screenshot proves the browser decoded and painted the embedded images. A
control with corrupted image data shows the check can fail. Skips without ``chromium``
(fails under CI=true; ``make system-deps`` installs it).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
from PIL import Image

from evoharness.report import render_report
from tests.conftest import require_binary
from tests.report.sample import AFTER_RGB, BEFORE_RGB, make_run


def _chromium(exe: str, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            exe,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--force-color-profile=srgb",
            "--hide-scrollbars",
            f"--user-data-dir={tmp / 'profile'}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def _pixels_near(png: Path, rgb: tuple[int, int, int], tol: int = 6) -> int:
    a = np.asarray(Image.open(png).convert("RGB")).astype(np.int16)
    return int((np.abs(a - np.array(rgb, dtype=np.int16)).max(axis=2) <= tol).sum())


def _screenshot(exe: str, tmp: Path, html: Path) -> Path:
    shot = tmp / f"{html.stem}.png"
    r = _chromium(exe, tmp, "--window-size=1280,2600", f"--screenshot={shot}", html.as_uri())
    assert shot.exists(), r.stderr[-2000:]
    return shot


def test_chromium_renders_the_images(tmp_path: Path) -> None:
    exe = require_binary("chromium")
    report = render_report(make_run(tmp_path), tmp_path / "out")
    shot = _screenshot(exe, tmp_path, report)
    # Each 256 px image is drawn ~260 px wide; two pairs → well over 50k pixels per colour.
    assert _pixels_near(shot, BEFORE_RGB) > 50_000
    assert _pixels_near(shot, AFTER_RGB) > 50_000

    dom = _chromium(exe, tmp_path, "--dump-dom", report.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert (
        len(re.findall(r'<img class="(?:before|after)" src="data:image/png;base64,', dom.stdout))
        == 4
    )
    assert "Before / after: same task, same seed" in dom.stdout


def test_control_corrupted_images_are_not_painted(tmp_path: Path) -> None:
    exe = require_binary("chromium")
    report = render_report(make_run(tmp_path), tmp_path / "out")
    html = report.read_text(encoding="utf-8")
    broken = tmp_path / "broken.html"
    broken.write_text(
        re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]{40}", "data:image/png;base64,AAAA", html),
        encoding="utf-8",
    )
    shot = _screenshot(exe, tmp_path, broken)
    assert _pixels_near(shot, BEFORE_RGB) < 100 and _pixels_near(shot, AFTER_RGB) < 100
