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
        "faults",
        "parent_middleware",
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
    assert rec["faults"] == ["tools"]
    assert rec["parent_middleware"] == load_case(p).faulted.middleware.model_dump(mode="json")
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
    # classified from the record alone (no parent rebuilt): a tools fault, so only a patch
    # that adds resampling counts, and then as resampling for a fault elsewhere
    rs = summary["resampling_for_fault_elsewhere"]
    assert rs["n"] == int(rec["decision"] == "accepted")
    assert rs["k"] == int(rs["n"] == 1 and fault_run.record_adds_resampling(rec))
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


# ------------------------------------------------------------------------------ resampling

#: A parent with verify-and-repair (budget 2), no best-of-N and one memory guideline.
PARENT = {
    "middleware": {
        "stages": [
            {"kind": "skill_routing", "max_active": 3},
            {"kind": "verify_and_repair", "repair_budget": 2},
        ]
    },
    "memory": {"enabled": True, "guidelines": [{"trigger": "count", "text": "count them"}]},
}
BUDGET = "/middleware/stages/1/repair_budget"


def _mw(*ops: dict[str, object]) -> dict[str, object]:
    return {"responsibility": "middleware", "ops": list(ops)}


@pytest.mark.parametrize(
    ("patch", "widens"),
    [
        (_mw({"op": "add", "path": "/middleware/stages/-", "value": {"kind": "best_of_n"}}), True),
        (
            {"responsibility": "memory", "ops": [{"op": "remove", "path": "/memory/guidelines/0"}]},
            False,
        ),
        (_mw({"op": "replace", "path": BUDGET, "value": 4}), True),
        (_mw({"op": "replace", "path": BUDGET, "value": 1}), False),
        (_mw({"op": "replace", "path": BUDGET, "value": 2}), False),  # as it was
        (_mw({"op": "remove", "path": "/middleware/stages/1"}), False),  # repair removed
        (  # repair swapped for best-of-3: a new best-of-N widens whatever else shrinks
            _mw(
                {"op": "remove", "path": "/middleware/stages/1"},
                {
                    "op": "add",
                    "path": "/middleware/stages/-",
                    "value": {"kind": "best_of_n", "n": 3},
                },
            ),
            True,
        ),
        (  # best-of-1 resamples nothing
            _mw(
                {
                    "op": "add",
                    "path": "/middleware/stages/-",
                    "value": {"kind": "best_of_n", "n": 1},
                }
            ),
            False,
        ),
        (
            {
                "responsibility": "policy",
                "ops": [{"op": "replace", "path": "/policy/params/steps", "value": 40}],
            },
            False,
        ),
    ],
)
def test_the_resampling_classifier_reads_the_ops_against_the_parent(
    patch: dict[str, object], widens: bool
) -> None:
    from evoharness.harness.schema import Harness

    parent = Harness.model_validate(PARENT)
    assert fault_run.patch_widens_resampling(parent, patch) is widens
    rec = {"case": "x", "patch": patch, "parent_middleware": PARENT["middleware"]}
    assert fault_run.record_adds_resampling(rec) is widens


def test_best_of_n_raised_widens_and_lowered_does_not() -> None:
    from evoharness.harness.schema import Harness

    parent = Harness.model_validate({"middleware": {"stages": [{"kind": "best_of_n", "n": 4}]}})
    n = "/middleware/stages/0/n"
    assert fault_run.patch_widens_resampling(parent, _mw({"op": "replace", "path": n, "value": 6}))
    assert not fault_run.patch_widens_resampling(
        parent, _mw({"op": "replace", "path": n, "value": 2})
    )


def test_a_middleware_patch_without_its_parent_is_an_error_naming_the_case() -> None:
    rec = {"case": "old-run", "patch": _mw({"op": "replace", "path": BUDGET, "value": 4})}
    with pytest.raises(ValueError, match="old-run: the record has no parent_middleware"):
        fault_run.record_adds_resampling(rec)
    # any other responsibility cannot write /middleware: no parent needed
    rec["patch"] = {
        "responsibility": "memory",
        "ops": [{"op": "remove", "path": "/memory/guidelines/0"}],
    }
    assert fault_run.record_adds_resampling(rec) is False


def _wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson (1927) score interval, written out here to check the summary's."""
    p = k / n
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5
    return mid - half, mid + half


