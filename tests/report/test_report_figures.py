"""The run report's figures (issue 27 items 5-7): the headline is the untouched test split with
task-level intervals, per-tag rows say how many tasks they rest on and every count column its
unit, cost per request baseline vs final, rounds counted as rounds, candidate ids unique
across beam branches, verdicts naming their verifier."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from evoharness.evidence import EvidenceStatus
from evoharness.report import render_report
from evoharness.report.intervals import paired_rate
from evoharness.report.lineage import patch_lineage, qualify_candidate_ids
from evoharness.report.models import PassRate, RequestCost, RunReportInput
from evoharness.trace.gate_stats import task_bootstrap
from evoharness.trace.gates import GateConfig, _bootstrap
from evoharness.trace.models import Candidate, CandidateStatus, Decision, DecisionKind
from tests.report.sample import H0, H1, gate, make_run

H2 = "c" * 64  # a beam branch's child, not in the final harness's lineage


def _test_rate() -> PassRate:
    """20 test tasks × 8 verdicts: 9 → 14 passing tasks' worth of verdicts."""
    before = {f"t{i}": (8, 8 if i < 9 else 2) for i in range(20)}
    after = {f"t{i}": (8, 8 if i < 14 else 2) for i in range(20)}
    return paired_rate(before, after)


def _beam_run(tmp: Path) -> RunReportInput:
    """make_run plus a round-2 beam branch 1 whose candidate is also numbered r2-c1 and was
    accepted (child H2), which the final harness H1 does not descend from."""
    run = make_run(tmp)
    r1, r2 = run.rounds
    branch = r2.model_copy(
        update={
            "parent_harness_id": H1,
            "candidates": [
                Candidate(
                    candidate_id="r2-c1",
                    cluster_id="k9",
                    patch=r1.candidates[0].patch,
                    status=CandidateStatus.accepted,
                    harness_id=H2,
                    gate=gate(0.05, True, []),
                )
            ],
            "decision": Decision(
                kind=DecisionKind.accepted,
                reason="branch 1 accepted r2-c1",
                harness_id=H2,
                parent_harness_id=H1,
                candidate_id="r2-c1",
            ),
        }
    )
    return run.model_copy(
        update={
            "rounds": [r1, r2, branch],
            "beams": [0, 0, 1],
            "split_pass_rates": {**run.split_pass_rates, "test": _test_rate()},
            "tag_pass_rates": {
                "counting": paired_rate(
                    {"a": (4, 1), "b": (4, 0)}, {"a": (4, 4), "b": (4, 3)}, unit="images"
                ),
                "colors": paired_rate(
                    {f"c{i}": (4, 3) for i in range(6)},
                    {f"c{i}": (4, 3) for i in range(6)},
                    unit="images",
                ),
            },
        }
    )


def _html(run: RunReportInput, tmp: Path) -> str:
    return render_report(run, tmp / "out").read_text(encoding="utf-8")


def test_task_bootstrap_is_the_gates_and_is_reproducible() -> None:
    per_task = {f"t{i}": (4, i % 3, (i + 1) % 4) for i in range(12)}
    arr = np.array(list(per_task.values()), dtype=float)

    def delta(idx: np.ndarray) -> np.ndarray:
        s = arr[idx].sum(axis=1)
        return (s[:, 2] - s[:, 1]) / s[:, 0]

    gate_ci = _bootstrap({"target": per_task}, {}, {}, GateConfig(n_bootstrap=300))
    assert gate_ci["delta_target"] == task_bootstrap(12, delta, n_resamples=300, seed=0)
    assert task_bootstrap(12, delta, seed=3) == task_bootstrap(12, delta, seed=3)
    with pytest.raises(ValueError, match="n_tasks 0"):
        task_bootstrap(0, delta)


def test_paired_rate_intervals() -> None:
    r = _test_rate()
    assert (r.before, r.after, r.n, r.tasks) == (0.5875, 0.775, 160, 20)
    assert r.ci_before and r.ci_after and r.ci_delta
    assert r.ci_before[0] < r.before < r.ci_before[1]
    # paired: the five tasks that changed all improved, so every resample's Δ is >= 0 …
    assert 0.0 <= r.ci_delta[0] < r.delta < r.ci_delta[1]
    # … while the unpaired intervals of before and after overlap
    assert r.ci_after[0] < r.ci_before[1]
    # GenEval overall: the mean of the groups' rates, not the pooled rate
    g = paired_rate(
        {"a": (1, 1), "b": (3, 0)}, {"a": (1, 1), "b": (3, 3)}, groups={"a": "x", "b": "y"}
    )
    assert (g.before, g.after) == (0.5, 1.0)
    with pytest.raises(ValueError, match="not on both sides"):
        paired_rate({"a": (1, 1)}, {"b": (1, 1)})


