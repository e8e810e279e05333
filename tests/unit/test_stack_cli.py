"""Bad input to the local-stack verbs: one-line errors, exit 1, nothing started."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoharness_app.cli import main


@pytest.mark.parametrize("verb", ["status", "down", "env"])
def test_corrupt_state_file_is_named(verb: str, tmp_path: Path, capsys) -> None:
    (tmp_path / "state.json").write_text("{not json")
    assert main([verb, "--run-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "state.json is not a stack state file" in err and "Traceback" not in err


def test_run_dir_that_is_a_file_is_refused(tmp_path: Path, capsys) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    assert main(["up", "--run-dir", str(f)]) == 1
    assert "is not a directory" in capsys.readouterr().err
    assert f.read_text() == "x"


def test_preservation_that_is_not_a_task_file_is_refused(tmp_path: Path, capsys) -> None:
    """`up --preservation F` names F when it is not a task file, before anything starts."""
    bad = tmp_path / "pres.jsonl"
    bad.write_text('{"prompt": 1}\n')
    run_dir = tmp_path / "stack"
    assert main(["up", "--run-dir", str(run_dir), "--preservation", str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"--preservation {bad}" in err and "Traceback" not in err
    assert not (run_dir / "state.json").exists()


def test_default_preservation_split_is_written_once(tmp_path: Path) -> None:
    from evoharness.tasks.io import load_tasks
    from services import stack

    path = stack.preservation_split(tmp_path)
    tasks = load_tasks(path)
    assert path == tmp_path.resolve() / "postpromotion" / "preservation.jsonl"
    assert len(tasks) == stack.POSTPROMOTION_TASKS and all(t.constraints for t in tasks)
    assert stack.preservation_split(tmp_path) == path and load_tasks(path) == tasks
    mine = tmp_path / "mine.jsonl"
    mine.write_bytes(path.read_bytes())
    assert stack.preservation_split(tmp_path, mine) == mine.resolve()


def test_an_exited_process_not_yet_reaped_counts_as_stopped(tmp_path: Path) -> None:
    """`down` stops what another process (`up`) started, so the components exit as zombies
    that only init reaps (seconds later here) and `kill(pid, 0)` still answers for them: `down`
    waited out its whole grace period and `status` called them alive. A zombie has stopped."""
    import os
    import subprocess

    from services import stack
    from services.common.process import pid_alive

    proc = subprocess.Popen(["sh", "-c", "exit 0"])
    try:
        for _ in range(2000):  # until it has exited; not reaped (no wait) it stays a zombie
            if Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                break
            os.sched_yield()
        os.kill(proc.pid, 0)  # a zombie still answers
        assert not pid_alive(proc.pid)
        state = stack.StackState(run_dir=str(tmp_path), started_at=0.0)
        state.components["c"] = stack.Component("c", proc.pid)
        assert stack.running_components(state) == []
        assert pid_alive(os.getpid())
    finally:
        proc.wait()


def test_status_and_env_without_a_stack(tmp_path: Path, capsys) -> None:
    assert main(["status", "--run-dir", str(tmp_path)]) == 1
    assert "no stack is running" in capsys.readouterr().out
    assert main(["env", "--run-dir", str(tmp_path)]) == 1
    assert "no stack is running" in capsys.readouterr().err
    assert main(["down", "--run-dir", str(tmp_path)]) == 0


def test_make_up_and_down_do_not_reinstall_the_venv(repo_root: Path, tmp_path: Path) -> None:
    """With an installed venv whose stamp is older than pyproject.toml, `make up`/`make down`
    run the CLI only (a reinstall before stopping the stack was issue 14 item 13)."""
    import os
    import shutil
    import subprocess

    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "evoharness").write_text("#!/bin/sh\n")
    (venv / "bin" / "evoharness").chmod(0o755)
    stamp = venv / ".installed"
    stamp.write_text("")
    os.utime(stamp, (0, 0))  # older than pyproject.toml
    for target in ("up", "down"):
        out = subprocess.run(
            ["make", "-n", "-C", str(repo_root), target, f"VENV={venv}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        assert "pip" not in out and f"{venv}/bin/evoharness {target}" in out, out


def test_down_stops_components_in_parallel(tmp_path: Path) -> None:
    """Each fake component exits cleanly on SIGTERM only once every component has received
    SIGTERM: stopped one after another, the first would be SIGKILLed after its grace."""
    import subprocess
    import sys
    import threading

    from services import stack

    n = 3
    script = (
        "import os, signal, sys, time\n"
        "d, i, n = sys.argv[1], sys.argv[2], int(sys.argv[3])\n"
        "def term(*_):\n"
        "    open(os.path.join(d, 'term-' + i), 'w').close()\n"
        "    for _ in range(400):\n"
        "        if sum(f.startswith('term-') for f in os.listdir(d)) == n:\n"
        "            open(os.path.join(d, 'clean-' + i), 'w').close()\n"
        "            sys.exit(0)\n"
        "        time.sleep(0.05)\n"
        "signal.signal(signal.SIGTERM, term)\n"
        "open(os.path.join(d, 'ready-' + i), 'w').close()\n"
        "while True:\n"
        "    time.sleep(1)\n"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(tmp_path), str(i), str(n)], start_new_session=True
        )
        for i in range(n)
    ]
    reapers = [threading.Thread(target=p.wait, daemon=True) for p in procs]
    for t in reapers:
        t.start()
    try:
        for i in range(n):  # wait until every handler is installed
            for _ in range(600):
                if (tmp_path / f"ready-{i}").exists():
                    break
                threading.Event().wait(0.05)
        state = stack.StackState(
            run_dir=str(tmp_path),
            started_at=0.0,
            components={
                f"c{i}": stack.Component(name=f"c{i}", pid=p.pid) for i, p in enumerate(procs)
            },
        )
        (tmp_path / stack.STATE_FILE).write_text(state.to_json())
        assert sorted(stack.down(tmp_path, grace=5.0)) == ["c0", "c1", "c2"]
        assert sorted(f.name for f in tmp_path.glob("clean-*")) == ["clean-0", "clean-1", "clean-2"]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()


def test_up_refuses_half_the_tls_files(tmp_path: Path, capsys) -> None:
    assert main(["up", "--run-dir", str(tmp_path), "--tls-cert", str(tmp_path / "c.pem")]) == 1
    assert "--tls-cert, --tls-key and --tls-ca go together" in capsys.readouterr().err
    assert not (tmp_path / "state.json").exists()


def test_env_exports_the_stack_token_and_ca(tmp_path: Path, capsys) -> None:
    """`evoharness env` exports what a client needs to pass the stack's auth and TLS."""
    import os

    from services import stack

    state = stack.StackState(
        run_dir=str(tmp_path),
        started_at=0.0,
        components={"temporal": stack.Component("temporal", os.getpid(), "127.0.0.1:7233")},
        env={stack.TOKEN_ENV: "tok-123", stack.CA_ENV: "/ca/ca.pem"},
    )
    (tmp_path / stack.STATE_FILE).write_text(state.to_json())
    assert main(["env", "--run-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "export EVOHARNESS_TOKEN=tok-123" in out
    assert "export EVOHARNESS_CLIENT__TLS_CA_FILE=/ca/ca.pem" in out


def test_evolve_main_refuses_an_unknown_profile_before_starting(tmp_path: Path, capsys) -> None:
    assert main(["evolve", "main", "--profile", "sd99-like", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "--profile sd99-like" in err and "Traceback" not in err
    assert not any(tmp_path.iterdir())  # nothing started, nothing written


def test_up_refuses_a_bad_profile_before_starting(tmp_path: Path) -> None:
    from evoharness.sim.profiles import ProfileError
    from services import stack

    bad = tmp_path / "bad.yaml"
    bad.write_text("profile: x\n")
    with pytest.raises(ProfileError, match="missing required field"):
        stack.up(tmp_path / "stack", sim_profile=str(bad))
    assert stack.read_state(tmp_path / "stack") is None


def test_state_records_the_profile_and_reads_old_files(tmp_path: Path) -> None:
    from services import stack

    st = stack.StackState(run_dir=str(tmp_path), started_at=1.0, sim_profile="flux-like")
    assert stack.StackState.from_json(st.to_json()).sim_profile == "flux-like"
    # a state file written before the field existed reads as "the config's profile"
    old = json.dumps({"run_dir": str(tmp_path), "started_at": 1.0, "components": {}, "env": {}})
    assert stack.StackState.from_json(old).sim_profile == ""


def test_main_job_refuses_a_running_stack_with_another_profile(tmp_path: Path) -> None:
    import os

    from evoharness_app.main_job import MainJob, MainJobOptions
    from services import stack

    st = stack.StackState(
        run_dir=str(tmp_path),
        started_at=1.0,
        components={"x": stack.Component("x", os.getpid())},  # "running": this process
        sim_profile="sd15-like",
    )
    (tmp_path / stack.STATE_FILE).write_text(st.to_json())
    job = MainJob(MainJobOptions(stack_dir=tmp_path, sim_profile="flux-like"))
    with pytest.raises(stack.StackError, match="serves sd15-like"):
        job.ensure_stack()
    same = MainJob(MainJobOptions(stack_dir=tmp_path, sim_profile="sd15-like"))
    assert same.ensure_stack() == (stack.read_state(tmp_path), False)


def test_llm_local_without_the_extra_is_one_line(tmp_path: Path, capsys, monkeypatch) -> None:
    """`up --llm local` with an interpreter lacking llama_cpp: one line naming what to
    install, exit 1, nothing started (no state file)."""
    import sys

    monkeypatch.setenv("EVOHARNESS_LLM_PYTHON", sys.executable)
    if __import__("importlib").util.find_spec("llama_cpp") is not None:
        pytest.skip("this interpreter has llama_cpp")
    assert main(["up", "--llm", "local", "--run-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip()
    assert "pip install -e '.[llm-local]'" in err and "make llm-venv" in err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "state.json").exists()
    monkeypatch.setenv("EVOHARNESS_LLM_PYTHON", str(tmp_path / "no-python"))
    assert main(["up", "--llm", "local", "--run-dir", str(tmp_path)]) == 1
    assert "no-python does not exist" in capsys.readouterr().err
    assert main(["up", "--llm", "gpt", "--run-dir", str(tmp_path)]) == 1
    assert "the only local model is 'local'" in capsys.readouterr().err


def test_local_llm_server_threads_sleep_while_they_wait(tmp_path: Path, monkeypatch) -> None:
    """The model server is started with passive OpenMP waiting (spin-waiting threads made
    decoding 50x slower on shared cores); a policy set in the environment is kept."""
    from services import llm_local

    started: list[dict[str, str]] = []

    class Recorder:
        def __init__(self, name: str, argv: list[str], log: Path, env: dict[str, str]) -> None:
            started.append(env)

        def start(self) -> Recorder:
            return self

        def wait_healthy(self, *args: object, **kwargs: object) -> None:
            raise TimeoutError("not a server")

        def stop(self) -> None:
            pass

    monkeypatch.setattr(llm_local, "ManagedProcess", Recorder)
    monkeypatch.setattr(llm_local, "llm_python", lambda: "python")
    monkeypatch.setattr(llm_local, "local_model_path", lambda python: tmp_path / "m.gguf")
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    with pytest.raises(TimeoutError):
        llm_local.start_local_llm(tmp_path / "llm.log", threads=2)
    assert started[-1]["OMP_WAIT_POLICY"] == "passive"
    assert started[-1]["OMP_NUM_THREADS"] == "2"
    monkeypatch.setenv("OMP_WAIT_POLICY", "active")
    with pytest.raises(TimeoutError):
        llm_local.start_local_llm(tmp_path / "llm.log")
    assert started[-1]["OMP_WAIT_POLICY"] == "active"


def _state_with(tmp_path: Path, pids: dict[str, int]) -> None:
    from services import stack

    state = stack.StackState(run_dir=str(tmp_path), started_at=0.0)
    for name, pid in pids.items():
        state.components[name] = stack.Component(name, pid, address=f"127.0.0.1:{pid % 60000}")
    (tmp_path / stack.STATE_FILE).write_text(state.to_json())


def _dead_pid() -> int:
    import subprocess

    proc = subprocess.Popen(["true"])
    proc.wait()  # reaped: its PID names no process (until reused, which takes a while)
    return proc.pid


def test_status_with_a_state_file_but_nothing_alive_exits_1(tmp_path: Path, capsys) -> None:
    """A stack that crashed (or a machine that rebooted) leaves its state file: nothing is
    running, so `status` says so and exits 1, as it does without a state file."""
    dead = _dead_pid()
    _state_with(tmp_path, {"temporal": dead, "s3": dead})
    assert main(["status", "--run-dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "no stack is running" in out and "temporal" in out and "s3" in out


def test_status_exits_1_when_a_component_is_dead_and_0_when_all_are_alive(
    tmp_path: Path, capsys
) -> None:
    import os

    _state_with(tmp_path, {"temporal": os.getpid(), "s3": _dead_pid()})
    assert main(["status", "--run-dir", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "temporal" in out and "s3" in out and "dead" in out  # the table, piped: tab lines
    _state_with(tmp_path, {"temporal": os.getpid()})
    assert main(["status", "--run-dir", str(tmp_path)]) == 0
    assert "alive" in capsys.readouterr().out
