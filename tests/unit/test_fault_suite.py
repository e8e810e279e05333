"""The fault suite (bench/faults): every shipped case loads and its faults apply inside their
contracts, the suite has the counts issue 17 asks for, malformed cases fail naming file and
field (and count as errors, never as passes), and one tiny case runs end to end through the
real round (sim generator and inspector, rule-based proposer, local store)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from bench.faults import run as fault_run
from bench.faults.case import CaseError, case_files, load_case, parse_case
from evoharness.harness.patch import owner_of

CASES = Path(fault_run.__file__).resolve().parent / "cases"

TINY = """\
profile: sdxl-like
base: reference
faults:
  - responsibility: tools
    patch: [{op: replace, path: /tools/tools/0/enabled, value: false}]
    note: layout planner disabled
tasks:
  dataset: synthetic
  families: [synthetic_counting]
  sizes: {target: 2, held_out: 1, preservation: 1}
seeds: 2
expect:
  - responsibility: tools
why: tiny end-to-end case
"""


def test_every_shipped_case_loads_and_the_suite_has_the_required_counts() -> None:
    kinds: Counter[str] = Counter()
    per_resp: Counter[str] = Counter()
    profiles: set[str] = set()
    for path in case_files(CASES):
        lc = load_case(path)  # raises CaseError naming the file and field
        kinds[lc.case.kind] += 1
        profiles.add(lc.case.profile)
        assert lc.case.why.strip()
        for fault in lc.case.faults:
            for op in fault.patch:
                assert owner_of(op["path"]) == fault.responsibility, (path, op)
        if lc.case.kind == "single":
            per_resp[lc.case.expected()[0]] += 1
            assert lc.faulted.to_document() != lc.base.to_document()
        if lc.case.kind == "clean":
            assert lc.faulted == lc.base
        split_ids = [
            {t.task_id for t in lc.splits[s]} for s in ("target", "heldout", "preservation")
        ]
        assert not (
            split_ids[0] & split_ids[1]
            or split_ids[0] & split_ids[2]
            or split_ids[1] & split_ids[2]
        )
    assert kinds["single"] >= 25 and kinds["compound"] >= 5 and kinds["clean"] >= 10, kinds
    assert all(per_resp[r] >= 5 for r in fault_run.RESPONSIBILITIES), per_resp
    assert len(profiles) >= 2


def _write(tmp_path: Path, text: str, name: str = "case.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (
            lambda s: s.replace("seeds: 2", "seeds: 2\nextra: 1"),
            "extra: Extra inputs are not permitted",
        ),
        (
            lambda s: s.replace(
                "responsibility: tools\n    patch", "responsibility: tool\n    patch"
            ),
            "faults[0].responsibility",
        ),
        (lambda s: s.replace("target: 2", "target: 0"), "tasks.sizes.target"),
        (lambda s: s.replace("seeds: 2", "seeds: many"), "seeds"),
        (lambda s: s.replace("sizes: {", "sizes: {{"), "invalid YAML"),
        (
            lambda s: s.replace("  - responsibility: tools\nwhy", "  []\nwhy").replace(
                "expect:\n", "expect:"
            ),
            "expect",
        ),
        (
            lambda s: s.replace("[synthetic_counting]", "[synthetic_juggling]"),
            "tasks.families: unknown synthetic families",
        ),
        (
            lambda s: s.replace("/tools/tools/0/enabled", "/policy/template"),
            "faults[0].patch: op 0 (replace /policy/template) is outside the boundary contract of tools",
        ),
        (
            lambda s: s.replace("/tools/tools/0/enabled", "/tools/tools/7/enabled"),
            "faults[0].patch: op 0",
        ),
        (lambda s: s.replace("value: false", "value: maybe"), "faults[0].patch"),
        (lambda s: s.replace("base: reference", "base: nowhere"), "base:"),
        (lambda s: s.replace("target: 2", "target: 200"), "tasks.sizes"),
    ],
)
def test_malformed_cases_fail_naming_file_and_field(tmp_path: Path, edit, needle: str) -> None:
    p = _write(tmp_path, edit(TINY))
    with pytest.raises(CaseError) as exc:
        load_case(p)
    msg = str(exc.value)
    assert msg.startswith(str(p)), msg
    assert needle in msg, msg


def test_yaml_error_names_the_line(tmp_path: Path) -> None:
    p = _write(tmp_path, TINY.replace("sizes: {", "sizes: {{"))
    with pytest.raises(CaseError, match=rf"^{p}:\d+: invalid YAML"):
        parse_case(p)


def test_a_fault_that_changes_nothing_is_a_case_error(tmp_path: Path) -> None:
    p = _write(tmp_path, TINY.replace("value: false", "value: true"))
    with pytest.raises(CaseError, match=r"faults\[0\]\.patch changes nothing"):
        load_case(p)


def test_malformed_case_counts_as_error_never_as_pass(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(tmp_path, TINY.replace("seeds: 2", "seeds: 2\nbogus: true"), "bad.yaml")
    out = tmp_path / "res.json"
    rc = fault_run.main(["--cases", str(tmp_path), "--jobs", "1", "--out", str(out)])
    assert rc == 1
    res = json.loads(out.read_text())
    assert res["summary"]["errors"] == ["bad"]
    assert res["summary"]["scored"] == 0
    assert res["cases"][0]["status"] == "error" and "bogus" in res["cases"][0]["error"]
    # one progress line per finished case, with its count, name and outcome
    assert "[  1/1] bad" in capsys.readouterr().out


def test_quick_subset_is_a_stratified_third() -> None:
    paths = case_files(CASES)
    quick = fault_run.quick_subset(paths)
    assert len(paths) / 3 - 7 <= len(quick) <= len(paths) / 3 + 7
    strata = {fault_run.stratum(p) for p in quick}
    assert {"clean", "compound", *fault_run.RESPONSIBILITIES} <= strata


def test_tiny_case_end_to_end(tmp_path: Path) -> None:
    p = _write(tmp_path, TINY)
    rec = fault_run.run_case(str(p), str(tmp_path / "store"))
    assert rec["status"] in ("ok", "invalid_fault"), rec.get("error")
    for key in (
        "case",
        "kind",
        "profile",
        "profile_available",
        "generator_id",
        "expected",
        "acceptable",
        "decision",
        "decision_reason",
        "top_attribution",
        "attributed",
        "patch",
        "candidates",
        "most_common_failure_type",
        "preservation_regression",
        "generator_calls",
        "generator_calls_made",
        "generator_seconds",
        "correct",
        "validity",
        "repaired",
        "seconds",
    ):
        assert key in rec, key
    assert rec["tasks"] == {"target": 2, "heldout": 1, "preservation": 1}
    v = rec["validity"]
    for m in ("first_attempt_drop", "final_drop", "generations_rise"):
        lo, hi = v[m]["ci95"]
        assert lo <= v[m]["delta"] + 1e-9 and v[m]["delta"] <= hi + 1e-9
    # 2 tasks x 2 seeds of the faulted harness on target at least, each >= 1 generation
    assert rec["generator_calls"] >= 4
    assert isinstance(rec["attributions"], list) and "counterfactual" in rec
    for cand in rec["candidates"]:  # every candidate keeps what the gate said (or None)
        assert "gate" in cand and "ops" in cand
        if cand["gate"] is not None:
            assert isinstance(cand["gate"]["reasons"], list)
    assert rec["patched_right"] == (
        rec["decision"] == "accepted" and rec["patch"]["responsibility"] in rec["acceptable"]
    )
    if rec["decision"] == "accepted":
        assert rec["patch"]["responsibility"] == rec["attributed"]
    summary = fault_run.summarize([rec])
    assert summary["cases"] == 1
    assert set(summary["attribution_recall"]) == {
        "trace",
        "always_policy",
        "uniform_random",
        "most_common_failure_type",
    }


def test_sizes_option_resizes_builder_cases_and_rejects_bad_text(tmp_path: Path) -> None:
    p = _write(tmp_path, TINY)
    sizes = fault_run.parse_sizes("24/12/12")
    lc = load_case(p, sizes)
    assert {k: len(v) for k, v in lc.splits.items()} == {
        "target": 24,
        "heldout": 12,
        "preservation": 12,
    }
    with pytest.raises(Exception, match="TARGET/HELD_OUT/PRESERVATION"):
        fault_run.parse_sizes("24/12")
    with pytest.raises(CaseError, match="tasks.sizes"):
        load_case(p, fault_run.parse_sizes("30/20/1"))  # 40 synthetic counting tasks


def test_summary_reports_patched_in_right_responsibility_and_invalid_share() -> None:
    base = {
        "kind": "single",
        "expected": ["tools"],
        "acceptable": ["tools"],
        "most_common_failure_type": "count",
        "preservation_regression": 0.0,
        "generator_calls": 1.0,
        "generator_seconds": 1.0,
    }
    recs = [
        {
            **base,
            "case": "a",
            "status": "ok",
            "decision": "accepted",
            "correct": True,
            "patched_right": True,
        },
        {
            **base,
            "case": "b",
            "status": "ok",
            "decision": "no_patch",
            "correct": True,
            "patched_right": False,
        },
        {**base, "case": "c", "status": "invalid_fault", "decision": "no_patch", "correct": False},
    ]
    s = fault_run.summarize(recs)
    assert s["patched_right_responsibility"]["k"] == 1
    assert s["patched_right_responsibility"]["n"] == 2
    assert s["invalid_fault_share"]["k"] == 1 and s["invalid_fault_share"]["n"] == 3


def test_records_keep_every_candidates_ops_attributions_and_the_counterfactual() -> None:
    from evoharness.harness.patch import Patch
    from evoharness.harness.schema import Responsibility
    from evoharness.trace.models import (
        Attribution,
        Candidate,
        CandidateStatus,
        CounterfactualRecord,
        Decision,
        DecisionKind,
        RoundReport,
    )

    op = {"op": "replace", "path": "/policy/params/steps", "value": 30}
    patch = Patch(responsibility=Responsibility.policy, ops=[op], rationale="more steps")
    cand = Candidate(
        candidate_id="c1",
        cluster_id="k0",
        patch=patch,
        status=CandidateStatus.rejected,
        reject_reason="gate",
    )
    got = fault_run.candidate_record(cand)
    assert got["ops"] == [op] and got["responsibility"] == "policy"
    assert (got["cluster"], got["source"], got["rationale"]) == ("k0", "rule", "more steps")
    assert got["gate"] is None and got["reject_reason"] == "gate"
    assert fault_run.candidate_record(Candidate(candidate_id="c2", cluster_id="k0"))["ops"] is None
    attr = Attribution(
        cluster_id="k0", scores={"policy": 1.0}, chosen="policy", reasons=["counterfactual: x"]
    )
    decision = Decision(
        kind=DecisionKind.no_patch, reason="none", parent_harness_id="h", harness_id="h"
    )
    rep = RoundReport(
        run_id="r",
        round=0,
        parent_harness_id="h",
        attributions=[attr],
        decision=decision,
        counterfactual=CounterfactualRecord(budget_calls=10.0, causes=["reset steps"]),
    )
    ar = fault_run.analysis_record(rep)
    assert ar["attributions"][0]["reasons"] == ["counterfactual: x"]
    assert ar["counterfactual"]["causes"] == ["reset steps"]
    json.dumps(ar)  # plain JSON
    assert (
        fault_run.analysis_record(rep.model_copy(update={"counterfactual": None}))["counterfactual"]
        is None
    )
