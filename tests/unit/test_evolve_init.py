"""``evoharness evolve init`` writes parameters for your own run (file:// paths, or uploaded to
S3 against a real SeaweedFS), checked before anything is written; ``evolve start`` refuses
file:// paths that do not exist here (``configs/evolution.yaml``'s ``/app/...``)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

from evoharness.harness.io import harness_id, load_dir, loads
from evoharness.tasks.io import load_tasks
from evoharness_app.cli import main
from workflows.params import EvolutionParams

GENEVAL_ROWS = [
    {"tag": "single_object", "include": [{"class": c, "count": 1}], "prompt": f"a photo of a {c}"}
    for c in ("car", "dog", "cat", "cup", "bench", "apple", "bird")
]


@pytest.fixture
def splits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    meta = tmp_path / "meta.jsonl"
    meta.write_text("".join(json.dumps(r) + "\n" for r in GENEVAL_ROWS))
    tasks = tmp_path / "tasks.jsonl"
    argv = ["build-tasks", "--dataset", "geneval", "--input", str(meta), "--output", str(tasks)]
    assert main(argv) == 0
    out = tmp_path / "mysplits"
    assert main(["prepare-splits", str(tasks), "--out", str(out), "--sizes", "5,1,1"]) == 0
    capsys.readouterr()
    return out


def test_init_writes_file_params_that_start_accepts(
    splits: Path, repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "params.json"
    harness = repo_root / "harnesses" / "baseline"
    argv = ["evolve", "init", "--splits", str(splits), "--harness", str(harness)]
    assert main([*argv, "--out", str(out), "--run-id", "myrun", "--seeds", "2"]) == 0
    assert "evolve start" in capsys.readouterr().out
    p = EvolutionParams.model_validate(json.loads(out.read_text()))
    assert p.run_id == "myrun" and p.seeds == [0, 1]
    assert p.harness.uri == f"file://{harness.resolve()}"
    for name in ("target", "heldout", "preservation"):
        uri = getattr(p.splits, name).uri
        assert load_tasks(urlparse(uri).path) == load_tasks(splits / f"{name}.jsonl")
    assert p.scored_on == []  # three sizes: no test split
    # a split folder's test split is scored-on only (checked for overlap), never evolved on
    four = tmp_path / "four"
    tasks = splits.parent / "tasks.jsonl"
    assert main(["prepare-splits", str(tasks), "--out", str(four), "--sizes", "4,1,1,1"]) == 0
    out4 = tmp_path / "p4.json"
    assert (
        main(
            ["evolve", "init", "--splits", str(four), "--harness", str(harness), "--out", str(out4)]
        )
        == 0
    )
    p4 = EvolutionParams.model_validate(json.loads(out4.read_text()))
    [scored] = p4.scored_on
    assert scored.uri == f"file://{(four / 'test.jsonl').resolve()}"
    assert "test" not in p4.splits.model_dump()
    capsys.readouterr()
    # the budget dry run reads the same file (calls nothing)
    assert main(["evolve", "start", str(out), "--dry-run-budget"]) == 0
    assert json.loads(capsys.readouterr().out)["config"]["n_target"] == len(
        load_tasks(splits / "target.jsonl")
    )
    # an existing file is kept unless --force
    before = out.read_text()
    assert main([*argv, "--out", str(out)]) == 1
    assert "exists" in capsys.readouterr().err and out.read_text() == before


def test_init_refuses_bad_input_and_writes_nothing(
    splits: Path, repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "p.json"
    rc = main(["evolve", "init", "--splits", str(tmp_path / "nope"), "--out", str(out)])
    assert rc == 1 and "not a folder" in capsys.readouterr().err
    (splits / "target.jsonl").write_text("{broken\n")
    harness = str(repo_root / "harnesses" / "baseline")
    rc = main(["evolve", "init", "--splits", str(splits), "--harness", harness, "--out", str(out)])
    assert rc == 1 and "target.jsonl:1" in capsys.readouterr().err
    assert not out.exists()


def test_init_names_a_folder_that_is_not_a_split_folder_before_the_out_inside_it(
    splits: Path, repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--out`` inside a folder that is no split folder: the first thing to fix is the
    folder (no target.jsonl), not where --out lies."""
    x = tmp_path / "x"
    x.mkdir()
    harness = str(repo_root / "harnesses" / "baseline")
    argv = ["evolve", "init", "--harness", harness, "--splits"]
    assert main([*argv, str(x), "--out", str(x / "run.json")]) == 1
    assert "no target.jsonl" in capsys.readouterr().err
    # a real split folder still refuses an --out inside it, writing nothing
    assert main([*argv, str(splits), "--out", str(splits / "run.json")]) == 1
    assert "--out" in capsys.readouterr().err and not (splits / "run.json").exists()


