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


def test_internal_vs_official_table_stays_inside_its_section(tmp_path: Path) -> None:
    """At a 1,400 px window the internal-vs-official table (16 columns, intervals under each
    figure) is wider than its section: it must scroll inside it, not run past the page's edge
    where nothing can reach it (issue 27 item 7). A script in a copy of the page writes the
    measured edges into the title, which ``--dump-dom`` returns."""
    from evoharness.report import VerifierScores
    from evoharness.report.intervals import paired_rate

    exe = require_binary("chromium")
    rate = paired_rate(
        {f"t{i}": (8, i % 9) for i in range(20)}, {f"t{i}": (8, 8) for i in range(20)}
    )
    scores = VerifierScores(
        internal_constraint=rate,
        official_constraint=rate,
        internal_geneval=rate,
        official_geneval=rate,
    )
    run = make_run(tmp_path, n_pairs=0).model_copy(
        update={
            "verifier_scores": {s: scores for s in ("target", "heldout", "preservation", "test")},
            "internal_verifier": "sim-detector@0123456789abcdef",
            "official_verifier": "sim-inspector@0123456789abcdef (exact, GenEval rules)",
        }
    )
    html = render_report(run, tmp_path / "out").read_text(encoding="utf-8")
    probe = """<script>
const t = document.getElementById('verifier-scores');
const s = document.getElementById('internal-vs-official');
let box = t.parentElement;
document.title = JSON.stringify({
  table: t.getBoundingClientRect().right, section: s.getBoundingClientRect().right,
  visible: Math.min(box.getBoundingClientRect().right, s.getBoundingClientRect().right),
  scrolls: getComputedStyle(box).overflowX, page: document.documentElement.scrollWidth,
  window: window.innerWidth});
</script></body>"""
    page = tmp_path / "probe.html"
    page.write_text(html.replace("</body>", probe), encoding="utf-8")
    dom = _chromium(exe, tmp_path, "--window-size=1400,900", "--dump-dom", page.as_uri())
    m = re.search(r"<title>(\{.*?\})</title>", dom.stdout)
    assert m, dom.stderr[-2000:]
    import json

    box = json.loads(m.group(1).replace("&quot;", '"'))
    # wider than the section, so it must scroll there rather than spill out of the page
    assert box["table"] > box["section"], box
    assert box["scrolls"] in ("auto", "scroll"), box
    assert box["page"] <= box["window"], box
