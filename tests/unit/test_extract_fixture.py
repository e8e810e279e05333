"""The hand-checked extraction fixture (bench/extract/) matches its annotations and sample."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import require

EXTRACT = Path(__file__).resolve().parents[2] / "bench" / "extract"


def _load(name: str) -> ModuleType:
    sys.path.insert(0, str(EXTRACT))
    try:
        spec = importlib.util.spec_from_file_location(
            f"_bench_extract_{name}", EXTRACT / f"{name}.py"
        )
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(EXTRACT))


def test_fixture_is_built_from_the_annotations_and_the_sampled_lines(shared_dir: Path) -> None:
    build = _load("build_fixture")
    rows = build.build(shared_dir / "data", EXTRACT / "annotations.txt")
    assert (EXTRACT / "fixture.jsonl").read_text(encoding="utf-8") == build.render(rows)
    assert len(rows) >= 400
    # every row's prompt is its source line (CRLF stripped; Parti's first column)
    for row in rows[::37]:
        raw = (shared_dir / "data" / row["source"]).read_bytes().decode("utf-8").split("\n")
        assert raw[row["line"] - 1].rstrip("\r").split("\t")[0].strip() == row["prompt"]
    cats = {r["category"].split("/")[0] for r in rows}
    assert len(cats) == 8 + 11


def test_a_bad_annotation_names_its_line() -> None:
    build = _load("build_fixture")
    pid, atoms = build.parse_line("x | dog=3{brown}[fluffy]; cat | dog>left of>cat", "a.txt:1")
    assert pid == "x"
    assert atoms["objects"][0] == {
        "noun": "dog",
        "count": 3,
        "colors": ["brown"],
        "attributes": ["fluffy"],
    }
    assert atoms["relations"] == [{"subject": "dog", "relation": "left of", "object": "cat"}]
    with pytest.raises(ValueError, match=r"a\.txt:7: relation 'dog>left of>cow' names 'cow'"):
        build.parse_line("x | dog; cat | dog>left of>cow", "a.txt:7")
    with pytest.raises(ValueError, match=r"a\.txt:2: colour 'teal'"):
        build.parse_line("x | dog{teal}", "a.txt:2")
    with pytest.raises(ValueError, match=r"a\.txt:3: relation 'atop'"):
        build.parse_line("x | dog; cat | dog>atop>cat", "a.txt:3")
    json.dumps(atoms)  # rows are JSON-serialisable


def test_bench_matching_rules() -> None:
    """extract_bench's scoring: nouns match when equal, one class, or same head that is not
    two different classes; ignored nouns are not counted against precision."""
    require(importlib.util.find_spec("lemminflect") is not None, "lemminflect is not installed")
    sys.path.insert(0, str(EXTRACT.parent))
    try:
        bench = importlib.import_module("extract_bench")
    finally:
        sys.path.remove(str(EXTRACT.parent))
    assert bench.noun_match("tree", "oak tree") and bench.noun_match("dogs", "dog")
    assert not bench.noun_match("bear", "teddy bear") and not bench.noun_match("dog", "hot dog")
    atom = bench.Atom
    pred = [atom("object", ("cat",)), atom("object", ("kitchen",)), atom("object", ("car",))]
    gold = [atom("object", ("cat",))]
    assert bench.match(pred, gold, ignore=["kitchen"]) == (1, 2)  # car is wrong, kitchen ignored
    row = {
        "objects": [{"noun": "dog", "count": 3, "colors": ["red"], "attributes": []}],
        "relations": [],
        "negations": [],
        "texts": ["Hi  There"],
    }
    kinds = [(a.kind, a.value) for a in bench.gold_atoms(row)]
    assert kinds == [("object", None), ("count", 3), ("colour", "red"), ("text", "hi there")]
