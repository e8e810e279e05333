"""Bad input through the CLI: one-line error, exit 1 (bad input) / 2 (bad usage), no
traceback, and nothing half-written (an existing output file is left untouched)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from evoharness_app.cli import main

GOOD_GENEVAL = {
    "tag": "single_object",
    "include": [{"class": "car", "count": 1}],
    "prompt": "a photo of a car",
}


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    rc = main(argv)
    cap = capsys.readouterr()
    assert "Traceback" not in cap.out + cap.err
    return rc, cap.err


def test_build_tasks_empty_input_is_bad_input_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    out = tmp_path / "out.jsonl"
    out.write_text("keep\n")
    rc, err = _run(
        ["build-tasks", "--dataset", "geneval", "--input", str(empty), "--output", str(out)],
        capsys,
    )
    assert rc == 1 and "empty.jsonl" in err and "no tasks" in err
    assert out.read_text() == "keep\n"


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--seed", "-1", "--count", "5"], "--seed"),
        (["--count", "99999999999999999999"], "--count"),
        ([], "--count"),
        (["--count", "3", "--input", "x.jsonl"], "--input"),
    ],
    ids=["negative-seed", "huge-count", "no-count", "input-given"],
)
def test_build_tasks_synthetic_bad_usage(
    extra: list[str], needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "s.jsonl"
    rc, err = _run(["build-tasks", "--dataset", "synthetic", *extra, "--output", str(out)], capsys)
    assert rc == 2 and needle in err
    assert not out.exists()


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--dataset", "multiref", "--count", "0"], "--count"),
        (["--dataset", "synthetic", "--count", "0"], "--count"),
        (["--dataset", "geneval", "--input", "x.jsonl", "--count", "3"], "drop --count"),
    ],
    ids=["multiref-zero", "synthetic-zero", "count-for-a-file-dataset"],
)
def test_build_tasks_count_is_one_or_more_and_only_for_generated_datasets(
    argv: list[str], needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--count 0`` is refused (multiref took it as "the default 12"), and a dataset read
    from ``--input`` refuses ``--count`` (it was ignored)."""
    out = tmp_path / "t.jsonl"
    rc, err = _run(["build-tasks", *argv, "--output", str(out)], capsys)
    assert rc == 2 and needle in err
    assert not out.exists()


def test_prepare_splits_empty_task_file_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    rc, err = _run(["prepare-splits", str(empty), "--out", str(tmp_path / "sp")], capsys)
    assert rc == 1 and "no tasks" in err
    assert not (tmp_path / "sp").exists()


def test_prepare_splits_out_is_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tasks = tmp_path / "g.jsonl"
    src = tmp_path / "meta.jsonl"
    src.write_text(json.dumps(GOOD_GENEVAL) + "\n")
    assert (
        main(["build-tasks", "--dataset", "geneval", "--input", str(src), "--output", str(tasks)])
        == 0
    )
    out = tmp_path / "keep.txt"
    out.write_text("keep")
    capsys.readouterr()
    rc, err = _run(["prepare-splits", str(tasks), "--out", str(out)], capsys)
    assert rc == 1 and "keep.txt" in err and "not a folder" in err
    assert out.read_text() == "keep"


# --------------------------------------------------------------------------- harness


def _copy_reference(repo_root: Path, tmp_path: Path) -> Path:
    dst = tmp_path / "h"
    shutil.copytree(repo_root / "harnesses" / "reference", dst)
    return dst


