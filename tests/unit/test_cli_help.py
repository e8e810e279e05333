"""``--help`` of every command reads cleanly: docstrings' ``code`` spans render as code (no
literal double backticks), wrapped docstring lines are joined, and nothing in a help text is
lost to the renderer (an ``<placeholder>`` read as an HTML tag, a ``[name]`` as markup)."""

from __future__ import annotations

import re
from typing import Any

import pytest
import typer

from evoharness_app.cli import app, main


def _commands() -> list[tuple[list[str], Any]]:
    out: list[tuple[list[str], Any]] = []

    def walk(cmd: Any, path: list[str]) -> None:
        out.append((path, cmd))
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            walk(sub, [*path, name])

    walk(typer.main.get_command(app), [])
    return out


def _flat(text: str) -> str:
    """Help text without the panels' box drawing, whitespace collapsed."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


@pytest.fixture
def render(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Any:
    monkeypatch.setenv("COLUMNS", "200")

    def run(path: list[str]) -> str:
        assert main([*path, "--help"]) == 0
        return capsys.readouterr().out

    return run


def test_every_help_renders_code_spans_and_keeps_its_text(render: Any) -> None:
    commands = _commands()
    assert len(commands) > 30  # the walk reached the sub-commands
    for path, cmd in commands:
        text = render(path)
        where = " ".join(["evoharness", *path])
        assert "``" not in text, f"{where} --help shows double backticks"
        for param in cmd.params:
            help_text = getattr(param, "help", None) or ""
            for token in re.findall(r"<[^<>`]+>|\[[^\[\]`]+\]", help_text):
                assert token in _flat(text), f"{where} --help lost {token!r} of {param.name}"


def test_docstring_paragraphs_are_joined(render: Any) -> None:
    text = render(["prepare-splits"])
    # the docstring's second paragraph is wrapped over three source lines
    assert "(preservation also over the object vocabulary); writes a manifest" in text
    assert "``" not in render(["evolve", "init"])
    assert "workflows.params.EvolutionParams" in render(["evolve", "init"])