def test_headline_is_the_untouched_test_split_with_intervals(tmp_path: Path) -> None:
    html = _html(_beam_run(tmp_path), tmp_path)
    head = re.search(r'id="headline">(.*?)</div>\s*</div>', html, re.S)
    assert head, "a headline card"
    card = head.group(1)
    assert "Test pass rate (untouched split)" in card and "77.5%" in card
    r = _test_rate()
    assert r.ci_after and r.ci_delta
    assert f"[{100 * r.ci_after[0]:.1f}%, {100 * r.ci_after[1]:.1f}%]" in card
    assert f"[{100 * r.ci_delta[0]:+.1f}, {100 * r.ci_delta[1]:+.1f}] pp" in card
    assert "20 tasks, 160 verdicts" in card
    assert "Target pass rate" not in html
    # every test figure in the split table carries its interval
    row = re.search(r"<td>test</td>(.*?)</tr>", html, re.S)
    assert row and row.group(1).count('class="ci"') == 3


def test_count_columns_say_what_they_count(tmp_path: Path) -> None:
    html = _html(_beam_run(tmp_path), tmp_path)
    # the per-tag rows show the tasks they rest on (2 tasks: +75 pp, interval wide)
    row = re.search(r"<td>counting</td>(.*?)</tr>", html, re.S)
    assert row, "a counting row"
    assert '<td class="num muted tasks">2</td>' in row.group(1)
    assert re.search(r"<th class=\"num\">tasks</th><th class=\"num\">images</th>", html)
    assert re.search(r"<th class=\"num\">tasks</th><th class=\"num\">verdicts</th>", html)
    assert '<th class="num">n</th>' not in html


def test_cost_per_request_baseline_vs_final(tmp_path: Path) -> None:
    run = _beam_run(tmp_path).model_copy(
        update={
            "request_cost": {
                "baseline": RequestCost(generator_calls=1.0, generator_seconds=2.5, requests=80),
                "final": RequestCost(generator_calls=3.25, generator_seconds=8.0, requests=80),
            },
            "spend": 0.8125,
        }
    )
    html = _html(run, tmp_path)
    sec = re.search(r'<section id="request-cost">(.*?)</section>', html, re.S)
    assert sec, "a cost comparison section"
    text = sec.group(1)
    assert re.search(r"generator calls per request</td><td class=\"num\">1.00</td>", text)
    assert "3.25" in text and "×3.25" in text and "×3.20" in text
    assert "8.00" in text and "0.8125 USD" in text and "same 80 requests" in text


def test_rounds_are_counted_and_candidate_ids_unique(tmp_path: Path) -> None:
    html = _html(_beam_run(tmp_path), tmp_path)
    rounds = re.search(r'<div class="label">Rounds</div><div class="value">(\d+)</div>', html)
    assert rounds and rounds.group(1) == "2"
    assert "3 round reports (one per beam branch)" in html
    assert 'id="round-2-b1"' in html and "beam branch 1" in html
    # the branch's r2-c1 is shown as r2-b1-c1; the head's r2-c1 keeps its id
    ids = re.findall(r"<td><code>(r\d[^<]*)</code><div class=\"muted\">", html)
    assert "r2-b1-c1" in ids and "r2-c1" in ids
    assert len(ids) == len(set(ids)), ids
    # No-Patch decisions: rounds where no branch accepted (none here: branch 1 did)
    no_patch = re.search(r"No-Patch decisions</div><div class=\"value\">(\d+)<", html)
    assert no_patch and no_patch.group(1) == "0"
    # the final harness's patches: only its lineage
    assert re.search(r'id="lineage">baseline → <code>r1-c1</code> \(round 1\)</dd>', html)


def test_lineage_leaves_out_other_branches(tmp_path: Path) -> None:
    run = _beam_run(tmp_path)
    rounds = [qualify_candidate_ids(r, b) for r, b in zip(run.rounds, run.beams, strict=True)]
    assert [c.candidate_id for _, c in patch_lineage(rounds, H0, H1) or []] == ["r1-c1"]
    assert [c.candidate_id for _, c in patch_lineage(rounds, H0, H2) or []] == [
        "r1-c1",
        "r2-b1-c1",
    ]
    assert patch_lineage(rounds, H0, H0) == []
    assert patch_lineage(rounds[1:], H0, H1) is None


def test_verdicts_name_their_verifier(tmp_path: Path) -> None:
    run = make_run(tmp_path)
    pairs = [
        p.model_copy(
            update={
                "verifier": "sim-detector@0123abcd",
                "verdicts": [
                    v.model_copy(
                        update={
                            "official_before": EvidenceStatus.passed,
                            "official_after": EvidenceStatus.passed,
                        }
                    )
                    for v in p.verdicts
                ],
            }
        )
        for p in run.image_pairs
    ]
    run = run.model_copy(update={"image_pairs": pairs, "official_verifier": "sim-inspector@9"})
    html = _html(run, tmp_path)
    assert html.count("<code>sim-detector@0123abcd</code>, the internal verifier") == len(pairs)
    assert "<th>official before</th><th>official after</th>" in html
    assert "official columns: <code>sim-inspector@9</code>" in html


def test_unreadable_round_report_is_named_on_the_page(tmp_path: Path) -> None:
    run = make_run(tmp_path).model_copy(
        update={"unreadable_rounds": ["runs/run-42/round-003.json: Invalid JSON: EOF"]}
    )
    html = _html(run, tmp_path)
    assert re.search(
        r'class="problem unreadable-round">.*<code>runs/run-42/round-003.json: Invalid JSON: EOF'
        r"</code>",
        html,
    )
