"""``evoharness evolve main --run-id`` (issue newuser27): a run id that names a finished run
is refused before the stack starts and before any of the run's files is rewritten."""

from __future__ import annotations

from pathlib import Path

import pytest

from evoharness_app.main_job import MainJob, MainJobInputError, MainJobOptions
from tests.conftest import SHARED


class _StackStarted(Exception):
    """Raised instead of starting the stack: the job got past its checks."""


def _no_stack(self: MainJob) -> None:
    raise _StackStarted


def _finished_run(runs: Path) -> dict[Path, bytes]:
    """A run folder as a finished run leaves it; its files' bytes by path."""
    run = runs / "done"
    (run / "splits").mkdir(parents=True)
    (run / "params.json").write_text('{"run_id": "done"}')
    (run / "summary.json").write_text('{"scores": {}}')
    (run / "splits" / "target.jsonl").write_text('{"id": "t1"}\n')
    (run / "splits" / "manifest.json").write_text('{"files": {}}')
    return {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}


def test_evolve_local_refuses_a_used_run_folder_and_leaves_it_unchanged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from evoharness_app.commands import evolve_local

    monkeypatch.setattr(evolve_local, "run_local_workflow", _no_stack)  # never a server
    runs = tmp_path / "runs"
    before = _finished_run(runs)
    rc, err = _cli(["evolve", "local", "--run-id", "done", "--out", str(runs)], capsys)
    assert rc == 1 and "already holds a run" in err, err
    after = {p: p.read_bytes() for p in (runs / "done").rglob("*") if p.is_file()}
    assert after == before


def test_a_used_run_folder_is_refused_before_the_stack_and_left_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = tmp_path / "runs"
    before = _finished_run(runs)
    monkeypatch.setattr(MainJob, "ensure_stack", _no_stack)
    opts = MainJobOptions(shared_dir=SHARED, runs_dir=runs, stack_dir=runs / "stack", run_id="done")
    with pytest.raises(MainJobInputError) as exc:
        MainJob(opts).run()
    line = str(exc.value)
    assert "\n" not in line and str((runs / "done").resolve()) in line, line
    after = {p: p.read_bytes() for p in (runs / "done").rglob("*") if p.is_file()}
    assert after == before


@pytest.mark.parametrize("marker", ["params.json", "summary.json", "splits", "tasks"])
def test_each_marker_of_a_run_is_enough_to_refuse(tmp_path: Path, marker: str) -> None:
    from evoharness_app.main_job import refuse_used_run_dir

    run = tmp_path / "r"
    run.mkdir()
    refuse_used_run_dir(run)  # an empty folder holds no run
    (run / "report.html").write_text("x")
    refuse_used_run_dir(run)  # nor one without a run's files
    (run / marker).mkdir() if marker in ("splits", "tasks") else (run / marker).write_text("{}")
    with pytest.raises(MainJobInputError, match=marker):
        refuse_used_run_dir(run)


def _cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    from evoharness_app.cli import main

    rc = main(argv)
    cap = capsys.readouterr()
    assert "Traceback" not in cap.out + cap.err
    return rc, cap.err


BAD_RUN_IDS = ["..", ".", "../../etc", "a/b", ".hidden", "_x"]


