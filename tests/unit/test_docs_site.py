"""The documentation: a short README whose links resolve, and a MkDocs site that builds strictly.

The site (``mkdocs.yml``, pages under ``docs/``) is built with ``mkdocs build --strict``; the
``validation`` settings of ``mkdocs.yml`` (MkDocs >= 1.6) make a link to a missing page, a
missing anchor, an absolute link or a page left out of the nav a warning, and ``--strict``
turns every warning into a failure. A test breaks a link in a copy of the site and shows that
the build then fails, naming the link.

README.md is read on GitHub, not in the site, so its relative links are checked here: each
must name an existing file, and an anchor must match a heading of the target page by GitHub's
rule (lower case, punctuation other than ``-`` and ``_`` removed, spaces as ``-``)."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
#: The README stays what a newcomer needs (issue 27, item 15); the rest is in docs/.
README_MAX_LINES = 300
#: [text](target) in Markdown, outside code spans; images ![..](..) included.
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _require_mkdocs() -> None:
    require(
        importlib.util.find_spec("mkdocs") is not None
        and importlib.util.find_spec("material") is not None,
        "mkdocs and mkdocs-material are not installed (dev extra)",
    )


def _build(project: Path, site_dir: Path) -> subprocess.CompletedProcess[str]:
    """``python -m mkdocs build --strict`` in ``project``; the completed process."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _copy_site_sources(dst: Path) -> None:
    shutil.copy(ROOT / "mkdocs.yml", dst / "mkdocs.yml")
    shutil.copytree(ROOT / "docs", dst / "docs")


def _outside_code(text: str) -> str:
    """``text`` without fenced code blocks and inline code spans."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def _github_anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but ``-``/``_`` removed, spaces
    as ``-`` (links in Markdown are reduced to their text)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    out = set()
    fence = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fence = not fence
        m = None if fence else HEADING.match(line)
        if m:
            out.add(_github_anchor(m.group(2)))
    return out


def test_site_builds_strictly(tmp_path: Path) -> None:
    """The site as committed builds with --strict: every link, anchor and nav entry resolves."""
    _require_mkdocs()
    proc = _build(ROOT, tmp_path / "site")
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "architecture.html").is_file()


@pytest.mark.parametrize(
    ("broken", "named"),
    [
        ("[the gate](no-such-page.md)", "no-such-page.md"),
        ("[the gate](evolution.md#no-such-heading)", "no-such-heading"),
    ],
    ids=["missing page", "missing anchor"],
)
def test_broken_link_fails_the_build(tmp_path: Path, broken: str, named: str) -> None:
    """A link to a missing page or anchor in a page fails the strict build, naming it."""
    _require_mkdocs()
    project = tmp_path / "project"
    project.mkdir()
    _copy_site_sources(project)
    page = project / "docs" / "getting-started.md"
    page.write_text(page.read_text(encoding="utf-8") + f"\nSee {broken}.\n", encoding="utf-8")
    proc = _build(project, tmp_path / "site")
    assert proc.returncode != 0, "a broken link did not fail mkdocs build --strict"
    assert named in proc.stdout + proc.stderr


def test_page_left_out_of_the_nav_fails_the_build(tmp_path: Path) -> None:
    """A page under docs/ that the nav does not list fails the strict build: one page per
    section, each reachable from the nav."""
    _require_mkdocs()
    project = tmp_path / "project"
    project.mkdir()
    _copy_site_sources(project)
    (project / "docs" / "orphan.md").write_text("# Orphan\n", encoding="utf-8")
    proc = _build(project, tmp_path / "site")
    assert proc.returncode != 0
    assert "orphan.md" in proc.stdout + proc.stderr


def test_readme_is_short() -> None:
    """The README is at most 300 lines; everything else lives in docs/."""
    n = len(README.read_text(encoding="utf-8").splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines (at most {README_MAX_LINES})"


def _links(text: str) -> list[str]:
    """Relative link targets of Markdown ``text`` (no scheme such as ``https:``)."""
    return [t for t in LINK.findall(_outside_code(text)) if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


def _broken_links(text: str, base: Path, page: Path) -> list[str]:
    """The relative links of ``text`` (the Markdown of ``page``, links relative to ``base``)
    that name no file, or an anchor no heading of the file has; one line per link."""
    broken = []
    for target in _links(text):
        path, _, anchor = target.partition("#")
        file = (base / path).resolve() if path else page
        if not file.is_file():
            broken.append(f"{target}: no file {path}")
        elif anchor and anchor not in _anchors(file):
            broken.append(f"{target}: no heading with anchor #{anchor}")
    return broken


def test_readme_links_resolve() -> None:
    """Every relative link of README.md names an existing file, and every anchor a heading of
    it; the README links into the docs pages."""
    text = README.read_text(encoding="utf-8")
    assert any(t.startswith("docs/") for t in _links(text)), "README.md links to no docs page"
    broken = _broken_links(text, ROOT, README)
    assert not broken, "README.md links that do not resolve:\n" + "\n".join(broken)


def test_readme_link_check_catches_broken_links() -> None:
    """The check above reports a missing page and a missing anchor, and passes good links."""
    text = (
        "[ok](docs/architecture.md#layout-of-the-repository) [web](https://example.org/x.md)\n"
        "[page](docs/no-such-page.md) [anchor](docs/architecture.md#no-such-heading)\n"
        "`[in code](docs/also-missing.md)`\n"
    )
    assert _broken_links(text, ROOT, README) == [
        "docs/no-such-page.md: no file docs/no-such-page.md",
        "docs/architecture.md#no-such-heading: no heading with anchor #no-such-heading",
    ]


def test_readme_links_every_page_of_the_nav() -> None:
    """The README's documentation table reaches every page of the site."""
    pages = {p.name for p in (ROOT / "docs").glob("*.md")} - {"index.md"}
    text = README.read_text(encoding="utf-8")
    linked = {Path(t.partition("#")[0]).name for t in _links(text) if t.startswith("docs/")}
    assert pages <= linked, f"docs pages the README does not link: {sorted(pages - linked)}"
