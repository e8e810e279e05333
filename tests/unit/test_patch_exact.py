"""Exact behaviour of patches and boundary contracts (``evoharness.harness.patch``): which
responsibility owns a path, every refusal's message with the op index and path it carries,
and how a schema error names its fields and the ops that wrote them. Pure and fast."""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest
from pydantic import ValidationError

from evoharness.harness.patch import (
    Patch,
    PatchError,
    _schema_error,
    _segments_match,
    apply_patch,
    check_contract,
    owner_of,
)
from evoharness.harness.schema import Harness, Responsibility

H = Harness.model_validate({"policy": {"negative_terms": ["a", "b"]}})


def _refusal(resp: str, *ops: dict[str, Any]) -> PatchError:
    with pytest.raises(PatchError) as info:
        apply_patch(H, {"responsibility": resp, "ops": list(ops)})
    return info.value


def test_owner_of_is_the_section_or_a_path_below_it() -> None:
    assert owner_of("/policy") is Responsibility.policy
    assert owner_of("/memory/guidelines/0/text") is Responsibility.memory
    assert owner_of("/middleware/stages/-") is Responsibility.middleware
    for outside in ("/policyx", "/policyx/a", "", "/", "/name", "policy", "/skill"):
        assert owner_of(outside) is None, outside


def test_contract_refusals_carry_their_message_op_index_and_path() -> None:
    ok = {"op": "replace", "path": "/policy/template", "value": "{prompt}."}
    cases: list[tuple[dict[str, Any], str, str | None]] = [
        ({"op": 5, "path": "/policy"}, "op 1: unknown op 5", "/policy"),
        ({"op": "frob"}, "op 1: unknown op 'frob'", None),
        (
            {"op": "replace", "value": 1},
            "op 1 (replace): 'path' must be a JSON pointer string",
            None,
        ),
        (
            {"op": "move", "path": "/policy/x"},
            "op 1 (move): 'from' must be a JSON pointer string",
            None,
        ),
        (
            {"op": "copy", "from": "/policy/template", "path": 3},
            "op 1 (copy): 'path' must be a JSON pointer string",
            None,
        ),
        (
            {"op": "replace", "path": "policy", "value": 1},
            "op 1 (replace): path 'policy' is not a JSON pointer: Location must start with /",
            "policy",
        ),
        (
            {"op": "copy", "from": "x", "path": "/policy/x"},
            "op 1 (copy): from 'x' is not a JSON pointer: Location must start with /",
            "x",
        ),
        (
            {"op": "replace", "path": "/tools", "value": 1},
            "op 1 (replace /tools) is outside the boundary contract of policy "
            "(may write only /policy/...)",
            "/tools",
        ),
        (
            {"op": "move", "from": "/memory/guidelines", "path": "/policy/negative_terms"},
            "op 1 (move from /memory/guidelines) is outside the boundary contract of policy "
            "(may write only /policy/...)",
            "/memory/guidelines",
        ),
        (
            {"op": "copy", "from": "/policy/template", "path": "/tools/x"},
            "op 1 (copy /tools/x) is outside the boundary contract of policy "
            "(may write only /policy/...)",
            "/tools/x",
        ),
    ]
    for op, message, path in cases:
        err = _refusal("policy", ok, op)
        assert (str(err), err.op_index, err.path) == (message, 1, path), op
        # the same refusal from the contract check alone, before anything is applied
        with pytest.raises(PatchError) as info:
            check_contract(Patch(responsibility=Responsibility.policy, ops=[ok, op]))
        assert str(info.value) == message


def test_every_write_op_is_known_and_copy_and_move_read_their_from() -> None:
    for name in ("add", "remove", "replace", "move", "copy", "test"):
        op = {"op": name, "path": "/policy/negative_terms/0", "value": "a"}
        if name in ("move", "copy"):
            op["from"] = "/policy/negative_terms/1"
        check_contract(Patch(responsibility=Responsibility.policy, ops=[op]))
    # copy may read another section; move may not (it removes there)
    copied = apply_patch(
        H,
        {
            "responsibility": "policy",
            "ops": [{"op": "copy", "from": "/memory/guidelines", "path": "/policy/negative_terms"}],
        },
    )
    assert copied.policy.negative_terms == []
    moved = apply_patch(
        H,
        {
            "responsibility": "policy",
            "ops": [
                {
                    "op": "move",
                    "from": "/policy/negative_terms/0",
                    "path": "/policy/negative_terms/-",
                }
            ],
        },
    )
    assert moved.policy.negative_terms == ["b", "a"]


