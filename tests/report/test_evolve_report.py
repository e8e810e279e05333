"""``evoharness evolve report RUN_ID`` renders the report of a run from its round reports in
S3 (a real SeaweedFS): what a run started by hand or from the Temporal CLI leaves there."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from evoharness_app.cli import main
from tests.report.sample import make_run


@pytest.fixture
def s3_env(s3_server: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    st = s3_server.settings
    bucket = f"rep-{uuid.uuid4().hex[:12]}"
    for k, v in {
        "ENDPOINT": st.endpoint,
        "ACCESS_KEY": st.access_key.get_secret_value(),
        "SECRET_KEY": st.secret_key.get_secret_value(),
        "BUCKET": bucket,
    }.items():
        monkeypatch.setenv(f"EVOHARNESS_S3__{k}", v)
    return bucket


def test_report_of_a_run_from_s3(
    s3_env: str, s3_server: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from services.storage.s3 import S3ArtifactStore

    store = S3ArtifactStore.from_settings(s3_server.settings, bucket=s3_env)
    store.ensure_bucket()
    run = make_run(tmp_path, n_pairs=0)
    for r in reversed(run.rounds):  # written out of order: the report sorts by round
        key = f"runs/run-42/round-{r.round:03d}.json"
        store.put(key, r.model_dump_json().encode(), "application/json")
    out = tmp_path / "out"
    assert main(["evolve", "report", "run-42", "--out", str(out)]) == 0
    assert "2 round report(s)" in capsys.readouterr().out
    html = (out / "report.html").read_text()
    assert "run-42" in html and "r1-c1" in html and "r2-c1" in html
    assert run.rounds[1].decision.reason in html  # the No-Patch reason
    assert "make evolve" in html  # says why there are no before/after images
    assert "not recorded" in html and "nothing-checkable" not in html  # no mode.json
    # with the mode load_inputs writes: the mode and the nothing-checkable count (issue 19)
    from workflows.params import EvolutionMode, run_mode_key

    mode = EvolutionMode(extractor="rules-v1@abc", dropped=["t2i/shape_train/7"], read=40)
    store.put(run_mode_key("run-42"), mode.model_dump_json().encode(), "application/json")
    assert main(["evolve", "report", "run-42", "--out", str(tmp_path / "out2")]) == 0
    html2 = (tmp_path / "out2" / "report.html").read_text()
    assert "rules-v1@abc" in html2 and "t2i/shape_train/7" in html2
    assert "nothing checkable read from 1 of 40 prompt(s)" in html2


def test_report_of_an_unknown_run_names_the_prefix(
    s3_env: str, s3_server: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from services.storage.s3 import S3ArtifactStore

    S3ArtifactStore.from_settings(s3_server.settings, bucket=s3_env).ensure_bucket()
    assert main(["evolve", "report", "nope", "--out", str(tmp_path / "o")]) == 1
    assert f"s3://{s3_env}/runs/nope/" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_a_run_that_kept_its_harness_shows_no_change(
    s3_env: str, s3_server: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A hand-started run whose only round was No-Patch showed "target 60.0% → 71.0%, +11.0 pp"
    for its unchanged harness: the gate's parent figures (fresh seeds of look 1) against the
    round's (both looks). One harness, one measurement: no change, and no "n 0"."""
    import re

    from services.storage.s3 import S3ArtifactStore

    store = S3ArtifactStore.from_settings(s3_server.settings, bucket=s3_env)
    store.ensure_bucket()
    r2 = make_run(tmp_path, n_pairs=0).rounds[1]
    assert r2.decision.harness_id == r2.parent_harness_id  # No-Patch
    gated = r2.candidates[0].gate
    assert gated is not None
    cand = r2.candidates[0].model_copy(
        update={"gate": gated.model_copy(update={"pass_rates": {"target": {"parent": 0.6}}})}
    )
    only = r2.model_copy(update={"round": 1, "candidates": [cand]})
    store.put("runs/kept/round-001.json", only.model_dump_json().encode(), "application/json")
    out = tmp_path / "out"
    assert main(["evolve", "report", "kept", "--out", str(out)]) == 0
    capsys.readouterr()
    html = (out / "report.html").read_text()
    row = re.search(r"<td>target</td>(.*?)</tr>", html, re.S)
    assert row is not None
    cells = re.findall(r'<td class="num[^"]*">([^<]*)</td>', row.group(1))
    assert cells[:3] == ["71.0%", "71.0%", "+0.0 pp"] and cells[-1] == "–"
    assert "kept its starting harness" in html


def test_an_unreadable_round_report_is_named_not_dropped(
    s3_env: str, s3_server: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A round report that does not parse is named with its key and error on stderr and on
    the page, and the rest is rendered (issue 28: it was dropped from the page silently); a
    beam branch's report (``round-NNN-b1.json``) is read with its branch."""
    from services.storage.s3 import S3ArtifactStore

    store = S3ArtifactStore.from_settings(s3_server.settings, bucket=s3_env)
    store.ensure_bucket()
    r1, r2 = make_run(tmp_path, n_pairs=0).rounds
    store.put("runs/bad/round-001.json", r1.model_dump_json().encode(), "application/json")
    store.put("runs/bad/round-002.json", b'{"run_id": "bad", "round": 2', "application/json")
    store.put("runs/bad/round-002-b1.json", r2.model_dump_json().encode(), "application/json")
    out = tmp_path / "out"
    assert main(["evolve", "report", "bad", "--out", str(out)]) == 0
    cap = capsys.readouterr()
    assert "round report not read: runs/bad/round-002.json: not a round report" in cap.err
    assert "2 round report(s)" in cap.out
    html = (out / "report.html").read_text()
    assert 'class="problem unreadable-round"' in html
    assert "runs/bad/round-002.json: not a round report" in html
    assert 'id="round-2-b1"' in html and "r2-b1-c1" in html