def test_init_says_when_the_target_split_is_too_small_for_the_gate(
    splits: Path, repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The gate's test units are the target + held-out tasks; the exact sign-flip test's
    smallest p is 2^-m for m changed units (2^-4 = 0.0625 > 0.05): with 4 units no patch can
    ever be accepted, with 5 all must change. A new user trying 12 prompts got No-Patch
    without a word."""
    from evoharness.trace.gate_stats import sign_flip_test
    from evoharness.trace.gates import GateConfig, min_changed_tasks

    m = min_changed_tasks(GateConfig().alpha)
    assert m == 5  # the test agrees: m improvements pass, m - 1 cannot
    assert sign_flip_test([1.0] * m).p_value < GateConfig().alpha
    assert sign_flip_test([1.0] * (m - 1)).p_value >= GateConfig().alpha
    assert min_changed_tasks(GateConfig().alpha, n_candidates=5) == 7
    harness = str(repo_root / "harnesses" / "baseline")
    argv = ["evolve", "init", "--splits", str(splits), "--harness", harness]
    assert main([*argv, "--out", str(tmp_path / "p.json")]) == 0
    err = capsys.readouterr().err
    assert "test units are 6 task(s) (5 target + 1 heldout); a patch is accepted only" in err
    assert "--sizes 24,8,8" in err
    small = tmp_path / "small"
    assert (
        main(
            [
                "prepare-splits",
                str(tmp_path / "tasks.jsonl"),
                "--out",
                str(small),
                "--sizes",
                "3,1,1",
            ]
        )
        == 0
    )
    capsys.readouterr()
    argv = ["evolve", "init", "--splits", str(small), "--harness", harness]
    assert main([*argv, "--out", str(tmp_path / "q.json")]) == 0
    err = capsys.readouterr().err
    assert "test units are 4 task(s) (3 target + 1 heldout); no patch can be accepted" in err


def test_start_and_status_name_an_unreachable_temporal(
    splits: Path, repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before the stack is up: a one-line error saying what to do, not a traceback."""
    from services.common.process import free_port

    out = tmp_path / "p.json"
    harness = str(repo_root / "harnesses" / "baseline")
    argv = ["evolve", "init", "--splits", str(splits), "--harness", harness, "--out", str(out)]
    assert main(argv) == 0
    capsys.readouterr()
    addr = f"127.0.0.1:{free_port()}"  # nothing listens there
    for cmd in (["start", str(out)], ["status", "r"], ["stop", "r"]):
        assert main(["evolve", *cmd, "--address", addr]) == 1
        err = capsys.readouterr().err
        assert f"cannot reach Temporal at {addr}" in err and "evoharness up" in err, cmd


def test_start_refuses_file_uris_missing_here(
    repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``configs/evolution.yaml`` names ``/app/harnesses/baseline`` (the container image):
    outside the image ``evolve start`` must fail before starting anything."""
    cfg = repo_root / "configs" / "evolution.yaml"
    rc = main(["evolve", "start", str(cfg), "--address", "127.0.0.1:1"])
    err = capsys.readouterr().err
    assert rc == 1 and "harness.uri file:///app/harnesses/baseline" in err
    assert "evolve init" in err


def test_init_upload_puts_inputs_in_s3(
    splits: Path,
    repo_root: Path,
    tmp_path: Path,
    s3_server: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from services.storage.s3 import S3ArtifactStore

    st = s3_server.settings
    for k, v in {
        "ENDPOINT": st.endpoint,
        "ACCESS_KEY": st.access_key.get_secret_value(),
        "SECRET_KEY": st.secret_key.get_secret_value(),
        "BUCKET": "init-upload",
    }.items():
        monkeypatch.setenv(f"EVOHARNESS_S3__{k}", v)
    out = tmp_path / "params.yaml"
    harness = repo_root / "harnesses" / "reference"
    argv = ["evolve", "init", "--splits", str(splits), "--harness", str(harness), "--upload"]
    assert main([*argv, "--out", str(out), "--run-id", "up1"]) == 0
    import yaml

    p = EvolutionParams.model_validate(yaml.safe_load(out.read_text()))
    assert p.harness.uri == "s3://init-upload/runs/up1/inputs/harness.json"
    store = S3ArtifactStore.from_settings(st, bucket="init-upload")
    got = loads(store.get("runs/up1/inputs/harness.json"))
    assert harness_id(got) == harness_id(load_dir(harness))
    assert p.splits.target.uri == "s3://init-upload/runs/up1/inputs/target.jsonl"
    assert store.get("runs/up1/inputs/target.jsonl") == (splits / "target.jsonl").read_bytes()


def test_init_refuses_a_split_changed_since_its_manifest(
    splits: Path, repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A split file edited after prepare-splits (still valid JSON Lines) is not the split its
    manifest describes: refused, naming the file and both hashes; nothing written."""
    from evoharness.canonical import sha256_hex

    held = splits / "heldout.jsonl"
    recorded = json.loads((splits / "manifest.json").read_text())["splits"]["heldout"]["sha256"]
    lines = held.read_text().splitlines(keepends=True)
    row = json.loads(lines[0])
    row["prompt"] = row["prompt"] + " at night"
    held.write_text(json.dumps(row) + "\n" + "".join(lines[1:]))
    assert load_tasks(held)  # still a valid task file
    out = tmp_path / "p.json"
    harness = str(repo_root / "harnesses" / "baseline")
    rc = main(["evolve", "init", "--splits", str(splits), "--harness", harness, "--out", str(out)])
    err = " ".join(capsys.readouterr().err.split())
    assert rc == 1 and not out.exists()
    assert f"{held}: sha256 {sha256_hex(held.read_bytes())}" in err
    assert f"does not match the manifest ({recorded})" in err


def test_status_and_stop_name_a_grpc_server_that_is_not_temporal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Another gRPC service's port (one that implements nothing Temporal asks for) was a
    traceback: now one line saying what failed and where, exit 1."""
    from concurrent import futures

    import grpc

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    port = server.add_insecure_port("127.0.0.1:0")  # a free port, bound before start
    server.start()
    try:
        addr = f"127.0.0.1:{port}"
        for cmd, what in (
            (["status", "r1"], "status of run r1"),
            (["stop", "r1"], "stop of run r1"),
        ):
            assert main(["evolve", *cmd, "--address", addr]) == 1
            cap = capsys.readouterr()
            assert "Traceback" not in cap.out + cap.err
            [line] = cap.err.strip().splitlines()
            assert line.startswith(f"error: {what}: {addr} is not a Temporal frontend"), line
    finally:
        server.stop(grace=None)


def test_dry_run_budget_of_the_cluster_config_with_remote_paths(
    repo_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``configs/evolution.yaml`` names the image's /app harness and S3 splits: with
    ``--remote-paths`` and the split sizes the dry run estimates (it was a traceback: the
    harness file is not on this machine), saying what it assumed."""
    cfg = repo_root / "configs" / "evolution.yaml"
    sizes = ["--n-target", "500", "--n-heldout", "100", "--n-preservation", "100"]
    rc = main(["evolve", "start", str(cfg), "--dry-run-budget", "--remote-paths", *sizes])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    out = json.loads(cap.out)
    assert out["config"]["n_target"] == 500
    assert out["config"]["generator_calls_per_execution"] == 1.0
    assert "file:///app/harnesses/baseline is not on this machine" in " ".join(cap.err.split())


@pytest.mark.parametrize(
    ("field", "value"), [("max_rounds", -1), ("max_clusters", "many"), ("beam", 0)]
)
def test_dry_run_budget_names_a_bad_parameter(
    splits: Path,
    repo_root: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    field: str,
    value: Any,
) -> None:
    """A parameter the budget cannot use (``max_rounds: -1``, a string for a count) is one
    line naming the file and the field, exit 1 (it was a pydantic or int() traceback)."""
    out = tmp_path / "params.json"
    harness = repo_root / "harnesses" / "baseline"
    argv = ["evolve", "init", "--splits", str(splits), "--harness", str(harness)]
    assert main([*argv, "--out", str(out), "--run-id", "myrun"]) == 0
    doc = json.loads(out.read_text())
    doc[field] = value
    out.write_text(json.dumps(doc))
    capsys.readouterr()
    rc = main(["evolve", "start", str(out), "--dry-run-budget"])
    cap = capsys.readouterr()
    assert rc == 1 and "Traceback" not in cap.out + cap.err
    [line] = cap.err.strip().splitlines()
    assert line.startswith(f"error: {out}: {field}: "), line


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (b"run_id: r\nseeds: [\n", r"params\.yaml:3: invalid YAML: "),
        (b"run_id: r\n\xff\xfe: 1\n", r"params\.yaml: not UTF-8"),
    ],
)
def test_start_with_broken_parameters_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: bytes, needle: str
) -> None:
    """Broken YAML names the file and line on one line (PyYAML's message spans four); bytes
    that are not UTF-8 are named too (it was a UnicodeDecodeError traceback)."""
    params = tmp_path / "params.yaml"
    params.write_bytes(text)
    rc = main(["evolve", "start", str(params), "--dry-run-budget"])
    cap = capsys.readouterr()
    assert rc == 1 and "Traceback" not in cap.out + cap.err
    [line] = cap.err.strip().splitlines()
    assert re.search(needle, line), line


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"seeds": [0, 0]}, "seeds: Value error, seed 0 is given twice"),
        ({"max_rounds": "3"}, "max_rounds: Input should be a valid integer"),
        ({"seeds": ["1"]}, "seeds.0: Input should be a valid integer"),
        ({"beam": True}, "beam: Input should be a valid integer"),
    ],
)
@pytest.mark.parametrize("dry_run", [False, True])
def test_start_validates_the_parameters_before_starting(
    splits: Path,
    repo_root: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    change: dict[str, Any],
    needle: str,
    dry_run: bool,
) -> None:
    """Duplicate seeds and numbers written as strings are refused by ``start`` itself, naming
    the field (they were accepted, then failed inside the workflow or were coerced)."""
    out = tmp_path / "p.json"
    harness = str(repo_root / "harnesses" / "baseline")
    argv = ["evolve", "init", "--splits", str(splits), "--harness", harness, "--out", str(out)]
    assert main(argv) == 0
    out.write_text(json.dumps({**json.loads(out.read_text()), **change}))
    capsys.readouterr()
    extra = ["--dry-run-budget"] if dry_run else ["--address", "127.0.0.1:1"]
    rc = main(["evolve", "start", str(out), *extra])
    err = capsys.readouterr().err
    assert rc == 1 and f"{out}: {needle}" in err, err


