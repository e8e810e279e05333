"""``evoharness extract``: what the policy extractor reads, as JSON lines with uncertain marks."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from evoharness.tasks.builders import write_jsonl
from evoharness.tasks.models import Task
from evoharness_app.cli import main
from tests.conftest import require


@pytest.fixture(autouse=True)
def _needs_lemminflect() -> None:
    require(importlib.util.find_spec("lemminflect") is not None, "lemminflect is not installed")


def _run(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> tuple[int, list[dict[str, Any]], str]:
    rc = main(argv)
    cap = capsys.readouterr()
    assert "Traceback" not in cap.out + cap.err
    return rc, [json.loads(line) for line in cap.out.splitlines()], cap.err


def test_prompts_give_constraints_and_uncertain_marks(capsys: pytest.CaptureFixture[str]) -> None:
    rc, rows, err = _run(["extract", "two red dogs behind a bagpipe", "derision"], capsys)
    assert rc == 0 and len(rows) == 2
    dogs, empty = rows
    types = {(c["type"], c["subject"]) for c in dogs["constraints"]}
    assert types == {("count", "dog"), ("color", "dog")}
    count = next(c for c in dogs["constraints"] if c["type"] == "count")
    assert (count["min_count"], count["max_count"]) == (2, 2)
    kinds = {(u["kind"], u.get("noun") or u.get("subject")) for u in dogs["uncertain"]}
    # the bagpipe (no class) and "behind" (no such check) are marked, not dropped
    assert ("object", "bagpipe") in kinds and ("relation", "dog") in kinds
    rel = next(u for u in dogs["uncertain"] if u["kind"] == "relation")
    assert rel["relation"] == "behind" and "bagpipe" in rel["reason"]
    assert dogs["nothing_checkable"] is False
    assert empty["nothing_checkable"] is True and empty["checkable"] == 0
    assert '2 prompt(s); 1 with nothing checkable: "derision"' in err


def test_input_task_file_names_each_task(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = [
        Task(task_id="t/1", prompt="a wooden chair on a cat", task_family="x"),
        Task(task_id="t/2", prompt='a sign that says "OPEN"', task_family="x"),
    ]
    path = write_jsonl(tasks, tmp_path / "tasks.jsonl")
    rc, rows, err = _run(["extract", "--input", str(path)], capsys)
    assert rc == 0 and [r["task_id"] for r in rows] == ["t/1", "t/2"]
    chair = rows[0]
    assert {c["subject"] for c in chair["constraints"]} == {"chair", "cat"}
    marks = {(u["kind"], u.get("value") or u.get("relation")) for u in chair["uncertain"]}
    # support ("on") is no position rule: marked, not checked (issue 19)
    assert ("relation", "on") in marks and ("attribute", "wooden") not in marks
    assert not [c for c in chair["constraints"] if c["type"] == "position"]
    # a material the embedded world draws is a constraint, not an uncertain mark (issue 19)
    assert {(c["type"], c["value"]) for c in chair["constraints"] if c["type"] == "attribute"} == {
        ("attribute", "wooden")
    }
    assert [c["value"] for c in rows[1]["constraints"] if c["type"] == "text"] == ["OPEN"]
    # the text is checkable; the sign itself has no class in the vocabulary
    assert [u["noun"] for u in rows[1]["uncertain"] if u["kind"] == "object"] == ["sign"]
    assert "2 prompt(s); 0 with nothing checkable" in err


def test_bad_task_file_names_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = Task(task_id="t/1", prompt="a cat", task_family="x").model_dump_json()
    bad = tmp_path / "tasks.jsonl"
    bad.write_text(good + "\n" + '{"task_id": "t/2", "prompt": 3}\n')
    rc, rows, err = _run(["extract", "--input", str(bad)], capsys)
    assert rc == 1 and rows == []
    assert f"{bad}:2" in err


def test_a_prompt_over_the_length_limit_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A prompt longer than MAX_PROMPT_CHARS exits 1 with one line naming the argument (or the
    task file's line) and the limit; nothing is printed on stdout."""
    from evoharness_app.commands.extract import MAX_PROMPT_CHARS

    long = "dog " * (MAX_PROMPT_CHARS // 4 + 1)
    rc, rows, err = _run(["extract", "a cat", long], capsys)
    assert rc == 1 and rows == []
    line = err.strip()
    assert "\n" not in line
    assert "prompt argument 2" in line and f"limit of {MAX_PROMPT_CHARS}" in line
    tasks = [
        Task(task_id="t/1", prompt="a cat", task_family="x"),
        # written without validation: the Task model itself refuses such a prompt
        Task.model_construct(
            task_id="t/2", prompt=long, task_family="x", constraints=[], references={}, metadata={}
        ),
    ]
    path = tmp_path / "tasks.jsonl"
    lines = [t.model_dump_json() for t in tasks]
    path.write_text(lines[0] + "\n\n" + lines[1] + "\n")  # a blank line: t/2 is on line 3
    rc, rows, err = _run(["extract", "--input", str(path)], capsys)
    assert rc == 1 and rows == []
    assert f"{path}:3: task 't/2'" in err and f"limit of {MAX_PROMPT_CHARS}" in err
    # at the limit it is read
    rc, rows, _ = _run(["extract", "a" * MAX_PROMPT_CHARS], capsys)
    assert rc == 0 and len(rows) == 1


def test_missing_file_and_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = _run(["extract", "--input", str(tmp_path / "none.jsonl")], capsys)
    assert rc == 1 and "none.jsonl" in err
    rc, _, err = _run(["extract"], capsys)
    assert rc == 2 and "--input" in err
    rc, _, err = _run(["extract", "a cat", "--input", str(tmp_path / "x.jsonl")], capsys)
    assert rc == 2


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["extract", "--help"]) == 0
    assert "uncertain" in capsys.readouterr().out


def test_the_summary_quotes_each_prompt_with_nothing_checkable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Blank or punctuation-only prompts stay visible in the stderr summary (JSON strings)."""
    rc, rows, err = _run(["extract", ",", "   ", "\U0001f436\U0001f436", "a dog"], capsys)
    assert rc == 0 and [r["nothing_checkable"] for r in rows] == [True, True, True, False]
    assert '4 prompt(s); 3 with nothing checkable: ",", "   ", "\U0001f436\U0001f436"' in err