@pytest.mark.parametrize("bad", BAD_RUN_IDS)
@pytest.mark.parametrize(
    "argv",
    [
        ["evolve", "main", "--run-id"],
        ["evolve", "local", "--run-id"],
        ["evolve", "init", "--splits", "nowhere", "--run-id"],
        ["evolve", "status"],
        ["evolve", "report"],
        ["evolve", "stop"],
    ],
)
def test_a_bad_run_id_is_a_usage_error_before_anything_starts(
    argv: list[str],
    bad: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`--run-id ../../etc` wrote outside --out and crashed in S3; `evolve init --run-id ..`
    was accepted. Every verb taking a run id refuses it with exit 2, naming the id."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(MainJob, "ensure_stack", _no_stack)
    rc, err = _cli([*argv, bad], capsys)
    assert rc == 2, err
    assert "is not a run id" in err, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("good", ["r1", "geneval-20260101-120000", "A.b_c-1", "9"])
def test_the_run_id_rule_accepts_ordinary_ids(good: str) -> None:
    from workflows.params import EvolutionParams
    from workflows.store_keys import check_run_id

    assert check_run_id(good) == good
    with pytest.raises(ValueError, match="not a run id"):
        check_run_id(good + "/..")
    # the parameters model applies the same rule
    fields = EvolutionParams.model_json_schema()["properties"]["run_id"]
    assert fields["pattern"] == r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


def test_corrupt_benchmark_data_is_one_line_before_the_stack_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A truncated line in evaluation_metadata.jsonl was a BuildError traceback after the
    stack had started: now one line naming file and line, exit 1, no stack, no run folder."""
    shared = tmp_path / "shared"
    meta = shared / "data" / "geneval" / "evaluation_metadata.jsonl"
    meta.parent.mkdir(parents=True)
    lines = (SHARED / "data" / "geneval" / "evaluation_metadata.jsonl").read_text().splitlines()
    lines[28] = lines[28][: len(lines[28]) // 2]  # line 29 truncated
    meta.write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("EVOHARNESS_SHARED", str(shared))
    monkeypatch.setattr(MainJob, "ensure_stack", _no_stack)
    monkeypatch.chdir(tmp_path)  # the stack folder, runs/stack, is taken relative to it
    runs = tmp_path / "runs"
    argv = ["evolve", "main", "--run-id", "r1", "--transfer", "0", "--sizes", "8,4,4,4"]
    rc, err = _cli(argv, capsys)
    assert rc == 1, err
    [line] = err.strip().splitlines()
    assert f"{meta}:29" in line and "JSON" in line, line
    assert sorted(p.name for p in runs.iterdir()) == ["stack"]  # no run or staging folder


@pytest.mark.parametrize("budget", ["--budget-wall-s", "--budget-usd", "--budget-generator-calls"])
def test_every_budget_at_zero_is_refused_before_the_stack_starts(
    budget: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(MainJob, "ensure_stack", _no_stack)
    rc, err = _cli(["evolve", "main", "--run-id", "r1", budget, "0"], capsys)
    assert rc == 1, err
    assert "too small for one round" in err and budget[2:].replace("-", "_") in err, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--llm", "gpt"], "--llm gpt: not one of local"),
        (["--protocol", "nope"], "--protocol nope: not one of trace"),
        (["--tracking", "wandb"], "--tracking wandb: not one of mlflow"),
    ],
)
def test_bad_choices_are_usage_errors_before_the_stack_starts(
    extra: list[str],
    said: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--llm <bad>` was refused only after the stack had started, and `--protocol nope` /
    `--tracking wandb` exited 1: each is bad usage, exit 2 (docs/cli.md), nothing started."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(MainJob, "ensure_stack", _no_stack)
    rc, err = _cli(["evolve", "main", "--run-id", "r1", *extra], capsys)
    assert rc == 2, err
    assert said in " ".join(err.replace("│", " ").split()), err
    assert list(tmp_path.iterdir()) == []


class _State:
    """A stack state whose Temporal is at a fake address."""

    def address(self, name: str) -> str:
        return f"{name}.invalid:1"


def test_a_run_id_temporal_has_seen_writes_nothing_in_the_run_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second guard (the run folder was deleted, the workflow is on the stack's
    Temporal): refused before the staged tasks and splits move into the run folder or
    anything is put in S3; the staging folder is removed."""
    import evoharness_app.main_job as mj

    checked: list[tuple[str, str]] = []

    def seen(temporal: str, run_id: str) -> None:
        checked.append((temporal, run_id))
        raise MainJobInputError(f"--run-id {run_id}: this run was already started")

    def no_settings(self: MainJob, state: object) -> None:
        raise AssertionError("the worker settings (S3) were read before the Temporal check")

    monkeypatch.setattr(MainJob, "ensure_stack", lambda self: (_State(), False))
    monkeypatch.setattr(MainJob, "worker_settings", no_settings)
    monkeypatch.setattr(mj, "refuse_started_on_temporal", seen)
    runs = tmp_path / "runs"
    opts = MainJobOptions(
        shared_dir=SHARED,
        runs_dir=runs,
        stack_dir=runs / "stack",
        run_id="again",
        sizes=(8, 4, 4, 4),
        transfer=0,
    )
    with pytest.raises(MainJobInputError, match="already started"):
        MainJob(opts).run()
    assert checked == [("temporal.invalid:1", "again")]
    assert sorted(p.name for p in runs.iterdir()) == ["stack"]  # no run, no staging folder


@pytest.mark.parametrize(("found", "refused"), [(True, True), (False, False)])
def test_the_temporal_check_asks_for_the_runs_workflow(
    found: bool, refused: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from temporalio.service import RPCError, RPCStatusCode

    from evoharness_app.main_job import refuse_started_on_temporal
    from workflows import client as wf
    from workflows import worker

    asked: list[str] = []

    class Handle:
        async def describe(self) -> object:
            if not found:
                raise RPCError("workflow not found", RPCStatusCode.NOT_FOUND, b"")
            return object()

    async def connect(address: str) -> str:
        asked.append(address)
        return "client"

    monkeypatch.setattr(worker, "connect", connect)

    def handle(client: str, run_id: str) -> Handle:
        asked.append(run_id)
        return Handle()

    monkeypatch.setattr(wf, "handle", handle)
    if refused:
        with pytest.raises(MainJobInputError, match="evolve-r9"):
            refuse_started_on_temporal("t:7233", "r9")
    else:
        refuse_started_on_temporal("t:7233", "r9")
    assert asked == ["t:7233", "r9"]