def test_rfc6902_refusals_name_the_op_and_its_path() -> None:
    keep = {"op": "test", "path": "/policy/negative_terms/0", "value": "a"}
    err = _refusal("policy", keep, {"op": "remove", "path": "/policy/negative_terms/7"})
    assert str(err).startswith("op 1 (remove /policy/negative_terms/7) rejected by RFC 6902: ")
    assert (err.op_index, err.path) == (1, "/policy/negative_terms/7")
    err = _refusal("policy", {"op": "replace", "path": "/policy/negative_terms/0"})
    assert str(err) == (
        "op 0 (replace /policy/negative_terms/0) rejected by RFC 6902: "
        "The operation does not contain a 'value' member"
    )
    # ops apply in order: the second sees the first's result
    both = apply_patch(
        H,
        {
            "responsibility": "policy",
            "ops": [
                {"op": "add", "path": "/policy/negative_terms/-", "value": "c"},
                {"op": "test", "path": "/policy/negative_terms/2", "value": "c"},
                {"op": "remove", "path": "/policy/negative_terms/0"},
            ],
        },
    )
    assert both.policy.negative_terms == ["b", "c"]


@pytest.mark.parametrize("error", [TypeError, KeyError, IndexError, ValueError])
def test_a_library_error_on_a_malformed_op_is_a_patch_error(
    monkeypatch: pytest.MonkeyPatch, error: type[Exception]
) -> None:
    real = jsonpatch.JsonPatch

    class Broken:
        def __init__(self, ops: list[dict[str, Any]]) -> None:
            self.ops = ops

        def apply(self, doc: Any) -> Any:
            if self.ops[0]["op"] == "remove":
                raise error("bad")
            return real(self.ops).apply(doc)

    monkeypatch.setattr("evoharness.harness.patch.jsonpatch.JsonPatch", Broken)
    ops = [
        {"op": "add", "path": "/policy/negative_terms/-", "value": "c"},
        {"op": "remove", "path": "/policy/negative_terms/0"},
    ]
    with pytest.raises(PatchError) as info:
        apply_patch(H, {"responsibility": "policy", "ops": ops})
    assert str(info.value) == f"op 1 (remove /policy/negative_terms/0) is malformed: {error('bad')}"
    assert (info.value.op_index, info.value.path) == (1, "/policy/negative_terms/0")


def test_patch_documents_that_are_not_patches() -> None:
    with pytest.raises(PatchError) as info:
        apply_patch(H, [{"op": "add", "path": "/policy/x", "value": 1}])
    assert str(info.value) == (
        "a bare RFC 6902 list of ops is not a patch: expected "
        '{"responsibility": "policy|tools|skills|middleware|memory", "ops": [...], '
        '"rationale": "...", "expected_effect": "..."}'
    )
    assert (info.value.op_index, info.value.path) == (None, None)
    with pytest.raises(PatchError) as info:
        apply_patch(H, {"responsibility": "policy", "ops": []})
    assert str(info.value) == (
        "invalid patch: List should have at least 1 item after validation, not 0 at ops"
    )
    with pytest.raises(PatchError) as info:
        apply_patch(H, {"responsibility": "policy", "ops": [{"op": "add"}], "extra": 1})
    assert str(info.value) == "invalid patch: Extra inputs are not permitted at extra"
    with pytest.raises(PatchError) as info:
        apply_patch(H, {"responsibility": "policy", "ops": [5]})
    assert str(info.value) == "invalid patch: Input should be a valid dictionary at ops.0"


def test_a_value_json_cannot_hold_is_refused_naming_the_field_and_op() -> None:
    nan = {"op": "replace", "path": "/policy/params/guidance_scale", "value": float("nan")}
    err = _refusal("policy", nan)
    assert str(err) == (
        "patch (policy): policy.params.guidance_scale: NaN is not a JSON number "
        "[op 0 (replace /policy/params/guidance_scale)]"
    )
    assert (err.op_index, err.path) == (0, "/policy/params/guidance_scale")


