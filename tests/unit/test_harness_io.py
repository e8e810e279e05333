"""Harness on disk and as canonical JSON: round trips (hypothesis), golden hashes, migration."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evoharness.canonical import CanonicalJSONError, canonical_json, content_hash, sha256_hex
from evoharness.harness import (
    SCHEMA_VERSION,
    Harness,
    HarnessError,
    canonical_bytes,
    from_document,
    harness_id,
    load_dir,
    loads,
    save_dir,
)
from evoharness.harness import io as hio

# ------------------------------------------------------------------ strategies

# Any unicode text except surrogates (not encodable as UTF-8, so not valid in a file).
text = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
names = st.from_regex(r"\A[a-z0-9][a-z0-9_\-]{0,20}\Z")
finite = st.floats(allow_nan=False, allow_infinity=False, width=64)

triggers = st.one_of(
    st.builds(
        lambda k, v: {"kind": k, "value": v},
        st.sampled_from(["feature", "keyword"]),
        text.filter(lambda s: s != ""),
    ),
    st.builds(lambda v: {"kind": "regex", "value": v}, st.sampled_from([r"\bno\b", "[0-9]+"])),
)
effects = st.builds(
    lambda k, v, p: {"kind": k, "value": v, "params": p},
    st.sampled_from(["rewrite", "negative_terms", "append_text", "set_params", "use_tool"]),
    st.none() | text,
    st.dictionaries(names, st.integers(-(2**40), 2**40) | finite | text, max_size=3),
)
skills = st.builds(
    lambda n, d, t, e, p, b: {
        "name": n,
        "description": d,
        "triggers": t,
        "effects": e,
        "priority": p,
        "body": b,
    },
    names,
    text,
    st.lists(triggers, max_size=3),
    st.lists(effects, max_size=2),
    st.integers(-1000, 1000),
    text,
)
tools = st.one_of(
    st.builds(
        lambda n, e, m, w: {
            "kind": "layout_planner",
            "name": n,
            "enabled": e,
            "margin": m,
            "when": w,
        },
        names,
        st.booleans(),
        st.floats(0.0, 0.3),
        st.lists(st.sampled_from(["count", "position", "color", "text"]), max_size=4),
    ),
    st.builds(
        lambda n, s, k: {"kind": "reference_retrieval", "name": n, "source": s, "top_k": k},
        names,
        text,
        st.integers(1, 8),
    ),
    st.builds(lambda n, s: {"kind": "knowledge_lookup", "name": n, "source": s}, names, text),
)
stages = st.lists(
    st.sampled_from(
        [
            {"kind": "skill_routing", "max_active": 2},
            {"kind": "verify_and_repair", "repair_budget": 3},
            {"kind": "best_of_n", "n": 4},
        ]
    ),
    max_size=3,
    unique_by=lambda s: s["kind"],
)
memory = st.builds(
    lambda en, sim, g, b: {
        "enabled": en,
        "min_similarity": sim,
        "guidelines": g,
        "bundles": b,
    },
    st.booleans(),
    st.floats(-1.0, 1.0),
    st.lists(
        st.builds(
            lambda t, x: {"trigger": t, "text": x},
            text.filter(bool),
            text.filter(bool),
        ),
        max_size=2,
    ),
    st.lists(
        st.builds(
            lambda i, k, g, r: {
                "bundle_id": i,
                "retrieval_key": k,
                "decision_guidance": g,
                "reward_gap": r,
            },
            names,
            st.dictionaries(names, text, max_size=2),
            st.dictionaries(names, st.lists(text, max_size=2), max_size=2),
            finite,
        ),
        max_size=2,
    ),
)
policy = st.builds(
    lambda tmpl, neg, terms, steps, g, rw: {
        "template": tmpl,
        "negative_prompt": neg,
        "negative_terms": terms,
        "params": {"steps": steps, "guidance_scale": g, "width": 512, "height": 768},
        "rewrites": rw,
    },
    st.sampled_from(["{prompt}", "a photo: {prompt}", "{prompt}, high detail"]),
    text,
    st.lists(text, max_size=3),
    st.integers(1, 150),
    st.floats(0.0, 30.0),
    st.lists(
        st.builds(
            lambda k, e: {"kind": k, "enabled": e},
            st.sampled_from(["move_negations", "bind_attributes", "compress"]),
            st.booleans(),
        ),
        max_size=3,
    ),
)
harness_docs = st.builds(
    lambda name, desc, pol, tl, sk, mw, mem: {
        "schema_version": SCHEMA_VERSION,
        "name": name,
        "description": desc,
        "policy": pol,
        "tools": {"tools": tl},
        "skills": {"skills": sk},
        "middleware": {"stages": mw},
        "memory": mem,
    },
    text,
    text,
    policy,
    st.lists(tools, max_size=3, unique_by=lambda t: t["name"]),
    st.lists(skills, max_size=3, unique_by=lambda s: s["name"]),
    stages,
    memory,
)


# ------------------------------------------------------------------ round trips


def _tree_bytes(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(harness_docs)
def test_directory_load_save_load_is_byte_identical(doc: dict[str, Any]) -> None:
    h = from_document(doc)
    with tempfile.TemporaryDirectory() as tmp:
        first = save_dir(h, Path(tmp) / "a")
        h1 = load_dir(first)
        second = save_dir(h1, Path(tmp) / "b")
        h2 = load_dir(second)
        assert _tree_bytes(first) == _tree_bytes(second)
        assert canonical_bytes(h1) == canonical_bytes(h2)
        # The only change a directory makes is skill order (files are read by name).
        assert canonical_bytes(h1) == canonical_bytes(hio.normalized(h))


@settings(max_examples=40, deadline=None)
@given(harness_docs)
def test_canonical_json_load_save_load_is_byte_identical(doc: dict[str, Any]) -> None:
    h = from_document(doc)
    b1 = canonical_bytes(h)
    h1 = loads(b1)
    assert canonical_bytes(h1) == b1
    assert harness_id(h1) == harness_id(h) == sha256_hex(b1)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | finite | text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(text, children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_canonical_json_is_a_fixed_point(value: Any) -> None:
    b = canonical_json(value)
    assert canonical_json(json.loads(b)) == b


def test_baseline_round_trips_byte_identical(repo_root: Path, tmp_path: Path) -> None:
    src = repo_root / "harnesses" / "baseline"
    h = load_dir(src)
    out = save_dir(h, tmp_path / "baseline")
    # Every file the baseline ships is reproduced byte for byte.
    shipped = _tree_bytes(src)
    written = _tree_bytes(out)
    assert {k: v for k, v in written.items() if k in shipped} == shipped


# ------------------------------------------------------------------ golden hashes

# RFC 8785 pins: key order by UTF-16 code units, ECMAScript number formatting, minimal
# string escapes with raw UTF-8. Values from RFC 8785 section 3.2.2 and its appendix.
GOLDEN = [
    ({"b": 1, "a": 2, "€": 3, "\U0001f600": 4, "\r": 5}, '{"\\r":5,"a":2,"b":1,"€":3,"😀":4}'),
    ([5.0, 1e21, 1e-7, -0.0, 0.1, 333333333.3333333], "[5,1e+21,1e-7,0,0.1,333333333.3333333]"),
    ({"s": 'é\u2028\u0007"\\/'}, '{"s":"é\u2028\\u0007\\"\\\\/"}'),
    ([1e20, 4.5, 2**53], "[100000000000000000000,4.5,9007199254740992]"),
    # UTF-16 order: U+1F600 is D83D DE00, before U+FB01 (code-point order would swap them).
    ({"\ufb01": 1, "\U0001f600": 2}, '{"\U0001f600":2,"\ufb01":1}'),
    ([29923679924710090, 2.992367992471009e16], "[29923679924710090,29923679924710090]"),
]


def test_integer_that_a_double_cannot_hold_is_rejected() -> None:
    with pytest.raises(CanonicalJSONError, match=r"/a/0: integer 9007199254740993"):
        canonical_json({"a": [2**53 + 1]})


@pytest.mark.parametrize(("value", "expected"), GOLDEN)
def test_canonical_form_golden(value: Any, expected: str) -> None:
    assert canonical_json(value) == expected.encode("utf-8")


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nan_and_infinity_are_rejected(bad: float) -> None:
    with pytest.raises(CanonicalJSONError, match="not allowed"):
        canonical_json({"x": [1, {"y": bad}]})
    with pytest.raises(HarnessError, match="not valid JSON"):
        loads('{"schema_version": 1, "memory": {"min_similarity": NaN}}')


def test_default_harness_golden_hash() -> None:
    # Pins the canonical document of the default harness. Changing a default or a field name
    # changes every harness_id: bump SCHEMA_VERSION and add a migration when this fails.
    h = Harness()
    assert canonical_bytes(h).startswith(b'{"description":"","memory":{"bundles":[],')
    assert harness_id(h) == content_hash(h.to_document())
    assert harness_id(h) == GOLDEN_DEFAULT_ID


GOLDEN_DEFAULT_ID = "7282fe48f1bd9d0eb116cbdaf56a5c7fb8cfd4b2ce51f35f67f419419b6447d6"


def test_harness_id_sensitive_to_unicode_and_numbers() -> None:
    a = Harness(description="café")
    b = Harness(description="cafe\u0301")  # same glyphs, different code points: different id
    assert harness_id(a) != harness_id(b)
    g5 = from_document({"schema_version": 1, "policy": {"params": {"guidance_scale": 5}}})
    g50 = from_document({"schema_version": 1, "policy": {"params": {"guidance_scale": 5.0}}})
    assert harness_id(g5) == harness_id(g50) == harness_id(Harness())


# ------------------------------------------------------------------ versions and errors


def test_older_schema_version_without_migration_names_the_version() -> None:
    with pytest.raises(HarnessError, match="schema_version 0"):
        from_document({"schema_version": 0})


def test_newer_schema_version_names_the_version() -> None:
    with pytest.raises(HarnessError, match=f"schema_version {SCHEMA_VERSION + 1} is newer"):
        from_document({"schema_version": SCHEMA_VERSION + 1})


def test_migration_is_applied(monkeypatch: pytest.MonkeyPatch) -> None:
    def v0_to_v1(doc: dict[str, Any]) -> dict[str, Any]:
        doc = dict(doc)
        doc["policy"] = {"template": doc.pop("prompt_template")}
        doc["schema_version"] = 1
        return doc

    monkeypatch.setitem(hio.MIGRATIONS, 0, v0_to_v1)
    h = from_document({"schema_version": 0, "prompt_template": "art: {prompt}"})
    assert h.policy.template == "art: {prompt}"


def test_invalid_yaml_names_file_and_line(tmp_path: Path, repo_root: Path) -> None:
    d = save_dir(load_dir(repo_root / "harnesses" / "baseline"), tmp_path / "h")
    (d / "policy.yaml").write_text("params:\n  steps: [1,\n", encoding="utf-8")
    with pytest.raises(HarnessError, match=r"policy\.yaml:\d+: invalid YAML"):
        load_dir(d)


def test_duplicate_yaml_key_is_refused_naming_file_line_and_key(tmp_path: Path) -> None:
    """A second ``params:`` block would silently replace the first: refused at its line."""
    d = save_dir(Harness(), tmp_path / "h")
    (d / "policy.yaml").write_text(
        "params:\n  steps: 10\ntemplate: '{prompt}'\nparams:\n  steps: 20\n", encoding="utf-8"
    )
    with pytest.raises(
        HarnessError, match=r"policy\.yaml:4: .*duplicate key 'params' \(first at line 1\)"
    ):
        load_dir(d)
    # a YAML merge key's fields may be overridden: not a duplicate
    (d / "policy.yaml").write_text(
        "params: &p\n  steps: 10\nnegative_prompt: x\n", encoding="utf-8"
    )
    assert load_dir(d).policy.params.steps == 10
    assert hio.load_yaml("a: &x {k: 1, j: 2}\nb:\n  <<: *x\n  k: 3\n") == {
        "a": {"k": 1, "j": 2},
        "b": {"k": 3, "j": 2},
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", r"policy\.yaml: empty"),
        ("# truncated\n", r"policy\.yaml: empty"),
        ("- steps\n", r"policy\.yaml:1: must be a mapping, got list"),
    ],
)
def test_empty_or_non_mapping_section_file_is_refused(
    tmp_path: Path, text: str, message: str
) -> None:
    d = save_dir(Harness(), tmp_path / "h")
    (d / "policy.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(HarnessError, match=message):
        load_dir(d)


def test_unknown_field_names_the_field(tmp_path: Path) -> None:
    d = save_dir(Harness(), tmp_path / "h")
    (d / "policy.yaml").write_text("generator: sdxl\n", encoding="utf-8")
    with pytest.raises(HarnessError, match=r"policy\.generator: Extra inputs"):
        load_dir(d)


def test_invalid_fields_name_their_file_and_line(tmp_path: Path, repo_root: Path) -> None:
    """A harness directory's validation errors name the file the field came from and its line
    (PyYAML's marks), not only the directory: section files, harness.yaml, a skill's front
    matter."""
    d = save_dir(load_dir(repo_root / "harnesses" / "baseline"), tmp_path / "h")
    policy = (d / "policy.yaml").read_text(encoding="utf-8")
    (d / "policy.yaml").write_text(policy.replace("steps: 30", "steps: many"), encoding="utf-8")
    line = policy.splitlines().index("  steps: 30") + 1
    with pytest.raises(HarnessError, match=rf"policy\.yaml:{line}: policy\.params\.steps: "):
        load_dir(d)
    (d / "policy.yaml").write_text(policy, encoding="utf-8")
    (d / "middleware.yaml").write_text("stages:\n  - kind: best_of_n\n    n: -3\n")
    with pytest.raises(HarnessError, match=r"middleware\.yaml:3: middleware\.stages\.0\."):
        load_dir(d)
    save_dir(load_dir(repo_root / "harnesses" / "baseline"), d)
    head = (d / "harness.yaml").read_text(encoding="utf-8")
    (d / "harness.yaml").write_text(head + "colour: red\n", encoding="utf-8")
    n = len(head.splitlines()) + 1
    with pytest.raises(HarnessError, match=rf"harness\.yaml:{n}: colour: Extra inputs"):
        load_dir(d)
    (d / "harness.yaml").write_text(head, encoding="utf-8")
    (d / "skills" / "s1.md").write_text("---\nname: s1\ndescription: x\npriority: lots\n---\nb\n")
    with pytest.raises(HarnessError, match=r"skills/s1\.md:4: priority: "):
        load_dir(d)
    (d / "skills" / "s1.md").write_text("---\ndescription: x\nname: s2\n---\nb\n")
    with pytest.raises(HarnessError, match=r"skills/s1\.md:3: front matter name 's2'"):
        load_dir(d)


def test_values_json_cannot_hold_name_their_file_line_and_field(
    tmp_path: Path, repo_root: Path
) -> None:
    """NaN, an overflowing float (1e999 is infinity), a YAML date or a recursive alias are
    refused naming the file, line and field, not only the directory."""
    d = save_dir(load_dir(repo_root / "harnesses" / "baseline"), tmp_path / "h")
    policy = (d / "policy.yaml").read_text(encoding="utf-8")
    line = policy.splitlines().index("  guidance_scale: 5.0") + 1
    for bad, what in ((".nan", "NaN"), ("1e999", "inf"), ("2026-12-03", "date")):
        (d / "policy.yaml").write_text(policy.replace("5.0", bad), encoding="utf-8")
        with pytest.raises(
            HarnessError, match=rf"policy\.yaml:{line}: policy\.params\.guidance_scale: .*{what}"
        ):
            load_dir(d)
    (d / "policy.yaml").write_text(policy + "loop: &x [*x]\n", encoding="utf-8")
    n = len(policy.splitlines()) + 1
    with pytest.raises(HarnessError, match=rf"policy\.yaml:{n}: policy\.loop\.0: .*itself"):
        load_dir(d)


def test_skill_file_round_trip(tmp_path: Path) -> None:
    h = from_document(
        {
            "schema_version": 1,
            "skills": {
                "skills": [
                    {
                        "name": "counting",
                        "description": "exact counts",
                        "triggers": [{"kind": "feature", "value": "count"}],
                        "effects": [{"kind": "rewrite", "value": "spell_counts"}],
                        "body": "# Counting\n\nSpell numbers out.",
                    }
                ]
            },
        }
    )
    d = save_dir(h, tmp_path / "h")
    text = (d / "skills" / "counting.md").read_text(encoding="utf-8")
    assert text.startswith("---\n") and "# Counting" in text
    assert load_dir(d) == h


@pytest.mark.parametrize("desc", ["0E0", "1e-3", "true", "null", "12"])
def test_skill_front_matter_keeps_a_string_that_reads_as_another_type(
    desc: str, tmp_path: Path
) -> None:
    # found by the round-trip property above: "0E0" was written unquoted and read back as 0.0
    doc = load_dir(Path(__file__).parents[2] / "harnesses" / "reference").to_document()
    doc["skills"]["skills"][0]["description"] = desc
    out = load_dir(save_dir(from_document(doc), tmp_path / "h"))
    assert out.skills.skills[0].description == desc


def test_strings_with_unicode_edge_whitespace_round_trip(tmp_path: Path) -> None:
    """A no-break space (or an em space) at either end of a string survives save and load:
    PyYAML's plain scalars lose it, so such strings are written double-quoted (hypothesis
    found a skill trigger ending in U+00A0)."""
    doc = load_dir("harnesses/baseline").model_dump(mode="json")
    doc["skills"]["skills"] = [
        {
            "name": "k",
            "description": " x\u2003",
            "triggers": [{"kind": "keyword", "value": "a\u00a0"}],
            "body": "",
        }
    ]
    h = load_dir(save_dir(from_document(doc), tmp_path / "h"))
    [skill] = h.skills.skills
    assert (skill.triggers[0].value, skill.description) == ("a\u00a0", " x\u2003")
