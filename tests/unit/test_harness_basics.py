from evoharness.harness import Harness, PatchError, apply_patch, harness_id, load_dir


def test_baseline_loads_and_patch_does_not_mutate(repo_root):
    h = load_dir(repo_root / "harnesses" / "baseline")
    before = harness_id(h)
    p = apply_patch(
        h,
        {
            "responsibility": "policy",
            "ops": [{"op": "replace", "path": "/policy/params/steps", "value": 40}],
        },
    )
    assert p.policy.params.steps == 40
    assert harness_id(h) == before != harness_id(p)


def test_out_of_contract_op_is_refused():
    h = Harness()
    try:
        apply_patch(
            h,
            {
                "responsibility": "memory",
                "ops": [
                    {
                        "op": "add",
                        "path": "/tools/tools/-",
                        "value": {"kind": "layout_planner", "name": "x"},
                    }
                ],
            },
        )
    except PatchError as exc:
        assert "outside the boundary contract of memory" in str(exc)
        assert exc.path == "/tools/tools/-"
    else:
        raise AssertionError("out-of-contract op was applied")


def test_program_seed_is_bounded_by_canonical_json():
    import pytest
    from pydantic import ValidationError

    from evoharness.program import MAX_SEED, Program, execution_key

    assert execution_key(Program(prompt="a cat", seed=MAX_SEED), "g")  # exact and hashable
    with pytest.raises(ValidationError, match="seed"):
        Program(prompt="a cat", seed=MAX_SEED + 1)