def test_a_schema_error_names_each_field_and_the_ops_that_wrote_there() -> None:
    err = _refusal(
        "middleware",
        {"op": "test", "path": "/middleware/stages", "value": []},
        {"op": "add", "path": "/middleware/stages/-", "value": {"kind": "best_of_n", "n": 99}},
        {
            "op": "add",
            "path": "/middleware/stages/1",
            "value": {"kind": "verify_and_repair", "repair_budget": 99},
        },
    )
    assert str(err) == (
        "patch (middleware) breaks the harness schema: "
        "middleware.stages.0.n: Input should be less than or equal to 16 (got 99) "
        "[op 1 (add /middleware/stages/-)]; "
        "middleware.stages.1.repair_budget: Input should be less than or equal to 8 (got 99) "
        "[op 1 (add /middleware/stages/-), op 2 (add /middleware/stages/1)]"
    )
    assert (err.op_index, err.path) == (1, "/middleware/stages/-")
    # the discriminator tag (layout_planner) is not part of the reported path
    err = _refusal(
        "tools",
        {
            "op": "add",
            "path": "/tools/tools/-",
            "value": {"kind": "layout_planner", "name": "a", "bogus": 1},
        },
    )
    assert str(err) == (
        "patch (tools) breaks the harness schema: tools.tools.0.bogus: "
        "Extra inputs are not permitted (got 1) [op 0 (add /tools/tools/-)]"
    )


def test_a_test_op_is_never_the_culprit() -> None:
    # both test ops read the invalid location; only the replace wrote there
    err = _refusal(
        "policy",
        {"op": "test", "path": "/policy/params", "value": H.policy.params.model_dump()},
        {"op": "replace", "path": "/policy/params", "value": {"steps": 0}},
        {"op": "test", "path": "/policy/params/steps", "value": 0},
    )
    assert str(err) == (
        "patch (policy) breaks the harness schema: policy.params: Value error, params.steps=0 "
        "is outside the declared bounds [1, 150] [op 1 (replace /policy/params)]"
    )
    assert (err.op_index, err.path) == (1, "/policy/params")


def test_an_escaped_pointer_names_the_op_that_wrote_the_key() -> None:
    # "/policy/a~1b" writes the key "a/b" (RFC 6901 escaping): that op is the culprit
    err = _refusal("policy", {"op": "add", "path": "/policy/a~1b", "value": 1})
    assert str(err) == (
        "patch (policy) breaks the harness schema: policy.a/b: Extra inputs are not permitted "
        "(got 1) [op 0 (add /policy/a~1b)]"
    )
    assert (err.op_index, err.path) == (0, "/policy/a~1b")
    err = _refusal("policy", {"op": "add", "path": "/policy/a~0b", "value": 1})
    assert str(err).endswith(
        "policy.a~b: Extra inputs are not permitted (got 1) [op 0 (add /policy/a~0b)]"
    )


def test_the_first_culprit_of_the_first_error_is_the_reported_op() -> None:
    err = _refusal(
        "middleware",
        {"op": "test", "path": "/middleware/stages", "value": []},
        {"op": "add", "path": "/middleware/stages/0", "value": {"kind": "best_of_n", "n": 99}},
        {"op": "add", "path": "/middleware/stages/1", "value": {"kind": "best_of_n", "n": 0}},
    )
    msg = str(err)
    assert (
        msg.endswith("[op 2 (add /middleware/stages/1)]")
        and "[op 1 (add /middleware/stages/0)]" in msg
    )
    assert (err.op_index, err.path) == (1, "/middleware/stages/0")


def test_a_schema_error_no_op_wrote_is_reported_without_a_culprit() -> None:
    # no cross-section validator exists today, so build the errors directly: one in another
    # section and one of the whole document; a test op is never a culprit
    patch = Patch(
        responsibility=Responsibility.policy,
        ops=[{"op": "test", "path": "/policy/template", "value": "{prompt}"}],
    )
    with pytest.raises(ValidationError) as other:
        Harness.model_validate({"memory": {"top_k": 0}})
    err = _schema_error(patch, other.value)
    assert str(err) == (
        "patch (policy) breaks the harness schema: memory.top_k: Input should be greater than "
        "or equal to 1 (got 0)"
    )
    assert (err.op_index, err.path) == (None, None)
    with pytest.raises(ValidationError) as root:
        Harness.model_validate_json("5", strict=True)
    assert str(_schema_error(patch, root.value)) == (
        "patch (policy) breaks the harness schema: <root>: Input should be an object (got 5)"
    )


def test_segments_match_when_one_path_is_a_prefix_of_the_other() -> None:
    assert _segments_match(["middleware", "stages", "-"], ["middleware", "stages", "3", "n"])
    assert _segments_match(["policy"], ["policy", "params", "steps"])
    assert _segments_match(["policy", "params", "steps"], ["policy"])
    assert not _segments_match(["policy", "params"], ["policy", "template"])
    assert not _segments_match(["middleware", "stages", "0"], ["middleware", "stages", "1"])
    assert not _segments_match(["middleware", "stages", "-"], ["middleware", "stages", "x"])
    assert not _segments_match(["a", "3"], ["a", "-"])  # only the op's "-" is a wildcard
