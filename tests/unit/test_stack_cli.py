"""Bad input to the local-stack verbs: one-line errors, exit 1, nothing started."""

from __future__ import annotations

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