def _rec(
    case: str, kind: str, faults: list[str], decision: str, patch: object, **kw: object
) -> dict:
    return {
        "case": case,
        "status": "ok",
        "kind": kind,
        "faults": faults,
        "expected": faults or ["no_patch"],
        "acceptable": faults,
        "decision": decision,
        "top_attribution": None,
        "attributed": None,
        "patch": patch,
        "parent_middleware": PARENT["middleware"],
        "correct": True,
        "patched_right": decision == "accepted",
        "most_common_failure_type": None,
        "preservation_regression": 0.0,
        "generator_calls": 1.0,
        "generator_seconds": 1.0,
        **kw,
    }


def test_the_summary_counts_resampling_accepted_for_a_fault_elsewhere(
    capsys: pytest.CaptureFixture[str],
) -> None:
    raise_budget = _mw({"op": "replace", "path": BUDGET, "value": 4})
    lower_budget = _mw({"op": "replace", "path": BUDGET, "value": 1})
    best_of_2 = _mw({"op": "add", "path": "/middleware/stages/-", "value": {"kind": "best_of_n"}})
    steps = {
        "responsibility": "policy",
        "ops": [{"op": "replace", "path": "/policy/params/steps", "value": 40}],
    }
    recs = [
        _rec("clean-raised", "clean", [], "accepted", raise_budget),  # counts: nothing broken
        _rec("memory-best-of-2", "single", ["memory"], "accepted", best_of_2),  # counts
        _rec("middleware-raised", "single", ["middleware"], "accepted", raise_budget),
        _rec("compound", "compound", ["tools", "middleware"], "accepted", best_of_2),
        _rec("policy-steps", "single", ["policy"], "accepted", steps),
        _rec(
            "tools-lowered", "single", ["tools"], "accepted", lower_budget, status="invalid_fault"
        ),
        _rec("skills-no-patch", "single", ["skills"], "no_patch", None),
        {"case": "broken", "status": "error", "error": "x"},
    ]
    s = fault_run.summarize(recs)
    rs = s["resampling_for_fault_elsewhere"]
    assert (rs["k"], rs["n"]) == (2, 6)
    assert rs["cases"] == ["clean-raised", "memory-best-of-2"]
    assert rs["ci95"] == pytest.approx(_wilson(2, 6))
    json.dumps(s)  # plain JSON
    fault_run.print_report(recs, s, {"profile_available": True})
    lo, hi = _wilson(2, 6)
    line = (
        "accepted patches adding resampling for a fault elsewhere: 2 of 6 "
        f"(33.3% [{lo:.1%}, {hi:.1%}])"
    )
    assert line in capsys.readouterr().out.splitlines()
    empty = fault_run.resampling_for_fault_elsewhere([])
    assert fault_run.resampling_line(empty).endswith("0 of 0 (n/a)")


def test_summarize_re_summarises_a_results_json_and_rebuilds_missing_parents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = tmp_path / "cases"
    cases.mkdir()
    _write(cases, TINY, "tiny.yaml")  # reference base: verify-and-repair, budget 2
    old = _rec(
        "tiny", "single", ["tools"], "accepted", _mw({"op": "replace", "path": BUDGET, "value": 3})
    )
    del old["parent_middleware"], old["faults"]  # a record from before they were kept
    old["file"] = str(tmp_path / "gone" / "tiny.yaml")  # run from another checkout
    res = tmp_path / "res.json"
    text = json.dumps(
        {"meta": {"mode": "round", "profile_available": True}, "summary": {}, "cases": [old]}
    )
    res.write_text(text, encoding="utf-8")

    assert fault_run.main(["--summarize", str(res), "--cases", str(cases)]) == 0
    out = capsys.readouterr().out
    assert "rebuilt from the case files as they are now: tiny" in out
    assert "accepted patches adding resampling for a fault elsewhere: 1 of 1 (" in out
    assert res.read_text(encoding="utf-8") == text  # the input is never written

    new = tmp_path / "new.json"
    assert fault_run.main(["--summarize", str(res), "--cases", str(cases), "--out", str(new)]) == 0
    doc = json.loads(new.read_text(encoding="utf-8"))
    assert doc["summary"]["resampling_for_fault_elsewhere"]["k"] == 1
    assert doc["meta"]["summarized_from"] == str(res)
    assert doc["cases"][0]["parent_rebuilt_from"] == str(cases / "tiny.yaml")
    with pytest.raises(ValueError, match="would overwrite the input"):
        fault_run.main(["--summarize", str(res), "--out", str(res)])
    with pytest.raises(CaseError, match="tiny: .* no case of that name"):
        fault_run.main(["--summarize", str(res), "--cases", str(tmp_path / "gone")])
