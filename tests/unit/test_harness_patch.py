"""Boundary contracts, RFC 6902 patch application and diff."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from evoharness.harness import (
    CONTRACTS,
    Harness,
    Patch,
    PatchError,
    Responsibility,
    apply_patch,
    canonical_bytes,
    diff,
    harness_id,
    load_dir,
)
from evoharness.harness.patch import patches_from_diff


@pytest.fixture()
def baseline(repo_root: Path) -> Harness:
    return load_dir(repo_root / "harnesses" / "baseline")


#: One valid op inside each responsibility's contract.
VALID_OP: dict[str, dict[str, Any]] = {
    "policy": {"op": "replace", "path": "/policy/params/guidance_scale", "value": 7.5},
    "tools": {
        "op": "add",
        "path": "/tools/tools/-",
        "value": {"kind": "layout_planner", "name": "layout"},
    },
    "skills": {
        "op": "add",
        "path": "/skills/skills/-",
        "value": {"name": "counting", "triggers": [{"kind": "feature", "value": "count"}]},
    },
    "middleware": {
        "op": "add",
        "path": "/middleware/stages/-",
        "value": {"kind": "verify_and_repair", "repair_budget": 2},
    },
    "memory": {"op": "replace", "path": "/memory/enabled", "value": True},
}


@pytest.mark.parametrize("resp", [r.value for r in Responsibility])
def test_each_responsibility_applies_its_own_op(baseline: Harness, resp: str) -> None:
    new = apply_patch(baseline, {"responsibility": resp, "ops": [VALID_OP[resp]]})
    changed = diff(baseline, new)
    assert list(changed) == [resp]


PAIRS = [(r.value, o.value) for r in Responsibility for o in Responsibility if r != o]


@pytest.mark.parametrize(("resp", "other"), PAIRS)
def test_out_of_contract_op_is_refused_for_each_responsibility(
    baseline: Harness, resp: str, other: str
) -> None:
    op = VALID_OP[other]
    with pytest.raises(PatchError) as info:
        apply_patch(baseline, {"responsibility": resp, "ops": [VALID_OP[resp], copy.deepcopy(op)]})
    msg = str(info.value)
    assert f"op 1 ({op['op']} {op['path']})" in msg
    assert f"outside the boundary contract of {resp}" in msg
    assert f"may write only /{resp}/..." in msg
    assert info.value.op_index == 1 and info.value.path == op["path"]


@pytest.mark.parametrize(
    ("op", "why"),
    [
        ({"op": "replace", "path": "/name", "value": "x"}, "outside the boundary contract"),
        ({"op": "add", "path": "/generator", "value": "sdxl"}, "outside the boundary contract"),
        ({"op": "replace", "path": "", "value": {}}, "outside the boundary contract"),
        ({"op": "replace", "path": "/policyx", "value": 1}, "outside the boundary contract"),
        (
            {"op": "move", "from": "/tools/tools", "path": "/policy/negative_terms"},
            "(move from /tools/tools) is outside",
        ),
        ({"op": "frobnicate", "path": "/policy/template"}, "unknown op 'frobnicate'"),
        ({"op": "replace", "path": "policy/template", "value": "x"}, "is not a JSON pointer"),
        ({"op": "replace", "value": "x"}, "'path' must be a JSON pointer string"),
    ],
)
def test_malformed_or_outside_ops_are_refused(
    baseline: Harness, op: dict[str, Any], why: str
) -> None:
    with pytest.raises(PatchError, match="op 0") as info:
        apply_patch(baseline, {"responsibility": "policy", "ops": [op]})
    assert why in str(info.value)


def test_copy_may_read_another_section(baseline: Harness) -> None:
    # copy only reads its 'from': Policy may copy a value from Memory into its own section.
    new = apply_patch(
        baseline,
        {
            "responsibility": "policy",
            "ops": [{"op": "copy", "from": "/memory/guidelines", "path": "/policy/negative_terms"}],
        },
    )
    assert new.policy.negative_terms == []


def test_rfc6902_missing_path_is_rejected(baseline: Harness) -> None:
    with pytest.raises(PatchError, match=r"op 0 \(remove /policy/nope\) rejected by RFC 6902"):
        apply_patch(
            baseline,
            {"responsibility": "policy", "ops": [{"op": "remove", "path": "/policy/nope"}]},
        )
    with pytest.raises(PatchError, match="rejected by RFC 6902"):
        apply_patch(
            baseline,
            {
                "responsibility": "skills",
                "ops": [{"op": "replace", "path": "/skills/skills/3", "value": {"name": "a"}}],
            },
        )


def test_rfc6902_failed_test_op_is_rejected(baseline: Harness) -> None:
    ops = [
        {"op": "test", "path": "/policy/params/steps", "value": 999},
        {"op": "replace", "path": "/policy/params/steps", "value": 40},
    ]
    with pytest.raises(
        PatchError, match=r"op 0 \(test /policy/params/steps\) rejected by RFC 6902"
    ):
        apply_patch(baseline, {"responsibility": "policy", "ops": ops})
    ops[0]["value"] = baseline.policy.params.steps
    assert apply_patch(baseline, {"responsibility": "policy", "ops": ops}).policy.params.steps == 40


@pytest.mark.parametrize(
    ("resp", "op", "field"),
    [
        ("policy", {"op": "replace", "path": "/policy/params/steps", "value": 10_000}, "steps"),
        ("policy", {"op": "add", "path": "/policy/generator", "value": "other-model"}, "generator"),
        ("tools", {"op": "add", "path": "/tools/tools/-", "value": {"kind": "diffusion"}}, "tools"),
        (
            "skills",
            {"op": "add", "path": "/skills/skills/-", "value": {"name": "Bad Name"}},
            "name",
        ),
        (
            "middleware",
            {"op": "add", "path": "/middleware/stages/-", "value": {"kind": "best_of_n", "n": 99}},
            "n",
        ),
        ("memory", {"op": "replace", "path": "/memory/top_k", "value": 0}, "top_k"),
    ],
)
def test_schema_breaking_patch_is_rejected_naming_the_field(
    baseline: Harness, resp: str, op: dict[str, Any], field: str
) -> None:
    keep = {"op": "test", "path": f"/{resp}", "value": baseline.to_document()[resp]}
    with pytest.raises(PatchError, match=f"patch \\({resp}\\) breaks the harness schema") as info:
        apply_patch(baseline, {"responsibility": resp, "ops": [keep, op]})
    msg = str(info.value)
    assert field in msg
    # The op that wrote the invalid value is named (not the harmless test op).
    assert f"[op 1 ({op['op']} {op['path']})]" in msg
    assert info.value.op_index == 1 and info.value.path == op["path"]


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_a_value_json_cannot_hold_names_the_field_and_op(baseline: Harness, value: float) -> None:
    """NaN or infinity (what json.loads makes of ``NaN`` and ``1e400``) in a patch names the
    field and the op that wrote it, not only the patch."""
    ops = [
        VALID_OP["policy"],
        {"op": "replace", "path": "/policy/params/steps", "value": value},
    ]
    with pytest.raises(
        PatchError,
        match=r"policy\.params\.steps: .*not a JSON number \[op 1 \(replace /policy/params/steps\)\]",
    ) as info:
        apply_patch(baseline, {"responsibility": "policy", "ops": ops})
    assert info.value.op_index == 1 and info.value.path == "/policy/params/steps"


def test_invalid_patch_document_is_rejected(baseline: Harness) -> None:
    with pytest.raises(PatchError, match="invalid patch"):
        apply_patch(baseline, {"responsibility": "generator", "ops": [VALID_OP["policy"]]})
    with pytest.raises(PatchError, match="invalid patch"):
        apply_patch(baseline, {"responsibility": "policy", "ops": []})


def test_apply_patch_never_mutates_its_inputs(baseline: Harness) -> None:
    before_doc = copy.deepcopy(baseline.to_document())
    before_bytes = canonical_bytes(baseline)
    for resp, op in VALID_OP.items():
        patch = {"responsibility": resp, "ops": [copy.deepcopy(op)]}
        patch_copy = copy.deepcopy(patch)
        new = apply_patch(baseline, patch)
        assert patch == patch_copy
        # Mutating the result must not reach the input either (no shared sub-objects).
        new.policy.negative_terms.append("leak")
        new.tools.tools.clear()
    for resp in VALID_OP:
        with pytest.raises(PatchError):
            apply_patch(
                baseline,
                {
                    "responsibility": resp,
                    "ops": [VALID_OP[resp], {"op": "remove", "path": f"/{resp}/missing"}],
                },
            )
    assert baseline.to_document() == before_doc
    assert canonical_bytes(baseline) == before_bytes


def test_patch_model_and_dict_give_the_same_result(baseline: Harness) -> None:
    d = {"responsibility": "memory", "ops": [VALID_OP["memory"]], "rationale": "r"}
    assert harness_id(apply_patch(baseline, d)) == harness_id(
        apply_patch(baseline, Patch.model_validate(d))
    )


def test_diff_groups_by_responsibility(baseline: Harness) -> None:
    new = baseline
    for resp in ("policy", "middleware", "memory"):
        new = apply_patch(new, {"responsibility": resp, "ops": [VALID_OP[resp]]})
    new = new.model_copy(update={"description": "evolved"})
    grouped = diff(baseline, new)
    assert set(grouped) == {"policy", "middleware", "memory", "header"}
    assert grouped["policy"] == [VALID_OP["policy"]]
    assert grouped["header"] == [{"op": "replace", "path": "/description", "value": "evolved"}]
    for resp, ops in grouped.items():
        if resp != "header":
            assert all(op["path"].startswith(CONTRACTS[Responsibility(resp)][0]) for op in ops)
    assert diff(baseline, baseline) == {}
    # Re-applying the grouped patches reproduces the target (header aside).
    rebuilt = baseline
    for p in patches_from_diff(baseline, new):
        rebuilt = apply_patch(rebuilt, p)
    assert diff(rebuilt, new) == {"header": grouped["header"]}


@pytest.mark.parametrize("resp", ["policy", "tools", "skills", "middleware", "memory"])
def test_removing_a_responsibility_root_is_refused(baseline: Harness, resp: str) -> None:
    """``remove /policy`` would reset the whole section to its defaults: refused, naming the
    op index and path (fields under the root may still be removed)."""
    ops = [{"op": "test", "path": f"/{resp}", "value": baseline.to_document()[resp]}]
    ops.append({"op": "remove", "path": f"/{resp}"})
    with pytest.raises(PatchError, match=rf"op 1 \(remove /{resp}\): .*responsibility root") as e:
        apply_patch(baseline, {"responsibility": resp, "ops": ops})
    assert (e.value.op_index, e.value.path) == (1, f"/{resp}")
    move = {"op": "move", "from": f"/{resp}", "path": f"/{resp}/x"}
    with pytest.raises(PatchError, match=rf"op 0 \(move from /{resp}\): .*responsibility root"):
        apply_patch(baseline, {"responsibility": resp, "ops": [move]})