def test_start_refuses_evolution_splits_that_overlap_the_test_split(
    splits: Path, repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A target split that is the test split is refused by ``start`` with the workflow's
    overlap list, before Temporal is contacted (nothing listens at the address)."""
    four = tmp_path / "four"
    tasks = splits.parent / "tasks.jsonl"
    assert main(["prepare-splits", str(tasks), "--out", str(four), "--sizes", "4,1,1,1"]) == 0
    out = tmp_path / "p.json"
    harness = str(repo_root / "harnesses" / "baseline")
    assert (
        main(["evolve", "init", "--splits", str(four), "--harness", harness, "--out", str(out)])
        == 0
    )
    doc = json.loads(out.read_text())
    doc["splits"]["target"] = doc["scored_on"][0]
    out.write_text(json.dumps(doc))
    capsys.readouterr()
    rc = main(["evolve", "start", str(out), "--address", "127.0.0.1:1"])
    err = capsys.readouterr().err
    assert rc == 1 and "evolution prompt(s) overlap the prompts the run is scored on" in err, err
    [test_task] = load_tasks(four / "test.jsonl")
    assert test_task.task_id in err and "Temporal" not in err


def test_evolve_main_sizes_warn_and_exit_like_prepare_splits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``evolve main --sizes 4,2,2`` says the gate cannot accept a patch (the note ``evolve
    init`` prints), before the job starts; ``--sizes 4,1`` is a usage error (exit 2) there as
    in ``prepare-splits``."""
    import evoharness_app.main_job as mj

    started: list[Any] = []

    class NoJob:
        def __init__(self, opts: Any) -> None:
            started.append(opts)

        def run(self) -> Any:
            from services.stack import StackError

            raise StackError("not started in this test")

    monkeypatch.setattr(mj, "MainJob", NoJob)
    rc = main(["evolve", "main", "--sizes", "4,2,2", "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 1 and started and started[0].sizes == (4, 2, 2)
    assert "test units are 6 task(s) (4 target + 2 heldout)" in err, err
    for cmd in (["evolve", "main"], ["evolve", "local"], ["prepare-splits", "x.jsonl"]):
        rc = main([*cmd, "--sizes", "4,1", "--out", str(tmp_path / "o")])
        assert rc == 2, cmd
        assert "4,1" in capsys.readouterr().err
    assert len(started) == 1
