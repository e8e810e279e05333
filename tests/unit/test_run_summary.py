"""The end-of-run summary of ``evoharness evolve main`` (``evoharness_app.summary``): what it
says of the accepted patches matches the final harness."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evoharness_app.summary import MainJobResult, patches_in_final
from tests.unit._main_job_result import main_job_result, summary_text


def _accepted(n: int, parent: str, child: str) -> dict[str, Any]:
    return {
        "round": n,
        "kind": "accepted",
        "reason": "all gate conditions hold",
        "harness_id": child,
        "parent_harness_id": parent,
    }


def _result(tmp_path: Path, decisions: list[dict[str, Any]], final: str) -> MainJobResult:
    return main_job_result(
        tmp_path,
        final_harness_id=final,
        decisions=decisions,
        accepted_diffs=[{"tools": [{"op": "add", "path": "/tools/tools/-"}]}]
        if final != "h0"
        else [],
    )


def test_a_patch_on_another_branch_is_not_said_to_be_in_the_final_harness(
    tmp_path: Path,
) -> None:
    """Round 2 accepted a patch of the baseline (another frontier entry): two patches were
    accepted, the final harness holds one of them (it read "2 accepted patch(es)")."""
    decisions = [_accepted(1, "h0", "h1"), _accepted(2, "h0", "h2")]
    assert [d["round"] for d in patches_in_final(decisions, "h0", "h2")] == [2]
    text = summary_text(_result(tmp_path, decisions, "h2"))
    assert "2 patches accepted (rounds 1, 2); the final harness holds 1 of them (round 2)" in text


def test_a_chain_of_patches_is_all_in_the_final_harness(tmp_path: Path) -> None:
    decisions = [
        _accepted(1, "h0", "h1"),
        {"round": 2, "kind": "no_patch", "reason": "no candidate passed", "harness_id": "h1"},
        _accepted(3, "h1", "h3"),
    ]
    assert [d["round"] for d in patches_in_final(decisions, "h0", "h3")] == [1, 3]
    text = summary_text(_result(tmp_path, decisions, "h3"))
    assert "2 patches accepted (rounds 1, 3); the final harness holds both" in text
    one = summary_text(_result(tmp_path, decisions[:1], "h1"))
    assert "1 patch accepted (round 1); the final harness holds it" in one


def test_no_accepted_patch_says_nothing_of_patches(tmp_path: Path) -> None:
    decisions = [{"round": 1, "kind": "no_patch", "reason": "none", "harness_id": "h0"}]
    assert patches_in_final(decisions, "h0", "h0") == []
    assert "accepted (round" not in summary_text(_result(tmp_path, decisions, "h0"))


def test_beam_entries_count_and_a_final_harness_off_the_record_is_said_so(
    tmp_path: Path,
) -> None:
    """A beam round records each entry's outcome under ``beam``: both accepted entries are
    patches, and the final harness's chain runs through the one it descends from."""
    beam = [
        {"parent_harness_id": "h0", "kind": "accepted", "harness_id": "h1"},
        {"parent_harness_id": "h0", "kind": "accepted", "harness_id": "h2"},
    ]
    decisions = [_accepted(1, "h0", "h1") | {"beam": beam}, _accepted(2, "h2", "h3")]
    assert [d["harness_id"] for d in patches_in_final(decisions, "h0", "h3") or []] == [
        "h2",
        "h3",
    ]
    text = summary_text(_result(tmp_path, decisions, "h3"))
    assert (
        "3 patches accepted (rounds 1, 1, 2); the final harness holds 2 of them (rounds 1, 2)"
        in text
    )
    # a final harness no accepted decision made (a gate-passing candidate the frontier kept)
    assert patches_in_final(decisions, "h0", "h9") is None
    assert "descends from a gate-passing candidate" in summary_text(
        _result(tmp_path, decisions, "h9")
    )


