"""``evoharness run``: one prompt through a harness with the embedded simulator."""

from __future__ import annotations

import json

import pytest

from evoharness.harness import load_dir, save_dir
from evoharness.harness.schema import Effect, Skill, Skills, Trigger
from evoharness_app.cli import main

pytest.importorskip("evoharness.sim")


def test_run_writes_image_program_and_trace(repo_root, tmp_path):
    out = tmp_path / "out"
    rc = main(
        [
            "run",
            "--harness",
            str(repo_root / "harnesses" / "reference"),
            "--prompt",
            "a photo of two dogs left of a red cat and no birds",
            "--seed",
            "3",
            "--out",
            str(out),
            "--no-verify",
        ]
    )
    assert rc == 0
    png = (out / "image.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    program = json.loads((out / "program.json").read_text())
    assert program["seed"] == 3
    assert "bird" in program["negative_prompt"]
    assert [i["label"] for i in program["layout"]].count("dog") == 2
    trace = json.loads((out / "trace.json").read_text())
    steps = {(t["responsibility"], t["step"]) for t in trace}
    assert {("policy", "extract"), ("policy", "rewrite"), ("tools", "layout_planner")} <= steps
    assert ("skills", "route") in steps  # the counting skill fired
    result = json.loads((out / "result.json").read_text())
    assert result["generator_id"].startswith("sim/")
    assert result["cost"]["generator_calls"] == 1


def test_run_reports_compile_errors(repo_root, tmp_path, capsys):
    h = load_dir(repo_root / "harnesses" / "baseline")
    bad = h.model_copy(
        update={
            "skills": Skills(
                skills=[
                    Skill(
                        name="s",
                        triggers=[Trigger(kind="feature", value="count")],
                        effects=[Effect(kind="use_tool", value="planner")],
                    )
                ]
            )
        }
    )
    save_dir(bad, tmp_path / "bad")
    rc = main(
        [
            "run",
            "--harness",
            str(tmp_path / "bad"),
            "--prompt",
            "a dog",
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert rc == 1
    err = capsys.readouterr().err
    assert "skills: skills.skills.0.effects.0.value: skill 's'" in err and "'planner'" in err
    assert not (tmp_path / "o").exists()
    assert (
        main(
            [
                "run",
                "--harness",
                str(tmp_path / "nope"),
                "--prompt",
                "a dog",
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 1
    )


def test_run_composites_request_references(repo_root, tmp_path):
    ref_dir = tmp_path / "ref"
    assert (
        main(
            [
                "run",
                "--harness",
                str(repo_root / "harnesses" / "baseline"),
                "--prompt",
                "a cat",
                "--out",
                str(ref_dir),
            ]
        )
        == 0
    )
    out = tmp_path / "out"
    rc = main(
        [
            "run",
            "--harness",
            str(repo_root / "harnesses" / "baseline"),
            "--prompt",
            "a photo of a dog",
            "--out",
            str(out),
            "--references",
            str(ref_dir / "image.png"),
        ]
    )
    assert rc == 0
    program = json.loads((out / "program.json").read_text())
    assert program["references"] == [
        {"bucket": "", "key": str((ref_dir / "image.png").resolve()), "sha256": ""}
    ]
    trace = json.loads((out / "trace.json").read_text())
    assert any(t["step"] == "references" for t in trace)


def test_run_refuses_a_prompt_over_the_task_limit(repo_root, tmp_path, capsys):
    """``run`` applies the one prompt limit (``MAX_PROMPT_CHARS``), naming ``--prompt``, and
    writes nothing."""
    from evoharness.tasks.models import MAX_PROMPT_CHARS

    out = tmp_path / "out"
    argv = ["run", "--harness", str(repo_root / "harnesses" / "reference"), "--out", str(out)]
    rc = main([*argv, "--prompt", "dog " * 3125, "--no-verify"])
    assert rc == 1
    err = capsys.readouterr().err
    assert "--prompt" in err and f"limit of {MAX_PROMPT_CHARS}" in err
    assert not out.exists()


def test_run_warns_on_stderr_when_the_llm_extractor_falls_back(repo_root, tmp_path, capsys):
    h = load_dir(repo_root / "harnesses" / "reference")
    llm = h.model_copy(update={"policy": h.policy.model_copy(update={"extractor": "llm"})})
    save_dir(llm, tmp_path / "h")
    args = ["run", "--harness", str(tmp_path / "h"), "--prompt", "two dogs", "--no-verify"]
    assert main([*args, "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert err.count("warning:") == 1
    assert "rule (fallback: no llm extractor)" in err
    # a harness reading with rules: no warning
    assert (
        main(
            [
                "run",
                "--harness",
                str(repo_root / "harnesses" / "reference"),
                "--prompt",
                "two dogs",
                "--no-verify",
                "--out",
                str(tmp_path / "o2"),
            ]
        )
        == 0
    )
    assert "warning" not in capsys.readouterr().err


def test_run_with_the_embedded_library_retrieves_references(repo_root, tmp_path, capsys):
    """``--library embedded``: the agent's ``image_search`` finds a reference for each object
    named by a material or pattern, and the generator reads them from the library's store;
    without a library the agent's note ("image_search not offered") is a warning on stderr;
    another value is refused, naming the option."""
    h = load_dir(repo_root / "harnesses" / "baseline")
    doc = h.model_dump(mode="json")
    doc["tools"]["tools"] += [
        {"name": "references", "kind": "image_search", "top_k": 4},
        {"name": "agent", "kind": "agent", "backend": "rule"},
    ]
    save_dir(type(h).model_validate(doc), tmp_path / "h")
    args = ["run", "--harness", str(tmp_path / "h"), "--prompt", "a wooden chair and a striped cat"]
    assert main([*args, "--out", str(tmp_path / "a"), "--library", "embedded"]) == 0
    assert "warning" not in capsys.readouterr().err
    program = json.loads((tmp_path / "a" / "program.json").read_text())
    assert program["prompt"] == "the wooden chair from image 1 and the striped cat from image 2"
    assert [r["key"].rsplit("/", 1)[-1] for r in program["references"]] == [
        "chair-purple-wooden-upright.png",
        "cat-yellow-striped-upright.png",
    ]
    assert main([*args, "--out", str(tmp_path / "b")]) == 0
    err = capsys.readouterr().err
    assert "warning: tools/agent: no reference library configured: image_search not offered" in err
    assert json.loads((tmp_path / "b" / "program.json").read_text())["prompt"] == args[-1]
    assert main([*args, "--out", str(tmp_path / "c"), "--library", "s3"]) == 1
    assert "--library 's3': only 'embedded'" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()


def test_run_warns_when_the_generator_drops_references(repo_root, tmp_path, capsys):
    """More request references than the generator honours: the extra ones are dropped (a
    ``capability_drop`` with the counts) and stderr says so."""
    from PIL import Image

    refs = []
    for i in range(5):
        path = tmp_path / f"r{i}.png"
        Image.new("RGB", (64, 64), (200, 10 * i, 10)).save(path)
        refs += ["--references", str(path)]
    argv = ["run", "--harness", str(repo_root / "harnesses" / "baseline"), "--no-verify"]
    prompt = "the cup from image 1 and the dog from image 5"
    assert main([*argv, "--prompt", prompt, *refs, "--out", str(tmp_path / "o")]) == 0
    err = capsys.readouterr().err
    assert "warning: the generator takes at most 4 reference(s): 1 of 5 dropped" in err
    trace = json.loads((tmp_path / "o" / "trace.json").read_text())
    [drop] = [t for t in trace if t.get("step") == "capability_drop"]
    assert (drop["references_given"], drop["references_kept"]) == (5, 4)


def test_tools_only_an_agent_calls_warn_without_an_agent(repo_root, tmp_path, capsys):
    """A harness with ``image_search`` and ``search`` but no agent compiles, and both tools
    never run: ``harness validate`` and ``run`` say so on stderr, naming file and line."""
    h = load_dir(repo_root / "harnesses" / "baseline")
    doc = h.model_dump(mode="json")
    doc["tools"]["tools"] += [
        {"name": "references", "kind": "image_search"},
        {"name": "facts", "kind": "search"},
    ]
    save_dir(type(h).model_validate(doc), tmp_path / "h")
    assert main(["harness", "validate", str(tmp_path / "h")]) == 0
    err = capsys.readouterr().err
    assert f"{tmp_path / 'h' / 'tools.yaml'}:" in err
    assert "tool 'references' (image_search) is offered only to an agent" in err
    assert "tool 'facts' (search)" in err
    args = ["run", "--harness", str(tmp_path / "h"), "--prompt", "a wooden chair"]
    assert main([*args, "--no-verify", "--out", str(tmp_path / "o")]) == 0
    assert "no enabled agent: it never runs" in capsys.readouterr().err
    doc["tools"]["tools"].append({"name": "agent", "kind": "agent"})
    save_dir(type(h).model_validate(doc), tmp_path / "h2")
    assert main(["harness", "validate", str(tmp_path / "h2")]) == 0
    assert "warning" not in capsys.readouterr().err


def test_run_out_with_a_folder_in_a_result_files_place(repo_root, tmp_path, capsys):
    """A folder named like a result file is not a previous run's output (refused), and with
    ``--force`` the write that fails is an error naming it, not a traceback."""
    (tmp_path / "o" / "image.png").mkdir(parents=True)
    argv = ["run", "--harness", str(repo_root / "harnesses" / "baseline"), "--prompt", "a cat"]
    argv += ["--no-verify", "--out", str(tmp_path / "o")]
    assert main(argv) == 1
    assert "not a previous run's output (holds image.png)" in capsys.readouterr().err
    assert main([*argv, "--force"]) == 1
    assert "cannot write image.png" in capsys.readouterr().err


def test_schema_errors_name_a_tool_field_without_the_union_tag(repo_root, tmp_path, capsys):
    """pydantic puts a discriminated union's tag in the location
    (``tools.tools.0.search.top_k``); the error spells the field as it is in the file."""
    base = repo_root / "harnesses" / "baseline"
    save_dir(load_dir(base), tmp_path / "h")
    (tmp_path / "h" / "tools.yaml").write_text("tools:\n- {name: facts, kind: search, top_k: 99}\n")
    assert main(["harness", "validate", str(tmp_path / "h")]) == 1
    err = capsys.readouterr().err
    assert "tools.yaml:2: tools.tools.0.top_k:" in err and ".search." not in err


def test_run_warns_when_the_requests_references_pass_through(repo_root, tmp_path, capsys):
    """Three references mentioned and an agent allowed two per render: the program carries
    none and the request's pass through; the agent's record and stderr say so."""
    from PIL import Image

    h = load_dir(repo_root / "harnesses" / "baseline")
    doc = h.model_dump(mode="json")
    doc["tools"]["tools"].append({"name": "agent", "kind": "agent", "max_references": 2})
    save_dir(type(h).model_validate(doc), tmp_path / "h")
    refs = []
    for i in range(3):
        path = tmp_path / f"r{i}.png"
        Image.new("RGB", (64, 64), (10, 60 * i, 200)).save(path)
        refs += ["--references", str(path)]
    prompt = "the dog from image 1, the cat from image 2 and the bird from image 3"
    argv = ["run", "--harness", str(tmp_path / "h"), "--prompt", prompt, "--no-verify"]
    assert main([*argv, *refs, "--out", str(tmp_path / "o")]) == 0
    err = capsys.readouterr().err
    assert "the program carries none of the request's 3 reference(s): they pass through" in err
    program = json.loads((tmp_path / "o" / "program.json").read_text())
    assert len(program["references"]) == 3