@pytest.mark.parametrize(
    ("file", "content", "needle"),
    [
        ("harness.yaml", "name: [unterminated\n", "harness.yaml:2: invalid YAML"),
        ("tools.yaml", b"\xff\xfe", "tools.yaml: not UTF-8"),
        ("skills/counting.md", "---\nname: [x\n---\nbody\n", "counting.md:3: invalid front matter"),
        ("skills/counting.md", "no front matter\n", "counting.md:1: no YAML front matter"),
        ("skills/counting.md", "", "counting.md:1: no YAML front matter"),
        ("skills/counting.md", "---\n- a\n---\nbody\n", "front matter must be a mapping"),
        ("skills/sub.md", None, "sub.md: cannot read"),
    ],
    ids=["yaml", "not-utf8", "frontmatter-yaml", "no-frontmatter", "empty-skill", "list-fm", "dir"],
)
def test_harness_validate_broken_files_one_line_error(
    file: str,
    content: str | bytes | None,
    needle: str,
    repo_root: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    h = _copy_reference(repo_root, tmp_path)
    target = h / file
    if content is None:
        target.mkdir()
    elif isinstance(content, bytes):
        target.write_bytes(content)
    else:
        target.write_text(content)
    rc, err = _run(["harness", "validate", str(h)], capsys)
    assert rc == 1
    assert needle in err, err
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("kind", ["file", "foreign-dir"])
def test_apply_patch_never_replaces_a_non_harness_output(
    kind: str, repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    patch = tmp_path / "p.json"
    patch.write_text(
        json.dumps(
            {
                "responsibility": "policy",
                "ops": [{"op": "replace", "path": "/policy/params/guidance_scale", "value": 7.5}],
            }
        )
    )
    out = tmp_path / "out"
    if kind == "file":
        out.write_text("keep")
    else:
        out.mkdir()
        (out / "data.txt").write_text("keep")
    rc, err = _run(
        [
            "harness",
            "apply-patch",
            str(repo_root / "harnesses" / "baseline"),
            str(patch),
            "-o",
            str(out),
        ],
        capsys,
    )
    assert rc == 1 and "--output" in err and "not overwritten" in err
    assert (out.read_text() if kind == "file" else (out / "data.txt").read_text()) == "keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "p.json"]


# --------------------------------------------------------------------------- run, sim, eval


def test_run_out_is_a_file(
    repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    out.write_text("keep")
    rc, err = _run(
        [
            "run",
            "--harness",
            str(repo_root / "harnesses" / "baseline"),
            "--prompt",
            "a cat",
            "--out",
            str(out),
        ],
        capsys,
    )
    assert rc == 1 and "--out" in err and "not a directory" in err
    assert out.read_text() == "keep"


@pytest.mark.parametrize("which", ["--out", "--manifest"])
def test_sim_render_output_is_a_directory(
    which: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d = tmp_path / "d"
    d.mkdir()
    png = tmp_path / "x.png"
    args = {"--out": ["--out", str(d)], "--manifest": ["--out", str(png), "--manifest", str(d)]}
    rc, err = _run(["sim", "render", "--prompt", "a cat", *args[which]], capsys)
    assert rc == 1 and which in err and "is a directory" in err
    assert not png.exists() and list(d.iterdir()) == []


def test_sim_render_layout_box_outside_unit_square_names_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    layout = tmp_path / "layout.json"
    layout.write_text(json.dumps([{"label": "car", "box": [0.1, 0.1, 1.5, 0.5]}]))
    rc, err = _run(
        [
            "sim",
            "render",
            "--prompt",
            "a car",
            "--layout",
            str(layout),
            "--out",
            str(tmp_path / "x.png"),
        ],
        capsys,
    )
    assert rc == 1 and "layout.json" in err and "layout.0.box" in err and "outside 0..1" in err
    assert not (tmp_path / "x.png").exists()


@pytest.mark.parametrize(
    ("data", "needle"),
    [(b"", "empty (0 bytes)"), (b"not a png", "not a decodable"), ("tiny", "too small")],
)
def test_eval_geneval_broken_image(
    data: bytes | str, needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from PIL import Image

    src = tmp_path / "meta.jsonl"
    src.write_text(json.dumps(GOOD_GENEVAL) + "\n")
    tasks = tmp_path / "t.jsonl"
    assert (
        main(["build-tasks", "--dataset", "geneval", "--input", str(src), "--output", str(tasks)])
        == 0
    )
    images = tmp_path / "imgs"
    images.mkdir()
    img = images / "geneval__meta__1__0.png"
    if data == "tiny":
        Image.new("RGB", (2, 2), "red").save(img)
    else:
        assert isinstance(data, bytes)
        img.write_bytes(data)
    capsys.readouterr()
    rc, err = _run(["eval", "geneval", "--images", str(images), "--tasks", str(tasks)], capsys)
    assert rc == 1 and img.name in err and needle in err


@pytest.mark.parametrize("content", ["", "\n\n"], ids=["empty", "blank-lines"])
def test_eval_geneval_empty_tasks_file_names_the_tasks_file(
    content: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A task file without tasks is the problem, not the images (which used to be blamed)."""
    from PIL import Image

    tasks = tmp_path / "empty.jsonl"
    tasks.write_text(content)
    images = tmp_path / "imgs"
    images.mkdir()
    Image.new("RGB", (64, 64), "red").save(images / "geneval__meta__1__0.png")
    rc, err = _run(["eval", "geneval", "--images", str(images), "--tasks", str(tasks)], capsys)
    assert rc == 1 and f"--tasks {tasks}: no tasks" in err and "--images" not in err
    assert len(err.strip().splitlines()) == 1


# --------------------------------------------------------------------------- registry


@pytest.mark.parametrize(
    "verb", [["promote", "{c}", "reg-x"], ["promote", "{c}", "--rollback"], ["resolve", "{c}"]]
)
@pytest.mark.parametrize("channel", ["", "bad name/x", "PROD"])
def test_registry_invalid_channel_name(
    verb: list[str], channel: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = ["--database-url", f"sqlite:///{tmp_path / 'r.db'}", "--blobs", str(tmp_path / "blobs")]
    argv = ["registry", *[channel if a == "{c}" else a for a in verb], *db]
    rc, err = _run(argv, capsys)
    assert rc == 1 and "InvalidArgument: channel:" in err


@pytest.mark.parametrize(
    ("url", "needle"),
    [
        ("nope", "<unparsable URL>: ArgumentError"),
        ("postgresql+psycopg://u:hunter2@127.0.0.1:1/x", "u:***@127.0.0.1:1/x: OperationalError"),
    ],
)
def test_registry_bad_database_url_one_line_no_password(
    url: str, needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, err = _run(["registry", "list", "--database-url", url, "--blobs", str(tmp_path)], capsys)
    assert rc == 1 and needle in err and "hunter2" not in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("weight", "needle"),
    [
        ("nan", "not a number (nan)"),
        ("inf", "not finite (inf)"),
        ("-inf", "not finite (-inf)"),
        ("1.5", "not in 0..1"),
        ("-0.1", "not in 0..1"),
    ],
)
def test_registry_promote_weight_out_of_range_names_why(
    weight: str, needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--weight nan`` used to read "should be <= 1"; NaN and infinities are named as such.
    A usage error (exit 2), checked before any registry is opened."""
    db = ["--database-url", f"sqlite:///{tmp_path}/r.db", "--blobs", str(tmp_path / "b")]
    rc, err = _run(["registry", "promote", "dev", "reg-x", "--weight", weight, *db], capsys)
    assert rc == 2 and "--weight" in err and needle in err
    assert not (tmp_path / "r.db").exists()


# --------------------------------------------------------------------------- verify-splits


@pytest.mark.parametrize(
    ("mutate", "needle"),
    [
        (lambda m: [], "malformed manifest: expected a JSON object"),
        (
            lambda m: {k: v for k, v in m.items() if k != "splits"},
            "malformed manifest: missing field 'splits'",
        ),
        (
            lambda m: {**m, "splits": {**m["splits"], "target": 5}},
            "malformed manifest: splits.target must be an object",
        ),
        (
            lambda m: {**m, "inputs": [3]},
            "malformed manifest: inputs[0] must be an object with a path",
        ),
        (lambda m: {**m, "manifest_version": 99}, "manifest_version 99 is not one"),
    ],
    ids=["list", "no-splits", "split-not-object", "input-not-object", "unknown-version"],
)
def test_verify_splits_malformed_manifest(
    mutate: Any, needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "meta.jsonl"
    rows = [{**GOOD_GENEVAL, "prompt": f"a photo of {i} cars"} for i in range(2, 9)]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tasks = tmp_path / "t.jsonl"
    sp = tmp_path / "sp"
    assert (
        main(["build-tasks", "--dataset", "geneval", "--input", str(src), "--output", str(tasks)])
        == 0
    )
    assert main(["prepare-splits", str(tasks), "--out", str(sp), "--sizes", "5,1,1"]) == 0
    capsys.readouterr()
    manifest = sp / "manifest.json"
    manifest.write_text(json.dumps(mutate(json.loads(manifest.read_text()))))
    rc, err = _run(["verify-splits", str(sp)], capsys)
    assert rc == 1 and "manifest.json: " + needle in err and err.count("\n") == 1


def test_harness_skill_field_error_names_the_skill_file(
    repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h = _copy_reference(repo_root, tmp_path)
    md = h / "skills" / "counting.md"
    md.write_text(md.read_text().replace("priority: 5", 'priority: "high"'))
    rc, err = _run(["harness", "validate", str(h)], capsys)
    line = md.read_text().splitlines().index('priority: "high"') + 1
    assert rc == 1 and f"skills/counting.md:{line}: priority:" in err


def test_harness_file_instead_of_directory(
    repo_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = repo_root / "harnesses" / "baseline" / "policy.yaml"
    rc, err = _run(["harness", "hash", str(f)], capsys)
    assert rc == 1 and "give the harness directory" in err


def test_harness_validate_reports_compile_errors(
    repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h = _copy_reference(repo_root, tmp_path)
    (h / "tools.yaml").write_text("tools: []\n")  # skills still use the layout tool
    rc, err = _run(["harness", "validate", str(h)], capsys)
    assert rc == 1 and "uses tool 'layout', which is not declared in tools" in err


def test_harness_validate_compile_error_names_the_skill_file_and_line(
    repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A skill using an undeclared tool: the error names skills/<name>.md and the line of the
    effect's value (docs/cli.md: invalid values are reported with file and line)."""
    h = _copy_reference(repo_root, tmp_path)
    (h / "tools.yaml").write_text("tools: []\n")
    rc, err = _run(["harness", "validate", str(h)], capsys)
    line = (h / "skills" / "counting.md").read_text().splitlines().index("  value: layout") + 1
    assert rc == 1 and f"skills/counting.md:{line}: skills: skills.skills.0.effects." in err


TWO_AGENTS = """# tools
tools:
  - name: layout
    kind: layout_planner
  - name: helper
    kind: agent
  - name: second
    kind: agent
"""
UNROUTED_AGENT = """# tools
tools:
  - name: layout
    kind: layout_planner
  - name: helper
    kind: agent
    route: skills
"""


@pytest.mark.parametrize(
    ("text", "line", "said"),
    [
        (TWO_AGENTS, 7, "tools.tools.2: at most one tool of kind 'agent'"),
        (UNROUTED_AGENT, 7, "tools: tools.tools.1.route: agent 'helper' is routed by skills"),
    ],
)
@pytest.mark.parametrize("verb", ["harness validate", "run"])
def test_tool_errors_name_the_offending_tools_line_in_one_spelling(
    text: str, line: int, said: str, verb: str, repo_root: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """A second agent tool and an agent routed by skills that no skill names: both errors
    pointed at the top of tools.yaml (the ``tools:`` key, or no line at all from ``run``),
    and the second spelt its field ``tools.tools[1] (helper).route`` while the schema's errors
    spell ``tools.tools.1.route``. Both name the offending tool's line, in the schema's
    spelling."""
    h = tmp_path / "h"
    shutil.copytree(repo_root / "harnesses" / "baseline", h)
    (h / "tools.yaml").write_text(text)
    argv = verb.split() + [str(h)] if verb != "run" else [
        "run", "--harness", str(h), "--prompt", "a cat", "--out", str(tmp_path / "o"),
    ]  # fmt: skip
    rc, err = _run(argv, capsys)
    assert rc == 1 and f"tools.yaml:{line}: {said}" in err, err


def test_apply_patch_refuses_a_result_that_does_not_compile(
    repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    patch = tmp_path / "p.json"
    patch.write_text(
        json.dumps(
            {
                "responsibility": "policy",
                "ops": [{"op": "replace", "path": "/policy/template", "value": "{nope}"}],
            }
        )
    )
    out = tmp_path / "new"
    base = str(repo_root / "harnesses" / "baseline")
    rc, err = _run(["harness", "apply-patch", base, str(patch), "-o", str(out)], capsys)
    assert rc == 1 and "does not compile" in err and "policy.template" in err
    assert not out.exists()


@pytest.mark.parametrize("verb", [["sim", "render"], ["run", "--harness", "harnesses/baseline"]])
def test_seed_beyond_canonical_json_is_usage_error(
    verb: list[str], repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    verb = [str(repo_root / a) if a.startswith("harnesses/") else a for a in verb]
    rc, err = _run(
        [*verb, "--prompt", "a cat", "--seed", str(2**53), "--out", str(tmp_path / "o")], capsys
    )
    assert rc == 2 and "--seed" in err


# --------------------------------------------------------------------------- issue 14


@pytest.mark.parametrize("how", ["same-path", "symlink", "hardlink"])
def test_build_tasks_refuses_to_overwrite_its_input(
    how: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "meta.jsonl"
    original = json.dumps(GOOD_GENEVAL) + "\n"
    src.write_text(original)
    out = tmp_path / "out.jsonl"
    if how == "same-path":
        out = tmp_path / "." / "meta.jsonl"
    elif how == "symlink":
        out.symlink_to(src)
    else:
        out.hardlink_to(src)
    argv = ["build-tasks", "--dataset", "geneval", "--input", str(src), "--output", str(out)]
    rc, err = _run(argv, capsys)
    assert rc == 1 and "output is the input file" in err and "meta.jsonl" in err
    assert src.read_text() == original


def test_prepare_splits_refuses_an_input_among_its_outputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "meta.jsonl"
    src.write_text(json.dumps(GOOD_GENEVAL) + "\n")
    splits = tmp_path / "sp"
    splits.mkdir()
    tasks = splits / "target.jsonl"
    assert (
        main(["build-tasks", "--dataset", "geneval", "--input", str(src), "--output", str(tasks)])
        == 0
    )
    before = tasks.read_bytes()
    capsys.readouterr()
    rc, err = _run(["prepare-splits", str(tasks), "--out", str(splits)], capsys)
    assert rc == 1 and "target.jsonl" in err and "overwrite" in err
    assert tasks.read_bytes() == before and sorted(p.name for p in splits.iterdir()) == [
        "target.jsonl"
    ]


def test_prepare_splits_all_zero_sizes_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, err = _run(
        ["prepare-splits", "x.jsonl", "--out", str(tmp_path / "sp"), "--sizes", "0,0,0"], capsys
    )
    assert rc == 2 and "all sizes are 0" in err
    assert not (tmp_path / "sp").exists()


@pytest.mark.parametrize(
    ("yaml_value", "needle"),
    [("true", "(got true)"), ('"30"', '(got "30")'), ("30.5", "(got 30.5)")],
    ids=["bool", "string", "fraction"],
)
def test_harness_yaml_strict_types(
    yaml_value: str,
    needle: str,
    repo_root: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    h = _copy_reference(repo_root, tmp_path)
    policy = h / "policy.yaml"
    policy.write_text(policy.read_text().replace("steps: 30", f"steps: {yaml_value}"))
    rc, err = _run(["harness", "validate", str(h)], capsys)
    assert rc == 1 and "policy.params.steps" in err and needle in err, err


def test_harness_yaml_reads_exponent_floats(
    repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """PyYAML (YAML 1.1) reads ``75e-1`` as a string; the harness loader reads it as 7.5."""
    from evoharness.harness.io import load_dir

    h = _copy_reference(repo_root, tmp_path)
    policy = h / "policy.yaml"
    policy.write_text(policy.read_text().replace("guidance_scale: 7.5", "guidance_scale: 75e-1"))
    assert load_dir(h) == load_dir(repo_root / "harnesses" / "reference")


@pytest.mark.parametrize(
    ("value", "needle"), [(True, "(got true)"), ("30", '(got "30")')], ids=["bool", "string"]
)
def test_apply_patch_strict_types(
    value: Any, needle: str, repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    patch = tmp_path / "p.json"
    op = {"op": "replace", "path": "/policy/params/steps", "value": value}
    patch.write_text(json.dumps({"responsibility": "policy", "ops": [op]}))
    out = tmp_path / "new"
    base = str(repo_root / "harnesses" / "baseline")
    rc, err = _run(["harness", "apply-patch", base, str(patch), "-o", str(out)], capsys)
    assert rc == 1 and "policy.params.steps" in err and needle in err, err
    assert not out.exists()


def test_apply_patch_bare_rfc6902_list_names_the_expected_form(
    repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    patch = tmp_path / "p.json"
    patch.write_text(json.dumps([{"op": "replace", "path": "/policy/params/steps", "value": 20}]))
    base = str(repo_root / "harnesses" / "baseline")
    rc, err = _run(["harness", "apply-patch", base, str(patch)], capsys)
    assert rc == 1 and "bare RFC 6902 list" in err and '"responsibility"' in err and '"ops"' in err


def test_harness_directory_with_an_unknown_file_names_it(
    repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h = _copy_reference(repo_root, tmp_path)
    (h / "policy.yaml").rename(h / "polcy.yaml")
    rc, err = _run(["harness", "validate", str(h)], capsys)
    assert rc == 1 and "polcy.yaml: unknown file" in err and "did you mean policy.yaml" in err
    (h / "polcy.yaml").rename(h / "policy.yaml")
    (h / "skills" / "notes.txt").write_text("x")
    rc, err = _run(["harness", "validate", str(h)], capsys)
    assert rc == 1 and "notes.txt: not a skill file" in err


@pytest.mark.parametrize("sizes", ["0,0,0,5", "0,5,5"])
def test_prepare_splits_empty_target_says_which_split_must_have_tasks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sizes: str
) -> None:
    """All evolution splits empty (only a test split), or no target: refused before reading
    anything, naming the split that needs tasks and which may be empty."""
    rc, err = _run(
        ["prepare-splits", "x.jsonl", "--out", str(tmp_path / "sp"), "--sizes", sizes], capsys
    )
    flat = " ".join(err.replace("│", " ").split())
    assert rc == 2 and "the target split (the first size) needs at least one task" in flat
    assert "heldout, preservation and test may be 0" in flat
    assert not (tmp_path / "sp").exists()


def test_evolve_local_finds_the_data_and_harness_beside_the_clone_from_any_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run from another folder, ``evolve local`` reads ``../shared`` beside the clone (as the
    README says, and as ``evolve main`` does) and the clone's baseline harness, not
    ``<cwd>/../shared`` and ``<cwd>/harnesses/baseline``."""
    from evoharness.tasks import split_prepare
    from evoharness_app.commands import evolve_local
    from tests.conftest import ROOT, SHARED

    seen: dict[str, Any] = {}
    real = split_prepare.build_run_splits

    def build(shared: Path, *args: Any, **kwargs: Any) -> Any:
        seen["shared"] = Path(shared)
        return real(SHARED, *args, **kwargs)  # the data wherever this machine keeps it

    async def run_main(doc: dict[str, Any], base: Path, address: str) -> None:
        seen["doc"] = doc

    monkeypatch.setattr(split_prepare, "build_run_splits", build)
    monkeypatch.setattr(evolve_local, "run_local_workflow", run_main)
    monkeypatch.delenv("EVOHARNESS_SHARED", raising=False)
    monkeypatch.chdir(tmp_path)
    rc = main(["evolve", "local", "--run-id", "r", "--sizes", "4,2,2", "--synthetic", "0"])
    assert rc == 0
    assert seen["shared"] == ROOT.parent / "shared"
    assert seen["doc"]["harness"]["uri"] == f"file://{ROOT / 'harnesses' / 'baseline'}"


def test_prepare_splits_negative_seed_is_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Seeds are >= 0 everywhere else (``build-tasks --seed``); ``prepare-splits --seed -3``
    is a usage error (exit 2) naming the option, and nothing is written."""
    tasks = tmp_path / "g.jsonl"
    src = tmp_path / "meta.jsonl"
    src.write_text(json.dumps(GOOD_GENEVAL) + "\n")
    assert (
        main(["build-tasks", "--dataset", "geneval", "--input", str(src), "--output", str(tasks)])
        == 0
    )
    capsys.readouterr()
    out = tmp_path / "sp"
    rc, err = _run(["prepare-splits", str(tasks), "--out", str(out), "--seed", "-3"], capsys)
    assert rc == 2 and "--seed" in err and "greater than or equal to 0" in err
    assert not out.exists()


def test_apply_patch_that_changes_nothing_says_so(
    repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A patch whose result equals the input harness says so on stderr (one line); the
    harness_id printed is the input's."""
    base = str(repo_root / "harnesses" / "baseline")
    patch = tmp_path / "p.json"
    op = {"op": "test", "path": "/policy/params/steps", "value": 30}
    patch.write_text(json.dumps({"responsibility": "policy", "ops": [op]}))
    rc, err = _run(["harness", "apply-patch", base, str(patch)], capsys)
    assert rc == 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "changes nothing" in lines[0] and str(patch) in lines[0]
    patch.write_text(json.dumps({"responsibility": "policy", "ops": [{**op, "op": "replace"}]}))
    rc, err = _run(["harness", "apply-patch", base, str(patch)], capsys)
    assert rc == 0 and "changes nothing" in err
    op = {"op": "replace", "path": "/policy/params/steps", "value": 31}
    patch.write_text(json.dumps({"responsibility": "policy", "ops": [op]}))
    rc, err = _run(["harness", "apply-patch", base, str(patch)], capsys)
    assert rc == 0 and "changes nothing" not in err


def test_evolve_main_says_in_one_line_how_the_run_failed_and_stops_its_stack(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A workflow failure in ``evolve main`` is one line naming the run and the failure chain
    (as ``evolve start --wait``), exit 1, no traceback; the stack the job started is stopped."""
    from temporalio.client import WorkflowFailureError
    from temporalio.exceptions import ApplicationError

    from evoharness_app.main_job import MainJob
    from services import stack

    def fail(self: Any, *args: Any) -> Any:
        cause = ApplicationError("activity load_splits failed")
        cause.__cause__ = ValueError("splits.target: no such key")
        raise WorkflowFailureError(cause=cause)

    downs: list[Path] = []
    monkeypatch.chdir(tmp_path)  # the job's stack folder and lock (runs/stack) are cwd-relative
    monkeypatch.setattr(MainJob, "ensure_stack", lambda self: (object(), True))
    monkeypatch.setattr(MainJob, "_run", fail)
    monkeypatch.setattr(stack, "down", lambda d: downs.append(d))
    rc, err = _run(["evolve", "main", "--run-id", "r7", "--out", str(tmp_path)], capsys)
    assert rc == 1 and err == (
        "error: run r7 failed: activity load_splits failed: splits.target: no such key\n"
    )
    assert len(downs) == 1


@pytest.mark.parametrize("dataset", ["t2icompbench", "partiprompts"])
def test_build_tasks_text_builder_refuses_json_lines(
    dataset: str, shared_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 27 item 12: GenEval's ``evaluation_metadata.jsonl`` given to a text-format builder
    (one prompt per line, or PartiPrompts' TSV) is refused with the file and line; before the
    fix ``t2icompbench`` wrote 553 tasks whose prompts were raw JSON lines."""
    src = shared_dir / "data" / "geneval" / "evaluation_metadata.jsonl"
    out = tmp_path / "tasks.jsonl"
    rc, err = _run(
        ["build-tasks", "--dataset", dataset, "--input", str(src), "--output", str(out)], capsys
    )
    assert rc == 1, err
    assert "evaluation_metadata.jsonl:1" in err.replace("\n", "")
    assert not out.exists()


def test_t2icompbench_json_object_on_a_later_line_names_that_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "color_train.txt"
    src.write_text('a red car\n{"prompt": "a blue dog"}\n', encoding="utf-8")
    out = tmp_path / "tasks.jsonl"
    rc, err = _run(
        ["build-tasks", "--dataset", "t2icompbench", "--input", str(src), "--output", str(out)],
        capsys,
    )
    flat = err.replace("\n", "")
    assert rc == 1 and "color_train.txt:2" in flat and "JSON" in flat, err
    assert not out.exists()


def test_run_non_utf8_prompt_names_the_option(
    repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 27 item 13d: a prompt whose bytes are not UTF-8 (Python hands them over as
    surrogate escapes, here byte 0xff) said only "input contains non-UTF-8 codepoints"."""
    out = tmp_path / "out"
    argv = ["run", "--harness", str(repo_root / "harnesses" / "baseline")]
    rc, err = _run([*argv, "--prompt", "a \udcff cat", "--out", str(out)], capsys)
    assert rc == 1 and "--prompt" in err and "UTF-8" in err and "0xff" in err, err
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--every", "6h", "--canary-deadline", "6h"], "must be shorter than --every 6h"),
        (["--canary-deadline", "soon"], "--canary-deadline"),
    ],
)
def test_schedule_create_refuses_a_canary_deadline_it_cannot_keep(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The check runs inside the scheduled run and the schedule skips overlapping runs, so a
    deadline as long as the period would skip every other run; refused before any Temporal
    call (no server here)."""
    code, out = _run(["schedule", "create", "--channel", "prod", *args], capsys)
    assert code != 0 and message in out, out


def test_schedule_create_refuses_a_channel_the_registry_does_not_know(
    tmp_path: Path, repo_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``schedule create --channel prodd`` was accepted and every scheduled run would fail
    resolving it: refused before any Temporal call, naming the channel, the registry and the
    channels there are (as ``registry history`` of an unknown channel is NotFound)."""
    from evoharness.harness.io import load_dir
    from evoharness.local_store import LocalArtifactStore
    from harness_registry import Registry
    from harness_registry.db import make_engine, upgrade
    from services.common.server import ServiceRegistration, build_server
    from services.common.settings import ServerSettings
    from services.protos.evoharness.v1 import registry_pb2_grpc as pb_grpc
    from services.registry.server import SERVICE_NAME, HarnessRegistryServicer

    engine = make_engine(f"sqlite:///{tmp_path / 'registry.db'}")
    upgrade(engine)
    reg = Registry(engine, LocalArtifactStore(tmp_path / "blobs"))
    running = build_server(
        ServerSettings(port=0, metrics_port=-1),
        [ServiceRegistration(
            HarnessRegistryServicer(reg), pb_grpc.add_HarnessRegistryServicer_to_server,
            SERVICE_NAME,
        )],
    )  # fmt: skip
    target = f"127.0.0.1:{running.port}"
    try:
        argv = ["schedule", "create", "--target", target, "--channel"]
        code, out = _run([*argv, "prodd"], capsys)
        assert code == 1 and "--channel prodd" in out and target in out, out
        assert "no channel has been promoted to yet" in out, out
        rid = reg.put(load_dir(repo_root / "harnesses" / "baseline")).registration.registration_id
        reg.promote("prod", rid, expected_registration_id=None)
        reg.promote("dev", rid, expected_registration_id=None)
        code, out = _run([*argv, "prodd"], capsys)
        assert code == 1 and "'prodd'" in out and "channels: dev, prod" in out, out
        code, out = _run([*argv, "prod", "--address", "127.0.0.1:1"], capsys)
        assert code == 1 and "--channel" not in out and "127.0.0.1:1" in out, out  # Temporal's
    finally:
        running.stop(0)
        engine.dispose()


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--protocol", "beam"], "--protocol beam: not one of trace, autoref"),
        (["--search-iterations", "2"], "need a --protocol other than trace"),
    ],
)
def test_evolve_local_refuses_a_bad_protocol_before_anything_starts(
    extra: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, err = _run(["evolve", "local", "--out", str(tmp_path), *extra], capsys)
    flat = " ".join(err.replace("│", " ").split())  # the usage error's box, unwrapped
    assert rc == 2 and said in flat, err  # bad usage (docs/cli.md)
    assert not any(tmp_path.iterdir())  # no splits written, no server started