@pytest.fixture
def no_proposer_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The proposer service reads its settings from the YAML and ``EVOHARNESS_*``: none here."""
    import os

    for k in list(os.environ):
        if k.startswith("EVOHARNESS_") and k != "EVOHARNESS_SHARED":
            monkeypatch.delenv(k)


@pytest.mark.usefixtures("no_proposer_env")
def test_the_proposer_line_says_what_the_service_uses(tmp_path: Path) -> None:
    """Without ``--llm`` the stack's proposer service runs as ``configs/proposer.yaml`` says:
    when that names a language model, the main job says so (it printed "rule-based")."""
    from evoharness_app.summary import describe_proposer

    rule = tmp_path / "rule.yaml"
    rule.write_text("backend: rule\n")
    assert describe_proposer("", rule) == "rule-based"
    llm = tmp_path / "llm.yaml"
    llm.write_text(
        "backend: openai\nopenai:\n  model: qwen-7b\n  base_url: http://10.0.0.5:8000/v1\n"
    )
    line = describe_proposer("", llm)
    assert line.startswith("LLM (qwen-7b at http://10.0.0.5:8000/v1")
    assert f"{llm} names it" in line and "--llm was not given" in line
    # `--llm local` (or a running stack started with it): the local model's address
    assert describe_proposer("http://127.0.0.1:9999/v1", llm) == "LLM (http://127.0.0.1:9999/v1)"
    # what the service would refuse is said, not guessed
    bad = tmp_path / "bad.yaml"
    bad.write_text("backend: telepathy\n")
    assert describe_proposer("", bad).startswith(f"as {bad} says (not readable here:")


def test_the_registry_description_says_what_the_summary_says(tmp_path: Path) -> None:
    """The best harness's registry description counts beam entries and says which patches
    the harness holds, in the end-of-run summary's words (it read "1 accepted patch(es) in
    all", counting decisions only)."""
    from evoharness_app.summary import registry_description

    beam = [
        {"parent_harness_id": "h0", "kind": "accepted", "harness_id": "h1"},
        {"parent_harness_id": "h0", "kind": "accepted", "harness_id": "h2"},
    ]
    decisions = [_accepted(1, "h0", "h1") | {"beam": beam}, _accepted(2, "h2", "h3")]
    sentence = (
        "3 patches accepted (rounds 1, 1, 2); the final harness holds 2 of them (rounds 1, 2)"
    )
    assert sentence in summary_text(_result(tmp_path, decisions, "h3"))
    assert registry_description("r", decisions, "h0", "h3", 2, 3) == (
        f"Best harness of run r: accepted in round 2 of 3; {sentence}."
    )


def test_the_decisions_are_the_final_harness_patches_with_their_gate_figures(
    tmp_path: Path,
) -> None:
    """Issue 27 item 8: the summary labelled a patch with its failure cluster's id, printed
    one row per round (not per patch) and left out the gate figures of the candidate the
    final harness came from. Now: one row per patch the final harness holds (candidate id,
    responsibility, what it changed, gate figures), one per No-Patch round, and a line with
    the figures of the candidate it came from. A patch accepted on another beam branch is
    neither a row nor credited in the image grid (item 7)."""
    from evoharness_app.job_report import credited_patches, patch_rows
    from evoharness_app.run_report import RoundReads
    from tests.report.sample import H0, H1
    from tests.report.test_report_figures import _beam_run

    run = _beam_run(tmp_path)
    reads = RoundReads(reports=run.rounds, beams=run.beams)
    assert credited_patches(reads, H0, H1) == [("r1-c1", "count")]
    rows = patch_rows(reads, H0, H1)
    assert rows is not None and [r["candidate_id"] for r in rows] == ["r1-c1"]
    decisions = [
        {"round": 1, "kind": "accepted", "reason": "accepted r1-c1 (tools/count/k1)"},
        {"round": 2, "kind": "no_patch", "reason": "no candidate passed the gate"},
    ]
    r = _result(tmp_path, decisions, H1)
    r.baseline_harness_id = H0
    r.patches = rows
    r.request_cost = {
        "baseline": {"generator_calls": 1.0, "generator_seconds": 2.5, "requests": 80},
        "final": {"generator_calls": 3.25, "generator_seconds": 8.0, "requests": 80},
    }
    text = summary_text(r)
    table = text[text.index("decisions:") : text.index("the final harness came from")]
    lines = [ln for ln in table.splitlines() if ln.strip().startswith("│ 1") or "│ 2 " in ln]
    assert len(lines) == 2, table  # the patch and the No-Patch round
    patch_line = next(ln for ln in lines if "r1-c1" in ln)
    assert "r1-c1 (tools)" in patch_line and "add /tools/tools/- = layout_planner" in patch_line
    assert "accepted → final" in patch_line and "(tools/count/k1)" not in text
    assert "+12.0 pp" in patch_line and "0.003 (Holm 0.006)" in patch_line
    assert "No-Patch" in table and "no candidate passed the gate" in table
    assert (
        "the final harness came from r1-c1 (tools, round 1): Δtarget +12.0 pp, p 0.003 "
        "(Holm 0.006), Δheld-out +1.0 pp, Δcost +4.0%, utility +0.1170" in text
    )
    assert (
        "cost per request (baseline → final, same 80 requests): generator calls 1.00 → 3.25, "
        "generator-seconds 2.50 → 8.00" in text
    )
    assert "spend $0.0000" in text
    # issue 28: a round report the job could not read is named, not dropped
    r.unreadable_rounds = ["runs/x/round-003.json: not a round report (1 error(s))"]
    assert "round report not read: runs/x/round-003.json: not a round report" in summary_text(r)


def test_the_summary_says_which_budget_stopped_the_run(tmp_path: Path) -> None:
    """Issue 33: ``summary.json`` and the console name the limit that stopped evolution."""
    from evoharness_app.summary import summary_doc

    r = _result(tmp_path, [_accepted(1, "h0", "h1")], "h1")
    r.stopped, r.stopped_by = (
        "generator-call budget exhausted (250 of 100)",
        "budget_generator_calls",
    )
    assert summary_doc(r)["stopped"] == {
        "by": "budget_generator_calls",
        "reason": "generator-call budget exhausted (250 of 100)",
    }
    assert (
        "evolution stopped: generator-call budget exhausted (250 of 100) (stopped by budget_generator_calls)"
        in summary_text(r)
    )
